"""``possym data --task T --out F.jsonl [data.KEY=VALUE ...] [task.KEY=VALUE ...]``: write task instances as JSON
lines; a shell over :mod:`possym.stages.data`. Its settings are :class:`~possym.stages.data.DataConfig`'s
(``data.n=50 data.seed=3 data.split=val data.extra=7``) and the task's own (``task.max_hops=2``); the task and the
output file have no default, so they are its flags."""

from __future__ import annotations

import argparse
import dataclasses
import sys

from possym.cli._args import add_overrides
from possym.stages.data import DataConfig
from possym.tasks import TASKS

DEFAULTS = {f.name: f.default for f in dataclasses.fields(DataConfig)}


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("data", help="generate task instances as JSONL (tokens, answer, n_hops, path)",
                       description=__doc__)
    p.add_argument("--task", required=True, choices=list(TASKS))
    p.add_argument("--out", required=True, help="output .jsonl file, or - for standard output")
    add_overrides(p, "data", DEFAULTS, "data.n=50 data.seed=3 data.split=val task.max_hops=2", DataConfig)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from possym.config import apply_overrides, config_from_dict
    from possym.settings import check_overrides, from_dict, section_values
    from possym.stages.data import jsonl_text, task_instances, write_jsonl

    check_overrides(args.overrides)
    mine = [o for o in args.overrides if o.startswith("data.")]
    cfg = config_from_dict(apply_overrides({"task": {"name": args.task}},
                                           [o for o in args.overrides if o not in mine])).task
    data = from_dict(DataConfig, section_values(mine, "data", [*DEFAULTS]), "data")
    samples = task_instances(cfg, data.n, data.seed, data.split, data.extra)
    if args.out == "-":  # the lines alone on stdout, so that they pipe; the count goes to stderr
        text = jsonl_text(samples, cfg)
        sys.stdout.write(text)
        n = text.count("\n")
        print(f"wrote {n} {args.task} instances to standard output", file=sys.stderr)
        return 0
    n = write_jsonl(samples, cfg, args.out)
    print(f"wrote {n} {args.task} instances to {args.out}")
    return 0
