"""``possym reproduce``'s pipeline: the whole paper, resumable, into one directory.

Stages (each skipped when done, redone when cut short; see :mod:`possym.pipeline.stages`):

  data               audit both tasks' splits: sizes, balance, overlap, the independent solver  -> tables/data.csv
  train              both tasks, with the live score monitor                       -> DIR/number, DIR/letter
  score:{task}       positional/symbolic scores of every checkpoint, purity, frequency use (Table 1)
  theory             Theorem 3.1 constructions, Remark 3.1, Theorem 3.2 discrepancy      -> DIR/theory
  discrepancy:{task} discrepancy of the trained heads (best checkpoint) against extra length -> DIR/{task}/theory
  lengthgen:{task}   accuracy with K extra tokens, the paper's grid (Fig. 5B), at the best checkpoint (as the
                     authors evaluated) and the final one                          -> DIR/{task}/lengthgen.csv
  canonical          the metric paper's canonical tasks on frequency-controlled toy heads (its grid:
                     quick for the quick preset, the default grid otherwise)        -> DIR/canonical
  report             report.html, claims.csv, figures/, tables/ (rebuilt on every call)

Every per-task stage is one library call with its typed config (:func:`stage_configs`).

Example:
    >>> settings = resolve("quick", ["train.steps=500"])                  # doctest: +SKIP
    >>> reproduce(Path("runs/demo"), settings).rows()[-1]["stage"]         # doctest: +SKIP
    'report'
"""

from __future__ import annotations

import dataclasses
import functools
import json
import sys
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path
from typing import Any

from possym.config import load_config
from possym.errors import PossymError
from possym.evaluate.lengthgen import PAPER_GRID
from possym.pipeline.stages import Stage, StageLog, run_stages
from possym.runs import RunDir, atomic_write_text, csv_text
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
# paper_v1, the recipe of the reproductions committed before issue 16, is analysed as the paper preset is.
ANALYSIS["paper_v1"] = ANALYSIS["paper"]
SKIPPABLE = ("data", "score", "theory", "discrepancy", "lengthgen", "canonical")



def resolve(preset: str, overrides: list[str], jobs: int = 1, skip: tuple[str, ...] = (),
            **analysis_overrides: Any) -> dict[str, Any]:
    """The settings that define a reproduction directory's content (recorded in DIR/stages.json):
    the preset's :data:`ANALYSIS` settings, any of them replaced by ``analysis_overrides`` (None: keep)."""
    if preset not in ANALYSIS:
        raise PossymError(f"reproduce preset {preset!r}; allowed: {sorted(ANALYSIS)}")
    unknown = sorted(set(analysis_overrides) - set(ANALYSIS[preset]))
    if unknown:
        raise PossymError(f"unknown analysis setting(s) {unknown}; known: {sorted(ANALYSIS[preset])}")
    analysis = {k: (analysis_overrides[k] if analysis_overrides.get(k) is not None else v)
                for k, v in ANALYSIS[preset].items()}
    if analysis["theory"] not in ("quick", "full"):
        raise PossymError(f"--theory {analysis['theory']!r}; allowed: quick, full")
    bad = sorted(set(skip) - set(SKIPPABLE))
    if bad:
        raise PossymError(f"unknown stage(s) to skip {bad}; allowed: {', '.join(SKIPPABLE)}")
    overrides = list(overrides) + (["train.threads=1"] if jobs == 2 else [])
    for task in PAPER_TASKS:  # validate now, not after an hour of training
        load_config(task, preset, overrides)
    return {"preset": preset, "overrides": overrides, "skip": list(skip), **analysis}


def _run_config(task: str, settings: dict):
    return load_config(task, settings["preset"], settings["overrides"])


def _open_run(out: Path, task: str, settings: dict) -> RunDir:
    """DIR/{task}: created from the preset, or reopened if it holds the same config."""
    path, cfg = out / task, _run_config(task, settings)
    if not (path / "config.yaml").exists():
        return RunDir.create(path, cfg, argv=sys.argv)
    run = RunDir.open(path)
    if dataclasses.asdict(run.config) != dataclasses.asdict(cfg):
        raise PossymError(
            f"{path} holds a run with another config than --preset {settings['preset']} "
            f"{' '.join(settings['overrides'])}; use a new --out"
        )
    return run


