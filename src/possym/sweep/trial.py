"""One trial, run in-process: train, then each analysis stage as a library call with its typed config.

:func:`run_trial` is a top-level function of plain, picklable data, so the local process pool, Ray
and submitit all run the very same code. Each stage's printed output is appended to ``STATE/log.txt``.

Resumable at stage granularity. After each stage returns, ``STATE/STAGE.done`` is written
atomically; a rerun skips marked stages, resumes an interrupted training from its last state, and a
trial with every stage marked is skipped whole. ``STATE/DONE`` holds the finished trial's record; a
stage added to the spec later runs on the next sweep. A killed sweep therefore loses at most the
stage in flight, and training loses at most the steps since its last checkpoint.

A trial's identity is the run config it trains. A later sweep that would train the same trial id
with a different resolved config is refused instead of mixing two configurations in one run
directory; one that spells the same config differently (the flags of an older spec, overrides in
another order) continues it.

Example:
    >>> record = run_trial(trial)   # doctest: +SKIP
    >>> record["status"], record["stages_run"]   # doctest: +SKIP
    ('done', ['train', 'score', 'lengthgen', 'discrepancy'])
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import time
import traceback
from pathlib import Path
from typing import Any

from possym.config import changed_keys
from possym.errors import PossymError
from possym.runs import RunDir, atomic_write_text
from possym.sweep.spec import Trial

DONE = "DONE"


class TrialError(RuntimeError):
    """A stage of a trial failed; the message names the stage and the log to read."""


def is_done(trial: Trial) -> bool:
    """Every stage of this trial is marked (a stage added to the spec later makes it unfinished again)."""
    state = Path(trial.state_dir)
    return all((state / f"{s}.done").is_file() for s in ["train", *trial.stages]) and (state / DONE).is_file()


def done_record(trial: Trial) -> dict[str, Any] | None:
    path = Path(trial.state_dir) / DONE
    return json.loads(path.read_text()) if path.is_file() else None


def settings_conflict(trial: Trial) -> str | None:
    """Why this trial id cannot continue under ``trial``'s config (its run holds another), or None."""
    if not (Path(trial.run_dir) / "config.yaml").is_file():
        return None
    # The preset is a name, not a setting: paper_v1 is what `paper` meant before issue 16, so the trials
    # of a spec migrated from one to the other are still recognised by their values.
    before, now = RunDir.open(trial.run_dir).config.to_dict(), trial.config().to_dict()
    before.pop("preset", None)
    now.pop("preset", None)
    if before == now:
        return None
    changed = changed_keys(before, now)
    return (f"trial {trial.id} was started with another config ({', '.join(changed) or 'preset'} differ); "
            f"use a new --out, or delete {trial.state_dir} and {trial.run_dir} to start it again")


def check_settings(trial: Trial) -> None:
    """Refuse to continue a trial id that was started with another config; record the settings on first use."""
    conflict = settings_conflict(trial)
    if conflict:
        raise PossymError(conflict)
    settings = {"config": trial.config().to_dict(),
                "stages": {name: _plain(cfg) for name, cfg in trial.stages.items()}}
    atomic_write_text(Path(trial.state_dir) / "trial.json", json.dumps(settings, indent=1) + "\n")


def _plain(cfg: Any) -> Any:
    return dataclasses.asdict(cfg) if dataclasses.is_dataclass(cfg) and not isinstance(cfg, type) else cfg


def _stage(trial: Trial, name: str, run: RunDir | None) -> None:
    """Run one stage of the trial (its library function with its typed config)."""
    from possym.stages.score import score_run
    from possym.stages.theory import trained_discrepancy_run
    from possym.stages.train import train_run

    if name == "train":
        run = run or RunDir.create(trial.run_dir, trial.config())
        train_run(run, monitor=True, progress=False)
        return
    assert run is not None  # training comes first and is marked before any analysis runs
    cfg = trial.stages[name]
    if name == "score":
        score_run(run, cfg)
    elif name == "lengthgen":
        cfg.run(run)
    else:
        trained_discrepancy_run(run, cfg, log=print)


def run_trial(trial: Trial) -> dict[str, Any]:
    """Run the trial's missing stages; return its record (also written to ``STATE/DONE``).

    Raises :class:`TrialError` at the first failing stage; the stages before it stay marked.
    """
    import torch

    torch.set_num_threads(trial.threads)
    state = Path(trial.state_dir)
    state.mkdir(parents=True, exist_ok=True)
    if is_done(trial):
        return done_record(trial) or {}
    check_settings(trial)
    log = state / "log.txt"
    t0 = time.perf_counter()
    ran = []
    for stage in ["train", *trial.stages]:
        marker = state / f"{stage}.done"
        if marker.is_file():
            continue
        run = RunDir.open(trial.run_dir) if (Path(trial.run_dir) / "config.yaml").is_file() else None
        t = time.perf_counter()
        with log.open("a") as f, contextlib.redirect_stdout(f), contextlib.redirect_stderr(f):
            resuming = stage == "train" and run is not None  # an interrupted training continues from its state
            f.write(f"== {stage} ({trial.id}){': resuming ' + trial.run_dir if resuming else ''}\n")
            f.flush()
            try:
                _stage(trial, stage, run)
            except Exception as exc:
                traceback.print_exc()
                raise TrialError(f"trial {trial.id}: stage {stage} failed ({type(exc).__name__}: {exc}); "
                                 f"see {log}") from exc
        atomic_write_text(marker, json.dumps({"seconds": time.perf_counter() - t}) + "\n")
        ran.append(stage)
    record = {
        **{k: v for k, v in dataclasses.asdict(trial).items() if k in ("id", "variant", "task", "seed", "run_dir")},
        "status": "done",
        "stages_run": ran,
        "seconds": time.perf_counter() - t0,
        "stage_seconds": {
            s: json.loads((state / f"{s}.done").read_text())["seconds"] for s in ["train", *trial.stages]
        },
    }
    atomic_write_text(state / DONE, json.dumps(record, indent=1) + "\n")
    return record
