"""`possym sweep engine.name=slurm` on a real one-node Slurm cluster (submitit, sbatch, accounting off):
while the jobs train, a second writer is refused, naming each job's process; one job is cancelled
mid-run with scancel and another's process is SIGKILLed mid-run; the rerun takes over the locks they
left and resumes both from their last state; its own driver is SIGKILLed, leaving its jobs running, and
the next call cancels them before it resumes the runs. Nothing is lost or trained twice, and the grid
equals the local engine's. A lock left by a process on another host (one this node cannot check) is
refused with the advice to delete it, kept in the run's log OUT/logs/ID.log, and deleting it lets the sweep go
on."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import time

import pytest
from cluster_procs import alive, environ
from cluster_sweeps import (
    RUNS,
    SCORE,
    STEPS,
    assert_resumed_once,
    assert_same_results,
    cluster_env,
    resume_log,
    sweep_command,
    wait_mid_training,
    write_grid,
)

from possym.errors import LockError
from possym.experiment import run_stage
from possym.experiment.spec import load_experiment
from possym.locks import LOCK_FILE, lock_holder
from possym.runs import RunDir, ensure_run
from possym.stages.score import ScoreConfig

# The second tier (`make test-long`, which CI runs after `make test`): minutes of cluster set-up.
pytestmark = [pytest.mark.slurm, pytest.mark.long, pytest.mark.timeout(900)]


def refused_naming(run: RunDir, pid: int) -> None:
    """A second writer, in this process (not a Slurm job), is refused, naming process ``pid`` on this host."""
    holder = re.escape(f"run {run.path} is being written by process {pid} on {socket.gethostname()}")
    with pytest.raises(LockError, match=holder):
        # table_step 0: "final" names no checkpoint of a run in training, and is refused before the lock
        run_stage(run, "score", ScoreConfig(**{**SCORE, "table_step": 0}))


def test_slurm_jobs_cancelled_or_killed_mid_run_or_orphaned_resume_on_rerun_and_equal_the_local_engines(
    slurm, reference, tmp_path, tiny_overrides
):
    spec = write_grid(tmp_path / "grid.yaml", tiny_overrides, retries=0)
    out = tmp_path / "sweep"
    env = cluster_env(SLURM_CONF=str(slurm.conf))
    cmd = sweep_command(spec, out, "engine.name=slurm", "engine.partition=debug", "engine.time_min=20")
    faults = dict(zip(RUNS, ("scancel", "sigkill"), strict=True))
    first = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    jobs, pids = {}, {}
    try:
        # Both array tasks run at once (2 CPUs, 1 per run); catch each after its first resumable state.
        for rid in RUNS:
            _, pids[rid] = wait_mid_training(out, (rid,), first)
            job_env = environ(pids[rid])
            assert "SLURM_ARRAY_JOB_ID" in job_env, f"{rid} is not running as a Slurm array task"
            jobs[rid] = f"{job_env['SLURM_ARRAY_JOB_ID']}_{job_env['SLURM_ARRAY_TASK_ID']}"
        for rid in RUNS:  # each job holds its run's lock
            refused_naming(RunDir.open(out / "runs" / rid), pids[rid])
        for rid, fault in faults.items():
            if fault == "scancel":  # the array task's own name: 22.05's scancel refuses its raw id, exiting 0
                subprocess.run(["scancel", jobs[rid]], env=env, check=True, timeout=30)
            else:
                os.kill(pids[rid], signal.SIGKILL)
        deadline = time.monotonic() + 60
        while any(alive(p) for p in pids.values()):
            assert time.monotonic() < deadline, "a run's process outlived its job by 60 s"
            time.sleep(0.05)
        died_at = time.time()
        output, _ = first.communicate(timeout=300)
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
    # The first sweep saw both jobs end without a result (no sacct here) and reported both runs failed.
    assert first.returncode == 1, output
    assert "0/2 runs done, 2 failed, 0 retried (none), engine slurm" in output, output
    states = {}
    for rid, fault in faults.items():
        expected = "CANCELLED" if fault == "scancel" else "FAILED"
        assert slurm.jobs()[jobs[rid]] == expected
        assert f"FAILED {rid}: slurm job {jobs[rid]} ended {expected} without a result" in output, output
        entry = resume_log(out, rid)["training"]  # the engine's account, not a stale 'running'
        assert entry["status"] == "failed" and f"ended {expected}" in entry["error"] and entry["attempts"] == 1
        run = RunDir.open(out / "runs" / rid)
        state = run.load_state()
        assert state is not None and 0 < state["step"] < STEPS  # killed mid-run
        assert not any(r.get("event") == "final" for r in run.metrics())
        states[rid] = state["step"]
    # A SIGKILLed job leaves its lock behind; the driver, writing the engine's account into the run's memo
    # (under the run's lock), took it over from the dead process and released it.
    killed = out / "runs" / RUNS[1]
    assert f"took over the lock of {killed} from process {pids[RUNS[1]]}" in output, output[-2000:]
    assert lock_holder(killed) is None

    # The rerun resumes both; its driver is then SIGKILLed mid-run, as a lost login session would end it,
    # so it cannot cancel its jobs, which train on.
    rerun_at = time.time()
    second = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    leftovers = {}
    try:
        for rid in RUNS:
            _, pid = wait_mid_training(out, (rid,), second, after=states[rid])
            refused_naming(RunDir.open(out / "runs" / rid), pid)  # the new job took the dead one's lock over
            job_env = environ(pid)
            leftovers[rid] = f"{job_env['SLURM_ARRAY_JOB_ID']}_{job_env['SLURM_ARRAY_TASK_ID']}"
        second.kill()
        second.communicate(timeout=30)
    finally:
        if second.poll() is None:
            second.kill()
            second.wait()
    assert all(slurm.jobs()[j] == "RUNNING" for j in leftovers.values()), slurm.jobs()

    # The third call cancels the jobs the killed one left, then resumes both runs: never two jobs on one run.
    third = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert third.returncode == 0, third.stdout + third.stderr
    assert "2/2 runs done, 0 failed, 0 retried (none), engine slurm" in third.stdout, third.stdout
    assert all(slurm.jobs()[j] == "CANCELLED" for j in leftovers.values()), slurm.jobs()
    for rid in RUNS:
        assert_same_results(out, reference, rid)
        assert_resumed_once(out, rid, states[rid], died_at, rerun_at, trains=3)
        assert not (out / "runs" / rid / LOCK_FILE).exists()
    # No sacct here (accounting storage off): the engine followed the jobs through squeue.
    assert subprocess.run(["sacct", "-j", jobs[RUNS[0]]], env=env, capture_output=True).returncode != 0


def test_a_lock_left_on_another_host_is_refused_on_a_slurm_job_with_advice_that_deleting_it_follows(
    slurm, tmp_path, tiny_overrides
):
    spec = tmp_path / "grid.yaml"
    spec.write_text(json.dumps({"tasks": ["number"], "seeds": [0], "overrides": tiny_overrides, "retries": 0,
                                "stages": {"training": {"group": False}, "score": SCORE}, "threads": 1}))
    out = tmp_path / "sweep"
    (run_spec,) = load_experiment(spec).runs()
    run = ensure_run(out / "runs" / run_spec.id, run_spec.config())  # the run exists, not yet trained
    # The lock of a process on a node this one cannot see (here, a node name no machine has).
    (run.path / LOCK_FILE).write_text(json.dumps({"host": "node-elsewhere", "pid": 4242}))
    env = cluster_env(SLURM_CONF=str(slurm.conf))
    cmd = sweep_command(spec, out, "engine.name=slurm", "engine.partition=debug", "engine.time_min=20")
    refused = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert refused.returncode == 1, refused.stdout + refused.stderr
    advice = (f"run {run.path} is being written by process 4242 on node-elsewhere, a host this one cannot check; "
              f"if that process is gone, delete {run.path / LOCK_FILE}")
    (failed,) = [line for line in refused.stdout.splitlines() if line.startswith(f"FAILED {run_spec.id}: ")]
    assert advice in failed, refused.stdout
    # The run's memo is written under the run's lock, which the other host holds: nothing is recorded there
    # (no stale 'running', no 'failed' a lock holder elsewhere might contradict); the FAILED line above carries
    # the advice, and the executor keeps it on disk in the run's log.
    assert "training" not in resume_log(out, run_spec.id)
    log = (out / "logs" / f"{run_spec.id}.log").read_text()
    assert "training failed:" in log and advice in log, log
    assert run.checkpoint_steps() == [], "refused before it trained"
    (run.path / LOCK_FILE).unlink()  # the advice
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1/1 runs done, 0 failed" in done.stdout, done.stdout
    assert RunDir.open(run.path).finished and run.artifact("scores").is_file()
    assert not (run.path / LOCK_FILE).exists()
