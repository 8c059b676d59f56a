"""``possym reproduce --preset {quick,paper,paper_v1} --out DIR [section.key=value ...]``: the whole paper,
resumable, into one directory.

A shell over :func:`possym.experiment.reproduce.reproduce`. The stages (data, train, score, theory,
discrepancy, lengthgen, the canonical grid, report) are the packaged experiment's
(``possym/configs/experiments/PRESET.yaml``); ``key=value`` overrides any run setting
(``train.precision=bf16``), stage setting (``lengthgen.n=200``, ``score.n_inputs=50``, ``report.sweep=DIR``:
a `possym sweep` directory in the report) or the experiment's own (``experiment.seeds=[0,1,2]``). Each stage's
printed output goes to DIR/logs/; the screen shows the progress bars.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path


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
    p.add_argument("--skip", type=_skip_list, default=(),
                   help=f"comma-separated stages to leave out, of {', '.join(SKIPPABLE)} (the report shows the rest)")
    p.add_argument("--workers", type=int, default=1,
                   help="runs (or groups of runs) trained and analysed at once, each in its own process with "
                        "experiment.threads threads (default 1: everything in this process)")
    p.add_argument("overrides", nargs="*", default=[], metavar="section.KEY=VALUE",
                   help="e.g. experiment.seeds=[0,1,2] train.precision=bf16 lengthgen.n=200 report.sweep=DIR")
    p.epilog = ("experiment keys: experiment.seeds (the preset's: quick [0], paper [0,1,2]), experiment.tasks, "
                "experiment.retries, experiment.threads; a stage's keys and defaults: `possym score --help` "
                "(and lengthgen, theory, discrepancy, canonical); the run's: `possym train --help`. "
                "OUT/experiment.yaml holds every value a reproduction ran with.")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from possym.errors import PossymError
    from possym.experiment.reproduce import reproduce
    from possym.records import ClaimRecord, read_records

    if args.workers < 1:
        raise PossymError(f"--workers={args.workers} must be >= 1")
    overrides = list(args.overrides)
    engine = None
    if args.workers > 1:
        from possym.sweep.engines import LocalEngine

        engine = LocalEngine(args.workers)
        if not any(o.startswith("experiment.threads=") for o in overrides):
            overrides.append("experiment.threads=1")  # one thread per worker: the workers share the cores
    t0 = time.perf_counter()
    outcome = reproduce(args.preset, args.out, None, overrides, args.skip, engine=engine)
    out: Path = args.out
    if outcome.changed:
        print(f"settings changed since the last call: {', '.join(outcome.changed)} (the stages they feed reran)")
    print(f"\nreproduction in {out} ({time.perf_counter() - t0:.0f} s this call)")
    print(f"  report: {out / 'report.html'}\n  claims: {out / 'claims.csv'}")
    for c in read_records(out / "claims.csv", ClaimRecord):
        at = f" [{c.step}]" if c.step else ""
        print(f"  {c.verdict:<8} {c.claim}{at}: paper {c.paper}; ours {c.ours}")
    for line in outcome.failure_lines():
        print(line)
    return 1 if outcome.failed else 0
