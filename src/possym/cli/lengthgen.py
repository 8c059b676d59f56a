"""``possym lengthgen RUN``: accuracy with K extra tokens before the target window (paper Fig. 5B).

A shell over :func:`possym.stages.lengthgen.length_curve`, which caches the curve of each checkpoint
in RUN/lengthgen.csv (with its settings in RUN/lengthgen.json); a rerun with the same settings and
step reads it back unless --force. Also draws figures/fig5b_length_generalisation.{png,svg}, ours
beside the paper's digitised curve.
"""

from __future__ import annotations

import argparse

import torch
from tqdm import tqdm

from possym.cli._args import add_device, add_step, int_list
from possym.evaluate.lengthgen import EXTRA_TOKENS, HOP_MIXES, PAPER_GRID, LengthGenConfig
from possym.runs import RunDir
from possym.stages.lengthgen import length_curve


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("lengthgen", help="length generalisation: accuracy with K extra tokens (Fig. 5B)")
    p.add_argument("run", help="a run directory made by `possym train`")
    p.add_argument("--grid", type=int_list, default=PAPER_GRID,
                   help="K values, comma-separated (default: the paper's)")
    p.add_argument("--n", type=int, default=500, help="inputs per (K, hop count) point (default 500)")
    p.add_argument("--n-prefixes", type=int, default=8, help="distinct prefixes per point (default 8)")
    p.add_argument(
        "--mode",
        choices=("cached", "plain"),
        default="cached",
        help="cached: each prefix's KV cache is computed once (default); plain: full forward per input",
    )
    p.add_argument("--token-budget", type=int, default=2**18, help="tokens per batch (bounds memory)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--extra-tokens", choices=EXTRA_TOKENS, default="targets",
                   help="what the K extra tokens are (default targets: the target window's kind; docs/choices.md)")
    p.add_argument("--hop-mix", choices=HOP_MIXES, default="uniform",
                   help="how the pooled row weights the hop counts (default uniform; test: the test split's mix)")
    add_step(p)
    p.add_argument("--threads", type=int, help="torch threads (default: torch's)")
    p.add_argument("--no-figures", action="store_true")
    p.add_argument("--force", action="store_true", help="recompute even if RUN/lengthgen.csv has these settings")
    add_device(p, "auto")
    p.set_defaults(func=run)


def config(args: argparse.Namespace) -> LengthGenConfig:
    return LengthGenConfig(grid=args.grid, n=args.n, n_prefixes=args.n_prefixes, mode=args.mode,
                           token_budget=args.token_budget, seed=args.seed, extra_tokens=args.extra_tokens,
                           hop_mix=args.hop_mix)


def run(args: argparse.Namespace) -> int:
    if args.threads:
        torch.set_num_threads(args.threads)
    cfg = config(args)
    run_dir = RunDir.open(args.run, allow_unfinished=args.allow_unfinished)
    # The figure goes into RUN too, so the lock covers it; taken before the progress bar, a refusal is one line.
    with run_dir.writing():
        step = run_dir.resolve_step(args.step)
        total = cfg.n * len(run_dir.config.task.hops) * len(cfg.grid)
        with tqdm(total=total, desc=f"lengthgen {run_dir.config.task.name}", unit="input", dynamic_ncols=True) as bar:
            points = length_curve(run_dir, cfg, step, force=args.force, progress=bar.update, device=args.device)
        if not args.no_figures:
            from possym.paper import paper_numbers
            from possym.records import LengthRecord, frame
            from possym.report.length_plots import plot_length_curves
            from possym.runs import save_figure

            curve = frame(points, LengthRecord)
            fig = plot_length_curves({run_dir.config.task.name: curve}, paper_numbers()["fig5b_length_generalisation"])
            save_figure(fig, run_dir.artifact("figures") / "fig5b_length_generalisation")
    print(run_dir.step_label(step))
    print(f"{'K':>6} {'accuracy':>9}  95% interval (per prefix)")
    for p in points:
        if p.n_hops == 0:
            print(f"{p.extra:>6} {p.accuracy:>9.3f}  [{p.cluster_low:.3f}, {p.cluster_high:.3f}]  n={p.n}")
    print(f"wrote {run_dir.artifact('lengthgen')}")
    return 0
