"""One writer at a time: an advisory lock file in a run directory or an experiment directory.

A writer (training, an analysis that writes into a run: scores, length curves, ...; an experiment's
executor) holds ``DIR/.lock`` while it writes; the file names the holder (host, PID, start time,
command), so a second writer is refused with one line naming who holds it and what to do. Readers (the
metrics log, checkpoints, an analysis read back from its files) take no lock: every file is replaced
atomically, so they see the old content or the new. Two mechanisms work together:

- ``fcntl.flock`` on the open lock file says whether the holder is alive on this host: the kernel
  drops it when its process ends, however it ends (an exception, SIGTERM, SIGKILL);
- the file's content names the holder for the message, and for another host, where ``flock`` may
  not reach (NFS, Lustre without ``-o flock``): there a lock left by a host we cannot see is refused
  with the advice to delete the file once that process is known to be gone.

So a lock whose holder died on this host is stale: the next writer takes it over and logs a note
naming the dead holder. Release unlinks the file while still holding ``flock``; a writer that opened
the old file just before checks that the path still names the file it locked, and retries if not.

A process may take the same directory's lock again while it holds it (training a group member calls
the single-run loop; the executor runs a stage under the run's lock, and the stage takes it too): the
lock counts its holds and is released by the last.

The lock is in the library, so every way of running possym code honours it: the CLI, notebooks, and
the executor's engines (a process pool, Ray, Slurm), whose workers run the same stage functions.

Example:
    >>> import tempfile
    >>> d = Path(tempfile.mkdtemp())
    >>> with writer_lock(d, "run"):
    ...     (d / LOCK_FILE).is_file()
    True
    >>> (d / LOCK_FILE).exists()
    False
"""

from __future__ import annotations

import contextlib
import contextvars
import errno
import fcntl
import json
import logging
import os
import socket
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from possym.errors import LockError

__all__ = ["LOCK_FILE", "Holder", "LockError", "being_written", "lock_holder", "on_behalf_of", "writer_lock"]

LOCK_FILE = ".lock"

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Holder:
    """Who holds (or held) a lock: the content of its lock file."""

    host: str
    pid: int
    started: str = ""
    command: str = ""
    owner: str = ""  # the experiment whose worker this is (its lock's token), or ""

    @property
    def token(self) -> str:
        """This hold's name, unique to one process's hold: host, PID and start time."""
        return f"{self.host}:{self.pid}:{self.started}"

    def __str__(self) -> str:
        since = f" since {self.started}" if self.started else ""
        command = " ".join(self.command.split())  # one line: a refusal is one line, and argv may hold newlines
        return f"process {self.pid} on {self.host}{since}" + (f" ({command})" if command else "")

    @classmethod
    def me(cls) -> Holder:
        return cls(socket.gethostname(), os.getpid(), datetime.now(UTC).isoformat(timespec="microseconds"),
                   " ".join(sys.argv)[:200], _owner.get() or "")

    @classmethod
    def parse(cls, text: str) -> Holder | None:
        try:
            data: Any = json.loads(text)
            return cls(str(data["host"]), int(data["pid"]), str(data.get("started", "")),
                       str(data.get("command", "")), str(data.get("owner", "")))
        except (ValueError, KeyError, TypeError):
            return None  # empty (a writer between open and write) or not ours

    def to_json(self) -> str:
        return json.dumps({"host": self.host, "pid": self.pid, "started": self.started, "command": self.command,
                           "owner": self.owner})


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # it exists, owned by someone else
        return True
    return True


def lock_holder(directory: str | Path) -> Holder | None:
    """The holder named by ``directory``'s lock file, or None when there is none (or it is unreadable)."""
    try:
        return Holder.parse((Path(directory) / LOCK_FILE).read_text())
    except OSError:
        return None


