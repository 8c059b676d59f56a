"""Where a group's training time goes: the whole loop (data, dropout bits, step, AdamW, evaluations,
checkpoints, states) under cProfile, for a group of S members of the ``paper`` preset and for one run.

``bench_seeds.py`` times the step alone; on an H200 (2026-12-04) a group of 8 stepped at 102
member-steps/s there, but trained at 37-40 member-steps/s with evaluations excluded
(``device_check.sh``). This script says where the difference lies. It prints, per contender, the
wall time and steps/s of the loop (evaluations included: they are part of what a run costs), then the
functions that took the most time themselves and cumulatively. On CUDA the step is asynchronous, so its
kernels' time is charged to the first call that waits for them (the loss's ``tolist``).

    python benchmarks/profile_group.py [--device cuda] [--sizes 1,8] [--steps 150] [--every 50] [--top 25] [--compile]
    python benchmarks/profile_group.py --tiny     # a tiny model on the CPU, seconds: checks that it runs
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import tempfile
import time

import possym
from possym.devices import torch_threads


def contender(size: int, args: argparse.Namespace, root: str) -> tuple[float, pstats.Stats]:
    model = ["model.n_layers=2", "model.d_model=16", "model.d_mlp=32", "task.n_train=4000", "task.n_val=200",
             "task.n_test=200", "train.eval_size=100"] if args.tiny else []
    configs = [possym.load_config("number", "paper", [
        *model, f"train.device={args.device}", f"train.precision={args.precision}", f"train.steps={args.steps}",
        f"train.warmup_steps={max(1, args.steps // 9)}", f"train.eval_every={args.every}",
        f"train.checkpoint_every={args.every}", f"train.state_every={args.every}", f"train.compile={args.compile}",
        *(f"seeds.{k}={s}" for k in ("data", "init", "order", "dropout"))]) for s in range(size)]
    outs = [f"{root}/S{size}/seed{s}" for s in range(size)]
    profile = cProfile.Profile()
    t0 = time.perf_counter()
    profile.enable()
    possym.train_models(configs, outs, monitor=False, progress=False)
    profile.disable()
    return time.perf_counter() - t0, pstats.Stats(profile)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--precision", default="bf16")
    parser.add_argument("--sizes", default="1,8", help="group sizes, comma-separated")
    parser.add_argument("--steps", type=int, default=150)
    parser.add_argument("--every", type=int, default=50, help="evaluation, checkpoint and state interval")
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's own)")
    parser.add_argument("--compile", action="store_true", help="train.compile=true (Inductor; the reproduction's)")
    parser.add_argument("--tiny", action="store_true")
    args = parser.parse_args()
    if args.tiny:
        args.sizes, args.steps, args.every, args.top = "1,2", 20, 10, 5
    with torch_threads(args.threads), tempfile.TemporaryDirectory() as root:
        # Unprofiled warm-up: the lazy imports and the device's first kernels and handles are paid once.
        warm = argparse.Namespace(**{**vars(args), "steps": 2, "every": 1})
        contender(1, warm, f"{root}/warm")
        for size in (int(s) for s in args.sizes.split(",")):
            wall, stats = contender(size, args, root)
            print(f"== S={size} device={args.device} precision={args.precision} compile={args.compile} "
                  f"steps={args.steps} "
                  f"every={args.every}: {wall:.1f} s wall, {args.steps / wall:.2f} steps/s a member, "
                  f"{size * args.steps / wall:.1f} member-steps/s (set-up and evaluations included)")
            for key in ("tottime", "cumulative"):
                text = io.StringIO()
                stats.stream = text
                stats.sort_stats(key).print_stats(args.top)
                print(f"-- by {key}:")
                print("\n".join(line for line in text.getvalue().splitlines()[6:] if line.strip()))


if __name__ == "__main__":
    main()
