"""Misuse: a run that diverged is not a success. A non-finite loss stops training with one
line naming the step and the likely cause, exit code 2, its last finite checkpoint kept and the run marked diverged;
``train.on_nonfinite=continue`` trains on and the run says so wherever it is shown; in a group, the member that
diverged stops alone; a warm-up longer than the run is said in one line; analyses of a diverged run or of a
non-finite checkpoint are one line."""

from __future__ import annotations

import logging
import math
import re

import pytest
from misuse_probes import comparable, one_line_error, same_weights

import possym
from possym.cli import main
from possym.config import load_config
from possym.errors import DivergedError, RunError
from possym.runs import RunDir
from possym.stages.memo import run_memo
from possym.tasks import make_splits
from possym.train.loop import train

QUIET = ["training.progress=false", "training.monitor=false"]


def test_an_absurd_learning_rate_stops_training_with_one_line_exit_2_and_the_run_marked_diverged(tmp_path, capsys,
                                                                                                tiny_overrides):
    run = tmp_path / "run"
    err = one_line_error(capsys, ["train", "--task", "number", "--out", str(run), *tiny_overrides, "train.lr=1e300",
                                  *QUIET])  # before: exit 0, every weight NaN
    said = re.search(r"the loss is nan at step (\d+), so training stopped there \(train.lr=1e\+300 is likely far "
                     r"too high: these models train at 1e-4 to 1e-3\); its last finite checkpoint is step (\d+), and "
                     r"the run is marked diverged", err)
    assert said, err
    opened = RunDir.open(run)
    step, last = int(said.group(1)), int(said.group(2))
    assert opened.diverged["step"] == step and opened.checkpoint_steps()[-1] == last < step
    assert all(opened.load_model(s) is not None for s in opened.checkpoint_steps())  # every checkpoint kept is finite
    assert not opened.finished and run_memo(run).entry("training")["status"] == "failed"
    shown = f"diverged at step {step} (loss nan; last finite checkpoint: step {last})"
    assert repr(possym.open_run(run)).endswith(f"{shown})")
    assert main(["summary", str(run)]) == 0 and shown in capsys.readouterr().out
    err = one_line_error(capsys, ["score", str(run), "score.n_inputs=2"])  # before: a traceback
    assert f"{run} {shown}, so it has no final checkpoint; analyse a checkpoint by number" in err
    err = one_line_error(capsys, ["train", "--resume", str(run)])
    assert f"{shown}, and from its last state it would diverge again at the same step" in err
    err = one_line_error(capsys, ["train", "--resume", str(run), "train.steps=60"])
    assert "would diverge again" in err
    with pytest.raises(DivergedError, match="has no final checkpoint"):
        possym.open_run(run).model()
    # The advice: analyse a checkpoint by number.
    assert main(["score", str(run), "score.n_inputs=2", "score.figures=false", f"score.table_step={last}"]) == 0
    assert f"step {last} (diverged at step {step})" in capsys.readouterr().out


def test_a_diverged_member_of_a_group_stops_alone_and_the_others_train_to_their_end(tmp_path, tiny_overrides):
    good = load_config("number", None, tiny_overrides)
    bad = load_config("number", None, [*tiny_overrides, "seeds.init=1", "train.lr=1e300"])
    with pytest.raises(DivergedError) as raised:
        possym.train_models([good, bad], [tmp_path / "good", tmp_path / "bad"], progress=False, monitor=False)
    assert raised.value.runs == (str(tmp_path / "bad"),) and "the loss is nan" in str(raised.value)
    assert RunDir.open(tmp_path / "good").finished and RunDir.open(tmp_path / "bad").diverged
    assert run_memo(tmp_path / "good").entry("training")["status"] == "done"
    assert run_memo(tmp_path / "bad").entry("training")["status"] == "failed"
    alone = possym.train_model(good, tmp_path / "alone", progress=False, monitor=False)
    assert same_weights(RunDir.open(tmp_path / "good"), alone.dir, 30), "its numbers are those it has alone"


