"""``possym score RUN``: positional/symbolic scores of every checkpoint, purity, frequency use and figures.

A shell over :func:`possym.stages.score.score_run` (which lists the files it writes into RUN).
``--step best|final|N`` picks the checkpoint of the final-scores tables (Table 1, frequency use, the
per-plane scores, Fig. 3 and 4B, and the table printed here); every checkpoint is still scored.
"""

from __future__ import annotations

import argparse
import time

from tqdm import tqdm

from possym.cli._args import add_device, add_step
from possym.records import GAMMA, GAMMAS
from possym.runs import RunDir
from possym.scores.metric import COSINES, TAU
from possym.stages.score import ScoreConfig, ScoreResult, score_run


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("score", help="positional/symbolic scores of a run's checkpoints, purity and frequency use")
    p.add_argument("run", help="a run directory made by `possym train`")
    p.add_argument("--steps", type=int, nargs="+", help="checkpoint steps to score (default: all)")
    add_step(p, "checkpoint of the final-scores tables: a step, best or final (default final)")
    p.add_argument("--n-inputs", type=int, default=100, help="test inputs per checkpoint (paper: 100)")
    p.add_argument("--seed", type=int, default=0, help="seed choosing the test inputs")
    p.add_argument("--tau", type=float, default=TAU, help="swap temperature (paper: 1e-4)")
    p.add_argument("--block-size", type=int, default=1, help="tokens per swapped block (paper A: 1)")
    p.add_argument("--cosine", choices=COSINES, default="exact",
                   help="exact: the paper's formula (default); torch: the authors' F.cosine_similarity, float32 "
                   "with eps 1e-8 on each norm (docs/choices.md)")
    p.add_argument("--hops", action="store_true", help="also score every hop position as a query")
    p.add_argument("--no-frequency", action="store_true", help="skip frequency use and per-plane scores")
    p.add_argument("--no-figures", action="store_true")
    p.add_argument("--threads", type=int, default=1,
                   help="torch threads (default 1: the engine works on small tensors, and an OpenMP team on a busy "
                   "machine can be 10x slower)")
    p.add_argument("--force", action="store_true", help="re-score steps already in RUN/scores.csv")
    add_device(p, "cpu", "; the engine works in float64")
    p.set_defaults(func=run)


def config(args: argparse.Namespace) -> ScoreConfig:
    return ScoreConfig(n_inputs=args.n_inputs, seed=args.seed, tau=args.tau, block_size=args.block_size,
                       hops=args.hops, frequency=not args.no_frequency, figures=not args.no_figures,
                       table_step=args.step, steps=tuple(args.steps) if args.steps else None, force=args.force,
                       threads=args.threads, cosine=args.cosine, device=args.device)


def run(args: argparse.Namespace) -> int:
    run_dir = RunDir.open(args.run, allow_unfinished=args.allow_unfinished)
    cfg = config(args)
    n_steps = len(cfg.steps or run_dir.checkpoint_steps())
    # Locked here too (score_run takes it again), so that a refusal comes before the progress bar: one line.
    with run_dir.writing():
        print(f"{run_dir.path}: {cfg.n_inputs} inputs, {n_steps} checkpoints")
        t0 = time.perf_counter()
        with tqdm(total=n_steps, desc="score", unit="ckpt", dynamic_ncols=True) as bar:
            result = score_run(run_dir, cfg, progress=lambda _s: bar.update(1))
    print(f"scored {result.n_scored} checkpoints in {time.perf_counter() - t0:.1f}s "
          f"({n_steps - result.n_scored} already scored) -> {run_dir.artifact('scores')}")
    print_summary(result, run_dir.step_label(result.table_step))
    if cfg.figures:
        print(f"figures -> {run_dir.artifact('figures')}/")
    return 0


def print_summary(result: ScoreResult, label: str) -> None:
    from possym.scores.dynamics import purity

    step = result.table_step
    by = {(f.layer, f.head, f.gamma): f for f in result.purity if f.query == "last"}
    ids = {(t.layer, t.head): t for t in result.table1}
    print(f"\ntable {label}; max-accuracy step {result.best_step} (the best checkpoint)")
    print(f"{'layer':>5} {'head':>4} {'s_pos':>6} {'s_sym':>6} {f'pure@{GAMMA}':>10} {f'first@{GAMMAS[0]}':>18} "
          f"{f'first@{GAMMAS[1]}':>18} {'mean ID':>7} {'dom ID':>6}")

    def fmt(f) -> str:  # first passage, and the first step pure as the final kind if that differs
        if f is None or f.step is None:
            return "never"
        text = f"{f.kind[:3]} {f.step}"
        if f.final_kind and f.final_kind != f.kind:
            text += f"/{f.final_kind[:3]} {f.final_kind_step}"
        return text

    for r in result.scores:
        if r.step != step or r.query != "last":
            continue
        key = (r.layer, r.head)
        kind = purity(r.s_pos, r.s_sym, GAMMA) or "-"
        t = ids.get(key)
        mean_id, dom = (f"{t.weighted_id:.1f}", t.dominant_id) if t else ("", "")
        print(f"{r.layer:>5} {r.head:>4} {r.s_pos:6.3f} {r.s_sym:6.3f} {kind:>10} "
              f"{fmt(by.get((*key, GAMMAS[0]))):>18} {fmt(by.get((*key, GAMMAS[1]))):>18} {mean_id:>7} {dom:>6}")
