"""A one-node Slurm cluster of the real daemons (munged, slurmctld, slurmd), in a temporary directory.

Test infrastructure, not library code. Everything the cluster writes (config, munge key and socket,
state, spool, logs) lives under ``root``; the daemons run in the foreground as children of this
process, so their pids are known and :meth:`SlurmCluster.stop` ends them, and every process their
jobs started, whatever happened. Accounting storage is off, as on many small clusters, so ``sacct``
answers with an error; jobs are followed through ``squeue``, and completions go to a text log.

Example (as root, with slurm-wlm and munge installed)::

    cluster = SlurmCluster(Path("/tmp/slurm"))
    cluster.start()
    try:
        subprocess.run(["sbatch", "--wrap", "hostname"], env=cluster.env, check=True)
    finally:
        cluster.stop()
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from cluster_procs import free_port, kill_marked

PACKAGES = ("slurm-wlm", "munge")
DAEMONS = ("munged", "slurmctld", "slurmd")
COMMANDS = ("sinfo", "sbatch", "srun", "squeue", "scancel", "scontrol")


def _missing() -> list[str]:
    return [c for c in (*DAEMONS, *COMMANDS) if shutil.which(c) is None and not Path("/usr/sbin", c).is_file()]


def ensure_installed(say: Callable[[str], None]) -> str | None:
    """Install Debian's slurm-wlm and munge when a daemon or command is missing; None when ready, else why not.

    The daemons run as root (slurmd starts each job as its submitter, and the test ends every process they
    started), so without root the cluster is not brought up even where the packages are installed.
    """
    if os.geteuid() != 0:
        return ("a Slurm cluster's daemons run as root, and this is not root: run `sudo make test-slurm` "
                "(CI runs as root)")
    missing = _missing()
    if not missing:
        return None
    if shutil.which("apt-get") is None:
        return f"{', '.join(missing)} missing and no apt-get to install {' and '.join(PACKAGES)}"
    say(f"installing Debian's {' and '.join(PACKAGES)} with apt-get (missing: {', '.join(missing)})")
    t = time.perf_counter()
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    install = ["apt-get", "install", "-y", "-qq", "--no-install-recommends", *PACKAGES]
    done = subprocess.run(install, env=env, capture_output=True, text=True, timeout=600)
    if done.returncode != 0:  # a stale package index: update once, then try again
        subprocess.run(["apt-get", "update", "-qq"], env=env, capture_output=True, timeout=600)
        done = subprocess.run(install, env=env, capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        return f"apt-get install {' '.join(PACKAGES)} failed: {done.stderr.strip()[-500:]}"
    say(f"installed {' and '.join(PACKAGES)} in {time.perf_counter() - t:.0f} s")
    return None if not _missing() else f"still missing after apt-get: {', '.join(_missing())}"


def node_line() -> str:
    """This machine as slurmd sees it (``slurmd -C``: CPUs, sockets, cores, threads, memory), so the
    node registers without a mismatch that would drain it."""
    out = subprocess.run(["slurmd", "-C"], capture_output=True, text=True, check=True, timeout=30).stdout
    first = next(line for line in out.splitlines() if line.startswith("NodeName="))
    fields = dict(f.split("=", 1) for f in first.split())
    fields["RealMemory"] = str(int(fields["RealMemory"]) * 9 // 10)  # a margin: memory is not scheduled here
    fields.pop("NodeName")
    return " ".join(f"{k}={v}" for k, v in fields.items())


class SlurmCluster:
    """munged, slurmctld and slurmd for one node, on loopback ports chosen free, under ``root``."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.node = socket.gethostname().split(".")[0]
        self.conf = root / "slurm.conf"
        self.procs: dict[str, subprocess.Popen] = {}

    @property
    def env(self) -> dict[str, str]:
        """The environment a client (sbatch, squeue, submitit) needs to reach this cluster."""
        return {**os.environ, "SLURM_CONF": str(self.conf)}

    def write_config(self) -> None:
        r = self.root
        for d in ("state", "spool", "log", "munge"):
            (r / d).mkdir(parents=True, exist_ok=True)
        os.chmod(r / "munge", 0o700)
        key = r / "munge" / "munge.key"
        key.write_bytes(os.urandom(1024))
        os.chmod(key, 0o400)
        self.conf.write_text(
            "\n".join(
                [
                    "ClusterName=possymtest",
                    f"SlurmctldHost={self.node}(127.0.0.1)",
                    f"SlurmctldPort={free_port()}",
                    f"SlurmdPort={free_port()}",
                    "SlurmUser=root",
                    "SlurmdUser=root",
                    "AuthType=auth/munge",
                    "CredType=cred/munge",
                    f"AuthInfo=socket={r / 'munge' / 'munge.socket'}",
                    f"StateSaveLocation={r / 'state'}",
                    f"SlurmdSpoolDir={r / 'spool'}",
                    f"SlurmctldPidFile={r / 'slurmctld.pid'}",
                    f"SlurmdPidFile={r / 'slurmd.pid'}",
                    f"SlurmctldLogFile={r / 'log' / 'slurmctld.log'}",
                    f"SlurmdLogFile={r / 'log' / 'slurmd.log'}",
                    # No cgroups: processes are tracked by parentage, tasks are not bound.
                    "ProctrackType=proctrack/linuxproc",
                    "TaskPlugin=task/none",
                    "SelectType=select/cons_tres",
                    "SelectTypeParameters=CR_Core",
                    "SchedulerType=sched/builtin",
                    "MpiDefault=none",
                    # Accounting off, as on a small cluster without slurmdbd: sacct has nothing to read.
                    "AccountingStorageType=accounting_storage/none",
                    "JobAcctGatherType=jobacct_gather/none",
                    "JobCompType=jobcomp/filetxt",
                    f"JobCompLoc={r / 'log' / 'jobcomp.txt'}",
                    "ReturnToService=2",
                    "KillWait=2",  # scancel: SIGTERM, then SIGKILL 2 s later (default 30 s)
                    "MinJobAge=600",  # finished jobs stay visible to squeue for 10 minutes
                    "SlurmdTimeout=60",
                    "InactiveLimit=0",
                    f"NodeName={self.node} NodeAddr=127.0.0.1 {node_line()} State=UNKNOWN",
                    f"PartitionName=debug Nodes={self.node} Default=YES MaxTime=INFINITE State=UP",
                ]
            )
            + "\n"
        )

    def _spawn(self, name: str, cmd: list[str]) -> None:
        log = (self.root / "log" / f"{name}.out").open("w")
        env = {**self.env, "POSSYM_TEST_SLURM": str(self.root)}  # marks every process the cluster starts
        self.procs[name] = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env,
                                            start_new_session=True)

    def start(self, timeout_s: float = 60) -> None:
        """Start the three daemons and wait until ``sinfo`` shows the node idle (or raise, saying why)."""
        self.write_config()
        m = self.root / "munge"
        self._spawn("munged", ["munged", "--foreground", "--force", f"--socket={m / 'munge.socket'}",
                               f"--key-file={m / 'munge.key'}", f"--pid-file={m / 'munged.pid'}",
                               f"--log-file={m / 'munged.log'}", f"--seed-file={m / 'munged.seed'}"])
        self._wait(lambda: (m / "munge.socket").exists(), timeout_s, "munged to open its socket")
        self._spawn("slurmctld", ["slurmctld", "-D", "-f", str(self.conf)])
        self._spawn("slurmd", ["slurmd", "-D", "-f", str(self.conf), "-N", self.node])
        self._wait(lambda: self.node_state() == "idle", timeout_s, "sinfo to show the node idle")

    def node_state(self) -> str:
        done = subprocess.run(["sinfo", "--noheader", "--format=%T", f"--nodes={self.node}"], env=self.env,
                              capture_output=True, text=True, timeout=30)
        return done.stdout.strip() if done.returncode == 0 else ""

    def _wait(self, ready: Callable[[], bool], timeout_s: float, what: str) -> None:
        deadline = time.monotonic() + timeout_s
        while not ready():
            dead = [n for n, p in self.procs.items() if p.poll() is not None]
            if dead or time.monotonic() > deadline:
                logs = "\n".join(f"--- {p.name}\n{p.read_text()[-1500:]}" for p in sorted((self.root / "log").glob("*"))
                                 if p.is_file())
                raise RuntimeError(f"waited {timeout_s:.0f} s for {what}; exited: {dead or 'none'}\n{logs}")
            time.sleep(0.2)

    def jobs(self) -> dict[str, str]:
        """Job id -> state, for every job squeue knows (finished ones too, for MinJobAge)."""
        done = subprocess.run(["squeue", "--noheader", "--states=all", "--format=%i %T"], env=self.env,
                              capture_output=True, text=True, timeout=30)
        return dict(line.split() for line in done.stdout.splitlines() if line.strip())

    def stop(self, timeout_s: float = 30) -> None:
        """Cancel every job, stop the daemons, and end every process they started; bounded by ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        if "slurmctld" in self.procs and self.procs["slurmctld"].poll() is None:
            subprocess.run(["scancel", "--full", "--quiet", "--user", str(os.geteuid())], env=self.env,
                           capture_output=True, timeout=10)
            busy = ("RUNNING", "COMPLETING")
            while any(s in busy for s in self.jobs().values()) and time.monotonic() < deadline - 10:
                time.sleep(0.2)
        for name in ("slurmd", "slurmctld", "munged"):  # the workers first, the authenticator last
            proc = self.procs.get(name)
            if proc is not None and proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(max(1.0, min(5.0, deadline - time.monotonic())))
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(5)
        kill_marked("POSSYM_TEST_SLURM", str(self.root))  # job steps that outlived slurmd (slurmstepd, tasks)
