"""Misuse: one writer at a time, in a run directory and an experiment directory."""

from __future__ import annotations

import json
import logging
import os
import socket

import pytest
from misuse_probes import comparable, hold_lock, possym_cli, same_weights, start_trainer, wait_for

from possym.errors import LockError
from possym.experiment.executor import run_experiment
from possym.experiment.spec import load_experiment
from possym.locks import LOCK_FILE, lock_holder, on_behalf_of, writer_lock
from possym.runs import RunDir
from possym.tasks import make_splits
from possym.train.loop import train


@pytest.mark.parametrize("second", ["resume", "fresh --out"])
def test_two_trainers_on_one_run_one_is_refused_and_the_survivor_equals_an_undisturbed_run(
        tmp_path, make_run, reference, tiny_overrides, second):
    run = make_run("run")
    first = start_trainer(run.path, "pause", 12, tmp_path / "go")
    wait_for(tmp_path / "go.ready", first)
    argv = (["train", "--resume", str(run.path)] if second == "resume" else
            ["train", "--task", "number", "--out", str(run.path), *tiny_overrides])
    refused = possym_cli(*argv)
    (tmp_path / "go").touch()
    assert first.wait(timeout=300) == 0, first.stderr.read().decode()[-2000:]
    assert refused.returncode == 2, refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1, refused.stderr
    if second == "resume":
        assert f"being written by process {first.pid} on {socket.gethostname()}" in refused.stderr
    else:
        assert "already holds a run" in refused.stderr
    assert comparable(run.metrics()) == comparable(reference.metrics())
    assert run.checkpoint_steps() == reference.checkpoint_steps()
    assert same_weights(run, reference, 30)
    assert not (run.path / LOCK_FILE).exists(), "the survivor releases its lock"


def test_a_second_writer_is_refused_with_a_message_naming_the_holder(make_run):
    run = make_run("run")
    holder = hold_lock(run.path)
    try:
        with pytest.raises(LockError, match=f"run {run.path} is being written by process {holder.pid} on "):
            train(run, make_splits(run.config.task, 0))
        assert lock_holder(run.path).pid == holder.pid
        assert not run.checkpoint_steps() and not (run.path / "metrics.jsonl").exists(), "refused before any write"
    finally:
        holder.stdin.close()
        holder.wait()
    assert not (run.path / LOCK_FILE).exists()
    train(run, make_splits(run.config.task, 0))  # the holder gone, the run trains
    assert run.finished


def test_a_killed_holder_is_taken_over_with_a_note_and_the_run_resumes_bitwise(
        tmp_path, make_run, reference, caplog):
    run = make_run("run")
    killed = start_trainer(run.path, "kill", 17, tmp_path / "unused")
    assert killed.wait(timeout=300) < 0
    assert lock_holder(run.path).pid == killed.pid, "a SIGKILL leaves the lock file behind"
    with caplog.at_level(logging.WARNING, logger="possym.locks"):
        train(RunDir.open(run.path), make_splits(run.config.task, 0))
    assert f"took over the lock of {run.path} from process {killed.pid}" in caplog.text
    assert comparable(run.metrics()) == comparable(reference.metrics())
    assert same_weights(run, reference, 30)


def test_a_lock_from_another_host_is_refused_and_deleting_it_as_advised_recovers(make_run):
    run = make_run("run")
    (run.path / LOCK_FILE).write_text(json.dumps({"host": "node-elsewhere", "pid": 4242}))
    with pytest.raises(LockError, match=f"process 4242 on node-elsewhere, a host this one cannot check; if "
                                        f"that process is gone, delete {run.path / LOCK_FILE}"):
        train(run, make_splits(run.config.task, 0))
    (run.path / LOCK_FILE).unlink()  # the advice
    train(run, make_splits(run.config.task, 0))
    assert run.finished


def test_the_lock_is_released_when_training_raises(make_run):
    run = make_run("run")

    class Stop(Exception):
        pass

    def stop(info):
        raise Stop

    with pytest.raises(Stop):
        train(run, make_splits(run.config.task, 0), on_step=stop)
    assert not (run.path / LOCK_FILE).exists()


def test_the_lock_is_reentrant_in_its_process_and_excludes_a_forked_child(tmp_path):
    with writer_lock(tmp_path), writer_lock(tmp_path):  # a group member resumed through the single loop
        assert lock_holder(tmp_path).pid == os.getpid()
        child = os.fork()
        if child == 0:  # the child inherits the parent's holds but must not count itself among them
            try:
                with writer_lock(tmp_path):
                    os._exit(1)
            except LockError:
                os._exit(0)
        assert os.waitpid(child, 0)[1] == 0
        assert (tmp_path / LOCK_FILE).exists()
    assert not (tmp_path / LOCK_FILE).exists()


def test_a_second_executor_on_an_experiment_directory_is_refused(tmp_path):
    exp = load_experiment("quick", overrides=["experiment.tasks=[number]", "train.steps=4"])
    holder = hold_lock(tmp_path / "exp")
    try:
        with pytest.raises(LockError, match=f"experiment {tmp_path / 'exp'} is being written by process {holder.pid}"):
            run_experiment(exp, tmp_path / "exp", progress=False)
        assert sorted(p.name for p in (tmp_path / "exp").iterdir()) == [LOCK_FILE], "refused before any work"
    finally:
        holder.stdin.close()
        holder.wait()


def test_a_lock_left_on_another_host_by_a_lost_worker_of_this_experiment_is_taken_over(tmp_path, caplog):
    """A Slurm job killed on another node leaves its run's lock; the executor's retry of that unit (on any
    node) works for the same experiment call, whose lock token the worker reads from OUT/.lock."""
    out, run = tmp_path / "exp", tmp_path / "exp" / "runs" / "number-s0"
    run.mkdir(parents=True)
    with writer_lock(out, "experiment"):
        token = lock_holder(out).token
        (run / LOCK_FILE).write_text(json.dumps({"host": "node-lost", "pid": 77, "owner": token}))
        with pytest.raises(LockError, match="process 77 on node-lost, a host this one cannot check"):
            with writer_lock(run, "run"):
                pass
        with on_behalf_of("another call's token"), pytest.raises(LockError, match="cannot check"):
            with writer_lock(run, "run"):
                pass
        with caplog.at_level(logging.WARNING, logger="possym.locks"), on_behalf_of(token), writer_lock(run, "run"):
            assert lock_holder(run).owner == token and lock_holder(run).host == socket.gethostname()
    assert "from process 77 on node-lost, an earlier worker of this experiment" in caplog.text
