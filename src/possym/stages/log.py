"""The resume log of an experiment directory: one entry per (run, stage), keyed by the stage's settings.

``OUT/log/RUN.json`` holds the entries of run ``RUN`` and ``OUT/log/experiment.json`` those of the
experiment-scope stages: for each stage its status (``running``, ``done``, ``failed``), the settings
it ran with (:meth:`possym.stages.registry.Stage.key_of`), wall-clock seconds, attempts and the last
error. A stage is done for a run only if its entry is ``done`` *with today's settings*: change a
stage's settings and only that stage reruns. A kill leaves an entry ``running``, redone on the next
call; each stage's own work is itself resumable (training restarts from its last state). One file
per run, each rewritten atomically, so workers on other machines never write the same file.

Example:
    >>> import tempfile
    >>> log = ResumeLog(Path(tempfile.mkdtemp()))
    >>> log.start("number-s0", "score", {"n_inputs": 100}); log.finish("number-s0", "score", 1.5)
    >>> log.done("number-s0", "score", {"n_inputs": 100}), log.done("number-s0", "score", {"n_inputs": 50})
    (True, False)
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from possym.errors import RunError
from possym.runs import atomic_write_text

EXPERIMENT = "experiment"  # the owner of experiment-scope entries
STATUSES = ("running", "done", "failed")


@dataclass(frozen=True)
class ResumeRecord:
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


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


class ResumeLog:
    """The log under ``out/log/``; see the module docstring."""

    def __init__(self, out: Path) -> None:
        self.dir = Path(out) / "log"

    def _file(self, owner: str) -> Path:
        return self.dir / f"{owner}.json"

    def _read(self, owner: str) -> dict[str, dict[str, Any]]:
        file = self._file(owner)
        if not file.is_file():
            return {}
        try:
            return json.loads(file.read_text())["stages"]
        except (json.JSONDecodeError, KeyError) as exc:
            raise RunError(f"{file} is not a resume log ({exc}); delete it to redo {owner}'s stages") from exc

    def _write(self, owner: str, stages: dict[str, dict[str, Any]]) -> None:
        atomic_write_text(self._file(owner), json.dumps({"owner": owner, "stages": stages}, indent=1) + "\n")

    def entry(self, owner: str, stage: str) -> dict[str, Any] | None:
        return self._read(owner).get(stage)

    def done(self, owner: str, stage: str, settings: dict[str, Any], defaults: dict[str, Any] | None = None) -> bool:
        """Whether ``stage`` finished for ``owner`` with these settings. A setting the entry lacks was added to
        the stage after the entry was written, and held its value in ``defaults`` then."""
        e = self.entry(owner, stage)
        if e is None or e["status"] != "done":
            return False
        stored, defaults = e["settings"], defaults or {}
        return set(stored) <= set(settings) and all(
            (stored[k] if k in stored else defaults.get(k, object())) == v for k, v in settings.items())

    def start(self, owner: str, stage: str, settings: dict[str, Any]) -> None:
        stages = self._read(owner)
        attempts = stages.get(stage, {}).get("attempts", 0) + 1
        stages[stage] = {"status": "running", "settings": settings, "started": _now(), "finished": None,
                         "seconds": None, "attempts": attempts, "error": None}
        self._write(owner, stages)

    def finish(self, owner: str, stage: str, seconds: float) -> None:
        stages = self._read(owner)
        stages[stage].update(status="done", finished=_now(), seconds=round(seconds, 2), error=None)
        self._write(owner, stages)

    def fail(self, owner: str, stage: str, seconds: float, error: str) -> None:
        stages = self._read(owner)
        stages[stage].update(status="failed", finished=_now(), seconds=round(seconds, 2), error=error[-2000:])
        self._write(owner, stages)

    def mark_done(self, owner: str, stage: str, settings: dict[str, Any], seconds: float | None = None) -> None:
        """Record ``stage`` as done without running it (a migrated directory's finished work)."""
        stages = self._read(owner)
        stages[stage] = {"status": "done", "settings": settings, "started": _now(), "finished": _now(),
                         "seconds": seconds, "attempts": 1, "error": None, "migrated": True}
        self._write(owner, stages)

    def records(self) -> list[ResumeRecord]:
        """Every entry, the experiment's last, in the order each owner's stages first ran."""
        files = sorted(self.dir.glob("*.json"), key=lambda f: (f.stem == EXPERIMENT, f.stem))
        out = []
        for file in files:
            for stage, e in self._read(file.stem).items():
                out.append(ResumeRecord(file.stem, stage, e["status"], e.get("seconds"), e.get("attempts", 1),
                                        e.get("started", ""), e.get("finished"), e.get("error"), e["settings"]))
        return out
