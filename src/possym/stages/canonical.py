"""The metric paper's canonical grid as two stages: the analysis of one cell, and the grid's report.

- ``canonical_cell`` (run scope, :class:`~possym.canonical.grid.CanonicalCellConfig`): accuracy by answer
  position at 1x, 2x, 4x the training length, the exact scores, frequency use and plane geometry of
  one trained toy head, written to ``RUN/canonical.json``;
- ``canonical_report`` (experiment scope, :class:`~possym.canonical.grid.CanonicalReportConfig`):
  Theorem 7's curves, the verdicts, the tables and the figures from every cell, into the experiment
  directory, rebuilt on every call (from the analyses the cells hold). A cell's condition is its run's
  variant, checked against the planes its model config lets in; the grid's conditions, in order, are the
  experiment's variants, and its training length and chance levels are the cells' task configs'.

Example:
    >>> from possym.stages.registry import get_stage
    >>> get_stage("canonical_cell").scope, get_stage("canonical_report").scope
    ('run', 'experiment')
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from possym.canonical.claims import canonical_claims
from possym.canonical.conditions import Condition, run_condition
from possym.canonical.grid import (
    CanonicalCellConfig,
    CanonicalReportConfig,
    GridResults,
    analyse_cell,
    cell_rows,
    read_cell,
    wmax_rows,
)
from possym.canonical.plots import save_figures
from possym.canonical.records import CellRecord, PositionRecord
from possym.errors import PossymError
from possym.records import records_csv
from possym.runs import atomic_write_text
from possym.stages.registry import Stage, StageContext
from possym.tasks import get_task
from possym.tasks.canonical import CANONICAL_TASKS


def canonical_cell(ctx: StageContext, cfg: CanonicalCellConfig) -> dict[str, Any]:
    """One cell's analysis (:func:`possym.canonical.grid.analyse_cell`) into ``RUN/canonical.json``."""
    return analyse_cell(ctx.run, cfg)


def canonical_report(ctx: StageContext, cfg: CanonicalReportConfig) -> GridResults:
    """The grid's report from the analyses its cells hold (every cell must be analysed, with the same settings)."""
    exp = ctx.exp
    if not exp.runs:
        raise PossymError(f"{exp.path}: no cell of the grid was trained and analysed; see {exp.path / 'log'}")
    runs: list[CellRecord] = []
    positions: list[PositionRecord] = []
    conditions: dict[str, Condition] = {}
    specs: dict[str, Any] = {}
    settings: dict[str, str] = {}
    for rid, run in exp.runs.items():
        spec = run.config.task
        try:
            cond = run_condition(exp.variants.get(rid, ""), run.config.model, spec.length)  # type: ignore[attr-defined]
        except ValueError as exc:
            raise PossymError(f"run {rid}: its variant is not a frequency condition of the canonical grid: {exc}"
                              ) from None
        data = read_cell(run)
        settings[json.dumps(data["settings"], sort_keys=True)] = rid
        r, p = cell_rows(data, exp.tasks[rid], cond, exp.seeds[rid])
        runs += r
        positions += p
        conditions.setdefault(cond.name, cond)
        specs.setdefault(spec.name, spec)
    if len(settings) > 1:
        raise PossymError(f"{exp.path}: the cells were analysed with different canonical_cell settings (e.g. "
                          f"{sorted(settings.values())[:2]}); rerun the experiment, which analyses every cell alike")
    lengths = {s.length for s in specs.values()}
    if len(lengths) > 1:
        raise PossymError(f"{exp.path}: the tasks are trained at different lengths {sorted(lengths)}; the grid's "
                          "shapes and length claims compare them at one")
    length = lengths.pop()
    # A task the grid lacks still has a floor in the shape claims' "n/a" line: its defaults' chance.
    chance = {t: get_task(t).chance(specs.get(t) or get_task(t).config()) for t in CANONICAL_TASKS}
    wmax = wmax_rows()
    claims = canonical_claims(list(conditions), length, chance, runs, positions, wmax,
                              rng=np.random.default_rng(cfg.claims_seed))
    out = exp.path
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out / "results.csv", records_csv(runs))
    atomic_write_text(out / "positions.csv", records_csv(positions))
    atomic_write_text(out / "theorem7.csv", records_csv(wmax))
    atomic_write_text(out / "claims.csv", records_csv(claims))
    save_figures(list(conditions), length, runs, positions, wmax, out)
    return GridResults(runs, positions, wmax, claims)


STAGES = (
    Stage("canonical_cell", CanonicalCellConfig, canonical_cell, scope="run",
          summary="one canonical toy head: accuracy by position and length, scores, frequency use, geometry"),
    Stage("canonical_report", CanonicalReportConfig, canonical_report, scope="experiment", always=True,
          summary="the canonical grid's Theorem 7 curves, verdicts, tables and figures"),
)
