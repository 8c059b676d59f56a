"""Resumable stages over one output directory: what is done is skipped, what was cut short is redone.

``DIR/stages.json`` records the settings the directory was made with and, per stage, ``running`` or
``done`` with its wall-clock seconds and exit code; it is rewritten atomically at every transition.
A stage killed mid-way stays ``running`` and is redone on the next call; each stage's own work is
itself resumable (training restarts from its last checkpoint), so little is lost. A stage marked
``always`` (the report) is redone on every call, since it reads whatever the others produced.

Example:
    >>> import tempfile
    >>> out = Path(tempfile.mkdtemp())
    >>> calls = []
    >>> stages = [Stage("a", lambda: calls.append("a")), Stage("b", lambda: calls.append("b"))]
    >>> _ = run_stages(out, stages, {"preset": "x"}, progress=False)
    >>> _ = run_stages(out, stages, {"preset": "x"}, progress=False)   # both done: nothing reruns
    >>> calls
    ['a', 'b']
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tqdm import tqdm

from possym.errors import PossymError
from possym.runs import atomic_write_text


@dataclass(frozen=True)
class Stage:
    """A named step; ``run()`` returns an exit code (None = 0) or raises."""

    name: str
    run: Callable[[], int | None]
    always: bool = False


class StageLog:
    """``DIR/stages.json``: the settings and each stage's status."""

    def __init__(self, out: Path, settings: dict[str, Any]) -> None:
        self.path = out / "stages.json"
        out.mkdir(parents=True, exist_ok=True)
        if self.path.exists():
            record = json.loads(self.path.read_text())
            if record["settings"] != settings:
                changed = sorted(
                    k for k in set(settings) | set(record["settings"]) if settings.get(k) != record["settings"].get(k)
                )
                raise PossymError(
                    f"{out} was made with other settings ({', '.join(changed)} differ: "
                    f"{ {k: record['settings'].get(k) for k in changed} }); use a new --out, or the same settings"
                )
            self.stages: dict[str, dict[str, Any]] = record["stages"]
        else:
            self.stages = {}
        self.settings = settings
        self._write()

    def _write(self) -> None:
        atomic_write_text(self.path, json.dumps({"settings": self.settings, "stages": self.stages}, indent=2) + "\n")

    def done(self, name: str) -> bool:
        return self.stages.get(name, {}).get("status") == "done"

    def start(self, name: str) -> None:
        self.stages[name] = {
            "status": "running",
            "started": _now(),
            "runs": self.stages.get(name, {}).get("runs", 0) + 1,
        }
        self._write()

    def finish(self, name: str, seconds: float, rc: int) -> None:
        self.stages[name].update(status="done", finished=_now(), seconds=round(seconds, 2), rc=rc)
        self._write()

    def rows(self) -> list[dict[str, Any]]:
        """One record per stage, in the order they first ran."""
        return [{"stage": name, **info} for name, info in self.stages.items()]


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def run_stages(
    out: Path,
    stages: Sequence[Stage],
    settings: dict[str, Any],
    progress: bool = True,
    log_dir: Path | None = None,
) -> StageLog:
    """Run every stage not yet done, in order, under one progress bar; returns the stage log.

    With ``log_dir``, each stage's printed output goes to ``log_dir/{stage}.log`` (progress bars,
    on stderr, stay on screen), so the screen shows one display for the whole run.
    """
    log = StageLog(out, settings)
    with tqdm(
        total=len(stages), desc="reproduce", unit="stage", position=0, disable=not progress, dynamic_ncols=True
    ) as bar:
        for stage in stages:
            if log.done(stage.name) and not stage.always:
                bar.update(1)
                continue
            bar.set_description(f"reproduce [{stage.name}]")
            log.start(stage.name)
            t0 = time.perf_counter()
            with _stdout_to(log_dir / f"{stage.name.replace(':', '_')}.log" if log_dir else None):
                rc = stage.run() or 0
            log.finish(stage.name, time.perf_counter() - t0, int(rc))
            bar.update(1)
    return log


@contextlib.contextmanager
def _stdout_to(path: Path | None):
    if path is None:
        yield
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as f, contextlib.redirect_stdout(f):
        yield
