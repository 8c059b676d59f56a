"""``possym data``: write task instances as JSON lines."""

from __future__ import annotations

import argparse
import json

import numpy as np

from possym.config import apply_overrides, config_from_dict
from possym.errors import PossymError
from possym.runs import atomic_write_text
from possym.tasks import SPLITS, TASKS, generate, make_splits, task_vocab


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("data", help="generate task instances as JSONL (tokens, answer, n_hops, path)")
    p.add_argument("--task", required=True, choices=list(TASKS))
    p.add_argument("--split", choices=SPLITS, default=None, help="a split of the paper's 480k dataset")
    p.add_argument("--n", type=int, required=True, help="number of instances to write")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--extra", type=int, default=0, help="extra tokens inserted before the target window")
    p.add_argument("--out", required=True, help="output .jsonl file")
    p.add_argument("overrides", nargs="*", help="task.key=value, e.g. task.max_hops=2")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.n < 0:
        raise PossymError(f"--n={args.n} must be >= 0")
    if args.extra < 0:
        raise PossymError(f"--extra={args.extra} must be >= 0")
    cfg = config_from_dict(apply_overrides({"task": {"name": args.task}}, args.overrides)).task
    if args.split is None:
        samples = generate(cfg, args.n, np.random.default_rng(args.seed), extra=args.extra)
    else:
        if args.extra:
            raise PossymError("--extra applies to freshly generated instances; drop --split to use it")
        split = make_splits(cfg, args.seed)[args.split]
        if args.n > len(split):
            raise PossymError(f"--n={args.n} exceeds the {args.split} split's {len(split)} instances")
        samples = split.take(np.arange(args.n))
    lines = [json.dumps(r) for r in samples.records(task_vocab(cfg))]
    atomic_write_text(args.out, "".join(line + "\n" for line in lines))
    print(f"wrote {len(lines)} {args.task} instances to {args.out}")
    return 0
