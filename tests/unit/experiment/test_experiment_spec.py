"""Experiment configs: expansion into runs, one override syntax, dumps that read back, and errors that say
what is wrong before anything runs; the packaged sweeps still mean the runs they trained."""

from __future__ import annotations

import json

import pytest
import yaml

from possym.config import ConfigError, config_from_dict, config_from_saved, load_config
from possym.experiment import apply_overrides, experiment_from_dict, experiment_to_dict, load_experiment
from possym.experiment.spec import SEED_FIELDS, experiment_names


def test_a_grid_expands_seed_by_seed_with_every_seed_field_set():
    exp = experiment_from_dict({
        "preset": "quick", "tasks": ["number", "letter"], "seeds": [3, 4],
        "overrides": ["train.steps=10"],
        "variants": {"base": [], "prope": {"overrides": ["model.p_rope=0.5"], "tasks": ["number"], "seeds": [3]}},
        "stages": {"score": {"n_inputs": 5}},
    })
    runs = exp.runs()
    assert [r.id for r in runs] == ["base-number-s3", "base-letter-s3", "prope-number-s3",
                                    "base-number-s4", "base-letter-s4"]
    cfg = runs[2].config()
    assert (cfg.preset, cfg.train.steps, cfg.model.p_rope) == ("quick", 10, 0.5)
    assert (cfg.seeds.data, cfg.seeds.init, cfg.seeds.order, cfg.seeds.dropout) == (3, 3, 3, 3)
    assert exp.stage_names == ("score",) and exp.stage("score").n_inputs == 5
    assert exp.with_stages().stage_names == ("training", "score")  # training comes first unless listed


def test_train_runs_before_the_first_stage_that_reads_a_run_wherever_it_is_listed():
    # yaml.safe_dump sorts a mapping's keys, so a generated file lists score before training
    exp = experiment_from_dict({"tasks": ["number"], "seeds": [0],
                                "stages": {"data": {}, "report": {}, "score": {}, "training": {"group": False}}})
    assert exp.with_stages().stage_names == ("data", "report", "training", "score")
    assert exp.with_stages().stage("training").group is False  # its settings move with it
    assert experiment_from_dict({"stages": {"data": {}}}).with_stages().stage_names == ("training", "data")


def test_without_variants_a_run_is_named_by_its_task_and_seed():
    assert [r.id for r in experiment_from_dict({"tasks": ["letter"], "seeds": [0, 1]}).runs()] == [
        "letter-s0", "letter-s1"]


def test_one_override_syntax_reaches_runs_stages_and_the_tree_itself():
    exp = load_experiment("quick", overrides=["score.n_inputs=50", "train.lr=3e-4", "experiment.seeds=[0, 1]",
                                              "lengthgen.steps=[best]"])
    assert exp.stage("score").n_inputs == 50 and exp.stage("lengthgen").steps == ("best",)
    assert [r.id for r in exp.runs()] == ["number-s0", "letter-s0", "number-s1", "letter-s1"]
    assert all(r.config().train.lr == 3e-4 for r in exp.runs())
    assert load_experiment("quick", seeds=(0, 1)) == apply_overrides(load_experiment("quick"),
                                                                     ["experiment.seeds=[0,1]"])


@pytest.mark.parametrize("name", experiment_names())
def test_every_packaged_experiment_reads_back_from_its_dump(name):
    exp = load_experiment(name)
    assert experiment_from_dict(experiment_to_dict(exp)) == exp


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"tasks": ["number"], "sedes": [0]}, r"unknown key 'experiment.sedes'; known experiment keys: .*did you mean "
                                              r"'experiment.seeds'"),
        ({"tasks": ["numbers"]}, "'numbers' is not a task"),
        ({"tasks": ["number"], "seeds": [0, 0]}, "distinct integers"),
        ({"tasks": ["number"], "seeds": "0"}, "must be a list of integers"),
        ({"tasks": ["number"], "variants": {"v": ["model.p_rope=2"]}}, "variant 'v', task 'number': model.p_rope=2.0"),
        ({"tasks": ["number"], "variants": {"v": ["model.lr=1"]}}, "unknown key 'model.lr'"),
        ({"tasks": ["number"], "variants": {"v": {"overrides": [], "tasks": ["letter"]}}}, "not among the experiment"),
        ({"tasks": ["number"], "variants": {"a/b": []}}, "may hold only letters"),
        ({"tasks": ["number"], "stages": {"scores": {}}}, "unknown stage 'scores'"),
        ({"tasks": ["number"], "stages": {"score": ["--n-inputs", "30"]}}, "config keys, e.g. {n_inputs: 30}, not"),
        ({"tasks": ["number"], "stages": {"score": {"n-inputs": 30}}}, "unknown key 'score.n-inputs'; known"),
        ({"tasks": ["number"], "stages": {"lengthgen": {"steps": ["last"]}}}, "'last'; allowed"),
        ({"tasks": ["letter"], "variants": {"x": ["train.random_extra=4"]}}, "windows may follow any prefix"),
        ({"tasks": ["number"], "task_overrides": {"letter": []}}, "not among the experiment's tasks"),
    ],
)
def test_bad_experiments_fail_before_any_run_with_a_message(data, message):
    with pytest.raises(ConfigError, match=message):
        experiment_from_dict(data)


