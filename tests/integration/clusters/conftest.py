"""Real clusters for the sweep engines: a one-node Slurm cluster and a two-node Ray cluster, and what
an uninterrupted run of the same grid gives, to compare them with.

The helpers beside this file (``slurm_cluster``, ``ray_cluster``, ``cluster_procs``) bring the
daemons up and down; the fixtures here skip, saying why, where that cannot be done (no root for
Slurm, a package missing), and tear down whatever happens.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

import possym

SRC = Path(possym.__file__).resolve().parents[1]  # the possym under test, for the cluster's own processes
STEPS = 2000  # long enough that a job Slurm takes ~5 s to kill is still training when it dies
EVERY = 100  # evaluation, checkpoint and resumable state
SCORE = {"n_inputs": 4, "figures": False, "frequency": False}
TRIALS = ("baseline-number-s0", "baseline-number-s1")


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


def cluster_env(**extra: str) -> dict[str, str]:
    """This process's environment with the possym under test first on the path, for a CLI or a daemon."""
    path = os.pathsep.join(p for p in (str(SRC), os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "PYTHONPATH": path, **extra}


def sweep_command(spec: Path, out: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "possym", "sweep", str(spec), "--out", str(out), *args]


def write_grid(path: Path, tiny: list[str], retries: int = 0) -> Path:
    """Two trials (number task, seeds 0 and 1) of STEPS steps, with a small score stage."""
    overrides = [*tiny, f"train.steps={STEPS}", f"train.eval_every={EVERY}", f"train.checkpoint_every={EVERY}"]
    path.write_text(yaml.safe_dump({"tasks": ["number"], "seeds": [0, 1], "overrides": overrides,
                                    "stages": {"score": SCORE}, "retries": retries}))
    return path


@pytest.fixture(scope="session")
def reference(tmp_path_factory, tiny_session_overrides) -> Path:
    """The grid run by the local engine, uninterrupted: what every cluster run must equal."""
    root = tmp_path_factory.mktemp("reference")
    spec = write_grid(root / "grid.yaml", tiny_session_overrides)
    done = subprocess.run(sweep_command(spec, root / "sweep", "--workers", "2"), env=cluster_env(),
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    return root / "sweep"


@pytest.fixture(scope="session")
def slurm(tmp_path_factory, say):
    """A one-node Slurm cluster (munged, slurmctld, slurmd as root); skipped, saying why, where it cannot run."""
    if importlib.util.find_spec("submitit") is None:
        pytest.skip("submitit is missing: pip install -e '.[slurm]'")
    if not Path("/proc/self/environ").exists():
        pytest.skip("the Slurm test finds its processes through /proc (Linux)")
    from slurm_cluster import SlurmCluster, ensure_installed

    reason = ensure_installed(say)
    if reason:
        pytest.skip(reason)
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
    """A head node and one worker node, each `ray start` with 1 CPU, on 127.0.0.1; torn down after the test."""
    if importlib.util.find_spec("ray") is None:
        pytest.skip("ray is missing: pip install -e '.[ray]'")
    if not Path("/proc/self/environ").exists():
        pytest.skip("the Ray test finds its processes through /proc (Linux)")
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


# ---- what a run directory says -------------------------------------------------------------------------

VOLATILE = ("time", "eval_s", "monitor_s")  # wall-clock facts, which differ between any two runs


def assert_same_results(out: Path, ref: Path, trial: str) -> None:
    """The trial's final weights bitwise, its checkpoints, metrics and scores as the reference's."""
    import torch
    from safetensors.torch import load_file

    from possym.runs import RunDir

    run, base = RunDir.open(out / "runs" / trial), RunDir.open(ref / "runs" / trial)
    assert run.checkpoint_steps() == base.checkpoint_steps() == list(range(0, STEPS + 1, EVERY))
    mine, theirs = load_file(run.checkpoint_path(STEPS)), load_file(base.checkpoint_path(STEPS))
    assert mine.keys() == theirs.keys()
    differ = [k for k in mine if not torch.equal(mine[k], theirs[k])]
    assert not differ, f"{trial}: final weights differ from the uninterrupted run's in {differ}"

    def plain(records):
        return [{k: v for k, v in r.items() if k not in VOLATILE} for r in records]

    assert plain(run.metrics()) == plain(base.metrics()), f"{trial}: metrics differ from the uninterrupted run's"
    assert (run.path / "scores.csv").read_text() == (base.path / "scores.csv").read_text()
    record = json.loads((out / "trials" / trial / "DONE").read_text())
    assert record["status"] == "done"


def stage_starts(out: Path, trial: str, stage: str) -> list[str]:
    """The lines of the trial's log where STAGE started, one per run of it."""
    return [line for line in (out / "trials" / trial / "log.txt").read_text().splitlines()
            if line.startswith(f"== {stage} ({trial})")]


def assert_ran_once(out: Path, trial: str) -> None:
    assert len(stage_starts(out, trial, "train")) == 1 and len(stage_starts(out, trial, "score")) == 1


def assert_resumed_once(out: Path, trial: str, resumed_from: int, died_at: float, rerun_at: float) -> None:
    """Trained up to ``resumed_from`` before it died and never again; trained after it only once, resumed.

    The evidence is the metrics log: an evaluation record carries the wall-clock time at which it was
    written, and a resumed run keeps the records up to its state and writes the later ones anew.
    Records up to the state must predate the death (a restart from scratch would rewrite them); every
    later one must be written by the second run and appear once (a second training in parallel, or a
    step trained twice, would leave two).
    """
    from possym.runs import RunDir

    train = stage_starts(out, trial, "train")
    assert len(train) == 2 and "resuming" not in train[0] and "resuming" in train[1], train
    assert len(stage_starts(out, trial, "score")) == 1
    evals = [r for r in RunDir.open(out / "runs" / trial).metrics() if r.get("event") == "eval"]
    steps = [r["step"] for r in evals]
    assert steps == sorted(set(steps)) == list(range(0, STEPS + 1, EVERY)), steps
    before = [r for r in evals if r["step"] <= resumed_from]
    after = [r for r in evals if r["step"] > resumed_from]
    assert before and after
    assert all(r["time"] <= died_at for r in before), "records before the resume point were written again"
    assert all(r["time"] >= rerun_at for r in after), "records after the resume point predate the rerun"


def wait_mid_training(out: Path, trials: tuple[str, ...], proc: subprocess.Popen,
                      owner: Callable[[int], bool] | None = None, timeout_s: float = 240) -> tuple[str, int]:
    """The first of ``trials`` seen training once it has saved its state at step EVERY or later (in a process
    for which ``owner(pid)`` holds, where given), with the pid of that process. Fails if the sweep ends, or a
    trial finishes, first."""
    from cluster_procs import holders

    from possym.runs import RunDir

    deadline = time.monotonic() + timeout_s
    while True:
        assert proc.poll() is None, f"the sweep ended before a trial was caught mid-training: {proc.communicate()}"
        assert time.monotonic() < deadline, f"no trial of {trials} was caught mid-training in {timeout_s:.0f} s"
        for trial in trials:
            run, log = out / "runs" / trial, out / "trials" / trial / "log.txt"
            steps = RunDir.open(run).checkpoint_steps() if (run / "config.yaml").is_file() else []
            assert STEPS not in steps, f"{trial} finished before it could be killed: lengthen STEPS"
            if not (steps and max(steps) >= EVERY and log.is_file()):
                continue
            pids = [p for p in holders(log) if owner is None or owner(p)]
            if pids:
                return trial, pids[0]
        time.sleep(0.1)
