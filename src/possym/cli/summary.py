"""``possym summary``: what a run learned, read from its metrics log."""

from __future__ import annotations

import argparse
import json

from possym.evaluate.curves import curve_gap, learning_summary
from possym.records import SOLVED
from possym.runs import RunDir


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("summary", help="per-hop final test accuracy and the step each hop first passed a threshold")
    p.add_argument("run", metavar="RUN")
    p.add_argument("--threshold", type=float, default=SOLVED,
                   help=f"an accuracy in [0, 1] (default {SOLVED})")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.add_argument(
        "--against", metavar="OTHER", help="a second run: print it beside RUN, and how far apart the curves are"
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    runs = [RunDir.open(args.run)] + ([RunDir.open(args.against)] if args.against else [])
    metrics = [r.metrics_log() for r in runs]
    summaries = [learning_summary(m, args.threshold) | {"status": r.status(), "history": r.history}
                 for r, m in zip(runs, metrics, strict=True)]
    gap = curve_gap(*metrics) if args.against else None
    if args.json:
        out = summaries[0] if not args.against else {"run": summaries[0], "against": summaries[1], "curve_gap": gap}
        print(json.dumps(out, indent=2))
        return 0
    for run_dir, s in zip(runs, summaries, strict=True):
        print(f"{run_dir.path} ({run_dir.config.task.name}, preset {run_dir.config.preset}): {s['status']}")
        for change in s["history"]:
            moved = "; ".join(f"{k} {old} -> {new}" for k, (old, new) in change.get("changed", {}).items())
            print(f"  trained on from step {change.get('step')}: {moved} ({change.get('time')})")
        print(f"{'':12s} {'final test':>10s} {'first step >= ' + str(args.threshold):>20s}")
        for key, step in s["first_step"].items():
            acc = s["final_test"].get(key)
            print(f"{key:12s} {'-' if acc is None else format(acc, '.4f'):>10} {str(step):>20s}")
        print(f"best evaluation accuracy {s['best_accuracy']} at step {s['best_step']}")
    if gap is not None:
        print("curve gap |RUN - OTHER| on the steps both evaluated:")
        for key, g in gap.items():
            print(f"{key:12s} max {g['max']:.4f} (step {g['at_step']}), mean {g['mean']:.4f}, {g['steps']} steps")
    return 0
