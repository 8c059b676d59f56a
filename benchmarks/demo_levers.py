"""What the demo's last levers would buy, and what each would change: the two largest parts of ``make demo``'s
work measured as they run and as they could run, in the same process.

``make demo`` is about 1,040 CPU-seconds on 2 cores: training (the step is bitwise-pinned by
``STEP_VERSION``) and the length curves (fp32, about 30% of the work) are nearly all of it. The two
levers that keep the training step's arithmetic are measured here:

1. **The length curve in bf16**: :func:`possym.evaluate.lengthgen.measure_length_curve` on a trained run's
   ``best`` checkpoint as the demo measures it (fp32), then under ``torch.autocast(bfloat16)``: the time of
   each, their ratio, and what the curve would say differently (the largest change of a pooled accuracy,
   and how many (K, hop count) points count a different number of correct windows).
2. **Training through ``torch.compile``** (``train.compile=true``) on a cold Inductor cache, as a fresh
   machine would run the demo: ``possym train`` of the quick preset for ``--steps`` steps, eager and compiled,
   alternated ``--repeats`` times, each compiled run with an empty cache; medians and their ratio. The
   compiled step rounds differently from the eager one, so a compiled demo trains other models.

    python benchmarks/demo_levers.py --run runs/demo/runs/letter-s0 [--steps 1000] [--repeats 2] [--threads 1]
    python benchmarks/demo_levers.py --tiny     # a tiny model, seconds: checks that it runs
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

import possym
from possym.devices import torch_threads
from possym.evaluate.lengthgen import LengthGenConfig, measure_length_curve

ROOT = Path(__file__).resolve().parents[1]


def curve_lever(run: possym.Run, cfg: LengthGenConfig) -> None:
    model, task = run.model(step="best"), run.config.task
    t0 = time.perf_counter()
    fp32 = measure_length_curve(model, task, cfg)
    t_fp32 = time.perf_counter() - t0
    t0 = time.perf_counter()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        bf16 = measure_length_curve(model, task, cfg)
    t_bf16 = time.perf_counter() - t0
    pooled = [(a["extra"], a["accuracy"], b["accuracy"]) for a, b in zip(fp32, bf16, strict=True) if a["n_hops"] == 0]
    k, before, after = max(pooled, key=lambda p: abs(p[1] - p[2]))
    moved = sum(a["correct"] != b["correct"] for a, b in zip(fp32, bf16, strict=True) if a["n_hops"] > 0)
    print(f"length curve ({task.name}, {len(cfg.grid)} K up to {cfg.grid[-1]}, n={cfg.n}): fp32 {t_fp32:.1f} s, "
          f"bf16 autocast {t_bf16:.1f} s, fp32/bf16 {t_fp32 / t_bf16:.2f}x; largest pooled change "
          f"{abs(after - before):.3f} (K={k}: {before:.3f} -> {after:.3f}); per-hop points counting differently: "
          f"{moved} of {sum(a['n_hops'] > 0 for a in fp32)}")


def train_seconds(compiled: bool, steps: int, threads: int, extra: list[str]) -> float:
    with tempfile.TemporaryDirectory() as out, tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": cache, "OMP_NUM_THREADS": str(threads)}
        argv = [sys.executable, "-m", "possym", "train", "--task", "number", "--preset", "quick", "--out",
                f"{out}/run", f"train.steps={steps}", f"train.compile={str(compiled).lower()}",
                "training.monitor=false", "training.progress=false", f"train.threads={threads}", *extra]
        t0 = time.perf_counter()
        done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True)
        seconds = time.perf_counter() - t0
        if done.returncode != 0:
            raise SystemExit(f"possym train failed:\n{done.stderr[-3000:]}")
        return seconds


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--run", help="a trained run (the demo's runs/demo/runs/TASK-s0) for the length-curve lever")
    p.add_argument("--steps", type=int, default=1000, help="training steps per timed run")
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--tiny", action="store_true", help="a tiny model and curve: checks that the script runs")
    args = p.parse_args()
    tiny = ["model.n_layers=2", "model.d_model=16", "model.d_mlp=32", "task.n_train=2000", "task.n_val=100",
            "task.n_test=100", "train.eval_size=50", "train.eval_every=5", "train.checkpoint_every=5"]
    with torch_threads(args.threads), tempfile.TemporaryDirectory() as scratch:
        if args.tiny:
            args.steps, args.repeats = 10, 1
            run = possym.train_model(possym.load_config("number", "quick", [*tiny, "train.steps=10"]),
                                     out=f"{scratch}/run", monitor=False, progress=False)
            curve_lever(run, LengthGenConfig(grid=(0, 20), n=8, n_prefixes=2))
        elif args.run:
            curve_lever(possym.open_run(args.run), LengthGenConfig())  # the demo's: the paper grid, n=500, 8 prefixes
        times: dict[bool, list[float]] = {False: [], True: []}
        for _ in range(args.repeats):
            for compiled in (False, True):
                times[compiled].append(train_seconds(compiled, args.steps, args.threads, tiny if args.tiny else []))
        eager, compiled = (statistics.median(times[c]) for c in (False, True))
        print(f"training, quick number task, {args.steps} steps, cold Inductor cache: eager {eager:.1f} s, compiled "
              f"{compiled:.1f} s (medians of {args.repeats}), eager/compiled {eager / compiled:.2f}x")


if __name__ == "__main__":
    main()
