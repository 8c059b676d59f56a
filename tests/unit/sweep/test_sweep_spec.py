"""Sweep specs: expansion into trials, and errors that say what is wrong before anything runs."""

from __future__ import annotations

import pytest

from possym.config import ConfigError
from possym.sweep.spec import expand, spec_from_dict


def test_a_grid_expands_seed_by_seed_with_every_seed_field_set():
    spec = spec_from_dict({
        "preset": "quick", "tasks": ["number", "letter"], "seeds": [3, 4],
        "overrides": ["train.steps=10"],
        "variants": {"base": [], "prope": {"overrides": ["model.p_rope=0.5"], "tasks": ["number"], "seeds": [3]}},
        "stages": {"score": {"n_inputs": 5}},
    })
    trials = expand(spec, "/sw")
    assert [t.id for t in trials] == ["base-number-s3", "base-letter-s3", "prope-number-s3",
                                      "base-number-s4", "base-letter-s4"]
    t = trials[2]
    assert t.run_dir == "/sw/runs/prope-number-s3" and t.state_dir == "/sw/trials/prope-number-s3"
    cfg = t.config()
    assert (cfg.preset, cfg.train.steps, cfg.model.p_rope) == ("quick", 10, 0.5)
    assert (cfg.seeds.data, cfg.seeds.init, cfg.seeds.order, cfg.seeds.dropout) == (3, 3, 3, 3)
    assert list(t.stages) == ["score"] and t.stages["score"].n_inputs == 5  # only the stages asked for


def test_default_stages_are_score_lengthgen_discrepancy_in_order():
    (trial,) = expand(spec_from_dict({"tasks": ["letter"], "seeds": [0]}), "o")
    assert list(trial.stages) == ["score", "lengthgen", "discrepancy"]
    assert trial.variant == "baseline"


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"tasks": ["number"], "sedes": [0]}, r"unknown sweep key\(s\) \['sedes'\]"),
        ({"tasks": ["numbers"]}, "'numbers' is not a task"),
        ({"tasks": ["number"], "seeds": [0, 0]}, "distinct integers"),
        ({"tasks": ["number"], "seeds": "0"}, "must be a list of integers"),
        ({"tasks": ["number"], "variants": {"v": ["model.p_rope=2"]}}, "variant 'v', task 'number': model.p_rope=2.0"),
        ({"tasks": ["number"], "variants": {"v": ["model.lr=1"]}}, "unknown key 'model.lr'"),
        ({"tasks": ["number"], "variants": {"v": {"overrides": [], "tasks": ["letter"]}}}, "not among sweep.tasks"),
        ({"tasks": ["number"], "variants": {"a/b": []}}, "may hold only letters"),
        ({"tasks": ["number"], "stages": {"scores": {}}}, "unknown stage 'scores'"),
        ({"tasks": ["number"], "stages": {"score": ["--n-inputs", "30"]}}, "config keys, e.g. {n_inputs: 30}, not"),
        ({"tasks": ["number"], "stages": {"score": {"n-inputs": 30}}}, r"unknown key\(s\) \['n-inputs'\]; known"),
        ({"tasks": ["number"], "stages": {"lengthgen": {"steps": ["last"]}}}, "'last'; allowed"),
        ({"tasks": ["letter"], "variants": {"x": ["train.random_extra=4"]}}, "number task only"),
    ],
)
def test_bad_specs_fail_before_any_trial_with_a_message(data, message):
    with pytest.raises(ConfigError, match=message):
        spec_from_dict(data)