def _train_one(path: str, position: int) -> None:
    """Train (or finish) one run; a top-level function so that a worker process can run it."""
    from possym.stages.train import is_trained, train_run

    run = RunDir.open(path)
    if not is_trained(run):
        train_run(run, monitor=True, position=position)


def stage_configs(settings: dict) -> dict[str, Any]:
    """The typed config of each per-task stage, from the settings recorded in DIR/stages.json."""
    from possym.evaluate.lengthgen import LengthGenConfig
    from possym.stages.score import ScoreConfig
    from possym.stages.theory import DiscrepancyConfig, TheoryConfig

    return {
        "score": ScoreConfig(n_inputs=settings["score_inputs"]),
        # The authors evaluated the best checkpoint (HF load_best_model_at_end); issue 16 §2.
        "discrepancy": DiscrepancyConfig(extras=tuple(int(x) for x in settings["discrepancy_extras"].split(",")),
                                         samples=settings["discrepancy_samples"], step="best"),
        "lengthgen": LengthGenConfig(grid=tuple(int(x) for x in settings["lengthgen_grid"].split(",")),
                                     n=settings["lengthgen_n"], n_prefixes=settings["lengthgen_prefixes"]),
        "theory": TheoryConfig(quick=settings["theory"] == "quick"),
    }


LENGTH_STEPS = ("best", "final")  # the authors' checkpoint, and ours beside it


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

    from possym.stages.lengthgen import length_curve
    from possym.stages.score import score_run
    from possym.stages.theory import trained_discrepancy_run

    skip = set(settings["skip"])
    configs = stage_configs(settings)
    # Each per-task stage is a library call on DIR/{task} with its typed config.
    calls = {
        "score": lambda run: score_run(run, configs["score"]),
        "discrepancy": lambda run: trained_discrepancy_run(run, configs["discrepancy"]),
        "lengthgen": lambda run: [length_curve(run, configs["lengthgen"], step) for step in LENGTH_STEPS],
    }

    def per_task(kind: str) -> list[Stage]:
        def one(task: str) -> int:
            calls[kind](RunDir.open(runs[task]))
            return 0

        return [Stage(f"{kind}:{t}", functools.partial(one, t)) for t in PAPER_TASKS]

    stages = ([] if "data" in skip else [Stage("data", data)]) + [Stage("train", train)]
    if "score" not in skip:
        stages += per_task("score")
    if "theory" not in skip:
        stages.append(Stage("theory", lambda: _theory(out, configs["theory"])))
    for kind in ("discrepancy", "lengthgen"):
        if kind not in skip:
            stages += per_task(kind)
    if "canonical" not in skip:
        stages.append(Stage("canonical", lambda: _canonical(out, settings["preset"] == "quick")))
    stages.append(Stage("report", lambda: _report(out, sweep), always=True))
    return stages


def _theory(out: Path, cfg) -> int:
    from possym.stages.theory import theory_tables

    # Rows off expectation are a finding for the claims table, not a crash: the stage records rc 1.
    return 0 if theory_tables(cfg, out / "theory", log=print).ok else 1


def _canonical(out: Path, quick: bool) -> int:
    from possym.canonical import GridConfig, run_grid

    run_grid(GridConfig.quick() if quick else GridConfig(), out / "canonical")
    return 0


def _report(out: Path, sweep: Path | None) -> int:
    from possym.pipeline.evidence import legacy_runs
    from possym.pipeline.report import build_report

    stages = json.loads((out / "stages.json").read_text())["stages"]
    build_report(out, legacy_runs(out), out / "theory",
                 [{"stage": name, **info} for name, info in stages.items() if name != "report"], sweep=sweep)
    return 0


def reproduce(out: Path, settings: dict[str, Any], jobs: int = 1, sweep: Path | None = None) -> StageLog:
    """Run every stage not yet done into ``out`` (``settings`` from :func:`resolve`); returns the stage log.
    Each stage's printed output goes to ``out/logs/{stage}.log``."""
    if sweep is not None:  # before any stage runs, not at the report
        from possym.pipeline.report import require_sweep_dir

        require_sweep_dir(sweep)
    return run_stages(out, build_stages(out, settings, jobs, sweep), settings, log_dir=out / "logs")
