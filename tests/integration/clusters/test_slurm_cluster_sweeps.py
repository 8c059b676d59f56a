"""`possym sweep --engine slurm` on a real one-node Slurm cluster (submitit, sbatch, accounting off):
one job cancelled mid-trial with scancel and another whose process is SIGKILLed mid-trial; the rerun
resumes both from their last state, nothing is lost or trained twice, and the grid equals the local
engine's."""

from __future__ import annotations

import os
import signal
import subprocess
import time

import pytest
from cluster_procs import alive, environ
from conftest import (
    STEPS,
    TRIALS,
    assert_resumed_once,
    assert_same_results,
    cluster_env,
    sweep_command,
    wait_mid_training,
    write_grid,
)

from possym.runs import RunDir

pytestmark = [pytest.mark.slurm, pytest.mark.timeout(600)]


def test_slurm_jobs_cancelled_or_killed_mid_trial_resume_on_rerun_and_the_grid_equals_the_local_engines(
    slurm, reference, tmp_path, tiny_overrides
):
    spec = write_grid(tmp_path / "grid.yaml", tiny_overrides, retries=0)
    out = tmp_path / "sweep"
    env = cluster_env(SLURM_CONF=str(slurm.conf))
    cmd = sweep_command(spec, out, "--engine", "slurm", "--partition", "debug", "--time-min", "20")
    faults = dict(zip(TRIALS, ("scancel", "sigkill"), strict=True))
    first = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    jobs, pids = {}, {}
    try:
        # Both array tasks run at once (2 CPUs, 1 per trial); catch each after its first saved state.
        for trial in TRIALS:
            _, pids[trial] = wait_mid_training(out, (trial,), first)
            job_env = environ(pids[trial])
            assert "SLURM_ARRAY_JOB_ID" in job_env, f"{trial} is not running as a Slurm array task"
            jobs[trial] = f"{job_env['SLURM_ARRAY_JOB_ID']}_{job_env['SLURM_ARRAY_TASK_ID']}"
        for trial, fault in faults.items():
            if fault == "scancel":  # the array task's own name: 22.05's scancel refuses its raw id, exiting 0
                subprocess.run(["scancel", jobs[trial]], env=env, check=True, timeout=30)
            else:
                os.kill(pids[trial], signal.SIGKILL)
        deadline = time.monotonic() + 60
        while any(alive(p) for p in pids.values()):
            assert time.monotonic() < deadline, "a trial's process outlived its job by 60 s"
            time.sleep(0.05)
        died_at = time.time()
        output, _ = first.communicate(timeout=300)
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
    # The first sweep saw both jobs end without a result and reported both trials failed.
    assert first.returncode == 1, output
    states = {}
    for trial, fault in faults.items():
        expected = "CANCELLED" if fault == "scancel" else "FAILED"
        assert slurm.jobs()[jobs[trial]] == expected
        assert f"FAILED {trial}: slurm job {jobs[trial]} ended {expected} without a result" in output, output
        state = RunDir.open(out / "runs" / trial).load_state()
        assert state is not None and 0 < state["step"] < STEPS  # killed mid-trial
        assert not any(r.get("event") == "final" for r in RunDir.open(out / "runs" / trial).metrics())
        states[trial] = state["step"]

    rerun_at = time.time()
    second = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert second.returncode == 0, second.stdout + second.stderr
    assert "2/2 trials done (0 already finished), 0 retried, 0 failed, engine slurm" in second.stdout
    for trial in TRIALS:
        assert_same_results(out, reference, trial)
        assert_resumed_once(out, trial, states[trial], died_at, rerun_at)
    # No sacct here (accounting storage off): the engine followed the jobs through squeue.
    assert subprocess.run(["sacct", "-j", jobs[TRIALS[0]]], env=env, capture_output=True).returncode != 0
