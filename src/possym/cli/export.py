"""``possym export``: a trained checkpoint as a plain Hugging Face folder (model + tokenizer)."""

from __future__ import annotations

import argparse
import shutil
import tempfile
from pathlib import Path

from possym.model.hf import hf_tokenizer, to_hf
from possym.runs import RunDir
from possym.tasks import PAD, task_vocab


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("export", help="write a checkpoint as a transformers GPTJForCausalLM folder")
    p.add_argument("run", metavar="RUN")
    p.add_argument("--step", type=int, default=None, help="checkpoint step (default: the last)")
    p.add_argument("--out", required=True, help="new folder for from_pretrained()")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    run_dir = RunDir.open(args.run)
    out = Path(args.out)
    if out.exists() and any(out.iterdir()):
        raise ValueError(f"--out {out} exists and is not empty")
    model = run_dir.load_model(args.step)
    vocab = task_vocab(run_dir.config.task)
    # Write into a sibling temp folder and rename it into place, so a crash never leaves half a model.
    tmp = Path(tempfile.mkdtemp(dir=out.parent if out.parent.exists() else None, prefix=f".{out.name}."))
    try:
        to_hf(model).save_pretrained(tmp)
        hf_tokenizer(vocab.tokens, PAD).save_pretrained(tmp)
        if out.exists():
            out.rmdir()
        shutil.move(str(tmp), out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    step = args.step if args.step is not None else run_dir.checkpoint_steps()[-1]
    print(f"exported {run_dir.path} step {step} to {out}")
    print("load it with transformers.AutoModelForCausalLM.from_pretrained and AutoTokenizer.from_pretrained")
    return 0
