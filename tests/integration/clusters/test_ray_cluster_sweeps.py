"""`possym sweep engine.name=ray engine.address= ...` on a two-node Ray cluster (two `ray start` processes on
loopback addresses): while a run trains on the worker node, a second writer elsewhere is refused, naming
that node's process; the worker node dies mid-run, and the sweep finishes on the head, retrying the lost
run from its last state after taking over the lock the dead process left, says which run it retried, and
every result equals an uninterrupted run's."""

from __future__ import annotations

import re
import socket
import subprocess
import time

import pytest
from cluster_sweeps import (
    RUNS,
    STEPS,
    assert_ran_once,
    assert_resumed_once,
    assert_same_results,
    cluster_env,
    sweep_command,
    wait_mid_training,
    write_grid,
)
from ray_cluster import CLIENT_ENV

from possym.errors import LockError
from possym.experiment import run_stage
from possym.locks import LOCK_FILE, lock_holder
from possym.runs import RunDir
from possym.stages.score import ScoreConfig

# The second tier (`make test-long`, which CI runs after `make test`): minutes of cluster set-up.
pytestmark = [pytest.mark.ray, pytest.mark.long, pytest.mark.timeout(900)]


def test_a_ray_worker_node_killed_mid_run_holding_its_lock_is_retried_on_the_surviving_node_from_its_state(
    ray_nodes, reference, tmp_path, tiny_overrides
):
    cluster, worker = ray_nodes
    spec = write_grid(tmp_path / "grid.yaml", tiny_overrides, retries=1)
    out = tmp_path / "sweep"
    cmd = sweep_command(spec, out, "engine.name=ray", f"engine.address={cluster.address}")
    sweep = subprocess.Popen(cmd, env=cluster_env(**CLIENT_ENV), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             text=True)
    try:
        # One CPU per node and two runs: one trains on each node. Catch the worker node's mid-run.
        victim, pid = wait_mid_training(out, RUNS, sweep, owner=lambda p: p in worker.pids())
        (bystander,) = [r for r in RUNS if r != victim]
        run = RunDir.open(out / "runs" / victim)
        # A second writer, in this process (not one of Ray's), is refused, naming the worker node's process.
        holder = re.escape(f"run {run.path} is being written by process {pid} on {socket.gethostname()}")
        with pytest.raises(LockError, match=holder):
            # table_step 0: "final" names no checkpoint of a run in training, and is refused before the lock
            run_stage(run, "score", ScoreConfig(n_inputs=4, figures=False, frequency=False, table_step=0))
        killed = cluster.kill(worker)  # raylet, agents and the run's worker process, at once
        died_at = time.time()
        assert pid in killed and not worker.pids()
        # The killed process leaves its lock file behind, unless the driver, seeing the node gone, has already
        # taken it over to record the engine's account (and released it): the note below says which.
        holder = lock_holder(run.path)
        assert holder is None or holder.pid in (pid, sweep.pid), holder
        # The retry waits for the round's other run to finish, so this is the state the dead node left.
        state = RunDir.open(out / "runs" / victim).load_state()
        output, _ = sweep.communicate(timeout=600)
    finally:
        if sweep.poll() is None:
            sweep.kill()
            sweep.wait()
    assert sweep.returncode == 0, output
    assert f"2/2 runs done, 0 failed, 1 retried ({victim}), engine ray" in output, output
    assert cluster.active_nodes() == 1  # the retry ran on the head, the only node left
    for rid in RUNS:
        assert_same_results(out, reference, rid)
    assert state is not None and 0 < state["step"] < STEPS  # killed mid-run
    assert_resumed_once(out, victim, state["step"], died_at, died_at)
    assert_ran_once(out, bystander)
    # The driver, writing the engine's account of the lost worker into the run's memo (under the run's lock),
    # took over the lock of the process that died with its node, and released it; the retry found it free.
    assert f"took over the lock of {run.path} from process {pid}" in output, output[-2000:]
    assert not (run.path / LOCK_FILE).exists()
