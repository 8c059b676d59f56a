"""The canonical grid as an experiment: a cell is a run config (task × condition × seed) plus its analysis.

Each condition is a variant (its plane options), each task carries its own sizes, and the stages are
``train`` (no live monitor: the cells are scored whole), ``canonical_cell`` and ``canonical_report``.
Cells train into ``OUT/runs/CONDITION-TASK-sSEED``, normal run directories.

Example:
    >>> from possym.canonical.grid import CanonicalGridConfig
    >>> exp = canonical_experiment(CanonicalGridConfig.quick(tasks=("index",)))
    >>> [r.id for r in exp.runs()][:2], exp.stage_names
    (['band1-index-s0', 'band4-index-s0'], ('train', 'canonical_cell', 'canonical_report'))
"""

from __future__ import annotations

from possym.canonical.grid import CanonicalGridConfig, CellConfig, run_overrides
from possym.experiment.config import Experiment, Variant
from possym.stages.registry import get_stage


def canonical_experiment(grid: CanonicalGridConfig) -> Experiment:
    """The experiment whose runs are the grid's cells and whose stages analyse and report them."""
    conditions = grid.all_conditions
    first = conditions[0]
    # What every cell shares: the run overrides of a condition, less the condition's own and the task sizes.
    shared = [o for o in run_overrides(grid, grid.tasks[0], first)
              if o not in first.overrides and not o.startswith("task.")]
    per_task = tuple((t, tuple(o for o in run_overrides(grid, t, first) if o.startswith("task."))) for t in grid.tasks)
    return Experiment(
        preset=None,
        tasks=grid.tasks,
        seeds=grid.seeds,
        overrides=tuple(shared),
        task_overrides=per_task,
        variants=tuple(Variant(c.name, tuple(c.overrides)) for c in conditions),
        stages=(("train", get_stage("train").settings_from({"monitor": False, "progress": False})),
                ("canonical_cell", CellConfig.of(grid)),
                ("canonical_report", grid)),
        retries=0,
        threads=grid.threads,
        name="canonical",
    )

