"""A sweep: its experiment run by the executor on an engine, then its summary.

Each run of the spec (``VARIANT-TASK-sSEED``) is one unit of work: its training and its run-scope
stages, in one worker of the engine, resumable from its last state. Finished units are only read,
never re-run, so the same call resumes a killed sweep; a unit that fails is retried ``retries``
times (``outcome.retried`` names the runs that were), and a run that still fails is reported in
``outcome.failed`` and in its memo. A spec that would give an existing run other training
settings is refused before anything runs.

Example:
    >>> from possym.sweep.engines import LocalEngine
    >>> outcome = run_sweep(load_experiment("robustness_quick"), "runs/sweep", LocalEngine(2))   # doctest: +SKIP
    >>> outcome.failed, outcome.retried   # doctest: +SKIP
    ({}, [])
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from possym.experiment.executor import ExperimentOutcome, Unit, run_experiment
from possym.experiment.spec import Experiment, load_experiment

__all__ = ["load_experiment", "run_sweep"]


def run_sweep(exp: Experiment, out: str | Path, engine: Any, on_unit: Callable[[Unit, str], None] | None = None,
              summary: bool = True) -> ExperimentOutcome:
    """Run every unfinished run of ``exp`` under ``out`` on ``engine``, then (``summary``) write the summary
    (:func:`possym.sweep.aggregate.write_summary`); ``on_unit(unit, "done" | "retry" | "failed")``
    reports each run's outcome."""
    from possym.sweep.aggregate import write_summary

    outcome = run_experiment(exp, out, engine=engine, on_unit=on_unit, progress=False)
    if summary:
        write_summary(exp, out)
    return outcome
