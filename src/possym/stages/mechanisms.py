"""The ``mechanisms_table`` stage (experiment scope): the mechanism stages' tables over every run, and what
each seed shows, in EXP/mechanisms/ (:mod:`possym.report.mechanisms`).

Writes ``NAME.csv`` for each stacked table (``cliff_accuracy_hops``, ``dilution_knockout``, ``l0_tally``,
...: every run's rows with ``task`` and ``seed``), ``summary.csv`` (one row per task, seed and measure)
and ``summary_by_seed.csv`` (the same, a column per seed). Runs that lack a stage's tables are left
out of that table; an experiment with none writes nothing.

Example:
    >>> from possym.stages.registry import get_stage
    >>> get_stage("mechanisms_table").scope
    'experiment'
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from possym.report.mechanisms import collect_tables, mechanism_summary
from possym.runs import atomic_write_text
from possym.stages.registry import Stage, StageContext

SUBDIR = "mechanisms"


@dataclass(frozen=True)
class MechanismsTableConfig:
    """The stage reads what the mechanism stages wrote; it has no settings of its own."""


def mechanisms_table(ctx: StageContext, cfg: MechanismsTableConfig) -> pd.DataFrame:
    """Write EXP/mechanisms/ (module docstring) and return the per-seed summary (empty: no mechanism tables)."""
    exp = ctx.exp
    runs = [exp.runs[i] for i in sorted(exp.runs, key=lambda i: (exp.tasks.get(i, ""), exp.seeds.get(i, 0)))]
    tables = collect_tables(runs)
    if not tables:
        return pd.DataFrame()
    out = exp.path / SUBDIR
    out.mkdir(parents=True, exist_ok=True)
    for name, frame in tables.items():
        atomic_write_text(out / f"{name}.csv", frame.to_csv(index=False))
    summary = mechanism_summary(tables)
    atomic_write_text(out / "summary.csv", summary.to_csv(index=False))
    wide = summary.pivot_table(index=["task", "measure"], columns="seed", values="value", aggfunc="first")
    wide.columns = [f"s{c}" for c in wide.columns]
    atomic_write_text(out / "summary_by_seed.csv", wide.reset_index().to_csv(index=False, float_format="%.3f"))
    return summary


STAGE = Stage("mechanisms_table", MechanismsTableConfig, mechanisms_table, scope="experiment", always=True,
              summary="the cliff, dilution and L0 tables of every run stacked, and what each seed shows")
