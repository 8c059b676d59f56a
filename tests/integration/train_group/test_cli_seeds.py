"""``possym train --seeds``: an experiment whose runs go into OUT/runs/TASK-sS and train as one group, each seed
meaning what it means in a sweep, and ``--resume OUT`` after a real SIGKILL, bitwise."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest
import torch
from safetensors.torch import load_file

from possym.cli import main
from possym.runs import RunDir


def _weights(run: RunDir) -> dict[str, torch.Tensor]:
    return load_file(run.checkpoint_path(run.checkpoint_steps()[-1]))


def test_train_seeds_makes_one_run_directory_per_seed_trained_as_one_group(tmp_path, tiny_overrides, capsys):
    out = tmp_path / "g"
    assert main(["train", "--task", "number", "--seeds", "0,2", "--out", str(out), *tiny_overrides]) == 0
    printed = capsys.readouterr().out
    assert "test accuracy (number, number-s0): " in printed and "test accuracy (number, number-s2): " in printed
    runs = [RunDir.open(out / "runs" / f"number-s{s}") for s in (0, 2)]
    assert [r.config.seeds.__dict__ for r in runs] == [dict(data=s, init=s, order=s, dropout=s) for s in (0, 2)]
    assert all(r.load_state()["group"]["size"] == 2 for r in runs)
    assert main(["train", "--resume", str(out)]) == 0  # finished: nothing left to do
    assert "test accuracy (number, number-s2) (trained already)" in capsys.readouterr().out


@pytest.mark.parametrize("argv,message", [
    (["train", "--task", "number", "--seeds", "0,x", "--out", "{d}/g"], "give whole numbers"),
    (["train", "--task", "number", "--seeds", "1,1", "--out", "{d}/g"], "distinct seeds"),
    (["train", "--task", "number", "--seeds", "0,1", "--out", "{d}/g", "seeds.init=3"], "drop the seeds.* overrides"),
    (["train", "--resume", "{d}", "--seeds", "0,1"], "takes only the run directory"),
])
def test_bad_seeds_fail_before_any_work(tmp_path, capsys, argv, message):
    assert main([a.format(d=tmp_path) for a in argv]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "g").exists()


@pytest.mark.long
def test_a_killed_group_resumes_from_its_parent_directory_to_the_same_weights(tmp_path, tiny_overrides):
    overrides = [o for o in tiny_overrides if not o.startswith("train.steps")] + [
        "train.steps=300", "model.d_model=32", "model.d_mlp=64"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "possym", "train", "--task", "letter", "--seeds", "0,1"]
    ref = subprocess.run([*cmd, "--out", str(tmp_path / "ref"), *overrides], env=env, capture_output=True)
    assert ref.returncode == 0, ref.stderr.decode()[-2000:]

    proc = subprocess.Popen([*cmd, "--out", str(tmp_path / "cut"), *overrides], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    marker = tmp_path / "cut" / "runs" / "letter-s1" / "checkpoints" / "step_000100.safetensors"
    deadline = time.time() + 300
    while not marker.exists() and proc.poll() is None and time.time() < deadline:
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL
    assert not marker.with_name("step_000300.safetensors").exists(), "killed too late"

    resumed = subprocess.run([*cmd[:4], "--resume", str(tmp_path / "cut")], env=env, capture_output=True)
    assert resumed.returncode == 0, resumed.stderr.decode()[-2000:]
    for s in (0, 1):
        wa, wb = (_weights(RunDir.open(tmp_path / d / "runs" / f"letter-s{s}")) for d in ("ref", "cut"))
        assert all(torch.equal(wa[k], wb[k]) for k in wa)
