"""``possym canonical --out DIR [--quick] [section.KEY=VALUE ...]``: the metric paper's canonical tasks on
frequency-controlled toy heads.

A shell over the executor: loads the packaged experiment ``canonical`` (``--quick``: ``canonical_quick``, 5
conditions, 1 seed, 1,000 steps; about a minute), applies the overrides, runs it into DIR and prints the
verdicts. The overrides are every experiment's: ``experiment.seeds=[0,1]
experiment.variants=[band1,band8,nope] train.steps=500 canonical_cell.n_score=32``. Rerun the same command
to resume; finished cells are neither retrained nor re-analysed.
"""

from __future__ import annotations

import argparse
import time


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("canonical", help="Index / Retrieval / partial induction on frequency-controlled toy heads",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True, help="output directory (rerun the same command to resume)")
    p.add_argument("--quick", action="store_true",
                   help="the quick grid (possym/configs/sweeps/canonical_quick.yaml) instead of the full one")
    p.add_argument("overrides", nargs="*", default=[], metavar="section.KEY=VALUE",
                   help="e.g. experiment.seeds=[0,1] experiment.variants=[band1,nope] train.steps=500 "
                        "canonical_cell.n_score=32 canonical_report.claims_seed=0")
    p.epilog = ("the grid's settings are possym/configs/sweeps/canonical.yaml; the stages' keys and defaults: "
                "canonical_cell (n_eval_per_position, length_factors, n_score, n_geometry, analysis_seed), "
                "canonical_report (claims_seed), train (monitor, progress); the runs' keys: `possym train --help`.")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from possym.experiment import load_experiment, run_experiment

    exp = load_experiment("canonical_quick" if args.quick else "canonical", overrides=list(args.overrides))
    t0 = time.perf_counter()
    outcome = run_experiment(exp, args.out, progress=True)
    for line in outcome.failure_lines():
        print(line)
    result = outcome.results.get("canonical_report")
    if result is None:
        return 1
    width = max(len(c.claim) for c in result.claims)
    for c in result.claims:
        print(f"{c.verdict:8s} {c.claim:{width}s}  {c.ours}")
    print(f"{len(result.runs)} toy heads, {time.perf_counter() - t0:.0f} s; results in {args.out}")
    return 1 if outcome.failed else 0
