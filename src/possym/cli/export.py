"""``possym export RUN --out DIR``: a checkpoint as a plain Hugging Face folder (model + tokenizer);
a shell over :func:`possym.stages.export.export_run`."""

from __future__ import annotations

import argparse
from pathlib import Path

from possym.cli._args import add_step
from possym.runs import RunDir
from possym.stages.export import export_run


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("export", help="write a checkpoint as a transformers GPTJForCausalLM folder")
    p.add_argument("run", metavar="RUN")
    add_step(p)
    p.add_argument("--out", required=True, type=Path, help="new folder for from_pretrained()")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    run_dir = RunDir.open(args.run, allow_unfinished=args.allow_unfinished)
    step = export_run(run_dir, args.out, args.step)
    print(f"exported {run_dir.path} {run_dir.step_label(step)} to {args.out}")
    print("load it with transformers.AutoModelForCausalLM.from_pretrained and AutoTokenizer.from_pretrained")
    return 0
