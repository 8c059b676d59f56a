"""``possym heads --model PATH --prompts SET --out DIR [heads.KEY=VALUE ...]``: positional/symbolic scores of
every head of a local RoPE LM.

A shell over :func:`possym.stages.heads.heads_run` (which lists the files it writes into DIR), with the
settings of :class:`~possym.stages.heads.HeadsConfig` as overrides, the syntax of every possym config:
``possym heads --model M --prompts binding --out DIR heads.n=20 heads.frequency_heads=[[3,0]]``. The model
and the prompts have no default, so they are flags. ``possym heads --replot --out DIR`` redraws the figures
from DIR's files alone (:func:`possym.stages.heads.replot_heads`; ``heads.label`` names the model).
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

from possym.cli._args import add_overrides
from possym.errors import PossymError
from possym.stages.heads import PROMPT_SETS, HeadsConfig

# Settings with a default; `model` and `prompts` have none, so they are the command's required flags.
DEFAULTS = {f.name: f.default for f in dataclasses.fields(HeadsConfig) if f.default is not dataclasses.MISSING}


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("heads", help="positional/symbolic scores of every head of a local Hugging Face RoPE LM",
                       description=__doc__)
    p.add_argument("--model", help="local model directory, .gguf file, packaged model name, or a Hugging Face id "
                                   "(ORG/NAME) already in the local Hugging Face cache; nothing is fetched (required)")
    p.add_argument("--prompts", help=f"one of {', '.join(PROMPT_SETS)}, or a text file (a prompt a line) (required)")
    p.add_argument("--out", required=True, help="output directory")
    p.add_argument("--replot", action="store_true", help="only redraw the figures from DIR's CSV and JSON files")
    add_overrides(p, "heads", {k: list(v) if isinstance(v, tuple) else v for k, v in DEFAULTS.items()},
                  "heads.n=20 heads.n_blocks=8 heads.frequency_heads=[[3,0]] heads.device=cpu", HeadsConfig)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from possym.devices import resolve_device
    from possym.local_models import resolve_local_model
    from possym.settings import from_dict, section_values
    from possym.stages.heads import heads_run, replot_heads

    values = section_values(args.overrides, "heads", [*DEFAULTS])
    if args.replot:
        replot_heads(Path(args.out), values.get("label"))
        print(f"figures redrawn in {args.out}")
        return 0
    for name in ("model", "prompts"):
        if getattr(args, name) is None:
            raise PossymError(f"--{name} is required (only --replot works without it)")
    cfg = from_dict(HeadsConfig, {"model": args.model, "prompts": args.prompts, **values}, "heads")
    resolve_device(cfg.device)  # a device this machine lacks stops the command before any work
    resolve_local_model(cfg.model, cfg.gguf)  # a --model that is not there: one line, before the bar
    with tqdm(total=None, desc="heads", unit="prompt", dynamic_ncols=True) as bar:

        def count(n: int) -> None:  # the prompts made, which a short prompt file makes fewer than heads.n
            bar.total = n
            bar.refresh()

        result = heads_run(cfg, Path(args.out), progress=bar.update, prompts_made=count)
    s = result.summary
    print(f"{len(result.records)} heads on {s['n']} prompts in {s['seconds']} s: median s_pos "
          f"{s['median_s_pos_early']:.2f} (early half) vs {s['median_s_pos_late']:.2f} (late half), "
          f"r = {s['pearson_r']:.2f} -> {result.out}")
    return 0
