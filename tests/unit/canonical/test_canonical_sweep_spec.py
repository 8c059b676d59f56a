"""The packaged canonical sweep trains exactly the toy heads `possym canonical` trains."""

from __future__ import annotations

from possym.canonical.grid import CanonicalGridConfig, run_config
from possym.experiment import load_experiment
from possym.experiment.canonical import canonical_experiment


def test_the_sweep_spec_expands_to_the_grids_run_configs() -> None:
    spec = load_experiment("canonical")
    grid = CanonicalGridConfig()
    expected = {f"{c.name}-{t}-s{s}": run_config(grid, t, c, s)
                for t in grid.tasks for c in grid.all_conditions for s in grid.seeds}
    assert {r.id: r.config() for r in spec.runs()} == expected
    assert {r.id: r.config() for r in canonical_experiment(grid).runs()} == expected
