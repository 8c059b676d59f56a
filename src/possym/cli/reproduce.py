"""``possym reproduce --preset {quick,paper,paper_v1} --out DIR``: the whole paper, resumable, into one directory.

The stages (data, train, score, theory, discrepancy, lengthgen, canonical, report; each skipped
when done, redone when cut short) are listed in :mod:`possym.pipeline.reproduce`.

A shell over :func:`possym.pipeline.reproduce.reproduce`. Each stage's printed output goes to
DIR/logs/{stage}.log; the screen shows one progress display.
``--jobs 2`` trains the two tasks at once, one thread each (on 2 cores this beats one run at a time
when the machine is otherwise idle). Extra ``section.key=value`` overrides apply to both runs.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from possym.config import preset_names
from possym.pipeline.reproduce import ANALYSIS, SKIPPABLE, reproduce, resolve
from possym.records import ClaimRecord, read_records


def _skip_list(text: str) -> tuple[str, ...]:
    names = tuple(sorted({s.strip() for s in text.split(",") if s.strip()}))
    unknown = [n for n in names if n not in SKIPPABLE]
    if unknown:
        raise argparse.ArgumentTypeError(
            f"--skip {text!r}: unknown stage(s) {unknown}; allowed: {', '.join(SKIPPABLE)}"
        )
    return names


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("reproduce", help="the whole pipeline for both tasks, resumable, with a report")
    p.add_argument(
        "--preset",
        required=True,
        choices=sorted(ANALYSIS),
        help=f"training preset and its analysis settings (presets: {', '.join(preset_names())})",
    )
    p.add_argument("--out", required=True, type=Path, help="output directory (rerun with it to resume)")
    p.add_argument("--jobs", type=int, choices=(1, 2), default=1, help="train the two tasks at once (1 thread each)")
    p.add_argument(
        "--skip",
        type=_skip_list,
        default=(),
        help=f"comma-separated stages to leave out, of {', '.join(SKIPPABLE)} (the report shows what exists)",
    )
    for key, value in ANALYSIS["quick"].items():
        p.add_argument(
            f"--{key.replace('_', '-')}",
            type=type(value),
            default=None,
            help=f"(default: quick {ANALYSIS['quick'][key]}, paper {ANALYSIS['paper'][key]})",
        )
    p.add_argument("--sweep", type=Path, help="a `possym sweep` directory to include in the report (any call)")
    p.add_argument("overrides", nargs="*", help="section.key=value for both training runs, e.g. train.steps=500")
    p.set_defaults(func=run)



def run(args: argparse.Namespace) -> int:
    analysis = {key: getattr(args, key) for key in ANALYSIS[args.preset]}
    settings = resolve(args.preset, args.overrides, args.jobs, args.skip, **analysis)
    out: Path = args.out
    t0 = time.perf_counter()
    log = reproduce(out, settings, args.jobs, args.sweep)
    total = sum(r.get("seconds", 0.0) for r in log.rows())
    print(
        f"\nreproduction in {out} ({time.perf_counter() - t0:.0f} s this call; {total / 60:.1f} min of stages in all)"
    )
    print(f"  report: {out / 'report.html'}\n  claims: {out / 'claims.csv'}")
    for c in read_records(out / "claims.csv", ClaimRecord):
        at = f" [{c.step}]" if c.step else ""
        print(f"  {c.verdict:<8} {c.claim}{at}: paper {c.paper}; ours {c.ours}")
    return 0
