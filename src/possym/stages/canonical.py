"""The metric paper's canonical grid as two stages: the analysis of one cell, and the grid's report.

- ``canonical_cell`` (run scope, :class:`~possym.canonical.grid.CellConfig`): accuracy by answer
  position at 1x, 2x, 4x the training length, the exact scores, frequency use and plane geometry of
  one trained toy head, cached in ``RUN/canonical.json``;
- ``canonical_report`` (experiment scope, :class:`~possym.canonical.grid.CanonicalGridConfig`):
  Theorem 7's curves, the verdicts, the tables and the figures from every cell, into the experiment
  directory, rebuilt on every call (from the cells' cached analyses). A cell's condition is its run's variant.

Example:
    >>> from possym.stages.registry import get_stage
    >>> get_stage("canonical_cell").scope, get_stage("canonical_report").scope
    ('run', 'experiment')
"""

from __future__ import annotations

from typing import Any

from possym.canonical.grid import CanonicalGridConfig, CellConfig, GridResults, analyse_cell, grid_report
from possym.errors import PossymError
from possym.stages.registry import ExperimentDir, Stage


def canonical_report(exp: ExperimentDir, grid: CanonicalGridConfig) -> GridResults:
    """The grid's report from the analyses its cells hold (every cell must be analysed)."""
    cells: list[tuple[str, str, int, dict[str, Any]]] = []
    cell = CellConfig.of(grid)
    for rid, run in exp.runs.items():
        if exp.variants.get(rid, "") not in grid.condition_names:
            raise PossymError(f"run {rid}: its variant {exp.variants.get(rid)!r} is not a condition of the grid "
                              f"{grid.condition_names}")
        cells.append((exp.tasks[rid], exp.variants[rid], exp.seeds[rid], analyse_cell(run, cell)))
    return grid_report(grid, cells, exp.path)


def _grid_settings(grid: CanonicalGridConfig) -> dict[str, Any]:
    from possym.canonical.grid import grid_to_dict

    return grid_to_dict(grid)["grid"]


STAGES = (
    Stage("canonical_cell", CellConfig, analyse_cell, scope="run",
          summary="one canonical toy head: accuracy by position and length, scores, frequency use, geometry"),
    Stage("canonical_report", CanonicalGridConfig, canonical_report, scope="experiment", always=True,
          to_dict=_grid_settings,
          summary="the canonical grid's Theorem 7 curves, verdicts, tables and figures"),
)
