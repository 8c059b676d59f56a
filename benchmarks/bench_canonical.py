"""The canonical grid's wall-clock: every band x 3 tasks x 3 seeds (108 toy heads) against the 15-minute goal.

Runs the packaged experiment ``canonical`` (``--quick``: ``canonical_quick``) through the executor into a
fresh directory (or --out) and prints the total, the wall-clock spent training (the union of the runs'
training spans, from their metrics logs: the cells train in groups, side by side, so a sum of each cell's
``train_s`` would count a group's time once per member) and the rest (evaluation at 1x/2x/4x, scores,
geometry, the report), per cell and in all. Goal: <= 15 minutes on 2 CPU cores with one torch thread (the
other core free or busy: say which).

    python benchmarks/bench_canonical.py [--quick] [--out DIR] [--threads 1]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from possym.experiment import load_experiment, run_experiment
from possym.runs import RunDir

GOAL_S = 15 * 60


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out", help="output directory (default: a fresh temporary one)")
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    threads = [f"experiment.threads={args.threads}", f"train.threads={args.threads}"]
    exp = load_experiment("canonical_quick" if args.quick else "canonical", overrides=threads)
    out = args.out or tempfile.mkdtemp(prefix="bench_canonical_")
    load = os.getloadavg()[0]
    t0 = time.perf_counter()
    result = run_experiment(exp, out).results["canonical_report"]
    total = time.perf_counter() - t0
    train = training_wall(Path(out) / "runs")
    n = len({(r.task, r.condition, r.seed) for r in result.runs})
    steps = exp.runs()[0].config().train.steps
    print(
        f"grid: {len(exp.tasks)} tasks x {len(exp.variants)} conditions x {len(exp.seeds)} seeds = {n} toy heads, "
        f"{steps} steps each, {args.threads} thread(s); load average before: {load:.2f} on {os.cpu_count()} cores"
    )
    print(f"total {total:.0f} s = {total / 60:.1f} min (goal {GOAL_S / 60:.0f} min: {total / GOAL_S:.2f} of it)")
    print(
        f"training {train:.0f} s ({train / n:.1f} s a head); evaluation, scores and report {total - train:.0f} s "
        f"({(total - train) / n:.1f} s a head)"
    )
    print(f"output: {out}")


def training_wall(runs: Path) -> float:
    """Seconds of wall-clock during which some run trained: the union of each run's span from its first logged
    record to its last (runs of one group share their span)."""
    spans = sorted((times[0], times[-1]) for times in
                   ([m.time for m in RunDir.open(p).metrics_log() if m.time is not None] for p in runs.iterdir())
                   if len(times) > 1)
    total, end = 0.0, float("-inf")
    for start, stop in spans:
        total += max(0.0, stop - max(start, end))
        end = max(end, stop)
    return total


if __name__ == "__main__":
    main()
