"""``possym canonical --out DIR [canonical.KEY=VALUE ...]``: the metric paper's canonical tasks on
frequency-controlled toy heads.

A shell over :func:`possym.experiment.run_canonical_grid`: parses, calls it, prints the verdicts. The
grid's settings (:class:`~possym.canonical.grid.CanonicalGridConfig`) are overrides, as in a
reproduction's canonical part: ``canonical.grid=quick`` (5 conditions, 1 seed, 1,000 steps; about a
minute), ``canonical.seeds=[0,1] canonical.conditions=[band1,band8,nope] canonical.steps=500``. Rerun
the same command to resume; finished cells are neither retrained nor re-analysed.
"""

from __future__ import annotations

import argparse
import time


def register(sub: argparse._SubParsersAction) -> None:
    from possym.canonical.grid import CanonicalGridConfig, grid_to_dict
    from possym.cli._args import add_overrides

    p = sub.add_parser("canonical", help="Index / Retrieval / partial induction on frequency-controlled toy heads",
                       description=__doc__)
    p.add_argument("--out", required=True, help="output directory (rerun the same command to resume)")
    defaults = grid_to_dict(CanonicalGridConfig())["grid"]
    quick = {k: v for k, v in grid_to_dict(CanonicalGridConfig.quick())["grid"].items() if v != defaults[k]}
    add_overrides(p, "canonical", {"grid": "default", **defaults}, "canonical.grid=quick canonical.seeds=[0,1]",
                  CanonicalGridConfig)
    p.epilog += f"\n\ncanonical.grid: default, or quick, whose defaults differ in {quick}"
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from possym.canonical.grid import grid_from_dict
    from possym.experiment import run_canonical_grid
    from possym.settings import section_values

    grid = grid_from_dict(section_values(args.overrides, "canonical"))
    t0 = time.perf_counter()
    result = run_canonical_grid(grid, args.out, progress=True)
    width = max(len(c.claim) for c in result.claims)
    for c in result.claims:
        print(f"{c.verdict:8s} {c.claim:{width}s}  {c.ours}")
    print(f"{len(result.runs)} toy heads, {time.perf_counter() - t0:.0f} s; results in {args.out}")
    return 0
