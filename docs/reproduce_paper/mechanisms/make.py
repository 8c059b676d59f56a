"""The mechanism tables of docs/reproduce_paper/mechanisms/, from trained runs: how every number seed beyond the
3-seed reproduction was trained, measured and gathered (the cliff, its knock-outs and the sharpening at each
seed), and how the letter seeds' dilution controls were pooled.

Four steps, each a command; every measurement is a library call whose settings stand here, once:

    PYTHONPATH=src OMP_NUM_THREADS=1 python docs/reproduce_paper/mechanisms/make.py train EXP_DIR SEED
    PYTHONPATH=src OMP_NUM_THREADS=1 python docs/reproduce_paper/mechanisms/make.py analyse RUN_DIR
    PYTHONPATH=src OMP_NUM_THREADS=1 python docs/reproduce_paper/mechanisms/make.py collect RUN_DIR...
    PYTHONPATH=src OMP_NUM_THREADS=1 python docs/reproduce_paper/mechanisms/make.py letter-controls RUN_DIR...

- ``train``: the number task on the paper preset in fp32 (``train.precision=auto`` on a CPU without fast bf16),
  seed SEED, in the executor's layout EXP_DIR/runs/number-sSEED (resumable: a rerun continues from the last
  state). Training stops at :data:`STOP`'s rule, the one seeds 0 and 1 were stopped by: the first evaluation at
  or after step 3,700 at which every hop count's accuracy is at least 0.9 (the paper's model is its best
  checkpoint, and the schedule's 10,000 steps would take hours here).
- ``analyse``: the run scored at every checkpoint at the hop queries (the cliff reads its positional layers from
  the purity table), the cliff at the best checkpoint with the 3-seed reproduction's settings, then the
  extra-window knock-outs and the sharpening (layers one at a time and in sets).
- ``collect``: the runs' cliff and dilution tables into ``fp32_retrain/``, one file per table with a seed column
  (the dilution tables one file per seed, as committed).
- ``letter-controls``: the letter runs' ``dilution_controls`` tables pooled into
  ``dilution_controls_{prediction,knockouts}_letter.csv`` (means over every head and hop; the knock-outs at the
  first hop query, where accuracy is recorded).
"""

from __future__ import annotations

import json
import multiprocessing
import sys
import time
from pathlib import Path

import pandas as pd

from possym.experiment import experiment_from_dict, run_experiment, run_stage
from possym.records import SOLVED, MetricsLog
from possym.runs import RunDir, atomic_write_text
from possym.stages.cliff import STAGE as CLIFF_STAGE
from possym.stages.cliff import CliffConfig
from possym.stages.dilution import STAGE as DILUTION_STAGE
from possym.stages.dilution import DilutionConfig
from possym.stages.score import STAGE as SCORE_STAGE

HERE = Path(__file__).parent
STOP = {"min_step": 3700, "every_hop_at_least": SOLVED}
CLIFF = CliffConfig(start=25, stop=70, every=1, n=192, n_prefixes=8, gate_every=2, queries="hops", threads=1)
DILUTION = DilutionConfig(grid=(0, 40, 100), hops=(3, 4), n=32, n_prefixes=4, betas=(1.0, 1.5, 2.0),
                          sharpen=("symbolic", "all", "not_symbolic", "each"), tasks=("number",), threads=1)
SCORE = ["score.hops=true", "score.frequency=false", "score.figures=false", "score.threads=1", "score.n_inputs=100"]
CLIFF_TABLES = ("accuracy_hops", "landing_summary", "evidence", "gated", "plane_margins")


def experiment(seed: int) -> dict:
    """The training experiment of one number seed (train stage only, one thread, the paper preset)."""
    return {"name": f"paper_number_cliff_s{seed}", "preset": "paper", "tasks": ["number"], "seeds": [seed],
            "overrides": ["train.threads=1", "train.precision=auto", "train.compile=true"],
            "stages": {"train": {"monitor": False, "group": False, "memory_budget_mb": 4096.0}},
            "retries": 0, "threads": 1}


def stopped(metrics: Path) -> bool:
    """Whether the run's last evaluation meets :data:`STOP` (read as the metrics log's records)."""
    if not metrics.is_file():
        return False
    evals = MetricsLog.from_json(map(json.loads, metrics.read_text().splitlines())).evals
    last = evals[-1] if evals else None
    return bool(last and last.step >= STOP["min_step"] and all(
        last.hops.get(h, 0.0) >= STOP["every_hop_at_least"] for h in (1, 2, 3, 4)))


