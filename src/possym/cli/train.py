"""``possym train``: train a model into a run directory, or resume one."""

from __future__ import annotations

import argparse
import sys

import torch

from possym.config import load_config, preset_names
from possym.errors import PossymError
from possym.runs import RunDir
from possym.stages.train import train_run
from possym.tasks import TASKS


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("train", help="train GPT-J on a task (or --resume a run)")
    p.add_argument("--task", choices=list(TASKS))
    p.add_argument("--preset", help=f"a packaged preset ({', '.join(preset_names())})")
    p.add_argument("--out", help="new run directory")
    p.add_argument("--resume", metavar="RUN", help="continue an interrupted run where it stopped")
    p.add_argument("--monitor", action="store_true", help="log positional/symbolic scores at every evaluation")
    p.add_argument("overrides", nargs="*", help="section.key=value, e.g. train.lr=3e-4 model.n_layers=4")
    p.set_defaults(func=run)


def open_or_create(args: argparse.Namespace) -> RunDir:
    if args.resume:
        if args.task or args.preset or args.out or args.overrides:
            raise PossymError("--resume takes only the run directory; its config is fixed in RUN/config.yaml")
        return RunDir.open(args.resume)
    if not args.task or not args.out:
        raise PossymError("give --task and --out for a new run, or --resume RUN")
    cfg = load_config(args.task, args.preset, args.overrides)
    if cfg.train.threads:  # before the run records its environment, so meta.json tells the truth
        torch.set_num_threads(cfg.train.threads)
    return RunDir.create(args.out, cfg, argv=sys.argv)


def format_eval(record: dict) -> str:
    hops = sorted(k for k in record if k.startswith("acc_hop"))
    return " ".join(f"{k[4:]}={record[k]:.3f}" for k in hops) + f" all={record['accuracy']:.3f}"


def run(args: argparse.Namespace) -> int:
    run_dir = open_or_create(args)
    print(f"run directory: {run_dir.path}")
    final = train_run(run_dir, monitor=args.monitor)
    print(f"test accuracy ({run_dir.config.task.name}): {format_eval(final)}")
    return 0
