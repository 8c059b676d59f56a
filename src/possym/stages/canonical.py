"""The metric paper's canonical grid as two stages: the analysis of one cell, and the grid's report.

- ``canonical_cell`` (run scope, :class:`~possym.canonical.grid.CellConfig`): accuracy by answer
  position at 1x, 2x, 4x the training length, the exact scores, frequency use and plane geometry of
  one trained toy head, written to ``RUN/canonical.json``;
- ``canonical_report`` (experiment scope, :class:`~possym.canonical.grid.CanonicalGridConfig`):
  Theorem 7's curves, the verdicts, the tables and the figures from every cell, into the experiment
  directory, rebuilt on every call (from the analyses the cells hold). A cell's condition is its run's variant.

Example:
    >>> from possym.stages.registry import get_stage
    >>> get_stage("canonical_cell").scope, get_stage("canonical_report").scope
    ('run', 'experiment')
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from possym.canonical.claims import canonical_claims
from possym.canonical.grid import (
    CanonicalGridConfig,
    CellConfig,
    GridResults,
    analyse_cell,
    cell_rows,
    grid_to_dict,
    read_cell,
    wmax_rows,
)
from possym.canonical.plots import save_figures
from possym.canonical.records import CellRecord, PositionRecord
from possym.errors import PossymError
from possym.records import records_csv
from possym.runs import atomic_write_text
from possym.stages.registry import ExperimentDir, Stage


def canonical_report(exp: ExperimentDir, grid: CanonicalGridConfig) -> GridResults:
    """The grid's report from the analyses its cells hold (every cell must be analysed)."""
    if not exp.runs:
        raise PossymError(f"{exp.path}: no cell of the grid was trained and analysed; see {exp.path / 'log'}")
    cells: list[tuple[str, str, int, dict[str, Any]]] = []
    cell = CellConfig.of(grid)
    for rid, run in exp.runs.items():
        if exp.variants.get(rid, "") not in grid.condition_names:
            raise PossymError(f"run {rid}: its variant {exp.variants.get(rid)!r} is not a condition of the grid "
                              f"{grid.condition_names}")
        cells.append((exp.tasks[rid], exp.variants[rid], exp.seeds[rid], read_cell(run, cell)))
    return grid_report(grid, cells, exp.path)


def grid_report(grid: CanonicalGridConfig, cells: list[tuple[str, str, int, dict[str, Any]]], out: Path) -> GridResults:
    """Theorem 7's curves, the verdicts, the tables and the figures from every cell's measurements
    ``(task, condition, seed, analyse_cell's data)``, into ``out``."""
    runs: list[CellRecord] = []
    positions: list[PositionRecord] = []
    for task, cond_name, seed, data in cells:
        r, p = cell_rows(grid, data, task, grid.condition(cond_name), seed)
        runs += r
        positions += p
    wmax = wmax_rows()
    claims = canonical_claims(grid, runs, positions, wmax, rng=np.random.default_rng(grid.claims_seed))
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out / "grid.json", json.dumps(grid_to_dict(grid)["grid"], indent=1) + "\n")
    atomic_write_text(out / "results.csv", records_csv(runs))
    atomic_write_text(out / "positions.csv", records_csv(positions))
    atomic_write_text(out / "theorem7.csv", records_csv(wmax))
    atomic_write_text(out / "claims.csv", records_csv(claims))
    save_figures(grid, runs, positions, wmax, out)
    return GridResults(runs, positions, wmax, claims)



def _grid_settings(grid: CanonicalGridConfig) -> dict[str, Any]:
    return grid_to_dict(grid)["grid"]


STAGES = (
    Stage("canonical_cell", CellConfig, analyse_cell, scope="run",
          summary="one canonical toy head: accuracy by position and length, scores, frequency use, geometry"),
    Stage("canonical_report", CanonicalGridConfig, canonical_report, scope="experiment", always=True,
          to_dict=_grid_settings,
          summary="the canonical grid's Theorem 7 curves, verdicts, tables and figures"),
)
