"""``possym theory --out OUT [theory.KEY=VALUE ...]`` (Theorems 3.1-3.2, Remark 3.1 as code) and
``possym discrepancy RUN [discrepancy.KEY=VALUE ...]`` (trained heads).

Shells over :func:`possym.experiment.run_stage` with the theory stage
(:func:`possym.stages.theory.theory_tables`) and the discrepancy stage
(:func:`possym.stages.theory.trained_discrepancy_run`), whose docstrings list the files they write; their
settings are the stages' (:class:`~possym.stages.theory.TheoryConfig`,
:class:`~possym.stages.theory.DiscrepancyConfig`), as overrides: ``possym theory --out OUT theory.quick=true``,
``possym discrepancy RUN discrepancy.extras=[0,100,1000] discrepancy.step=best``.
``possym theory`` writes into OUT/theory, as the stage does in an experiment directory, and records it in
OUT's memo (OUT/log/experiment.json): run again, or by a reproduction into the same OUT, with these settings,
its tables are read back (unless --redo). It exits 1 when a verification row is off expectation.
``possym discrepancy RUN`` goes through the run's memo, RUN/resume.json, which every experiment holding the
run shares, and says whether it is done with these settings (then the tables in RUN/theory are read back,
unless --redo); --replot draws the summary and figure again from those tables, and --out DIR copies them into
DIR (:meth:`possym.Run.discrepancy`).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from possym.api import open_run
from possym.cli._args import add_allow_unfinished, add_overrides, add_redo, report_skip
from possym.devices import resolve_device
from possym.experiment import run_stage
from possym.stages.memo import EXPERIMENT, ExperimentMemo
from possym.stages.theory import STAGES, read_theory

THEORY, DISCREPANCY = (next(s for s in STAGES if s.name == name) for name in ("theory", "discrepancy"))


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("theory", help="verify the RoPE constructions, Remark 3.1 and Theorem 3.2's bounds",
                              description=__doc__)
    p.add_argument("--out", required=True, type=Path,
                   help="experiment directory: the tables and figures go into OUT/theory")
    add_redo(p, "theory", "OUT/log/experiment.json")
    add_overrides(p, "theory", THEORY.defaults(), "theory.quick=true (a smoke run, about a minute)", THEORY.config)
    p.set_defaults(func=run_theory)

    q = subparsers.add_parser("discrepancy", help="top-minus-second attention score of a trained run's heads vs length",
                              description=__doc__)
    q.add_argument("run", type=Path, help="run directory made by `possym train`")
    q.add_argument("--out", type=Path, default=None, help="a directory that gets a copy of the tables and figure "
                   "(they are written into RUN/theory)")
    add_allow_unfinished(q)
    q.add_argument("--replot", action="store_true", help="redo the summary and figure from the tables in RUN/theory")
    add_redo(q, "discrepancy")
    add_overrides(q, "discrepancy", DISCREPANCY.defaults(), "discrepancy.extras=[0,100,1000] discrepancy.step=best",
                  DISCREPANCY.config)
    q.set_defaults(func=run_discrepancy)


def run_theory(args: argparse.Namespace) -> int:
    cfg = THEORY.from_overrides(args.overrides)
    done = run_stage(args.out, THEORY, cfg, redo=args.redo)
    result = done.result if done.ran else read_theory(args.out / "theory")
    if not done.ran:
        print(f"theory: done with these settings (the memo {ExperimentMemo(args.out).memo(EXPERIMENT).file}); "
              "read back, not rerun (--redo reruns it)")
    t = result.tables
    print("Theorem 3.1: the constructions against the oracles")
    for r in t["verification"]:
        beta = "hard   " if r["beta"] is None else f"β={r['beta']:.4g}"
        print(f"    {r['setting']:<20} {beta:<14} {r['inputs']:<6} {r['n_sequences']:>7} inputs, "
              f"{r['n_failed']} failed positions, min decoding gap {r['min_gap']:.3g}")
    for r in t["violations"]:
        print(f"    {r['setting']:<58} first failing length {r['first_failing_length']}  ({r['expect']})")
    print("Smallest softmax beta per n0")
    for r in t["beta"]:
        print(f"    {r['setting']:<26} n0={r['n0']:<5} β*={r['beta_star']:<12.6g} "
              f"Lemma F.1 β={r['beta_lemma_f1']:<10.4g} failures above: {r['failures_above']} ({r['checked']}), "
              f"witness fails below: {r['witness_fails_below']}")
    print("Remark 3.1: swap pairs")
    for r in t["witnesses"]:
        print(f"    {r['function']:<18} {r['head'][:60]:<60} right on both: {r['right_on_both']}")
    print("Theorem 3.2: where the bounds hold")
    for c in t["bounds"]:
        verdict = "holds" if c["n_failed"] == 0 else f"FAILS at {c['n_failed']} n (first {c['first_fail']})"
        print(f"    {c['function']:<9} {c['definition']:<5} {c['domain']:<10} premise n in {c['premise_range']:<9} "
              f"{verdict}; max ratio {c['max_ratio']:.3g}")
    print(f"{f'done in {result.seconds:.0f} s' if done.ran else 'read back'}; {len(result.off_expectation)} "
          f"verification rows off expectation; tables in {args.out / 'theory'}")
    return 0 if result.ok else 1


def run_discrepancy(args: argparse.Namespace) -> int:
    cfg = DISCREPANCY.from_overrides(args.overrides)
    resolve_device(DISCREPANCY.where(cfg)[1])  # a device this machine lacks stops the command before any work
    run = open_run(args.run, allow_unfinished=args.allow_unfinished)
    done = run.discrepancy(args.out, replot=args.replot, redo=args.redo, log=print, **DISCREPANCY.settings_of(cfg))
    if not done.ran:
        report_skip(done, run.dir)
    result = done.result
    for a in result.accuracy:
        print(f"    extra {a.extra:>5}: accuracy {a.accuracy:.3f}")
    for s in result.summary:
        print(f"    L{s.layer:<2} median gap {s.median_at_first_extra:.3g} -> {s.median_at_last_extra:.3g}; "
              f"collapses (< 1/2) at extra {s.collapse_extra}; accuracy breaks at {s.accuracy_break_extra}; "
              f"spearman {s.spearman:.2f}")
    print(f"{run.dir.step_label(result.step)}; tables in {result.out}")
    return 0