def being_written(directory: str | Path) -> bool:
    """Whether another live process holds ``directory``'s writer lock on this host, found without taking it and
    without writing anything (a reader, in a read-only directory too). A lock from another host is not seen here:
    taking the lock refuses it."""
    directory = Path(directory)
    with _guard:
        if (os.getpid(), str(directory.resolve())) in _held:
            return False
    try:
        fd = os.open(directory / LOCK_FILE, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        os.close(fd)  # closing releases the shared lock taken to look
    return False


# The experiment this process works for (its lock's token), set by the executor's workers (on_behalf_of).
_owner: contextvars.ContextVar[str | None] = contextvars.ContextVar("possym_lock_owner", default=None)


@contextlib.contextmanager
def on_behalf_of(owner: str | None) -> Iterator[None]:
    """Take locks in the block as a worker of the experiment whose lock token is ``owner``
    (:attr:`Holder.token`): a lock left on another host by an earlier worker of that same experiment
    call is taken over. The executor retries a unit only after its engine reported the worker ended,
    and no two units of one call share a run, so that earlier worker is gone."""
    reset = _owner.set(owner)
    try:
        yield
    finally:
        _owner.reset(reset)


# Directories this process holds: (PID, resolved path) -> [open lock file, number of holds]. The PID keeps a
# forked child from counting itself among its parent's holds (it must take the lock, and be refused).
_held: dict[tuple[int, str], list[Any]] = {}
_guard = threading.Lock()


def _refuse(directory: Path, what: str, holder: Holder | None, why: str = "") -> LockError:
    who = str(holder) if holder is not None else "another process"
    return LockError(f"{what} {directory} is being written by {who}{why}; wait for it to finish, or stop it")


def _acquire(directory: Path, what: str) -> int:
    path = directory / LOCK_FILE
    me = socket.gethostname()
    for _ in range(20):  # each retry follows a release that raced with our open
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                flocked = True
            except BlockingIOError:
                raise _refuse(directory, what, Holder.parse(os.pread(fd, 4096, 0).decode(errors="replace"))) from None
            except OSError as exc:  # a filesystem without flock: the file's content alone decides
                if exc.errno not in (errno.ENOLCK, errno.EOPNOTSUPP, errno.EINVAL):
                    raise
                flocked = False
            try:
                same = os.fstat(fd).st_ino == os.stat(path).st_ino
            except FileNotFoundError:
                same = False
            if not same:  # the holder released (unlinked) it between our open and our flock
                os.close(fd)
                continue
            before = Holder.parse(os.pread(fd, 4096, 0).decode(errors="replace"))
            if before is not None and (before.host, before.pid) != (me, os.getpid()):
                if before.host != me and before.owner and before.owner == _owner.get():
                    log.warning("possym: took over the lock of %s from %s, an earlier worker of this experiment "
                                "that its engine reported ended", directory, before)
                elif before.host != me:
                    raise _refuse(directory, what, before, f", a host this one cannot check; if that process "
                                  f"is gone, delete {path}")
                elif not flocked and _alive(before.pid):
                    raise _refuse(directory, what, before)
                else:
                    log.warning("possym: took over the lock of %s from %s, which is no longer running", directory,
                                before)
            os.ftruncate(fd, 0)
            os.pwrite(fd, Holder.me().to_json().encode(), 0)
            os.fsync(fd)
            return fd
        except BaseException:
            with contextlib.suppress(OSError):
                os.close(fd)
            raise
    raise _refuse(directory, what, lock_holder(directory), " (its lock file keeps changing)")


@contextlib.contextmanager
def writer_lock(directory: str | Path, what: str = "directory",
                on_acquire: Callable[[], None] | None = None) -> Iterator[None]:
    """Hold ``directory``'s writer lock for the ``with`` block (module docstring); ``what`` names the
    directory in the refusal (``"run"``, ``"experiment"``). Raises :class:`~possym.errors.LockError`,
    naming the holder, when another live process holds it. The directory is made if need be.
    ``on_acquire()`` runs once the lock is taken, when this process did not hold it already: the writer's
    open (:meth:`possym.runs.RunDir.writing` puts the run in order there); if it raises, the lock is released."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    key = (os.getpid(), str(directory.resolve()))
    with _guard:
        entry = _held.get(key)
        fresh = entry is None
        if entry is None:
            entry = _held[key] = [_acquire(directory, what), 0]
        entry[1] += 1
    try:
        if fresh and on_acquire is not None:
            on_acquire()
        yield
    finally:
        with _guard:
            entry[1] -= 1
            if entry[1] == 0:
                del _held[key]
                # Unlink while still holding flock, so a waiting writer never locks a file that is going.
                with contextlib.suppress(OSError):
                    (directory / LOCK_FILE).unlink()
                os.close(entry[0])
