"""The canonical grid is one experiment file; its quick version is that file with smaller settings."""

from __future__ import annotations

import pytest

from possym.canonical.conditions import frequency_conditions, run_condition
from possym.errors import ConfigError
from possym.experiment import load_experiment


def test_the_grids_variants_are_the_librarys_frequency_conditions() -> None:
    exp = load_experiment("canonical")
    conditions = frequency_conditions(32, 8)
    assert {v.name: v.overrides for v in exp.variants} == {c.name: tuple(c.overrides) for c in conditions}
    for spec in exp.runs():
        cfg = spec.config()
        assert run_condition(spec.variant, cfg.model, cfg.task.length).planes  # the name says what the head sees


def test_every_cell_is_a_one_layer_attention_only_head_trained_on_one_epoch_of_fresh_data() -> None:
    for name, steps in (("canonical", 1500), ("canonical_quick", 1000)):
        for spec in load_experiment(name).runs():
            cfg = spec.config()
            assert (cfg.model.n_layers, cfg.model.n_heads, cfg.model.d_model, cfg.model.mlp) == (1, 1, 32, False)
            assert (cfg.task.length, cfg.task.n_symbols, cfg.train.steps) == (8, 32, steps)
            assert cfg.task.n_train == cfg.train.steps * cfg.train.batch_size
            assert cfg.train.eval_every == cfg.train.state_every == steps // 3


def test_the_quick_grid_is_a_subset_of_the_full_grids_heads() -> None:
    full, quick = load_experiment("canonical"), load_experiment("canonical_quick")
    assert len(full.runs()) == 108 and len(quick.runs()) == 15
    models = {r.id: r.config().model for r in full.runs()}
    assert all(models[r.id] == r.config().model for r in quick.runs())
    assert quick.stage("canonical_cell").n_score < full.stage("canonical_cell").n_score


def test_seeds_asked_for_win_over_those_of_the_file_that_names_another() -> None:
    assert load_experiment("canonical_quick", seeds=(3, 4)).seeds == (3, 4)
    assert load_experiment("canonical_quick", overrides=["experiment.seeds=[5]"]).seeds == (5,)


def test_experiment_variants_keeps_the_variants_named_in_the_files_order() -> None:
    exp = load_experiment("canonical", overrides=["experiment.variants=[nope,band2]"])
    assert [v.name for v in exp.variants] == ["band2", "nope"]
    with pytest.raises(ConfigError, match="band9.*known: \\['band1'"):
        load_experiment("canonical", overrides=["experiment.variants=[band9]"])
