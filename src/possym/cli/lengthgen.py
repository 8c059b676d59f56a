"""``possym lengthgen RUN``: accuracy with K extra tokens before the target window (paper Fig. 5B).

Writes into RUN:
  lengthgen.csv     extra, n_hops (0 = pooled), seq_len, accuracy, n, correct, ci_low, ci_high (Wilson),
                    n_prefixes, prefix_sd, cluster_low, cluster_high (per-prefix t interval), mode
  lengthgen.json    the settings, checkpoint step, seconds taken and inputs evaluated; a rerun with the
                    same settings is skipped unless --force
  figures/fig5b_length_generalisation.{png,svg}   ours beside the paper's digitised curve
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time

import torch
from tqdm import tqdm

from possym.evaluate.lengthgen import PAPER_GRID, LengthGenConfig, length_curve
from possym.runs import RunDir, atomic_write_text, read_csv


def _grid(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(k) for k in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"--grid {text!r}: give comma-separated integers, e.g. 0,10,100") from None


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("lengthgen", help="length generalisation: accuracy with K extra tokens (Fig. 5B)")
    p.add_argument("run", help="a run directory made by `possym train`")
    p.add_argument("--grid", type=_grid, default=PAPER_GRID, help="K values, comma-separated (default: the paper's)")
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
    p.add_argument("--step", type=int, help="checkpoint step (default: the last)")
    p.add_argument("--threads", type=int, help="torch threads (default: torch's)")
    p.add_argument("--no-figures", action="store_true")
    p.add_argument("--force", action="store_true", help="recompute even if RUN/lengthgen.csv has these settings")
    p.set_defaults(func=run)


def settings(cfg: LengthGenConfig, step: int) -> dict:
    return {**dataclasses.asdict(cfg), "grid": list(cfg.grid), "step": step}


def measure(
    run_dir: RunDir, cfg: LengthGenConfig, step: int | None = None, force: bool = False, position: int = 0
) -> list[dict]:
    """Compute (or reuse) RUN/lengthgen.csv; shared by ``lengthgen`` and ``reproduce``."""
    if step is None:
        steps = run_dir.checkpoint_steps()
        step = steps[-1] if steps else None
    wanted = settings(cfg, step)
    done = run_dir.path / "lengthgen.json"
    if not force and done.exists() and json.loads(done.read_text())["settings"] == wanted:
        return read_csv(run_dir.path / "lengthgen.csv")
    model = run_dir.load_model(step)
    task = run_dir.config.task
    total = cfg.n * len(task.hops) * len(cfg.grid)
    start = time.perf_counter()
    with tqdm(total=total, desc=f"lengthgen {task.name}", unit="input", position=position, dynamic_ncols=True) as bar:
        rows = length_curve(model, task, cfg, on_batch=bar.update)
    seconds = time.perf_counter() - start
    run_dir.write_csv("lengthgen.csv", rows)
    # The settings file goes last: its presence says the CSV beside it is complete.
    atomic_write_text(
        done,
        json.dumps(
            {"settings": wanted, "seconds": seconds, "inputs": total, "threads": torch.get_num_threads()}, indent=2
        ),
    )
    return rows


def run(args: argparse.Namespace) -> int:
    if args.threads:
        torch.set_num_threads(args.threads)
    cfg = LengthGenConfig(
        grid=args.grid,
        n=args.n,
        n_prefixes=args.n_prefixes,
        mode=args.mode,
        token_budget=args.token_budget,
        seed=args.seed,
    )
    run_dir = RunDir.open(args.run)
    rows = measure(run_dir, cfg, args.step, args.force)
    if not args.no_figures:
        from possym.paper import paper_numbers
        from possym.report.length_plots import plot_length_curves
        from possym.runs import save_figure

        fig = plot_length_curves({run_dir.config.task.name: rows}, paper_numbers()["fig5b_length_generalisation"])
        save_figure(fig, run_dir.path / "figures" / "fig5b_length_generalisation")
    print(f"{'K':>6} {'accuracy':>9}  95% interval (per prefix)")
    for r in rows:
        if int(r["n_hops"]) == 0:
            print(
                f"{int(r['extra']):>6} {float(r['accuracy']):>9.3f}  "
                f"[{float(r['cluster_low']):.3f}, {float(r['cluster_high']):.3f}]  n={r['n']}"
            )
    print(f"wrote {run_dir.path / 'lengthgen.csv'}")
    return 0
