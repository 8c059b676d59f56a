"""``possym canonical --out DIR [--quick]``: the metric paper's canonical tasks on frequency-controlled toy heads.

A shell over :func:`possym.experiment.run_canonical_grid`: parses, calls it, prints the verdicts. Rerun
the same command to resume; finished cells are neither retrained nor re-analysed.
"""

from __future__ import annotations

import argparse
import time


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("canonical", help="Index / Retrieval / partial induction on frequency-controlled toy heads")
    p.add_argument("--out", required=True, help="output directory (rerun the same command to resume)")
    p.add_argument("--quick", action="store_true", help="5 conditions, 1 seed, 1,000 steps (about a minute)")
    p.add_argument("--seeds", type=int, nargs="+", help="seeds (default: 0 1 2; quick: 0)")
    p.add_argument("--conditions", nargs="+", help="conditions, e.g. band1 band8 nope two_angle (default: all)")
    p.add_argument("--tasks", nargs="+", help="tasks (default: index retrieval induction)")
    p.add_argument("--steps", type=int, help="training steps per toy head (default: 1500; quick: 1000)")
    p.add_argument("--threads", type=int, default=1, help="torch threads (default: 1)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from possym.canonical.grid import CanonicalGridConfig
    from possym.experiment import run_canonical_grid

    changes: dict = {"threads": args.threads}
    if args.seeds:
        changes["seeds"] = tuple(args.seeds)
    if args.conditions:
        changes["conditions"] = tuple(args.conditions)
    if args.tasks:
        changes["tasks"] = tuple(args.tasks)
    if args.steps:
        changes["steps"] = args.steps
    grid = CanonicalGridConfig.quick(**changes) if args.quick else CanonicalGridConfig(**changes)
    t0 = time.perf_counter()
    result = run_canonical_grid(grid, args.out, progress=True)
    width = max(len(c.claim) for c in result.claims)
    for c in result.claims:
        print(f"{c.verdict:8s} {c.claim:{width}s}  {c.ours}")
    print(f"{len(result.runs)} toy heads, {time.perf_counter() - t0:.0f} s; results in {args.out}")
    return 0
