"""``possym heads --model PATH --prompts SET --out DIR``: positional/symbolic scores of every head of a local RoPE LM.

A shell over :func:`possym.stages.heads.heads_run` (which lists the files it writes into DIR);
``possym heads --replot --out DIR`` redraws the figures from DIR's files alone
(:func:`possym.stages.heads.replot_heads`).
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from possym.cli._args import add_device
from possym.errors import PossymError
from possym.scores.metric import TAU
from possym.stages.heads import PROMPT_SETS


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("heads", help="positional/symbolic scores of every head of a local Hugging Face RoPE LM")
    p.add_argument("--model", help="local model directory, .gguf file, or a packaged model name (required)")
    p.add_argument("--gguf", help="GGUF file name inside --model's directory")
    p.add_argument("--prompts", help=f"one of {', '.join(PROMPT_SETS)}, or a text file (a prompt a line) (required)")
    p.add_argument("--n", type=int, default=100, help="number of prompts (a file: its first N lines)")
    p.add_argument("--out", required=True, help="output directory")
    p.add_argument("--pairs", type=int, default=16, help="binding: entity-attribute pairs per prompt")
    p.add_argument("--length", type=int, default=24, help="number1/letter1: target-window length")
    blocks = p.add_mutually_exclusive_group()
    blocks.add_argument("--block-size", type=int, help="tokens per swapped block (default: a binding pair; else 1)")
    blocks.add_argument("--n-blocks", type=int, help="split the swappable span evenly into this many blocks")
    p.add_argument("--tau", type=float, default=TAU, help="swap temperature (paper A: 1e-4)")
    p.add_argument("--seed", type=int, default=0, help="seed of the binding prompts and the 1-hop run")
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--frequency-heads", nargs="*", default=[], metavar="LAYER:HEAD",
                   help="more heads to get per-frequency scores for")
    p.add_argument("--threads", type=int, default=1, help="torch threads")
    add_device(p, "auto")
    p.add_argument("--device-map", default=None,
                   help="'auto': spread a model too big for one device over the GPUs, then the CPU (accelerate)")
    p.add_argument("--label", help="model name in figure titles (default: the --model file or folder name)")
    p.add_argument("--no-figures", action="store_true")
    p.add_argument("--replot", action="store_true", help="only redraw the figures from DIR's CSV and JSON files")
    p.set_defaults(func=run)


def _frequency_heads(specs: list[str]) -> tuple[tuple[int, int], ...]:
    heads = []
    for spec in specs:
        match = re.fullmatch(r"(\d+):(\d+)", spec)
        if not match:
            raise PossymError(f"--frequency-heads {spec!r} is not LAYER:HEAD (two integers, e.g. 3:0)")
        heads.append((int(match[1]), int(match[2])))
    return tuple(heads)


def run(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from possym.local_models import resolve_local_model
    from possym.stages.heads import HeadsConfig, heads_run, replot_heads

    if args.replot:
        replot_heads(Path(args.out), args.label)
        print(f"figures redrawn in {args.out}")
        return 0
    for name in ("model", "prompts"):
        if getattr(args, name) is None:
            raise PossymError(f"--{name} is required (only --replot works without it)")
    cfg = HeadsConfig(model=args.model, prompts=args.prompts, gguf=args.gguf, n=args.n, pairs=args.pairs,
                      length=args.length, block_size=args.block_size, n_blocks=args.n_blocks, tau=args.tau,
                      seed=args.seed, batch_size=args.batch_size,
                      frequency_heads=_frequency_heads(args.frequency_heads), threads=args.threads,
                      device=args.device, device_map=args.device_map, figures=not args.no_figures, label=args.label)
    resolve_local_model(cfg.model, cfg.gguf)  # a --model that is not there: one line, before the bar
    with tqdm(total=cfg.n, desc="heads", unit="prompt", dynamic_ncols=True) as bar:
        result = heads_run(cfg, Path(args.out), progress=bar.update)
    s = result.summary
    print(f"{len(result.records)} heads on {s['n']} prompts in {s['seconds']} s: median s_pos "
          f"{s['median_s_pos_early']:.2f} (early half) vs {s['median_s_pos_late']:.2f} (late half), "
          f"r = {s['pearson_r']:.2f} -> {result.out}")
    return 0
