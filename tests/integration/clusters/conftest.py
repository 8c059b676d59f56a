"""Real clusters for the sweep engines: a one-node Slurm cluster and a two-node Ray cluster, and what
an uninterrupted run of the same grid gives, to compare them with.

The modules beside this file bring the daemons up and down (``slurm_cluster``, ``ray_cluster``,
``cluster_procs``) and read a sweep's directory (``cluster_sweeps``); the fixtures here skip, saying
why, where a cluster cannot be brought up (no root for Slurm, a package missing), and tear it down
whatever happens.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from cluster_sweeps import cluster_env, sweep_command, write_grid

REQUIRE = "POSSYM_REQUIRE_CLUSTERS"  # set (as .ci/run does) where the clusters must come up: no skipping


def unavailable(reason: str) -> None:
    """Skip, saying why; or fail, where the cluster tests are required (CI) and a skip would hide them."""
    if os.environ.get(REQUIRE):
        pytest.fail(f"{REQUIRE} is set, but the cluster cannot be brought up: {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def say(pytestconfig) -> Callable[[str], None]:
    """Print past pytest's capture, so that a user sees an install as it happens."""
    reporter = pytestconfig.pluginmanager.get_plugin("terminalreporter")
    capture = pytestconfig.pluginmanager.get_plugin("capturemanager")

    def write(message: str) -> None:
        if reporter is None or capture is None:
            print(f"[clusters] {message}", file=sys.stderr)
            return
        with capture.global_and_fixture_disabled():
            reporter.write_line(f"[clusters] {message}")

    return write


@pytest.fixture(scope="session")
def reference(tmp_path_factory, tiny_session_overrides) -> Path:
    """The grid run by the local engine, uninterrupted: what every cluster run must equal."""
    root = tmp_path_factory.mktemp("reference")
    spec = write_grid(root / "grid.yaml", tiny_session_overrides)
    done = subprocess.run(sweep_command(spec, root / "sweep", "engine.workers=2"), env=cluster_env(),
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    return root / "sweep"


@pytest.fixture(scope="session")
def slurm(tmp_path_factory, say):
    """A one-node Slurm cluster (munged, slurmctld, slurmd as root); skipped, saying why, where it cannot run."""
    if importlib.util.find_spec("submitit") is None:
        unavailable("submitit is missing: pip install -e '.[slurm]'")
    if not Path("/proc/self/environ").exists():
        unavailable("the Slurm test finds its processes through /proc (Linux)")
    from slurm_cluster import SlurmCluster, ensure_installed

    reason = ensure_installed(say)
    if reason:
        unavailable(reason)
    cluster = SlurmCluster(tmp_path_factory.mktemp("slurm"))
    t = time.perf_counter()
    try:
        cluster.start()
        say(f"Slurm: munged, slurmctld and slurmd up, node {cluster.node} idle after {time.perf_counter() - t:.1f} s")
        yield cluster
    finally:
        t = time.perf_counter()
        cluster.stop()
        say(f"Slurm: daemons stopped in {time.perf_counter() - t:.1f} s")


@pytest.fixture
def ray_nodes(say):
    """A head node and one worker node, each `ray start` with 1 CPU, on loopback addresses; torn down after the test."""
    if importlib.util.find_spec("ray") is None:
        unavailable("ray is missing: pip install -e '.[ray]'")
    if not Path("/proc/self/environ").exists():
        unavailable("the Ray test finds its processes through /proc (Linux)")
    from ray_cluster import RayCluster

    cluster = RayCluster(env=cluster_env())
    t = time.perf_counter()
    try:
        cluster.start_head(cpus=1)
        worker = cluster.add_worker(cpus=1)
        say(f"Ray: head and worker node up at {cluster.address} after {time.perf_counter() - t:.1f} s")
        yield cluster, worker
    finally:
        t = time.perf_counter()
        cluster.stop()
        say(f"Ray: nodes stopped in {time.perf_counter() - t:.1f} s")


