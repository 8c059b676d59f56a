"""``possym reproduce {quick,paper,paper_v1} --out DIR [section.key=value ...]``: the whole paper, resumable,
into one directory.

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
    from possym.cli._args import engine_help
    from possym.experiment.reproduce import SKIPPABLE, reproduction_presets

    p = sub.add_parser("reproduce", help="the whole pipeline for both tasks, resumable, with a report")
    p.add_argument("experiment", metavar="EXPERIMENT", choices=reproduction_presets(),
                   help=f"the packaged reproduction experiment, one of {', '.join(reproduction_presets())} (its run "
                        "preset, seeds and stage settings: possym/configs/experiments/EXPERIMENT.yaml)")
    p.add_argument("--out", required=True, type=Path, help="output directory (rerun with it to resume)")
    p.add_argument("--skip", type=_skip_list, default=(),
                   help=f"comma-separated stages to leave out, of {', '.join(SKIPPABLE)} (the report shows the rest)")
    p.add_argument("overrides", nargs="*", default=[], metavar="section.KEY=VALUE",
                   help="e.g. experiment.seeds=[0,1,2] train.precision=bf16 lengthgen.n=200 report.sweep=DIR, and "
                        "where the runs run: engine.workers=2 (runs, or groups of runs, at once, each in its own "
                        "process with experiment.threads threads; 1: everything in this process), engine.name=slurm")
    p.epilog = ("experiment keys: experiment.seeds (the experiment's: quick [0], paper [0,1,2]), experiment.tasks, "
                "experiment.retries, experiment.threads; a stage's keys and defaults: `possym score --help` "
                "(and lengthgen, theory, discrepancy, canonical); the run's: `possym train --help`. "
                "OUT/experiment.yaml holds every value a reproduction ran with. " + engine_help())
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from possym.experiment.reproduce import reproduce
    from possym.records import ClaimRecord, read_records
    from possym.settings import take_section
    from possym.sweep.engines import EngineConfig, make_engine

    engine_cfg, overrides = take_section(EngineConfig, args.overrides, "engine")
    engine = None
    if engine_cfg.name != "local" or engine_cfg.workers > 1:
        if not any(o.startswith("experiment.threads=") for o in overrides):
            overrides.append("experiment.threads=1")  # one thread per worker: the workers share the cores
        engine = make_engine(engine_cfg, args.out)
    t0 = time.perf_counter()
    outcome = reproduce(args.experiment, args.out, None, overrides, args.skip, engine=engine)
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
