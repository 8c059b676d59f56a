"""``possym reproduce --preset {quick,paper} --out DIR``: the whole paper, resumable, into one directory.

Stages (each skipped when done, redone when cut short; see :mod:`possym.pipeline.stages`):

  data               audit both tasks' splits: sizes, balance, overlap, the independent solver  -> tables/data.csv
  train              both tasks, with the live score monitor                       -> DIR/number, DIR/letter
  score:{task}       positional/symbolic scores of every checkpoint, purity, frequency use (Table 1)
  theory             Theorem 3.1 constructions, Remark 3.1, Theorem 3.2 discrepancy      -> DIR/theory
  discrepancy:{task} discrepancy of the trained heads against extra length           -> DIR/{task}/theory
  lengthgen:{task}   accuracy with K extra tokens, the paper's grid (Fig. 5B)        -> DIR/{task}/lengthgen.csv
  report             report.html, claims.csv, figures/, tables/ (rebuilt on every call)

Each stage's printed output goes to DIR/logs/{stage}.log; the screen shows one progress display.
``--jobs 2`` trains the two tasks at once, one thread each (on 2 cores this beats one run at a time
when the machine is otherwise idle). Extra ``section.key=value`` overrides apply to both runs.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path

import torch

from possym.config import load_config, preset_names
from possym.evaluate.lengthgen import PAPER_GRID
from possym.pipeline.stages import Stage, run_stages
from possym.runs import RunDir, atomic_write_text, csv_text, read_csv
from possym.tasks import PAPER_TASKS

# Analysis settings per preset. The quick preset keeps every measurement of the paper's protocol but
# uses the smoke-run theory and a shorter discrepancy grid, to finish in minutes.
ANALYSIS = {
    "quick": {
        "theory": "quick",
        "score_inputs": 100,
        "discrepancy_extras": "0,10,20,50,100,200,500,1000",
        "discrepancy_samples": 16,
        "lengthgen_grid": ",".join(map(str, PAPER_GRID)),
        "lengthgen_n": 500,
        "lengthgen_prefixes": 8,
    },
    "paper": {
        "theory": "full",
        "score_inputs": 100,
        "discrepancy_extras": "0,10,20,30,40,50,100,200,500,1000,2000",
        "discrepancy_samples": 32,
        "lengthgen_grid": ",".join(map(str, PAPER_GRID)),
        "lengthgen_n": 500,
        "lengthgen_prefixes": 8,
    },
}
SKIPPABLE = ("data", "score", "theory", "discrepancy", "lengthgen")


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


def resolve(args: argparse.Namespace) -> dict:
    """The settings that define the directory's content (recorded in DIR/stages.json)."""
    analysis = {k: (getattr(args, k) if getattr(args, k) is not None else v) for k, v in ANALYSIS[args.preset].items()}
    if analysis["theory"] not in ("quick", "full"):
        raise ValueError(f"--theory {analysis['theory']!r}; allowed: quick, full")
    overrides = list(args.overrides) + (["train.threads=1"] if args.jobs == 2 else [])
    for task in PAPER_TASKS:  # validate now, not after an hour of training
        load_config(task, args.preset, overrides)
    return {"preset": args.preset, "overrides": overrides, "skip": list(args.skip), **analysis}


def _run_config(task: str, settings: dict):
    return load_config(task, settings["preset"], settings["overrides"])


def _open_run(out: Path, task: str, settings: dict) -> RunDir:
    """DIR/{task}: created from the preset, or reopened if it holds the same config."""
    path, cfg = out / task, _run_config(task, settings)
    if not (path / "config.yaml").exists():
        return RunDir.create(path, cfg, argv=sys.argv)
    run = RunDir.open(path)
    if dataclasses.asdict(run.config) != dataclasses.asdict(cfg):
        raise ValueError(
            f"{path} holds a run with another config than --preset {settings['preset']} "
            f"{' '.join(settings['overrides'])}; use a new --out"
        )
    return run


def _train_one(path: str, position: int) -> None:
    """Train (or finish) one run; a top-level function so that a worker process can run it."""
    from possym.cli.train import train_run

    run = RunDir.open(path)
    if run.config.train.threads:
        torch.set_num_threads(run.config.train.threads)
    if not any(r.get("event") == "final" for r in run.metrics()):
        train_run(run, monitor=True, position=position)


