"""Whole training, grouped against one by one: the paper reproduction's training on a prefix of its steps.

``bench_seeds.py`` times the step alone. This times what the reproduction's ``train`` stage does, with
its evaluations (2,400 validation rows every 50 steps), checkpoints and resumable state: for each task,
the seeds as one group (:func:`possym.train_models`, as the executor hands a task's seeds to one
worker) and the same seeds one after another (``group=False``), each for ``--steps`` steps of the
``paper`` preset (bf16 and compiled, one thread, no live monitor, as the committed reproduction
trained). The two tasks run side by side in two processes, one per core, as the reproduction's two
workers do; each process times its group and its singles in the order ``--order`` gives, into fresh
temporary directories, so compiling and data generation are inside every timing.

Prints each task's seconds for the group and for the singles, the ratio singles / group, and the
extrapolation to the preset's 6,750 steps.

    python benchmarks/bench_group_training.py [--steps 300] [--seeds 0,1,2] [--precision bf16]
    python benchmarks/bench_group_training.py --tiny     # the quick preset, eager, 40 steps: checks that it runs
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PAPER_STEPS = 6750


def one_task(task: str, preset: str, steps: int, seeds: list[int], precision: str, order: str,
             compiled: bool) -> dict:
    """Time the group and the singles of one task in this process (the child's side)."""
    import possym

    base = [f"train.steps={steps}", f"train.compile={str(compiled).lower()}", "train.threads=1",
            f"train.precision={precision}"]
    cfgs = [possym.load_config(task, preset, [*base, *(f"seeds.{k}={s}" for k in ("data", "init", "order",
                                                                              "dropout"))]) for s in seeds]
    out: dict[str, float] = {}
    for kind in order.split(","):
        with tempfile.TemporaryDirectory(prefix=f"bench_group_{task}_{kind}_") as tmp:
            outs = [Path(tmp) / f"{task}-s{s}" for s in seeds]
            t = time.perf_counter()
            possym.train_models(cfgs, outs, monitor=False, progress=False, group=(kind == "group"))
            out[kind] = time.perf_counter() - t
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--seeds", default="0,1,2")
    p.add_argument("--precision", default="bf16", choices=("fp32", "bf16"))
    p.add_argument("--order", default="group,singles", help="the order each process times them in")
    p.add_argument("--tiny", action="store_true", help="the quick preset, eager, 40 steps, 2 seeds: a smoke run")
    p.add_argument("--eager", action="store_true", help="the eager step instead of the compiled one")
    p.add_argument("--child", nargs=1, metavar="TASK", help=argparse.SUPPRESS)
    p.add_argument("--preset", default="paper", help=argparse.SUPPRESS)
    args = p.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    if args.child:
        print(json.dumps(one_task(args.child[0], args.preset, args.steps, seeds, args.precision, args.order,
                                  compiled=not args.eager)))
        return
    preset, steps = ("quick", 40) if args.tiny else ("paper", args.steps)
    eager = args.eager or args.tiny
    if args.tiny:
        seeds = seeds[:2]
    cmd = [sys.executable, __file__, "--steps", str(steps), "--seeds", ",".join(map(str, seeds)),
           "--precision", args.precision, "--order", args.order, "--preset", preset,
           *(["--eager"] if eager else []), "--child"]
    t = time.perf_counter()
    procs = {task: subprocess.Popen([*cmd, task], stdout=subprocess.PIPE, text=True) for task in ("number", "letter")}
    results = {}
    for task, proc in procs.items():
        stdout, _ = proc.communicate()
        if proc.returncode:
            sys.exit(f"the {task} process failed (rc {proc.returncode})")
        results[task] = json.loads(stdout.strip().splitlines()[-1])
    wall = time.perf_counter() - t
    print(f"preset={preset} steps={steps} seeds={seeds} precision={args.precision} "
          f"{'eager' if eager else 'compiled'}, one thread a process, "
          f"the two tasks side by side; order {args.order}; wall {wall:.0f} s")
    print(f"{'task':8s} {'group s':>9s} {'singles s':>10s} {'singles/group':>14s}"
          f" {'group s/step':>13s} {'singles s/step':>15s}")
    for task, r in results.items():
        print(f"{task:8s} {r['group']:9.1f} {r['singles']:10.1f} {r['singles'] / r['group']:13.2f}x"
              f" {r['group'] / steps:13.3f} {r['singles'] / steps:15.3f}")
    if not args.tiny:
        g = max(r["group"] for r in results.values()) / steps * PAPER_STEPS / 60
        s = max(r["singles"] for r in results.values()) / steps * PAPER_STEPS / 60
        print(f"extrapolated to {PAPER_STEPS} steps (the slower task; compile and data amortised less): "
              f"group {g:.0f} min, singles {s:.0f} min")


if __name__ == "__main__":
    main()
