"""``possym demo``: train both tasks on a preset and print per-hop test accuracy.

Rerunning resumes (or skips) each task's run, so an interrupted demo loses nothing.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from possym.cli.train import format_eval, train_run
from possym.config import TASK_NAMES, load_config
from possym.runs import RunDir


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("demo", help="train both tasks on a preset and report per-hop test accuracy")
    p.add_argument("--preset", default="quick")
    p.add_argument("--out", default="runs/demo", help="parent directory of the two runs")
    p.add_argument("overrides", nargs="*", help="section.key=value applied to both runs")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    results = {}
    for task in TASK_NAMES:
        path = Path(args.out) / task
        t0 = time.perf_counter()
        if (path / "config.yaml").exists():
            run_dir = RunDir.open(path)
        else:
            run_dir = RunDir.create(path, load_config(task, args.preset, args.overrides), argv=sys.argv)
        final = train_run(run_dir)
        results[task] = (final, time.perf_counter() - t0, run_dir.path)
    print(f"\nper-hop test accuracy ({args.preset} preset)")
    for task, (final, seconds, path) in results.items():
        print(f"  {task:7s} {format_eval(final)}   ({seconds / 60:.1f} min, run: {path})")
    return 0
