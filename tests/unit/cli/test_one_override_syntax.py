"""One override syntax: the same settings said on the command line, in YAML and in Python give equal configs,
for a run's config (``possym train``) and for a stage's settings (``possym score``)."""

from __future__ import annotations

import pytest
import yaml

import possym
from possym.cli import main
from possym.config import config_from_dict
from possym.errors import ConfigError
from possym.experiment.spec import load_experiment
from possym.runs import RunDir
from possym.settings import from_dict
from possym.stages.score import ScoreConfig

RUN = ["train.steps=500", "train.lr=3e-4", "train.grad_clip=null", "model.n_layers=2", "model.d_model=16",
       "model.d_mlp=32", "task.max_hops=2", "seeds.init=3"]
# YAML 1.1 reads 3e-4 (no dot) as a string: the field's type makes it the float the override gives.
RUN_YAML = """
task: {name: number, max_hops: 2}
model: {n_layers: 2, d_model: 16, d_mlp: 32}
train: {steps: 500, lr: 3e-4, grad_clip: null}
seeds: {init: 3}
"""
SCORE = ["score.n_inputs=50", "score.hops=true", "score.tau=1e-3", "score.steps=[0,10]", "score.table_step=best"]
SCORE_YAML = "{n_inputs: 50, hops: true, tau: 1e-3, steps: [0, 10], table_step: best}"
SCORE_KEYS = {"n_inputs": 50, "hops": True, "tau": 1e-3, "steps": (0, 10), "table_step": "best"}


class Captured(Exception):
    """Stops a command where it would start its work, holding the config it would work with."""


def _capture(*args, **_kwargs):
    raise Captured(args[1] if len(args) > 1 else None)


def test_a_run_config_is_the_same_from_the_command_line_yaml_and_python(tmp_path, monkeypatch):
    monkeypatch.setattr("possym.cli.train.run_stage", _capture)  # the run directory is written; no training
    with pytest.raises(Captured):
        main(["train", "--task", "number", "--out", str(tmp_path / "run"), *RUN])
    cli = RunDir.open(tmp_path / "run").config
    from_yaml = config_from_dict(yaml.safe_load(RUN_YAML))
    python = possym.load_config("number", None, RUN)
    keywords = possym.load_config("number", None, train__steps=500, train__lr=3e-4, train__grad_clip=None,
                                  model__n_layers=2, model__d_model=16, model__d_mlp=32, task__max_hops=2,
                                  seeds__init=3)
    assert cli == from_yaml == python == keywords
    assert (cli.train.lr, cli.train.grad_clip, cli.model.n_layers, cli.seeds.init) == (3e-4, None, 2, 3)


def test_stage_settings_are_the_same_from_the_command_line_yaml_and_python(tmp_path, monkeypatch):
    run = RunDir.create(tmp_path / "run", possym.load_config("number", None, RUN), argv=["test"])
    monkeypatch.setattr("possym.cli.score.run_stage", lambda run, stage, cfg, **_kw: _capture(run, cfg))
    # The run has no checkpoints: the checks against the run (steps [0, 10], best) are not what this test reads.
    monkeypatch.setattr("possym.stages.registry.Stage.prepare", lambda self, run, cfg: cfg)
    monkeypatch.setattr("possym.cli.score.stage_done", lambda run, stage, cfg: False)
    with pytest.raises(Captured) as cli:
        main(["score", str(run.path), *SCORE])
    spec = tmp_path / "exp.yaml"
    spec.write_text(f"preset: quick\ntasks: [number]\nstages:\n  score: {SCORE_YAML}\n")
    from_yaml = load_experiment(spec).stage("score")
    overridden = load_experiment("quick", overrides=SCORE).stage("score")
    python = from_dict(ScoreConfig, SCORE_KEYS, "score")  # what run.scores(n_inputs=50, ...) builds
    assert cli.value.args[0] == from_yaml == overridden == python == ScoreConfig(**SCORE_KEYS)
    assert from_yaml.tau == 1e-3 and isinstance(from_yaml.tau, float)


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["score", "RUN", "score.n_input=50"], "unknown key 'score.n_input'; known score keys: ['n_inputs', "),
        (["score", "RUN", "lengthgen.n=50"], "this command takes score.KEY=VALUE; known score keys: ['n_inputs', "),
        (["score", "RUN", "score.hops=maybe"], "score.hops='maybe' has the wrong type; expected bool"),
        (["lengthgen", "RUN", "lengthgen.grid=5"], "lengthgen.grid=5 has the wrong type; expected tuple[int, ...]"),
        (["theory", "--out", "OUT", "theory.n_maxx=3"], "unknown key 'theory.n_maxx'; known theory keys: ['n_max', "),
        (["canonical", "--out", "OUT", "canonical_cell.seed=1"],
         "unknown key 'canonical_cell.seed'; known canonical_cell keys"),
        (["discrepancy", "RUN", "discrepancy.step"], "must look like section.key=value"),
    ],
)
def test_a_bad_override_is_one_line_naming_the_key_and_the_allowed_ones(argv, says, tmp_path, capsys):
    argv = [str(tmp_path / a) if a in ("RUN", "OUT") else a for a in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert says in err and err.count("\n") == 1, err


def test_a_removed_flag_is_refused_by_argparse_and_its_override_is_in_the_help(capsys):
    with pytest.raises(SystemExit):
        main(["score", "RUN", "--n-inputs", "50"])
    assert "unrecognized arguments: --n-inputs 50" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["score", "--help"])
    assert "score.n_inputs=100" in capsys.readouterr().out


def test_keyword_settings_map_one_to_one_onto_overrides():
    with pytest.raises(ConfigError, match="write section__key, e.g. train__steps=500"):
        possym.load_config("number", None, steps=500)


def test_every_config_class_has_field_types_the_reader_can_resolve():
    """from_dict checks a value against its field's type; a class whose annotations cannot be resolved would
    pass values through unchecked."""
    import dataclasses
    import typing

    from possym.config import ModelConfig, Seeds, TrainConfig
    from possym.stages.heads import HeadsConfig
    from possym.stages.registry import stages
    from possym.tasks import TASKS, get_task

    classes = [s.config for s in stages().values()] + [ModelConfig, TrainConfig, Seeds,
                                                      HeadsConfig] + [get_task(t).config for t in TASKS]
    for cls in classes:
        assert set(typing.get_type_hints(cls)) >= {f.name for f in dataclasses.fields(cls)}, cls.__name__
