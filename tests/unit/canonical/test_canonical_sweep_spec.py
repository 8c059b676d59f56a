"""The packaged sweep spec trains exactly the toy heads `possym canonical` trains."""

from __future__ import annotations

from possym.canonical.grid import GridConfig, run_config
from possym.sweep.spec import expand, load_spec


def test_the_sweep_spec_expands_to_the_grids_run_configs(tmp_path) -> None:
    trials = {t.id: t for t in expand(load_spec("canonical"), tmp_path)}
    grid = GridConfig()
    want = {
        f"{c.name}-{task}-s{s}": run_config(grid, task, c, s)
        for c in grid.all_conditions
        for task in grid.tasks
        for s in grid.seeds
    }
    assert set(trials) == set(want)
    assert all(trials[k].config() == cfg for k, cfg in want.items())