def _train(exp_dir: str, seed: int) -> None:
    run_experiment(experiment_from_dict(experiment(seed)), exp_dir, progress=False)


def train(exp_dir: str, seed: int) -> None:
    """Train in a child process and end it (SIGTERM: the trainer saves its state) once :func:`stopped`."""
    metrics = Path(exp_dir) / "runs" / f"number-s{seed}" / "metrics.jsonl"
    child = multiprocessing.get_context("spawn").Process(target=_train, args=(exp_dir, seed))
    child.start()
    while child.is_alive() and not stopped(metrics):
        time.sleep(30)
    if child.is_alive():
        child.terminate()
    child.join()
    sys.stderr.write(f"seed {seed}: stopped by the rule: {stopped(metrics)}\n")


def analyse(run_dir: str) -> None:
    """Score at the hop queries, then the cliff and the dilution stages, each through the run's memo (a stage
    done with these settings is read back)."""
    run = RunDir.open(run_dir, allow_unfinished=True)
    for stage, cfg in ((SCORE_STAGE, SCORE_STAGE.from_overrides(SCORE)), (CLIFF_STAGE, CLIFF),
                       (DILUTION_STAGE, DILUTION)):
        t0 = time.perf_counter()
        done = run_stage(run, stage, cfg)
        sys.stderr.write(f"{run.path}: {stage.name} {'ran' if done.ran else 'read back'} "
                         f"({time.perf_counter() - t0:.0f} s)\n")


def _seed(run: RunDir) -> int:
    return run.config.seeds.init


def collect(run_dirs: list[str]) -> None:
    """Each cliff table of every run into one file with a seed column; each run's dilution tables as is."""
    out = HERE / "fp32_retrain"
    runs = [RunDir.open(p, allow_unfinished=True) for p in run_dirs]
    for name in CLIFF_TABLES:  # each run's table read as its records (possym.runs.ARTIFACTS)
        frames = [r.read_table(f"cliff_{name}").assign(seed=_seed(r), task="number") for r in runs]
        table = pd.concat(frames)
        atomic_write_text(out / f"cliff_{name}.csv", table[["task", "seed", *frames[0].columns[:-2]]].to_csv(
            index=False))
    for r in runs:
        for name in ("dilution_sharpen", "dilution_knockout"):
            if r.artifact(name).is_file():
                table = r.read_table(name)
                table.insert(0, "seed", _seed(r))
                atomic_write_text(out / f"{name}_s{_seed(r)}.csv", table.to_csv(index=False))


def letter_controls(run_dirs: list[str]) -> None:
    """The letter runs' dilution controls, pooled per seed (means over every head and hop)."""
    prediction, knockouts = [], []
    for path in run_dirs:
        run = RunDir.open(path, allow_unfinished=True)
        p = run.read_table("dilution_controls_prediction").query("n_extra > 0")
        g = p.groupby(["checkpoint", "step", "n_extra"]).agg(
            measured=("measured", "mean"), predicted=("predicted", "mean"),
            median_margin=("margin", "median")).reset_index()
        g.insert(0, "seed", _seed(run))
        prediction.append(g)
        k = run.read_table("dilution_controls_knockouts").query("query_hop == 0")
        g = k.groupby(["extra", "chosen", "fraction"]).agg(
            accuracy=("accuracy", "mean"), mass=("mass", "mean"), predicted=("predicted", "mean")).reset_index()
        g.insert(0, "seed", _seed(run))
        knockouts.append(g)
    atomic_write_text(HERE / "dilution_controls_prediction_letter.csv",
                      pd.concat(prediction).round(4).to_csv(index=False))
    atomic_write_text(HERE / "dilution_controls_knockouts_letter.csv",
                      pd.concat(knockouts).round(4).to_csv(index=False))


def main(argv: list[str]) -> None:
    commands = {"train": lambda a: train(a[0], int(a[1])), "analyse": lambda a: analyse(a[0]),
                "collect": collect, "letter-controls": letter_controls}
    if not argv or argv[0] not in commands:
        raise SystemExit(f"usage: make.py {{{','.join(commands)}}} ARGS... (the module docstring says which)")
    commands[argv[0]](argv[1:])


if __name__ == "__main__":
    main(sys.argv[1:])
