"""``possym sweep SPEC.yaml --out DIR [engine.KEY=VALUE ...] [section.KEY=VALUE ...]``: a grid of runs on a local
pool, Ray or Slurm (:class:`~possym.sweep.engines.EngineConfig`: ``engine.name=slurm engine.partition=gpu``), then
one summary.

A shell over :func:`possym.sweep.run.run_sweep`. Writes into DIR:
  experiment.yaml       the spec as resolved (a rerun with other settings says what differs)
  runs/ID/              each run's directory (train, score, lengthgen, discrepancy outputs), with
                        resume.json, its memo: each stage's status, settings, seconds, attempts, last error
  logs/ID.log           what its stages printed
  summary.csv, .md      mean ± sd across seeds per (variant, task)       (possym.sweep.aggregate)
  seeds.csv             the per-trial facts behind it (hop order, pure layers, Table 1 IDs)
  figures/              accuracy curves, length curves and per-layer scores with ±sd bands
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from possym.cli._args import engine_help


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("sweep", help="run a grid of trials (train, score, lengthgen, discrepancy) and summarise it")
    p.add_argument("spec", help="sweep spec: an experiment YAML file (docs/sweeps.md), or a packaged one's name "
                   "(src/possym/configs/sweeps/, e.g. quick_positional)")
    p.add_argument("--out", required=True, help="sweep directory (rerun the same command to resume)")
    p.add_argument("--aggregate-only", action="store_true", help="only redo the summary and figures")
    p.add_argument("overrides", nargs="*", default=[], metavar="section.KEY=VALUE",
                   help="where the runs run, engine.KEY=VALUE (engine.workers=4, engine.name=slurm "
                        "engine.partition=gpu engine.gpus=1 engine.slurm={account: abc}), and the runs' and "
                        "stages' settings (score.n_inputs=50 train.steps=500)")
    p.epilog = engine_help()
    p.set_defaults(func=run)



def run(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from possym.experiment.spec import load_experiment
    from possym.settings import take_section
    from possym.sweep.aggregate import write_summary
    from possym.sweep.engines import EngineConfig, make_engine
    from possym.sweep.run import run_sweep

    engine_cfg, overrides = take_section(EngineConfig, args.overrides, "engine")
    exp = load_experiment(args.spec, overrides=overrides)
    out = Path(args.out)
    outcome = None
    if not args.aggregate_only:
        engine = make_engine(engine_cfg, out, cpus=exp.threads or 1)
        specs = exp.runs()
        bar = tqdm(total=len(specs), desc="runs", unit="run", dynamic_ncols=True)

        def on_unit(unit, state: str) -> None:
            if state == "done":
                bar.update(len(unit.runs))
            else:
                bar.write(f"{unit.id}: {state} (see {out / 'logs'}/ID.log)")

        t0 = time.perf_counter()
        outcome = run_sweep(exp, out, engine, on_unit=on_unit, summary=False)
        bar.update(bar.total - bar.n - len(outcome.failed))
        bar.close()
        wall = time.perf_counter() - t0
        if outcome.changed:
            print(f"settings changed since the last call: {', '.join(outcome.changed)}")
        done = len(specs) - len(outcome.failed)
        print(f"{done}/{len(specs)} runs done, {len(outcome.failed)} failed, "
              f"{len(outcome.retried)} retried ({', '.join(outcome.retried) or 'none'}), engine {engine_cfg.name}, "
              f"{wall:.0f} s wall-clock")
        for line in outcome.failure_lines():
            print(line)
    paths = write_summary(exp, out)
    print(f"summary -> {', '.join(str(p) for p in paths)}")
    return 1 if outcome is not None and outcome.failed else 0
