"""`possym sweep --engine ray --address ...` on a two-node Ray cluster (two `ray start` processes on
127.0.0.1): the worker node dies mid-trial, the sweep finishes on the head, retrying the lost trial
from its last state, says which trial it retried, and every result equals an uninterrupted run's."""

from __future__ import annotations

import subprocess
import time

import pytest
from conftest import (
    STEPS,
    TRIALS,
    assert_ran_once,
    assert_resumed_once,
    assert_same_results,
    cluster_env,
    sweep_command,
    wait_mid_training,
    write_grid,
)
from possym.runs import RunDir

pytestmark = [pytest.mark.ray, pytest.mark.timeout(600)]


def test_a_ray_worker_node_killed_mid_trial_is_retried_on_the_surviving_node_from_its_state(
    ray_nodes, reference, tmp_path, tiny_overrides
):
    cluster, worker = ray_nodes
    spec = write_grid(tmp_path / "grid.yaml", tiny_overrides, retries=1)
    out = tmp_path / "sweep"
    cmd = sweep_command(spec, out, "--engine", "ray", "--address", cluster.address)
    sweep = subprocess.Popen(cmd, env=cluster_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        # One CPU per node and two trials: one trains on each node. Catch the worker's mid-trial.
        victim, pid = wait_mid_training(out, TRIALS, sweep, owner=lambda p: p in worker.pids())
        (bystander,) = [t for t in TRIALS if t != victim]
        killed = cluster.kill(worker)  # raylet, agents and the trial's worker process, at once
        died_at = time.time()
        assert pid in killed and not worker.pids()
        # The retry waits for the round's other trial to finish, so this is the state the dead node left.
        state = RunDir.open(out / "runs" / victim).load_state()
        output, _ = sweep.communicate(timeout=400)
    finally:
        if sweep.poll() is None:
            sweep.kill()
            sweep.wait()
    assert sweep.returncode == 0, output
    assert "2/2 trials done (0 already finished), 1 retried, 0 failed, engine ray" in output, output
    assert f"RETRIED {victim}: 1 attempt(s) failed" in output and f"RETRIED {bystander}" not in output, output
    assert cluster.active_nodes() == 1  # the retry ran on the head, the only node left
    for trial in TRIALS:
        assert_same_results(out, reference, trial)
    assert state is not None and 0 < state["step"] < STEPS  # killed mid-trial
    assert_resumed_once(out, victim, state["step"], died_at, died_at)
    assert_ran_once(out, bystander)
