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
        ({"tasks": ["letter"], "variants": {"x": ["train.random_extra=4"]}}, "windows may follow any prefix"),
    ],
)
def test_bad_specs_fail_before_any_trial_with_a_message(data, message):
    with pytest.raises(ConfigError, match=message):
        spec_from_dict(data)


# The committed specs' stages as they were written before settings became config keys (CLI flags).
FLAG_STAGES = {
    "interventions_quick": {"score": ["--n-inputs", "30", "--no-figures"],
                            "lengthgen": ["--grid", "0,10,20,50,100,200,500,1000", "--n", "100", "--threads", "1",
                                          "--no-figures"]},
    "issue8": {"score": ["--n-inputs", "30", "--no-figures"],
               "lengthgen": ["--grid", "0,10,20,50,100,200,500,1000", "--n", "100", "--threads", "1", "--no-figures"],
               "discrepancy": ["--samples", "8", "--extras", "0,20,100", "--threads", "1"]},
    "quick_positional": {"score": ["--n-inputs", "100", "--no-figures"]},
    "robustness_paper": {"score": ["--n-inputs", "100", "--no-figures"],
                         "lengthgen": ["--n", "200", "--threads", "1", "--no-figures"],
                         "discrepancy": ["--samples", "16", "--extras", "0,10,20,50,100,200,500,1000", "--threads",
                                         "1"]},
    "robustness_quick": {"score": ["--n-inputs", "100", "--no-figures"],
                         "lengthgen": ["--grid", "0,10,20,50,100,200,500,800,1000,2000,5000", "--n", "200",
                                       "--threads", "1", "--no-figures"],
                         "discrepancy": ["--samples", "8", "--extras", "0,20,100", "--threads", "1"]},
}


@pytest.mark.parametrize("name", sorted(FLAG_STAGES))
def test_a_migrated_spec_means_what_its_command_line_flags_meant(name):
    """Oracle: the CLI's own parsers turn the old flags into the configs the stages ran with then."""
    from possym.cli import build_parser
    from possym.cli.lengthgen import config as lengthgen_config
    from possym.cli.score import config as score_config
    from possym.cli.theory import discrepancy_config
    from possym.sweep.spec import load_spec

    spec = load_spec(name)
    assert sorted(spec.stages) == sorted(FLAG_STAGES[name])
    for stage, flags in FLAG_STAGES[name].items():
        args = build_parser(stage).parse_args([stage, "RUN", *flags])
        if stage == "score":
            assert spec.stages[stage] == score_config(args)
        elif stage == "lengthgen":
            assert spec.stages[stage].curve == lengthgen_config(args)
            assert spec.stages[stage].threads == args.threads and spec.stages[stage].steps == ("final",)
        else:
            assert spec.stages[stage] == discrepancy_config(args)


@pytest.mark.parametrize("name", sorted(FLAG_STAGES))
def test_a_migrated_spec_keeps_its_trial_ids_and_configs(name):
    """Trials were `possym train --task T [--preset P] OVERRIDES... seeds.*=S`: the same ids, the same configs."""
    from possym.config import load_config
    from possym.sweep.spec import SEED_FIELDS, load_spec

    spec = load_spec(name)
    for trial in expand(spec, "/sw"):
        variant = next(v for v in spec.variants if v.name == trial.variant)
        old = load_config(trial.task, spec.preset, [*spec.overrides, *variant.overrides,
                                                     *(f"seeds.{f}={trial.seed}" for f in SEED_FIELDS)])
        assert trial.id == f"{variant.name}-{trial.task}-s{trial.seed}" and trial.config() == old


def test_robustness_paper_trials_made_under_the_old_paper_preset_are_still_recognised(tmp_path):
    """Its trials were trained with `--preset paper` before issue 16 made `paper` the authors' recipe; the
    spec now names paper_v1. A run directory holding the old config (preset "paper", no embd_dropout or
    activation keys: the values of the time) continues; one trained on today's `paper` is refused."""
    import dataclasses

    from possym.config import config_from_saved, load_config
    from possym.runs import RunDir
    from possym.sweep.spec import load_spec
    from possym.sweep.trial import settings_conflict

    trial = expand(load_spec("robustness_paper"), tmp_path)[0]
    old = dataclasses.asdict(trial.config()) | {"preset": "paper"}
    for key in ("embd_dropout", "activation", "mlp"):
        old["model"].pop(key)  # a config.yaml written before the knobs existed
    old["train"].pop("eval_size")
    assert config_from_saved(old).model.embd_p == 0.1
    RunDir.create(trial.run_dir, config_from_saved(old), argv=["test"])
    assert settings_conflict(trial) is None
    authors = load_config(trial.task, "paper", list(trial.overrides))
    other = dataclasses.replace(trial, run_dir=str(tmp_path / "b"))
    RunDir.create(other.run_dir, authors, argv=["test"])
    conflict = settings_conflict(other)
    assert conflict is not None and "model.activation" in conflict and "model.embd_dropout" in conflict


def test_recipe_ablation_arms_differ_from_B_in_exactly_what_their_names_say():
    """The ablation's conclusions rest on each arm changing one thing (docs/results.md, issue 16): a spec edit
    that moved anything else, or put A somewhere other than paper_v1's model, would change what was measured."""
    from possym.config import changed_keys, load_config
    from possym.sweep.spec import load_spec

    trials = expand(load_spec("recipe_ablation"), "o")
    b = {(t.task, t.seed): t.config().to_dict() for t in trials if t.variant == "B"}
    changed: dict[str, set[str]] = {}
    for t in trials:
        if t.variant != "B":
            changed.setdefault(t.variant, set()).update(changed_keys(b[t.task, t.seed], t.config().to_dict()))
    assert changed == {
        "A": {"model.embd_dropout", "model.activation"},
        "B_minus_embd": {"model.embd_dropout"},
        "B_minus_gelu": {"model.activation"},
        "C": {"train.batch_size", "train.steps"},  # B's null steps is one epoch, 6,750 at batch 64
        "B_fp32": {"train.precision"},
    }
    c = next(t for t in trials if t.variant == "C")
    b0 = next(t for t in trials if t.variant == "B" and t.task == c.task)
    assert c.config().total_steps == b0.config().total_steps == 6750  # B's one epoch, C's three
    # A is paper_v1's model and training; only the validation rows (which pick `best`) and the name differ
    for t in (t for t in trials if t.variant == "A"):
        a, v1 = t.config(), load_config(t.task, "paper_v1", [o for o in t.overrides if not o.startswith("model.")])
        assert a.model.embd_p == v1.model.embd_p == 0.1 and a.model.activation == v1.model.activation
        assert changed_keys(v1.to_dict(), a.to_dict()) == ["model.embd_dropout", "preset", "train.eval_size"]
