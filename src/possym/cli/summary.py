"""``possym summary``: what a run learned, read from its metrics log."""

from __future__ import annotations

import argparse
import json

from possym.evaluate.accuracy import learning_summary
from possym.runs import RunDir


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("summary", help="per-hop final test accuracy and the step each hop first passed a threshold")
    p.add_argument("run", metavar="RUN")
    p.add_argument("--threshold", type=float, default=0.9)
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    run_dir = RunDir.open(args.run)
    s = learning_summary(run_dir.metrics(), args.threshold)
    if args.json:
        print(json.dumps(s, indent=2))
        return 0
    print(f"{run_dir.path} ({run_dir.config.task.name}, preset {run_dir.config.preset})")
    print(f"{'':12s} {'final test':>10s} {'first step >= ' + str(args.threshold):>20s}")
    for key, step in s["first_step"].items():
        acc = s["final_test"].get(key)
        print(f"{key:12s} {'-' if acc is None else format(acc, '.4f'):>10} {str(step):>20s}")
    print(f"best evaluation accuracy {s['best_accuracy']} at step {s['best_step']}")
    return 0