def test_a_diverged_run_of_an_experiment_fails_alone_and_its_group_companion_is_trained(tmp_path, tiny_overrides):
    from possym.experiment import Experiment, Variant, run_experiment
    from possym.stages.training import TrainStageConfig

    exp = Experiment(preset=None, tasks=("number",), seeds=(0,), overrides=tuple(tiny_overrides),
                     variants=(Variant("ok"), Variant("hot", ("train.lr=1e300",))),
                     stages=(("training", TrainStageConfig(monitor=False, progress=False)),), retries=0, threads=None,
                     name="t")
    outcome = run_experiment(exp, tmp_path / "out", progress=False)
    assert list(outcome.failed) == ["hot-number-s0"] and "the loss is nan" in outcome.failed["hot-number-s0"]
    assert ("ok-number-s0", "training") in outcome.ran and RunDir.open(tmp_path / "out/runs/ok-number-s0").finished
    assert run_memo(tmp_path / "out/runs/ok-number-s0").entry("training")["status"] == "done"


def test_on_nonfinite_continue_trains_on_and_the_run_says_so_wherever_it_is_shown(tmp_path, capsys, tiny_overrides):
    run = tmp_path / "run"
    assert main(["train", "--task", "number", "--out", str(run), *tiny_overrides, "train.lr=1e300",
                 "train.on_nonfinite=continue", *QUIET]) == 0
    out = capsys.readouterr().out
    opened = RunDir.open(run)
    step = opened.nonfinite["step"]
    said = f"its loss non-finite from step {step} (train.on_nonfinite=continue)"
    assert opened.finished and opened.diverged is None and said in out
    assert repr(possym.open_run(run)).endswith(f"finished, {said})")
    assert main(["summary", str(run)]) == 0 and said in capsys.readouterr().out
    assert opened.step_label(30) == "step 30 (final, non-finite loss)" and opened.step_label(0) == "step 0 of 30"
    err = one_line_error(capsys, ["export", str(run), "--out", str(tmp_path / "hf")])
    assert "holds non-finite weights" in err and f"analyse a checkpoint before step {step}" in err
    err = one_line_error(capsys, ["score", str(run), "score.n_inputs=2"])
    assert "holds non-finite weights" in err
    with pytest.raises(RunError, match="holds non-finite weights"):
        possym.load_model(opened.checkpoint_path(30))


def test_a_warm_up_longer_than_the_run_is_said_in_one_line(tmp_path, tiny_overrides, caplog):
    run = RunDir.create(tmp_path / "run", load_config("number", None, [*tiny_overrides, "train.warmup_steps=100000"]))
    with caplog.at_level(logging.WARNING, logger="possym.train.trainee"):
        train(run, make_splits(run.config.task, 0))
    lines = [r.getMessage() for r in caplog.records if "warmup" in r.getMessage()]
    assert len(lines) == 1 and "\n" not in lines[0], lines  # before: nothing
    assert "train.warmup_steps=100000 is longer than the run (30 steps), so its learning rate only reaches 0.029% " \
           "of train.lr=0.001" in lines[0]
    assert math.isclose(29 / 100000, 0.00029)


def test_a_run_that_never_met_a_non_finite_loss_reads_as_before(tmp_path, make_run, reference):
    assert reference.diverged is None and reference.nonfinite is None and reference.status() == "finished"
    assert comparable(reference.metrics())[0]["step"] == 0


def test_a_run_that_trained_on_past_a_non_finite_loss_resumes_as_any_finished_run(tmp_path, capsys, tiny_overrides):
    run = tmp_path / "run"
    assert main(["train", "--task", "number", "--out", str(run), *tiny_overrides, "train.lr=1e300",
                 "train.on_nonfinite=continue", *QUIET]) == 0
    assert main(["train", "--resume", str(run), *QUIET]) == 0 and RunDir.open(run).finished
