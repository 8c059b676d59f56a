"""``possym theory`` (Theorems 3.1-3.2, Remark 3.1 as code) and ``possym discrepancy RUN`` (trained heads).

possym theory --out DIR writes, in DIR:
  verification.csv     T_Index / T_Retrieval run through the model code, against the oracles (hard, softmax)
  violations.csv       the theorem's conditions violated: where the failures start
  beta.csv             the exact smallest softmax beta per n0, Lemma F.1's sufficient beta, the witness checks
  witnesses.csv        Remark 3.1's swap pairs and the heads run on them
  discrepancy.csv      exact discrepancy per (function, definition, domain, n) with Theorem 3.2's bound
  bounds.csv           where each bound holds and fails; counterexamples.csv: a concrete input per failure
  fig5a.csv            Theorem 3.2's bounds for n = 1..100 (the curves of the paper's Fig. 5A)
  theory_fig5a.{png,svg}, theory_discrepancy.{png,svg}, theory_beta.{png,svg}

possym discrepancy RUN writes, in RUN/theory (or --out): discrepancy_heads.csv, discrepancy_accuracy.csv,
discrepancy_summary.csv and discrepancy_heads.{png,svg}.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import torch

from possym.runs import RunDir, atomic_write_text, csv_text, read_csv, save_figure, typed_row


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("theory", help="verify the RoPE constructions, Remark 3.1 and Theorem 3.2's bounds")
    p.add_argument("--out", required=True, type=Path, help="directory for the tables and figures")
    p.add_argument("--n-max", type=int, default=5000, help="largest input length for the discrepancy (5000)")
    p.add_argument("--samples", type=int, default=10_000, help="random / task inputs per setting (10000)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--quick", action="store_true", help="small settings only (a smoke run, about a minute)")
    p.add_argument("--threads", type=int, default=1, help="torch threads (1: the machine is shared)")
    p.set_defaults(func=run_theory)

    q = subparsers.add_parser("discrepancy", help="top-minus-second attention score of a trained run's heads vs length")
    q.add_argument("run", type=Path, help="run directory made by `possym train`")
    q.add_argument("--out", type=Path, default=None, help="output directory (default RUN/theory)")
    q.add_argument("--step", type=int, default=None, help="checkpoint step (default: the last)")
    q.add_argument(
        "--extras",
        type=str,
        default=None,
        help="comma-separated extra-token counts (default 0,10,20,30,40,50,100,200,500,1000,2000,5000)",
    )
    q.add_argument("--samples", type=int, default=32, help="task instances per extra length (32)")
    q.add_argument("--seed", type=int, default=0)
    q.add_argument("--dtype", choices=("float32", "float64"), default="float32")
    q.add_argument("--threads", type=int, default=1)
    q.add_argument("--replot", action="store_true", help="redo the summary and figure from the CSVs in --out")
    q.set_defaults(func=run_discrepancy)


def _write_csv(out: Path, name: str, rows: list[dict]) -> None:
    atomic_write_text(out / name, csv_text(rows))
    print(f"  wrote {out / name} ({len(rows)} rows)")


def _dense_grid(n_max: int) -> np.ndarray:
    """Every n up to 300, every 10th to 1000, every 50th beyond: where the costly reductions are evaluated."""
    grid = np.concatenate([np.arange(2, 301), np.arange(310, 1001, 10), np.arange(1050, n_max + 1, 50)])
    return np.unique(grid[grid <= n_max])


def run_theory(args: argparse.Namespace) -> int:
    from possym.theory import discrepancy as disc
    from possym.theory import plots, tables

    torch.set_num_threads(args.threads)
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(args.seed)
    samples = min(args.samples, 300) if args.quick else args.samples
    n_max = min(args.n_max, 400) if args.quick else args.n_max
    t0 = time.perf_counter()

    print("Theorem 3.1: the constructions against the oracles")
    sets = tables.input_sets(samples, rng, quick=args.quick)
    verification = tables.verification_records(sets)
    _write_csv(out, "verification.csv", verification)
    for r in verification:
        beta = "hard   " if r["beta"] is None else f"β={r['beta']:.4g}"
        print(
            f"    {r['setting']:<20} {beta:<14} {r['inputs']:<6} {r['n_sequences']:>7} inputs, "
            f"{r['n_failed']} failed positions, min decoding gap {r['min_gap']:.3g}"
        )
    violations = tables.violation_records(quick=args.quick)
    _write_csv(out, "violations.csv", violations)
    for r in violations:
        print(f"    {r['setting']:<58} first failing length {r['first_failing_length']}  ({r['expect']})")

    print("Smallest softmax beta per n0")
    beta = tables.beta_records(tables.beta_settings(args.quick), samples, rng)
    _write_csv(out, "beta.csv", beta)
    for r in beta:
        print(
            f"    {r['setting']:<26} n0={r['n0']:<5} β*={r['beta_star']:<12.6g} Lemma F.1 β={r['beta_lemma_f1']:<10.4g}"
            f" failures above: {r['failures_above']} ({r['checked']}), witness fails below: {r['witness_fails_below']}"
        )

    print("Remark 3.1: swap pairs")
    witnesses = tables.witness_records(rng)
    _write_csv(out, "witnesses.csv", witnesses)
    for r in witnesses:
        print(f"    {r['function']:<18} {r['head'][:60]:<60} right on both: {r['right_on_both']}")

    print(f"Theorem 3.2: exact discrepancy for n <= {n_max}")
    ns_all = np.arange(2, n_max + 1)
    rows = disc.discrepancy_records(n_max=n_max, retrieval_ns=_dense_grid(n_max), index_ns=ns_all)
    _write_csv(out, "discrepancy.csv", rows)
    checks = disc.bound_checks(rows)
    _write_csv(out, "bounds.csv", checks)
    for c in checks:
        verdict = "holds" if c["n_failed"] == 0 else f"FAILS at {c['n_failed']} n (first {c['first_fail']})"
        print(
            f"    {c['function']:<9} {c['definition']:<5} {c['domain']:<10} premise n in {c['premise_range']:<9} "
            f"{verdict}; max ratio {c['max_ratio']:.3g}"
        )
    counter = tables.counterexample_records(rows)
    _write_csv(out, "counterexamples.csv", counter)
    fig5a = disc.fig5a_records()
    _write_csv(out, "fig5a.csv", fig5a)

    for stem, fig in (
        ("theory_fig5a", plots.fig5a_figure(fig5a, rows)),
        ("theory_discrepancy", plots.discrepancy_figure(rows)),
        ("theory_beta", plots.beta_figure(beta)),
    ):
        for path in save_figure(fig, out / stem):
            print(f"  wrote {path}")
    bad = [r for r in verification + violations if not r["ok"]]
    print(f"done in {time.perf_counter() - t0:.0f} s; {len(bad)} verification rows off expectation")
    return 1 if bad else 0


def run_discrepancy(args: argparse.Namespace) -> int:
    from possym.theory import plots
    from possym.theory.trained import DEFAULT_EXTRAS, collapse_summary, trained_discrepancy

    torch.set_num_threads(args.threads)
    run = RunDir.open(args.run)
    out = args.out or run.path / "theory"
    out.mkdir(parents=True, exist_ok=True)
    task = run.config.task
    t0 = time.perf_counter()
    if args.replot:
        disc_rows = [typed_row(r) for r in read_csv(out / "discrepancy_heads.csv")]
        acc_rows = [typed_row(r) for r in read_csv(out / "discrepancy_accuracy.csv")]
        step = disc_rows[0]["step"]
    else:
        dtype = torch.float64 if args.dtype == "float64" else torch.float32
        step = args.step if args.step is not None else (run.checkpoint_steps() or [None])[-1]
        model = run.load_model(step=step, dtype=dtype)
        extras = DEFAULT_EXTRAS if args.extras is None else tuple(int(x) for x in args.extras.split(","))
        print(
            f"{run.path}: {task.name} task, step {step}, {model.cfg.n_layers} layers; extras {list(extras)}, "
            f"{args.samples} samples each"
        )
        rng = np.random.default_rng(args.seed)
        disc_rows, acc_rows = trained_discrepancy(model, task, extras, args.samples, rng)
    summary = collapse_summary(disc_rows, acc_rows)
    for rows in (disc_rows, acc_rows, summary):
        for r in rows:
            r.update({"task": task.name, "step": step})
    _write_csv(out, "discrepancy_heads.csv", disc_rows)
    _write_csv(out, "discrepancy_accuracy.csv", acc_rows)
    _write_csv(out, "discrepancy_summary.csv", summary)
    for r in acc_rows:
        print(f"    extra {r['extra']:>5}: accuracy {r['accuracy']:.3f}")
    for r in summary:
        print(
            f"    L{r['layer']:<2} median gap {r['median_at_first_extra']:.3g} -> {r['median_at_last_extra']:.3g}; "
            f"collapses (< 1/2) at extra {r['collapse_extra']}; accuracy breaks at {r['accuracy_break_extra']}; "
            f"spearman {r['spearman']:.2f}"
        )
    fig = plots.trained_figure(disc_rows, acc_rows, task.name, title=f"{run.path.name}: step {step}")
    for path in save_figure(fig, out / "discrepancy_heads"):
        print(f"  wrote {path}")
    print(f"done in {time.perf_counter() - t0:.0f} s")
    return 0
