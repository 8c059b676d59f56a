"""Processes a cluster test started, found by a mark in their environment, and ended by pid.

A daemon started with ``VAR=VALUE`` in its environment passes it to everything it starts (Slurm's
job steps, Ray's workers), so the mark finds exactly the processes of one test cluster, and never
another user's Slurm or Ray. ``ray stop`` would stop every Ray instance on the machine; this does not.
"""

from __future__ import annotations

import os
import signal
import socket
import time
from pathlib import Path

_GIVEN: set[int] = set()  # ports handed out in this process: the kernel may offer a released port again


def free_port() -> int:
    """A TCP port free on the loopback address now, and never one this process has handed out before: the
    ports of one Ray node are taken together, and two equal ones make ``ray start`` refuse ("a port number
    ... that is used by other components"), which CI met once."""
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port not in _GIVEN:
            _GIVEN.add(port)
            return port


def marked(var: str, value: str) -> list[int]:
    """Pids of the processes whose environment holds ``var=value``: only processes this test started."""
    needle = f"{var}={value}".encode()
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if needle in (entry / "environ").read_bytes().split(b"\0"):
                pids.append(int(entry.name))
        except OSError:  # gone, or not ours to read
            continue
    return pids


def kill_marked(var: str, value: str, timeout_s: float = 10) -> list[int]:
    """SIGKILL every process marked ``var=value`` until none is left (or ``timeout_s`` passes); return them."""
    killed: list[int] = []
    deadline = time.monotonic() + timeout_s
    while (pids := marked(var, value)) and time.monotonic() < deadline:
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
            except ProcessLookupError:
                pass
        time.sleep(0.1)
    return sorted(set(killed))


def holders(path: Path) -> list[int]:
    """Pids of the processes that have ``path`` open (a trial holds its log open while a stage runs)."""
    target = str(Path(path).resolve())
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if any(os.readlink(fd) == target for fd in (entry / "fd").iterdir()):
                pids.append(int(entry.name))
        except OSError:
            continue
    return pids


def environ(pid: int) -> dict[str, str]:
    """The environment process ``pid`` started with ({} when it is gone)."""
    try:
        raw = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return {}
    return dict(item.split("=", 1) for item in raw.decode(errors="replace").split("\0") if "=" in item)


def alive(pid: int) -> bool:
    """Running, not a zombie waiting to be reaped."""
    try:
        return "State:\tZ" not in Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
