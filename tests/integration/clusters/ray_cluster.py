"""A Ray cluster of separate ``ray start`` processes on this machine: a head node and worker nodes.

Test infrastructure, not library code. Each node is its own ``ray start --block`` process (so its
pid is known), with its own ``--temp-dir``, on the loopback address only, with ports chosen free.
Every process of a node (raylet, agents, the workers that run tasks) carries the node's mark in its
environment, so :meth:`RayCluster.kill` can end one node hard, as a machine that loses power, and
:meth:`RayCluster.stop` ends everything this cluster started, and nothing else (``ray stop`` would
stop every Ray instance on the machine).

Example::

    cluster = RayCluster(env={"PYTHONPATH": "src"})
    cluster.start_head(cpus=1)
    worker = cluster.add_worker(cpus=1)
    ...                     # ray.init(address=cluster.address)
    cluster.kill(worker)    # the node dies mid-task
    cluster.stop()
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from cluster_procs import alive, free_port, kill_marked, marked

MARK = "POSSYM_TEST_RAY_NODE"
# What every process of the cluster and every client of it (the sweep) runs with. Token authentication
# off, explicitly: Ray turns it on for a head started where ~/.ray/auth_token exists, which a client
# without RAY_AUTH_MODE=token then cannot reach; a test cluster should not depend on the user's home.
CLIENT_ENV = {"RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0"}
# The head notices a dead node within about 2 s, not Ray's default 15-30 s.
FAST_HEALTH_CHECKS = {
    "RAY_health_check_initial_delay_ms": "1000",
    "RAY_health_check_period_ms": "500",
    "RAY_health_check_timeout_ms": "1000",
    "RAY_health_check_failure_threshold": "3",
}


def ray_cli() -> str:
    """The ``ray`` command of the Python running the tests."""
    beside = Path(sys.executable).with_name("ray")
    return str(beside) if beside.is_file() else (shutil.which("ray") or "ray")


@dataclass
class RayNode:
    name: str
    temp_dir: Path  # also the value of its mark
    proc: subprocess.Popen

    def pids(self) -> list[int]:
        return marked(MARK, str(self.temp_dir))


class RayCluster:
    def __init__(self, env: dict[str, str] | None = None) -> None:
        # Short paths: Ray's Unix sockets live under --temp-dir, and a socket path has at most 107 bytes.
        self.root = Path(tempfile.mkdtemp(prefix="possym-ray-", dir="/tmp"))
        self.env = {**os.environ, **(env or {}), **CLIENT_ENV}
        self.nodes: list[RayNode] = []
        self.port = free_port()

    @property
    def address(self) -> str:
        """The head's GCS. Not 127.0.0.1: Ray rewrites that one, in any address it is given, to the machine's
        outward IP, so traffic would leave the loopback interface's addresses; 127.0.0.2 is loopback too."""
        return f"127.0.0.2:{self.port}"

    def _start(self, name: str, args: list[str], extra_env: dict[str, str] | None = None) -> RayNode:
        temp = self.root / name
        temp.mkdir()
        ip = f"127.0.0.{2 + len(self.nodes)}"  # each node its own loopback address, as machines have theirs
        cmd = [ray_cli(), "start", "--block", f"--node-ip-address={ip}", "--num-gpus=0",
               f"--temp-dir={temp}", "--object-store-memory=100000000", "--disable-usage-stats",
               f"--dashboard-agent-listen-port={free_port()}", f"--dashboard-agent-grpc-port={free_port()}",
               f"--metrics-export-port={free_port()}", f"--runtime-env-agent-port={free_port()}",
               f"--node-manager-port={free_port()}", f"--object-manager-port={free_port()}", *args]
        env = {**self.env, **(extra_env or {}), MARK: str(temp)}
        log = (self.root / f"{name}.log").open("w")
        proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        node = RayNode(name, temp, proc)
        self.nodes.append(node)
        return node

    def start_head(self, cpus: int = 1, timeout_s: float = 90) -> RayNode:
        node = self._start("head", ["--head", f"--port={self.port}", f"--num-cpus={cpus}",
                                    "--include-dashboard=false"], FAST_HEALTH_CHECKS)
        self.wait_nodes(1, timeout_s)
        return node

    def add_worker(self, cpus: int = 1, timeout_s: float = 90) -> RayNode:
        node = self._start(f"worker{len(self.nodes)}", [f"--address={self.address}", f"--num-cpus={cpus}"])
        self.wait_nodes(sum(n.proc.poll() is None for n in self.nodes), timeout_s)
        return node

    def active_nodes(self) -> int:
        """How many nodes the head counts as alive (``ray status``), or -1 while it does not answer."""
        try:
            out = subprocess.run([ray_cli(), "status", f"--address={self.address}"], env=self.env,
                                 capture_output=True, text=True, timeout=30)
        except subprocess.TimeoutExpired:
            return -1
        if out.returncode != 0 or "Active:" not in out.stdout:
            return -1
        block = out.stdout.split("Active:", 1)[1].split("Pending:", 1)[0]
        return sum(1 for line in block.splitlines() if "node_" in line)

    def wait_nodes(self, n: int, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while self.active_nodes() != n:
            dead = [x.name for x in self.nodes if x.proc.poll() is not None and x.proc.returncode != -9]
            if dead or time.monotonic() > deadline:
                logs = "\n".join(f"--- {p.name}\n{p.read_text()[-1500:]}" for p in sorted(self.root.glob("*.log")))
                raise RuntimeError(f"waited {timeout_s:.0f} s for {n} Ray node(s); exited: {dead or 'none'}\n{logs}")
            time.sleep(0.5)

    def kill(self, node: RayNode) -> list[int]:
        """End every process of ``node`` with SIGKILL at once, as a node that loses power; return their pids."""
        killed = kill_marked(MARK, str(node.temp_dir))
        node.proc.wait(10)
        return killed

    def stop(self, timeout_s: float = 30) -> None:
        """Stop every node (workers first), then kill whatever of theirs is left; bounded by ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        for node in reversed(self.nodes):
            if node.proc.poll() is None:
                node.proc.terminate()  # `ray start --block` stops its node's processes on SIGTERM
        for node in reversed(self.nodes):
            try:
                node.proc.wait(max(1.0, deadline - time.monotonic() - 10))
            except subprocess.TimeoutExpired:
                pass
            kill_marked(MARK, str(node.temp_dir), timeout_s=max(1.0, min(10.0, deadline - time.monotonic())))
        if not any(alive(p) for node in self.nodes for p in node.pids()):
            shutil.rmtree(self.root, ignore_errors=True)