def _cli(argv: list[str]) -> int:
    from possym.cli import main

    rc = main(argv)
    if rc not in (0, None):
        raise RuntimeError(f"`possym {' '.join(argv)}` exited with {rc}; see its log under DIR/logs")
    return 0


def build_stages(out: Path, settings: dict, jobs: int, sweep: Path | None = None) -> list[Stage]:
    runs = {task: out / task for task in PAPER_TASKS}

    def data() -> int:
        from possym.tasks.audit import audit_splits

        rows = []
        for task in PAPER_TASKS:
            cfg = _run_config(task, settings)
            rows += audit_splits(cfg.task, cfg.seeds.data)
        atomic_write_text(out / "tables" / "data.csv", csv_text(rows))
        bad = [r for r in rows if r["solver_agrees"] != r["solver_checked"] or r["overlap_earlier"]]
        if bad:
            raise RuntimeError(f"the data audit failed: {bad}")
        return 0

    def train() -> int:
        for task in PAPER_TASKS:
            _open_run(out, task, settings)
        if jobs == 2:
            with ProcessPoolExecutor(max_workers=2, mp_context=get_context("spawn")) as pool:
                for f in [pool.submit(_train_one, str(runs[t]), i + 1) for i, t in enumerate(PAPER_TASKS)]:
                    f.result()
        else:
            for task in PAPER_TASKS:
                _train_one(str(runs[task]), 1)
        return 0

    skip = set(settings["skip"])
    # Each per-task stage is a subcommand run in-process on DIR/{task}.
    commands = {
        "score": ["score", "--n-inputs", str(settings["score_inputs"])],
        "discrepancy": ["discrepancy", "--extras", settings["discrepancy_extras"],
                        "--samples", str(settings["discrepancy_samples"])],
        "lengthgen": ["lengthgen", "--grid", settings["lengthgen_grid"], "--n", str(settings["lengthgen_n"]),
                      "--n-prefixes", str(settings["lengthgen_prefixes"]), "--no-figures"],
    }  # fmt: skip

    def per_task(kind: str) -> list[Stage]:
        name, *options = commands[kind]
        return [Stage(f"{kind}:{t}", lambda t=t: _cli([name, str(runs[t]), *options])) for t in PAPER_TASKS]

    stages = ([] if "data" in skip else [Stage("data", data)]) + [Stage("train", train)]
    if "score" not in skip:
        stages += per_task("score")
    if "theory" not in skip:
        quick = ["--quick"] if settings["theory"] == "quick" else []
        stages.append(Stage("theory", lambda: _theory(out, quick)))
    for kind in ("discrepancy", "lengthgen"):
        if kind not in skip:
            stages += per_task(kind)
    stages.append(Stage("report", lambda: _report(out, sweep), always=True))
    return stages


def _theory(out: Path, quick: list[str]) -> int:
    from possym.cli import main

    # Exit code 1 means a verification row was off expectation: a finding for the claims table, not a crash.
    rc = main(["theory", "--out", str(out / "theory"), *quick])
    if rc not in (0, 1):
        raise RuntimeError(f"`possym theory` exited with {rc}")
    return rc


def _report(out: Path, sweep: Path | None) -> int:
    from possym.pipeline.report import build_report

    stages = json.loads((out / "stages.json").read_text())["stages"]
    build_report(out, [{"stage": name, **info} for name, info in stages.items() if name != "report"], sweep=sweep)
    return 0


def run(args: argparse.Namespace) -> int:
    settings = resolve(args)
    out: Path = args.out
    t0 = time.perf_counter()
    if args.sweep is not None:  # before any stage runs, not at the report
        from possym.pipeline.report import require_sweep_dir

        require_sweep_dir(args.sweep)
    log = run_stages(out, build_stages(out, settings, args.jobs, args.sweep), settings, log_dir=out / "logs")
    total = sum(r.get("seconds", 0.0) for r in log.rows())
    print(
        f"\nreproduction in {out} ({time.perf_counter() - t0:.0f} s this call; {total / 60:.1f} min of stages in all)"
    )
    print(f"  report: {out / 'report.html'}\n  claims: {out / 'claims.csv'}")
    claims = read_csv(out / "claims.csv")
    for c in claims:
        print(f"  {c['verdict']:<8} {c['claim']}: paper {c['paper']}; ours {c['ours']}")
    return 0
