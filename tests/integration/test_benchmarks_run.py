"""The benchmarks run: each script with its smallest arguments, as a user would start it, prints its figures
and exits 0. A change to the library's API (a config no longer built as the benchmark built it, say) broke
three of them once without any test noticing; their speed is not checked here (that lives in their output,
as ratios measured in one run)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# (script, its smallest arguments, a pattern its report always prints)
SMOKE = [
    ("bench_monitor.py", ["--threads", "1", "--rounds", "1", "--steps-per-round", "2", "--monitor-size", "4"],
     r"overhead \d"),
    ("bench_scores.py", ["--repeats", "1", "--n-inputs", "4", "--checkpoints", "2"], r"max \|score difference\|"),
    ("bench_eval.py", ["--repeats", "1", "--n", "64"], "ratio bf16 compiled/eager"),
    ("bench_train.py", ["--steps", "1", "--repeats", "1", "--only", "possym,module"], "tokens/s"),
    ("bench_seeds.py", ["--tiny"], "group member-steps/s"),
    ("bench_group_training.py", ["--tiny"], "singles/group"),
    ("profile_group.py", ["--tiny"], r"member-steps/s \(set-up and evaluations included\)"),
    # the time left after training is never negative (it was, when grouped runs' spans were summed)
    ("bench_canonical.py", ["--quick", "--threads", "1"], r"evaluation, scores and report \d+ s"),
    ("bench_lengthgen.py", ["--task", "number", "--compare-grid", "0,10", "--compare-n", "2", "--skip-curve",
                            "--repeats", "1", "--threads", "1"], r"max \|logit difference\|"),
    ("demo_levers.py", ["--tiny"], r"eager/compiled \d"),
]


@pytest.mark.long
@pytest.mark.parametrize(("script", "args", "printed"), SMOKE, ids=[s for s, _, _ in SMOKE])
def test_a_benchmark_runs_with_its_smallest_arguments(script, args, printed):
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / script), *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, f"{script} failed:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    assert re.search(printed, done.stdout), f"{script} printed no {printed!r}:\n{done.stdout[-2000:]}"
