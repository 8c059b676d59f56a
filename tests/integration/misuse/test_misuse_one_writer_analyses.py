"""One writer at a time, for the analyses that write into a run: every stage of a run, the ``possym``
commands over them, the executor in its own process and on the local engine; readers take no lock.
(Ray and Slurm: tests/integration/clusters.)"""

from __future__ import annotations

import logging
import os
import re
import socket

import pytest
from misuse_probes import comparable, hold_lock, possym_cli, same_weights, start_scorer, start_trainer, wait_for

import possym
from possym.config import load_config
from possym.errors import LockError
from possym.evaluate.lengthgen import LengthGenConfig
from possym.experiment import apply_overrides, experiment_from_dict, run_experiment, run_stage
from possym.locks import LOCK_FILE, lock_holder, writer_lock
from possym.records import LengthRecord
from possym.runs import RunDir
from possym.stages.lengthgen import LengthStageConfig
from possym.stages.registry import get_stage, stages
from possym.stages.score import ScoreConfig
from possym.sweep.engines import LocalEngine
from possym.tasks import make_splits
from possym.train.loop import train

SMALL = {"n_inputs": 4, "figures": False, "frequency": False}  # a scoring that takes a second
CURVE = LengthGenConfig(grid=(0, 10), n=8, n_prefixes=2)
# Every stage that writes into a run: those of one run, and training (the one "runs" stage).
WRITERS = sorted(name for name, stage in stages().items() if stage.scope in ("run", "runs"))
# Settings under which a stage measures the number run rather than skip it (dilution measures letter runs).
MEASURE = {"dilution": {"tasks": ["number"]}}


def refusal(directory, holder_pid: int) -> str:
    """The start of the refusal that names the holder, as a regular expression."""
    return re.escape(f"run {directory} is being written by process {holder_pid} on {socket.gethostname()}")


def files(run: RunDir) -> dict[str, int]:
    """Every file of the run (its lock aside) with its modification time: what a writer would change."""
    return {str(p.relative_to(run.path)): p.stat().st_mtime_ns for p in run.path.rglob("*")
            if p.is_file() and p.name != LOCK_FILE}


@pytest.fixture(scope="module")
def trained(tmp_path_factory, tiny_session_overrides) -> RunDir:
    run = RunDir.create(tmp_path_factory.mktemp("trained") / "run",
                        load_config("number", None, tiny_session_overrides), argv=["test"])
    train(run, make_splits(run.config.task, run.config.seeds.data))
    return run


@pytest.mark.parametrize("name", WRITERS)
def test_every_stage_that_writes_a_run_is_refused_naming_the_holder_before_it_writes(name, trained, make_run):
    stage = get_stage(name)
    run = trained if stage.scope == "run" else make_run("untrained")  # training writes a run not yet trained
    before = files(run)
    holder = hold_lock(run.path)
    try:
        with pytest.raises(LockError, match=refusal(run.path, holder.pid)):
            run_stage(run, stage, stage.settings_from(MEASURE.get(name)), redo=True)
        assert lock_holder(run.path).pid == holder.pid
    finally:
        holder.stdin.close()
        holder.wait()
    assert files(run) == before


@pytest.mark.long
def test_possym_score_and_lengthgen_while_training_writes_the_run_are_refused_in_one_line_with_exit_code_2(
        tmp_path, make_run, reference):
    run = make_run("run")
    trainer = start_trainer(run.path, "pause", 20, tmp_path / "go")
    try:
        wait_for(tmp_path / "go.ready", trainer)
        for argv in (["score", str(run.path), "score.n_inputs=4"],
                     ["lengthgen", str(run.path), "lengthgen.grid=[0,10]"]):
            refused = possym_cli(*argv)
            assert refused.returncode == 2, refused.stderr
            assert len(refused.stderr.strip().splitlines()) == 1, refused.stderr
            assert re.search(refusal(run.path, trainer.pid) + r".*; wait for it to finish, or stop it$",
                             refused.stderr.strip()), refused.stderr
    finally:
        (tmp_path / "go").touch()
    assert trainer.wait(timeout=300) == 0, trainer.stderr.read().decode()[-2000:]
    assert not run.artifact("scores").exists() and not run.artifact("lengthgen").exists()
    assert comparable(run.metrics()) == comparable(reference.metrics()), "the refused writers left training alone"
    assert same_weights(run, reference, 30)
    # The advice: once training has finished, the run is scored.
    assert run_stage(run, "score", ScoreConfig(**SMALL)).result.n_scored == len(run.checkpoint_steps())


