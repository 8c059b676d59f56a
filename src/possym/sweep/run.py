"""Run a sweep's trials on an engine: skip finished ones, retry failed ones a bounded number of times.

Round r (r = 0..retries) submits every trial that is neither finished nor out of attempts; a trial
that fails in every round is reported, with its last error, in ``OUT/trials/ID/failed.json``.
Finished trials are only read, never re-run, so the same command resumes a killed sweep; a spec
that would give an existing trial id other training settings is refused before anything runs.

Example:
    >>> outcome = run_sweep(spec, "runs/sweep", LocalEngine(2))   # doctest: +SKIP
    >>> len(outcome.done), outcome.failed   # doctest: +SKIP
    (6, {})
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from possym.errors import PossymError
from possym.runs import atomic_write_text
from possym.sweep.spec import SweepSpec, Trial, expand
from possym.sweep.trial import done_record, is_done, run_trial, settings_conflict


@dataclass
class SweepOutcome:
    done: dict[str, dict[str, Any]] = field(default_factory=dict)  # trial id -> its record
    failed: dict[str, str] = field(default_factory=dict)  # trial id -> its last error
    skipped: list[str] = field(default_factory=list)  # finished before this call


def run_sweep(
    spec: SweepSpec,
    out: str | Path,
    engine: Any,
    on_trial: Callable[[Trial, str], None] | None = None,
    fn: Callable[[Trial], dict[str, Any]] = run_trial,
) -> SweepOutcome:
    """Run every unfinished trial of ``spec`` under ``out``; ``on_trial(trial, "done"|"retry"|"failed")``
    reports each outcome (the CLI's progress bar). ``fn`` is the trial function (tests inject failures)."""
    out = Path(out)
    trials = expand(spec, out)
    conflicts = [c for c in map(settings_conflict, trials) if c]
    if conflicts:  # before anything runs: one sweep directory never mixes two configurations of a trial
        raise PossymError(f"{len(conflicts)} trial(s) of this spec already exist with other settings: {conflicts[0]}")
    outcome = SweepOutcome()
    todo = []
    for trial in trials:
        if is_done(trial):
            outcome.done[trial.id] = done_record(trial) or {}
            outcome.skipped.append(trial.id)
        else:
            todo.append(trial)
    for attempt in range(spec.retries + 1):
        if not todo:
            break
        again = []
        for trial, record, error in engine.map(fn, todo):
            failed = Path(trial.state_dir) / "failed.json"
            if error is None:
                outcome.done[trial.id] = record
                outcome.failed.pop(trial.id, None)
                failed.unlink(missing_ok=True)
                state = "done"
            else:
                outcome.failed[trial.id] = error
                last = attempt == spec.retries
                atomic_write_text(failed, json.dumps({"attempts": attempt + 1, "error": error, "final": last}) + "\n")
                state = "failed" if last else "retry"
                if not last:
                    again.append(trial)
            if on_trial is not None:
                on_trial(trial, state)
        todo = again
    return outcome
