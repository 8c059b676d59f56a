"""``possym sweep SPEC.yaml --out DIR [key=value ...]``: a grid of runs on a local pool, Ray or Slurm, then one summary.

A shell over :func:`possym.sweep.run.run_sweep`. Writes into DIR:
  experiment.yaml       the spec as resolved (a rerun with other settings says what differs)
  runs/ID/              each run's directory (train, score, lengthgen, discrepancy outputs), with
                        resume.json, its resume log: each stage's status, settings, seconds, attempts, last error
  logs/ID.log           what its stages printed
  summary.csv, .md      mean ± sd across seeds per (variant, task)       (possym.sweep.aggregate)
  seeds.csv             the per-trial facts behind it (hop order, pure layers, Table 1 IDs)
  figures/              accuracy curves, length curves and per-layer scores with ±sd bands
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from possym.errors import PossymError
from possym.sweep.engines import ENGINES


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("sweep", help="run a grid of trials (train, score, lengthgen, discrepancy) and summarise it")
    p.add_argument("spec", help="sweep spec: an experiment YAML file (docs/sweeps.md), or a packaged one's name "
                   "(src/possym/configs/sweeps/, e.g. quick_positional)")
    p.add_argument("--out", required=True, help="sweep directory (rerun the same command to resume)")
    p.add_argument("--engine", choices=ENGINES, default="local", help="where trials run (default: local)")
    p.add_argument("--workers", type=int, default=os.cpu_count() or 1,
                   help="parallel trials for local/ray (default: the number of cores)")
    p.add_argument("--address", help="ray: an existing cluster's address (default: a new local instance)")
    p.add_argument("--partition", help="slurm: partition")
    p.add_argument("--time-min", type=int, default=240, help="slurm: time limit per trial, minutes")
    p.add_argument("--gpus", type=int, default=0, help="slurm: GPUs per trial")
    p.add_argument("--cluster", choices=["slurm", "local", "debug"], default="slurm",
                   help="slurm: submitit's executor ('local' runs the jobs as local processes)")
    p.add_argument("--array-parallelism", type=int, default=256,
                   help="slurm: array tasks running at once (sbatch --array=0-N%%P; default 256)")
    p.add_argument("--log-dir", help="slurm: the jobs' pickles and logs, on a filesystem the nodes share "
                                     "(default: OUT/submitit)")
    p.add_argument("--slurm-param", action="append", default=[], metavar="KEY=VALUE",
                   help="slurm: another submitit/sbatch setting, repeatable: account=ABC, qos=high, mem_gb=16, "
                        "constraint=a100, exclude=node07")
    p.add_argument("--aggregate-only", action="store_true", help="only redo the summary and figures")
    p.add_argument("overrides", nargs="*", default=[], help="section.key=value, e.g. score.n_inputs=50 train.steps=500")
    p.set_defaults(func=run)


def _key_values(pairs: list[str]) -> dict[str, object]:
    import yaml

    out: dict[str, object] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise PossymError(f"--slurm-param {pair!r}: give KEY=VALUE, e.g. account=abc or mem_gb=16")
        out[key.strip()] = yaml.safe_load(value)  # 16 -> int, a100 -> str
    return out


def run(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from possym.experiment.config import load_experiment
    from possym.sweep.aggregate import write_summary
    from possym.sweep.engines import make_engine
    from possym.sweep.run import run_sweep

    exp = load_experiment(args.spec, overrides=args.overrides)
    out = Path(args.out)
    if args.workers < 1:
        raise PossymError(f"--workers={args.workers} must be >= 1")
    outcome = None
    if not args.aggregate_only:
        engine = make_engine(args.engine, workers=args.workers, out=out, address=args.address,
                             partition=args.partition, time_min=args.time_min, gpus=args.gpus,
                             cluster=args.cluster, cpus=exp.threads or 1,
                             array_parallelism=args.array_parallelism,
                             log_dir=Path(args.log_dir) if args.log_dir else None,
                             slurm_params=_key_values(args.slurm_param))
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
              f"{len(outcome.retried)} retried ({', '.join(outcome.retried) or 'none'}), engine {args.engine}, "
              f"{wall:.0f} s wall-clock")
        for line in outcome.failure_lines():
            print(line)
    paths = write_summary(exp, out)
    print(f"summary -> {', '.join(str(p) for p in paths)}")
    return 1 if outcome is not None and outcome.failed else 0