@pytest.mark.parametrize("name", [n for n in experiment_names() if n not in ("quick", "paper", "paper_v1")])
def test_a_packaged_sweep_keeps_its_run_ids_and_configs(name):
    """Runs were `possym train --task T [--preset P] OVERRIDES... seeds.*=S`: the same ids, the same configs."""
    exp = load_experiment(name)
    for run in exp.runs():
        variant = next(v for v in exp.variants if v.name == run.variant)
        old = load_config(run.task, exp.preset, [*exp.overrides, *exp.overrides_of(run.task), *variant.overrides,
                                                 *(f"seeds.{f}={run.seed}" for f in SEED_FIELDS)])
        name = f"{variant.name}-" if variant.name else ""
        assert run.id == f"{name}{run.task}-s{run.seed}" and run.config() == old


def test_robustness_paper_runs_made_under_the_old_paper_preset_are_still_recognised_once_migrated(tmp_path):
    """Its runs were trained with `--preset paper` before `paper` became the authors' recipe; the spec now
    names paper_v1. A run directory holding the old config (preset "paper", no embd_dropout or activation
    keys: the values of the time) is refused until `possym migrate` rewrites it with those values; then it
    continues. One trained on today's `paper` is refused."""
    import dataclasses

    from possym.errors import EarlierLayoutError
    from possym.experiment.migrate import migrate, upgraded_config
    from possym.runs import CONFIG, RunError, config_text, ensure_run

    spec = load_experiment("robustness_paper").runs()[0]
    old = dataclasses.asdict(spec.config()) | {"preset": "paper"}
    for key in ("embd_dropout", "activation", "mlp"):
        old["model"].pop(key)  # a config.yaml written before the knobs existed
    old["train"].pop("eval_size")
    with pytest.raises(EarlierLayoutError, match="it lacks model.embd_dropout, model.activation"):
        config_from_saved(old)
    then = config_from_dict(upgraded_config(old))
    assert then.model.embd_p == 0.1
    run = ensure_run(tmp_path / "a", then)
    (run.path / CONFIG).write_text(config_text(then, run.identity).split("\n", 2)[0] + "\n" + yaml.safe_dump(old))
    (run.path / "meta.json").write_text(json.dumps(run.meta | {"config": old}))
    with pytest.raises(EarlierLayoutError, match=f"possym migrate {tmp_path / 'a'}"):
        ensure_run(tmp_path / "a", spec.config())
    assert migrate(tmp_path / "a")
    assert ensure_run(tmp_path / "a", spec.config()).config == then
    ensure_run(tmp_path / "b", load_config(spec.task, "paper", list(spec.overrides)))
    with pytest.raises(RunError, match="model.activation, model.embd_dropout"):
        ensure_run(tmp_path / "b", spec.config())


def test_recipe_ablation_arms_differ_from_B_in_exactly_what_their_names_say():
    """The ablation's conclusions rest on each arm changing one thing (docs/results.md): a spec edit that moved
    anything else, or put A somewhere other than paper_v1's model, would change what was measured."""
    from possym.config import changed_keys

    runs = load_experiment("recipe_ablation").runs()
    b = {(r.task, r.seed): r.config().to_dict() for r in runs if r.variant == "B"}
    changed: dict[str, set[str]] = {}
    for r in runs:
        if r.variant != "B":
            changed.setdefault(r.variant, set()).update(changed_keys(b[r.task, r.seed], r.config().to_dict()))
    assert changed == {
        "A": {"model.embd_dropout", "model.activation"},
        "B_minus_embd": {"model.embd_dropout"},
        "B_minus_gelu": {"model.activation"},
        "C": {"train.batch_size", "train.steps"},  # B's null steps is one epoch, 6,750 at batch 64
        "B_fp32": {"train.precision"},
    }
    c = next(r for r in runs if r.variant == "C")
    b0 = next(r for r in runs if r.variant == "B" and r.task == c.task)
    assert c.config().total_steps == b0.config().total_steps == 6750  # B's one epoch, C's three
    for r in (r for r in runs if r.variant == "A"):
        a, v1 = r.config(), load_config(r.task, "paper_v1", [o for o in r.overrides if not o.startswith("model.")])
        assert a.model.embd_p == v1.model.embd_p == 0.1 and a.model.activation == v1.model.activation
        assert changed_keys(v1.to_dict(), a.to_dict()) == ["model.embd_dropout", "preset", "train.eval_size"]


def test_train_names_both_the_runs_section_and_the_stage_and_each_key_goes_where_it_belongs():
    exp = load_experiment("quick", overrides=["training.group=false", "train.lr=3e-4"])
    assert exp.stage("training").group is False and all(r.config().train.lr == 3e-4 for r in exp.runs())
    with pytest.raises(ConfigError, match="unknown key 'train.grup'"):
        load_experiment("quick", overrides=["train.grup=false"])


def test_a_file_that_names_another_experiment_holds_only_its_overrides(tmp_path):
    small = tmp_path / "small.yaml"
    small.write_text("experiment: canonical_quick\noverrides: [train.steps=30]\n")
    assert load_experiment(small).runs()[0].config().train.steps == 30
    small.write_text("experiment: canonical_quick\nseeds: [1]\n")
    with pytest.raises(ConfigError, match="its only other key is overrides; got \\['seeds'\\]"):
        load_experiment(small)
    small.write_text(f"experiment: {small}\n")
    with pytest.raises(ConfigError, match="names itself"):
        load_experiment(small)
