"""benchmarks/device_check.sh in its tiny mode, on the CPU: every stage runs and the summary is written."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.long
def test_the_device_check_runs_every_stage_in_tiny_mode(tmp_path):
    env = {**os.environ, "PYTHON": sys.executable, "WORK": str(tmp_path / "work"), "OMP_NUM_THREADS": "1"}
    out = tmp_path / "out"
    done = subprocess.run(["bash", str(ROOT / "benchmarks" / "device_check.sh"), "--tiny", str(out)], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert {p.name for p in out.iterdir()} == {"device_check.log", "summary.md", "summary.json", "tests.log",
                                               "bench.txt", "env.txt"}
    summary = json.loads((out / "summary.json").read_text())
    assert [s["stage"] for s in summary["stages"]] == ["environment", "cuda_tests", "bench", "train", "analyses"]
    assert {s["status"] for s in summary["stages"]} == {"ok"}
    assert sorted(g["group"] for g in summary["groups"]) == ["letter-bf16", "letter-fp16", "number-bf16",
                                                               "number-fp16"]
    assert all(g["members"] == g["finished"] == 2 and g["member_steps_per_s"] > 0 for g in summary["groups"])
    assert "ratio" in (out / "bench.txt").read_text()
    for task in ("number", "letter"):
        run = tmp_path / "work" / "runs" / f"{task}-bf16" / "seed0"
        assert (run / "lengthgen.csv").is_file() and (run / "scores.csv").is_file()
