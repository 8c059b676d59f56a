"""The memo, the one memo of finished work: one entry per (owner, stage), keyed by the stage's settings.

A run's entries live with the run, in ``RUN/resume.json`` (:data:`MEMO_FILE`), so that ``possym score
RUN``, a notebook's :func:`possym.experiment.run_stage` and every experiment that holds the run consult the
same entry; the file is rewritten atomically under the run's writer lock (:mod:`possym.locks`). The
experiment-scope stages' entries live in ``OUT/log/experiment.json``. Each entry holds the stage's status
(``running``, ``done``, ``failed``), the settings it ran with (:meth:`possym.stages.registry.Stage.key_of`),
wall-clock seconds, attempts and the last error; a stage that works per checkpoint (``Stage.per_step``)
also holds the checkpoint ``steps`` done with those settings. A stage is done only if its entry is
``done`` *with today's settings* (and, per step, holds every step asked for): change a stage's settings
and only that stage reruns; ask for more checkpoints and only the new ones run. A kill leaves an entry
``running``, redone on the next call.

Example:
    >>> import tempfile
    >>> memo = StageMemo(Path(tempfile.mkdtemp()) / MEMO_FILE)
    >>> memo.start("score", {"n_inputs": 100}); memo.finish("score", 1.5, steps=[0, 10])
    >>> memo.todo("score", {"n_inputs": 100}, steps=[0, 10, 20]), memo.todo("score", {"n_inputs": 50}, steps=[0])
    ([20], [0])
    >>> memo.done("score", {"n_inputs": 100}, steps=[10])
    True
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from possym.errors import RunError
from possym.locks import writer_lock
from possym.runs import atomic_write_text

EXPERIMENT = "experiment"  # the owner of experiment-scope entries
STATUSES = ("running", "done", "failed")
MEMO_FILE = "resume.json"  # a run's entries, inside the run directory
# Stages renamed since an earlier possym wrote their entries (old -> new): `possym migrate` renames the entries and an
# experiment.yaml's stages; the run path refuses them (possym.experiment.executor.older_layout).
RENAMED_STAGES = {"train": "training"}


@dataclass(frozen=True)
class MemoRecord:
    """One entry of the log: who (a run id, or ``experiment``), which stage, and how it went."""

    owner: str
    stage: str
    status: str
    seconds: float | None
    attempts: int
    started: str
    finished: str | None
    error: str | None
    settings: dict[str, Any]
    steps: list[int] | None = None  # a per-step stage's checkpoints done with these settings


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def same_settings(stored: dict[str, Any], settings: dict[str, Any], defaults: dict[str, Any] | None = None) -> bool:
    """Whether an entry made with ``stored`` settings was made as ``settings`` ask. A setting the entry lacks
    was added to the stage after the entry was written, and held its value in ``defaults`` then."""
    defaults = defaults or {}
    return set(stored) <= set(settings) and all(
        (stored[k] if k in stored else defaults.get(k, object())) == v for k, v in settings.items())


class StageMemo:
    """One owner's entries: a run's (``RUN/resume.json``, written under the run's lock) or the experiment's."""

    def __init__(self, file: Path, owner: str | None = None, lock: Path | None = None) -> None:
        self.file = Path(file)
        self.owner = owner or self.file.parent.name
        self.lock = lock  # the directory whose writer lock covers a write (a run's); None: the caller's

    def read(self) -> dict[str, dict[str, Any]]:
        if not self.file.is_file():
            return {}
        try:
            return json.loads(self.file.read_text())["stages"]
        except (json.JSONDecodeError, KeyError) as exc:
            raise RunError(f"{self.file} is not a memo ({exc}); delete it to redo {self.owner}'s stages") from exc

    @contextlib.contextmanager
    def update(self) -> Iterator[dict[str, dict[str, Any]]]:
        """The entries to change in place, read and rewritten under the lock (a run's: reentrant, so a stage
        that holds it already goes on)."""
        with writer_lock(self.lock, "run") if self.lock is not None else contextlib.nullcontext():
            stages = self.read()
            yield stages
            atomic_write_text(self.file, json.dumps({"owner": self.owner, "stages": stages}, indent=1) + "\n")

    def entry(self, stage: str) -> dict[str, Any] | None:
        return self.read().get(stage)

    def done(self, stage: str, settings: dict[str, Any], defaults: dict[str, Any] | None = None,
             steps: list[int] | None = None, checkpoints: list[int] | None = None) -> bool:
        """Whether ``stage`` finished with these settings (and, for a per-step stage, at every one of ``steps``;
        for a stage that measures named checkpoints, at the ``checkpoints`` they name now: "best" moves when a
        run trains on). An entry written before checkpoints were recorded is taken at its word."""
        e = self._valid(stage, settings, defaults)
        if e is None or (checkpoints is not None and e.get("checkpoints", checkpoints) != checkpoints):
            return False
        return steps is None or not self.todo(stage, settings, defaults, steps)

    def _valid(self, stage: str, settings: dict[str, Any], defaults: dict[str, Any] | None) -> dict[str, Any] | None:
        e = self.entry(stage)
        if e is None or e["status"] != "done" or not same_settings(e["settings"], settings, defaults):
            return None
        return e

    def kept(self, stage: str, settings: dict[str, Any], defaults: dict[str, Any] | None = None,
             only: tuple[str, ...] | None = None) -> list[int]:
        """The checkpoints a per-step stage has done with these settings (none if its entry is not done);
        ``only``: the settings its per-step outputs depend on, the others left out of the comparison."""
        e = self.entry(stage)
        if e is None or e["status"] != "done":
            return []
        stored = e["settings"] if only is None else {k: v for k, v in e["settings"].items() if k in only}
        asked = settings if only is None else {k: v for k, v in settings.items() if k in only}
        return list(e.get("steps") or []) if same_settings(stored, asked, defaults) else []

    def todo(self, stage: str, settings: dict[str, Any], defaults: dict[str, Any] | None = None,
             steps: list[int] | None = None) -> list[int]:
        """Which of ``steps`` a per-step stage has still to do with these settings."""
        kept = set(self.kept(stage, settings, defaults))
        return [s for s in steps or [] if s not in kept]

    def start(self, stage: str, settings: dict[str, Any], keep: list[int] | None = None,
              execution: dict[str, Any] | None = None, checkpoints: list[int] | None = None) -> None:
        """``stage`` runs now with ``settings``; a per-step stage keeps the steps ``keep`` done before.
        ``execution``: how it runs (threads, device: not part of the key), recorded beside it; ``checkpoints``:
        the step numbers its ``step``/``steps`` name now."""
        with self.update() as stages:
            attempts = stages.get(stage, {}).get("attempts", 0) + 1
            stages[stage] = {"status": "running", "settings": settings, "started": _now(), "finished": None,
                             "seconds": None, "attempts": attempts, "error": None}
            if execution:
                stages[stage]["execution"] = execution
            if checkpoints is not None:
                stages[stage]["checkpoints"] = checkpoints
            if keep is not None:
                stages[stage]["steps"] = sorted(keep)

    def finish(self, stage: str, seconds: float, steps: list[int] | None = None,
               facts: dict[str, Any] | None = None) -> None:
        """``stage`` is done; a per-step stage adds ``steps`` to those it kept; ``facts``: what the stage recorded
        it did (the precision a length curve ran in), kept with the entry."""
        with self.update() as stages:
            e = stages[stage]
            e.update(status="done", finished=_now(), seconds=round(seconds, 2), error=None)
            if steps is not None:
                e["steps"] = sorted({*e.get("steps", []), *steps})
            if facts:
                e["facts"] = facts

    def fail(self, stage: str, seconds: float, error: str) -> None:
        with self.update() as stages:
            stages[stage].update(status="failed", finished=_now(), seconds=round(seconds, 2), error=error[-2000:])

    def mark_done(self, stage: str, settings: dict[str, Any], seconds: float | None = None,
                  steps: list[int] | None = None) -> None:
        """Record ``stage`` as done without running it (a migrated directory's finished work)."""
        with self.update() as stages:
            stages[stage] = {"status": "done", "settings": settings, "started": _now(), "finished": _now(),
                             "seconds": seconds, "attempts": 1, "error": None, "migrated": True}
            if steps is not None:
                stages[stage]["steps"] = sorted(steps)

    def records(self) -> list[MemoRecord]:
        return [MemoRecord(self.owner, stage, e["status"], e.get("seconds"), e.get("attempts", 1),
                             e.get("started", ""), e.get("finished"), e.get("error"), e["settings"], e.get("steps"))
                for stage, e in self.read().items()]


def run_memo(run: Path) -> StageMemo:
    """The memo of the run directory ``run``."""
    run = Path(run)
    return StageMemo(run / MEMO_FILE, run.name, lock=run)


class ExperimentMemo:
    """The log of an experiment directory ``out``: each run's memo (``out/runs/ID/resume.json``) and the
    experiment's (``out/log/experiment.json``); see the module docstring."""

    def __init__(self, out: Path) -> None:
        self.out = Path(out)
        self.dir = self.out / "log"

    def memo(self, owner: str) -> StageMemo:
        if owner == EXPERIMENT:
            return StageMemo(self.dir / f"{EXPERIMENT}.json", EXPERIMENT)
        return run_memo(self.out / "runs" / owner)

    def entry(self, owner: str, stage: str) -> dict[str, Any] | None:
        return self.memo(owner).entry(stage)

    def records(self) -> list[MemoRecord]:
        """Every entry, the runs' in id order, the experiment's last, each owner's in the order they first ran."""
        memos = [run_memo(f.parent) for f in sorted((self.out / "runs").glob(f"*/{MEMO_FILE}"))]
        return [r for memo in [*memos, self.memo(EXPERIMENT)] for r in memo.records()]