def test_a_second_scorer_is_refused_naming_the_first_and_a_killed_scorers_lock_is_taken_over_with_a_note(
        tmp_path, reference, caplog):
    first = start_scorer(reference.path, "pause", tmp_path / "go")
    try:
        wait_for(tmp_path / "go.ready", first)
        with pytest.raises(LockError, match=refusal(reference.path, first.pid)):
            run_stage(reference, "score", ScoreConfig(**SMALL), redo=True)
        with pytest.raises(LockError, match=refusal(reference.path, first.pid)):
            run_stage(reference, "lengthgen", LengthStageConfig(CURVE))
    finally:
        (tmp_path / "go").touch()
    assert first.wait(timeout=300) == 0, first.stderr.read().decode()[-2000:]
    scored = reference.artifact("scores").read_text()

    killed = start_scorer(reference.path, "kill", tmp_path / "unused")
    assert killed.wait(timeout=300) < 0
    assert lock_holder(reference.path).pid == killed.pid, "a SIGKILL leaves the lock file behind"
    with caplog.at_level(logging.WARNING, logger="possym.locks"):
        assert run_stage(reference, "score", ScoreConfig(**SMALL)).ran  # the killed scorer's entry: not done
    assert f"took over the lock of {reference.path} from process {killed.pid}" in caplog.text
    assert reference.artifact("scores").read_text() == scored
    assert not (reference.path / LOCK_FILE).exists()


def test_readers_take_no_lock_while_another_process_writes_the_run(trained):
    run_stage(trained, "score", ScoreConfig(**SMALL))
    run_stage(trained, "lengthgen", LengthStageConfig(CURVE))
    stored = trained.read("lengthgen", LengthRecord)
    holder = hold_lock(trained.path)
    try:
        run = possym.open_run(trained.path)
        assert not run.metrics().empty
        assert run.model("final") is not None
        assert not run.scores(**SMALL).empty  # read back: scored with these settings (the memo says)
        curve = run.length_curve(grid=CURVE.grid, n=CURVE.n, n_prefixes=CURVE.n_prefixes)
        assert curve.to_dict("records") == [p.to_dict() for p in stored]
        assert lock_holder(trained.path).pid == holder.pid
    finally:
        holder.stdin.close()
        holder.wait()


def tiny_experiment(tiny: list[str]):
    return experiment_from_dict({"tasks": ["number"], "seeds": [0], "overrides": tiny, "retries": 0,
                                 "stages": {"score": SMALL}})


def test_a_stage_the_executor_runs_in_the_process_that_holds_the_runs_lock_runs_and_keeps_the_lock(
        tmp_path, tiny_overrides):
    run = tmp_path / "runs" / "number-s0"
    with writer_lock(run, "run"):  # a caller that writes the run runs its experiment: not a second writer
        outcome = run_experiment(tiny_experiment(tiny_overrides), tmp_path, progress=False)
        assert outcome.failed == {} and sorted(outcome.ran) == [("number-s0", "score"), ("number-s0", "training")]
        assert lock_holder(run).pid == os.getpid(), "the stages' own holds ended without releasing the caller's"
    assert not (run / LOCK_FILE).exists()


def test_on_the_local_engine_a_held_run_fails_naming_its_holder_and_a_killed_holders_lock_is_taken_over(
        tmp_path, tiny_overrides):
    exp = tiny_experiment(tiny_overrides)
    assert run_experiment(exp, tmp_path, progress=False).failed == {}  # trained and scored here
    again = apply_overrides(exp, ["score.n_inputs=5"])  # the score stage runs again, on a worker process
    run = tmp_path / "runs" / "number-s0"
    holder = hold_lock(run)
    try:
        outcome = run_experiment(again, tmp_path, engine=LocalEngine(1), progress=False)
        assert list(outcome.failed) == ["number-s0"]
        assert re.search(refusal(run, holder.pid), outcome.failed["number-s0"]), outcome.failed
    finally:
        holder.kill()  # SIGKILL: its lock file stays behind
        holder.wait()
    assert lock_holder(run).pid == holder.pid
    outcome = run_experiment(again, tmp_path, engine=LocalEngine(1), progress=False)
    assert outcome.failed == {} and outcome.ran == [("number-s0", "score")]
    assert f"took over the lock of {run} from process {holder.pid}" in (tmp_path / "logs" / "number-s0.log").read_text()
    assert not (run / LOCK_FILE).exists()


def test_a_sweep_summary_is_refused_while_another_process_holds_the_sweep_and_written_once_it_is_gone(tmp_path):
    """The summary writes the sweep directory, as the executor does: under the same lock, so a summary (or
    ``possym sweep --aggregate-only``) never writes beside a running sweep."""
    from possym.sweep.aggregate import write_summary

    exp = experiment_from_dict({"tasks": ["number"], "seeds": [0]})
    out = tmp_path / "sweep"
    holder = hold_lock(out)
    try:
        with pytest.raises(LockError, match=re.escape(f"experiment {out} is being written by process {holder.pid}")):
            write_summary(exp, out)
        assert not (out / "summary.csv").exists()
    finally:
        holder.stdin.close()
        holder.wait(timeout=60)
    assert out / "summary.csv" in write_summary(exp, out) and not (out / LOCK_FILE).exists()
