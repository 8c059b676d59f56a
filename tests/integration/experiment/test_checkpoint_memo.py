"""A stage that measures a named checkpoint (``step="best"``: the cliff, dilution, l0, ...) is memoised on the
checkpoint the name resolves to, not on the name alone: when "best" moves, the executor and ``run_stage`` measure
again instead of reading back the tables of the checkpoint it named before."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest

from possym.api import train_model
from possym.config import load_config
from possym.errors import RunError
from possym.experiment import experiment_from_dict, run_experiment, run_stage
from possym.runs import RunDir
from possym.stages.memo import run_memo
from possym.stages.registry import Stage, get_stage, register_stage, unregister_stage


@dataclass(frozen=True)
class AtConfig:
    step: int | str = "best"
    threads: int | None = None


def measure(ctx, cfg: AtConfig) -> None:
    with (ctx.run.path / "measured_at.txt").open("a") as f:
        f.write(f"{ctx.run.resolve_step(cfg.step)}\n")


def measured(run: RunDir) -> list[int]:
    return [int(x) for x in (run.path / "measured_at.txt").read_text().split()]


def test_a_stage_at_best_is_measured_again_when_best_moves_and_read_back_while_it_stays(tmp_path, tiny_overrides):
    stage = register_stage(Stage("at_best", AtConfig, measure, scope="run"), replace=True)
    try:
        path = tmp_path / "runs" / "number-s0"
        train_model(load_config("number", None, tiny_overrides), path, monitor=False, progress=False)
        run = RunDir.open(path)
        first = run.best()
        assert run_stage(run, stage, AtConfig()).ran and not run_stage(run, stage, AtConfig()).ran
        assert run_memo(path).entry("at_best")["checkpoints"] == [first]
        # "best" moves, as when a run trains on: the same settings now name another checkpoint
        other = next(s for s in run.checkpoint_steps() if s != first)
        (path / "best.json").write_text(json.dumps({"step": other, "accuracy": 1.0, "rule": "test"}))
        exp = experiment_from_dict({"tasks": ["number"], "seeds": [0], "overrides": tiny_overrides, "retries": 0,
                                    "stages": {"training": {"monitor": False}, "at_best": {}}})
        outcome = run_experiment(exp, tmp_path, progress=False)
        assert outcome.failed == {} and outcome.ran == [("number-s0", "at_best")]
        assert measured(run) == [first, other]
        assert run_experiment(exp, tmp_path, progress=False).ran == []  # and it stays done while best stays
        assert run_stage(run, stage, AtConfig(step=other)).ran  # another name: its own settings
        assert measured(run) == [first, other, other]
    finally:
        unregister_stage(stage.name)


def test_the_memo_reads_the_steps_asked_one_way_for_both_kinds_of_stage(tmp_path, tiny_overrides):
    """``Stage.memo_steps`` is the one reading, and a stage of either kind asked for a checkpoint the run lacks is
    refused before anything runs or is recorded (``Stage.prepare``): a refused call changes nothing (the executor
    reports it from the error, not from the memo)."""
    stage = register_stage(Stage("at_best", AtConfig, measure, scope="run"), replace=True)
    try:
        path = tmp_path / "number-s0"
        train_model(load_config("number", None, tiny_overrides), path, monitor=False, progress=False)
        run = RunDir.open(path)
        missing = run.checkpoint_steps()[-1] + 7
        assert stage.memo_steps(run, AtConfig()) == (None, [run.best()])
        with pytest.raises(RunError, match=f"{missing}"):
            run_stage(run, "score", get_stage("score").settings_from({"steps": [missing]}))
        assert run_memo(path).entry("score") is None
        with pytest.raises(RunError, match=f"{missing}"):
            run_stage(run, stage, AtConfig(step=missing))
        assert run_memo(path).entry("at_best") is None
    finally:
        unregister_stage(stage.name)
