"""What the cluster tests run and read: the grid, the command, and what a sweep's directory says
(OUT/runs/ID, the memo OUT/log/ID.json, each run's metrics log)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import yaml

import possym
from possym.stages.memo import ExperimentMemo

SRC = Path(possym.__file__).resolve().parents[1]  # the possym under test, for the cluster's own processes
STEPS = 4000  # ~25 s a run: a job Slurm takes seconds to kill, and one orphaned, are still training
EVERY = 100  # evaluation, checkpoint and resumable state
SCORE = {"n_inputs": 4, "figures": False, "frequency": False}
RUNS = ("number-s0", "number-s1")


def cluster_env(**extra: str) -> dict[str, str]:
    """This process's environment with the possym under test first on the path, for a CLI or a daemon."""
    path = os.pathsep.join(p for p in (str(SRC), os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "PYTHONPATH": path, **extra}


def sweep_command(spec: Path, out: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "possym", "sweep", str(spec), "--out", str(out), *args]


def write_grid(path: Path, tiny: list[str], retries: int = 0) -> Path:
    """Two runs (number task, seeds 0 and 1) of STEPS steps, with a small score stage, 1 CPU each."""
    overrides = [*tiny, f"train.steps={STEPS}", f"train.eval_every={EVERY}", f"train.checkpoint_every={EVERY}",
                 f"train.state_every={EVERY}"]
    path.write_text(yaml.safe_dump({"tasks": ["number"], "seeds": [0, 1], "overrides": overrides,
                                    "stages": {"training": {"group": False}, "score": SCORE},  # a job per run
                                    "retries": retries, "threads": 1}))
    return path


# ---- what a run directory says -------------------------------------------------------------------------

VOLATILE = ("time", "eval_s", "monitor_s")  # wall-clock facts, which differ between any two runs


def resume_log(out: Path, rid: str) -> dict:
    """The run's memo (OUT/runs/ID/resume.json): stage -> {status, attempts, error, ...}."""
    return ExperimentMemo(out).memo(rid).read()


def assert_same_results(out: Path, ref: Path, rid: str) -> None:
    """The run's final weights bitwise, its checkpoints, metrics and scores as the reference's."""
    import torch
    from safetensors.torch import load_file

    from possym.runs import RunDir

    run, base = RunDir.open(out / "runs" / rid), RunDir.open(ref / "runs" / rid)
    assert run.checkpoint_steps() == base.checkpoint_steps() == list(range(0, STEPS + 1, EVERY))
    mine, theirs = load_file(run.checkpoint_path(STEPS)), load_file(base.checkpoint_path(STEPS))
    assert mine.keys() == theirs.keys()
    differ = [k for k in mine if not torch.equal(mine[k], theirs[k])]
    assert not differ, f"{rid}: final weights differ from the uninterrupted run's in {differ}"

    def plain(records):
        return [{k: v for k, v in r.items() if k not in VOLATILE} for r in records]

    assert plain(run.metrics()) == plain(base.metrics()), f"{rid}: metrics differ from the uninterrupted run's"
    assert (run.path / "scores.csv").read_text() == (base.path / "scores.csv").read_text()
    assert all(e["status"] == "done" for e in resume_log(out, rid).values()), resume_log(out, rid)


def assert_ran_once(out: Path, rid: str) -> None:
    """Each stage started once, and each evaluation was logged once."""
    from possym.runs import RunDir

    assert {s: e["attempts"] for s, e in resume_log(out, rid).items()} == {"training": 1, "score": 1}
    steps = [r["step"] for r in RunDir.open(out / "runs" / rid).metrics() if r.get("event") == "eval"]
    assert steps == list(range(0, STEPS + 1, EVERY)), steps


def assert_resumed_once(out: Path, rid: str, resumed_from: int, died_at: float, rerun_at: float,
                        trains: int = 2) -> None:
    """Trained up to ``resumed_from`` before it died and never again; trained after it only once, resumed.

    The evidence is the memo (training started twice, scoring once) and the metrics log: an
    evaluation record carries the wall-clock time at which it was written, and a resumed run keeps the
    records up to its state and writes the later ones anew. Records up to the state must predate the
    death (a restart from scratch would rewrite them); every later one must be written after the
    rerun began and appear once (a second training in parallel, or a step trained twice, would leave two).
    """
    from possym.runs import RunDir

    log = resume_log(out, rid)
    assert {s: e["attempts"] for s, e in log.items()} == {"training": trains, "score": 1}, log
    evals = [r for r in RunDir.open(out / "runs" / rid).metrics() if r.get("event") == "eval"]
    steps = [r["step"] for r in evals]
    assert steps == list(range(0, STEPS + 1, EVERY)), steps  # each step logged once, none lost
    before = [r for r in evals if r["step"] <= resumed_from]
    after = [r for r in evals if r["step"] > resumed_from]
    assert before and after
    assert all(r["time"] <= died_at for r in before), "records before the resume point were written again"
    assert all(r["time"] >= rerun_at for r in after), "records after the resume point predate the rerun"
    finals = [r for r in RunDir.open(out / "runs" / rid).metrics() if r.get("event") == "final"]
    assert len(finals) == 1 and finals[0]["time"] >= rerun_at


def wait_mid_training(out: Path, runs: tuple[str, ...], proc: subprocess.Popen,
                      owner: Callable[[int], bool] | None = None, timeout_s: float = 240,
                      after: int = 0) -> tuple[str, int]:
    """The first of ``runs`` seen training once it has saved its resumable state at step EVERY or later, and
    past ``after`` (in a process for which ``owner(pid)`` holds, where given), with the pid of that process:
    the one holding the run's log OUT/logs/ID.log open. Fails if the sweep ends, or a run finishes, first."""
    from cluster_procs import holders

    from possym.runs import RunDir

    deadline = time.monotonic() + timeout_s
    while True:
        assert proc.poll() is None, f"the sweep ended before a run was caught mid-training: {proc.communicate()}"
        assert time.monotonic() < deadline, f"no run of {runs} was caught mid-training in {timeout_s:.0f} s"
        for rid in runs:
            run, log = out / "runs" / rid, out / "logs" / f"{rid}.log"
            if not (run / "state.pt").is_file() or not log.is_file():
                continue
            steps = RunDir.open(run).checkpoint_steps()
            assert STEPS not in steps, f"{rid} finished before it could be killed: lengthen STEPS"
            try:
                state = RunDir.open(run).load_state()
            except Exception:  # being replaced as we read it
                continue
            if state is None or state["step"] < max(EVERY, after + 1):
                continue
            pids = [p for p in holders(log) if owner is None or owner(p)]
            if pids:
                return rid, pids[0]
        time.sleep(0.1)
