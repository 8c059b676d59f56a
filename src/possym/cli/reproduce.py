"""``possym reproduce --preset {quick,paper,paper_v1} --out DIR [--seeds 0,1,2] [key=value ...]``: the whole
paper, resumable, into one directory.

A shell over :func:`possym.experiment.reproduce.reproduce`. The stages (data, train, score, theory,
discrepancy, lengthgen, the canonical grid, report) are the packaged experiment's
(``possym/configs/experiments/PRESET.yaml``); ``key=value`` overrides any run setting
(``train.precision=bf16``) or stage setting (``lengthgen.n=200``, ``score.n_inputs=50``). Each stage's
printed output goes to DIR/logs/; the screen shows the progress bars.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from possym.cli._args import int_list


def _skip_list(text: str) -> tuple[str, ...]:
    from possym.experiment.reproduce import SKIPPABLE

    names = tuple(sorted({s.strip() for s in text.split(",") if s.strip()}))
    unknown = [n for n in names if n not in SKIPPABLE]
    if unknown:
        raise argparse.ArgumentTypeError(
            f"--skip {text!r}: unknown stage(s) {unknown}; allowed: {', '.join(SKIPPABLE)}")
    return names


def register(sub: argparse._SubParsersAction) -> None:
    from possym.experiment.reproduce import SKIPPABLE, reproduction_presets

    p = sub.add_parser("reproduce", help="the whole pipeline for both tasks, resumable, with a report")
    p.add_argument("--preset", required=True, choices=reproduction_presets(),
                   help="the reproduction (its training preset, seeds and stage settings)")
    p.add_argument("--out", required=True, type=Path, help="output directory (rerun with it to resume)")
    p.add_argument("--seeds", type=int_list, help="seeds, e.g. 0,1,2 (default: the preset's; quick 0, paper 0,1,2)")
    p.add_argument("--skip", type=_skip_list, default=(),
                   help=f"comma-separated stages to leave out, of {', '.join(SKIPPABLE)} (the report shows the rest)")
    p.add_argument("--sweep", type=Path, help="a `possym sweep` directory to include in the report")
    p.add_argument("overrides", nargs="*", help="section.key=value, e.g. train.precision=bf16 lengthgen.n=200")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from possym.experiment.reproduce import reproduce
    from possym.records import ClaimRecord, read_records

    overrides = list(args.overrides) + ([f"report.sweep={args.sweep}"] if args.sweep else [])
    t0 = time.perf_counter()
    outcome = reproduce(args.preset, args.out, args.seeds, overrides, args.skip)
    out: Path = args.out
    if outcome.changed:
        print(f"settings changed since the last call: {', '.join(outcome.changed)} (the stages they feed reran)")
    print(f"\nreproduction in {out} ({time.perf_counter() - t0:.0f} s this call)")
    print(f"  report: {out / 'report.html'}\n  claims: {out / 'claims.csv'}")
    for c in read_records(out / "claims.csv", ClaimRecord):
        at = f" [{c.step}]" if c.step else ""
        print(f"  {c.verdict:<8} {c.claim}{at}: paper {c.paper}; ours {c.ours}")
    for rid, error in outcome.failed.items():
        print(f"FAILED {rid}: {error.splitlines()[-1] if error else ''}")
    return 1 if outcome.failed else 0
