"""``possym data``: write task instances as JSON lines; a shell over :mod:`possym.stages.data`."""

from __future__ import annotations

import argparse
import sys

from possym.config import apply_overrides, config_from_dict
from possym.stages.data import jsonl_text, task_instances, write_jsonl
from possym.tasks import SPLITS, TASKS


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("data", help="generate task instances as JSONL (tokens, answer, n_hops, path)")
    p.add_argument("--task", required=True, choices=list(TASKS))
    p.add_argument("--split", choices=SPLITS, default=None, help="a split of the paper's 480k dataset")
    p.add_argument("--n", type=int, required=True, help="number of instances to write")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--extra", type=int, default=0, help="extra tokens inserted before the target window")
    p.add_argument("--out", required=True, help="output .jsonl file, or - for standard output")
    p.add_argument("overrides", nargs="*", default=[], help="task.key=value, e.g. task.max_hops=2")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    cfg = config_from_dict(apply_overrides({"task": {"name": args.task}}, args.overrides)).task
    samples = task_instances(cfg, args.n, args.seed, args.split, args.extra)
    if args.out == "-":  # the lines alone on stdout, so that they pipe; the count goes to stderr
        text = jsonl_text(samples, cfg)
        sys.stdout.write(text)
        n = text.count("\n")
        print(f"wrote {n} {args.task} instances to standard output", file=sys.stderr)
        return 0
    n = write_jsonl(samples, cfg, args.out)
    print(f"wrote {n} {args.task} instances to {args.out}")
    return 0
