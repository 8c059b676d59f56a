"""One trial, run in-process through the ``possym`` command: train, then each analysis stage.

:func:`run_trial` is a top-level function of plain, picklable data, so the local process pool, Ray
and submitit all run the very same code. It calls :func:`possym.cli.main` (the stable interface)
once per stage, with the stage's output appended to ``STATE/log.txt``.

Resumable at stage granularity. After each stage returns 0, ``STATE/STAGE.done`` is written
atomically; a rerun skips marked stages, resumes an interrupted training from its last state
(``possym train --resume``), and a trial with every stage marked is skipped whole. ``STATE/DONE``
holds the finished trial's record; a stage added to the spec later runs on the next sweep. A killed
sweep therefore loses at most the stage in flight, and training loses at most the steps since its
last checkpoint.

A trial first writes ``STATE/trial.json`` (its argv); a later sweep that would run the same trial id
with different settings is refused instead of mixing two configurations in one run directory.

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
from pathlib import Path
from typing import Any

from possym.runs import atomic_write_text
from possym.sweep.spec import Trial

DONE = "DONE"


class TrialError(RuntimeError):
    """A stage of a trial failed; the message names the stage and the log to read."""


def is_done(trial: Trial) -> bool:
    """Every stage of this trial is marked (a stage added to the spec later makes it unfinished again)."""
    state = Path(trial.state_dir)
    return all((state / f"{s}.done").is_file() for s in ["train", *trial.stage_argvs]) and (state / DONE).is_file()


def done_record(trial: Trial) -> dict[str, Any] | None:
    path = Path(trial.state_dir) / DONE
    return json.loads(path.read_text()) if path.is_file() else None


def settings_conflict(trial: Trial) -> str | None:
    """Why this trial id cannot continue under ``trial``'s training argv (it was started with others), or None."""
    path = Path(trial.state_dir) / "trial.json"
    if not path.is_file():
        return None
    before = json.loads(path.read_text())["train"]
    if before == trial.train_argv:
        return None
    return (f"trial {trial.id} was started with {before}, not {trial.train_argv}; use a new --out, or delete "
            f"{trial.state_dir} and {trial.run_dir} to start it again")


def check_settings(trial: Trial) -> None:
    """Refuse to continue a trial id that was started with other settings; record them on first use."""
    conflict = settings_conflict(trial)
    if conflict:
        raise ValueError(conflict)
    settings = {"train": trial.train_argv, "stages": trial.stage_argvs}
    atomic_write_text(Path(trial.state_dir) / "trial.json", json.dumps(settings, indent=1) + "\n")


def _call(argv: list[str], log: Path) -> int:
    """``possym ARGV`` in this process, stdout and stderr appended to ``log``; argparse exits become codes."""
    from possym.cli import main

    with log.open("a") as f, contextlib.redirect_stdout(f), contextlib.redirect_stderr(f):
        f.write(f"$ possym {' '.join(argv)}\n")
        f.flush()
        try:
            return main(argv)
        except SystemExit as exc:  # argparse refuses an argument (or an unknown subcommand)
            return exc.code if isinstance(exc.code, int) else 2


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
    for stage, argv in [("train", trial.train_argv), *trial.stage_argvs.items()]:
        marker = state / f"{stage}.done"
        if marker.is_file():
            continue
        if stage == "train" and (Path(trial.run_dir) / "config.yaml").is_file():
            argv = ["train", "--resume", trial.run_dir, "--monitor"]  # an interrupted training
        t = time.perf_counter()
        code = _call(argv, log)
        if code != 0:
            raise TrialError(f"trial {trial.id}: `possym {argv[0]}` exited with {code}; see {log}")
        atomic_write_text(marker, json.dumps({"seconds": time.perf_counter() - t}) + "\n")
        ran.append(stage)
    record = {
        **{k: v for k, v in dataclasses.asdict(trial).items() if k in ("id", "variant", "task", "seed", "run_dir")},
        "status": "done",
        "stages_run": ran,
        "seconds": time.perf_counter() - t0,
        "stage_seconds": {
            s: json.loads((state / f"{s}.done").read_text())["seconds"] for s in ["train", *trial.stage_argvs]
        },
    }
    atomic_write_text(state / DONE, json.dumps(record, indent=1) + "\n")
    return record
