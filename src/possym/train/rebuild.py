"""A lost metrics log rebuilt from the run's checkpoints: ``possym train --rebuild-metrics RUN``.

A run's evaluations are a function of its checkpoints: each evaluation during training is the validation
accuracy of the weights at that step (its first ``train.eval_size`` validation rows, at the run's
precision), and the final test is the test accuracy of the last weights. So where ``metrics.jsonl`` is
missing, empty (a crash's classic artefact) or damaged, :func:`rebuild_metrics` evaluates every checkpoint
at an evaluation step again, with the function training used (:func:`possym.train.trainee.evaluate`), and
writes the log back: the same accuracies and losses, bit for bit, on the machine and thread count that
trained it (eager; a ``train.compile`` run's evaluations were compiled and may differ in the last bits).
What a checkpoint cannot give back is left out and named: an evaluation at a step without a checkpoint
(``train.eval_every`` finer than ``train.checkpoint_every``), the wall-clock times and the live score
monitor's rows. Retraining the run from scratch gives those back too (delete ``state.pt``, then
``possym train --resume RUN``).

Example:
    >>> rebuilt = rebuild_metrics(RunDir.open("runs/x"))     # doctest: +SKIP
    >>> rebuilt.steps, rebuilt.missing, rebuilt.final          # doctest: +SKIP
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from possym.devices import resolve_device, torch_threads
from possym.errors import RunError
from possym.records import MetricsRecord
from possym.runs import BEST, METRICS, RunDir, atomic_write_text
from possym.tasks import make_splits
from possym.train.trainee import evaluate, precision_of

__all__ = ["RebuiltMetrics", "rebuild_metrics"]


@dataclass(frozen=True)
class RebuiltMetrics:
    """What :func:`rebuild_metrics` did: the evaluation steps it wrote back, those it could not (no checkpoint),
    whether it wrote the final test back (the run had finished), and where the damaged log it replaced was kept."""

    steps: tuple[int, ...]
    missing: tuple[int, ...]
    final: bool
    kept: Path | None = None


def rebuild_metrics(run: RunDir, device: str = "cpu") -> RebuiltMetrics:
    """Write ``run``'s metrics log back from its checkpoints (module docstring), holding its writer lock, on
    ``device``. Refused where the log reads and holds records (nothing is lost, so nothing is replaced); a
    damaged log is kept beside it as ``metrics.jsonl.damaged``."""
    at = resolve_device(device)
    with run.writing(), torch_threads(run.config.train.threads):
        file = run.path / METRICS
        kept = None
        try:
            held = len(run.metrics_log())
        except RunError:  # missing, empty, torn in the middle or another run's: what is rebuilt
            held = 0
            if file.is_file() and file.stat().st_size:
                kept = file.with_name(f"{METRICS}.damaged")
                os.replace(file, kept)
        if held:
            raise RunError(f"{file} holds {held} records; --rebuild-metrics replaces only a missing, empty or damaged "
                           "log")
        cfg, tc = run.config, run.config.train
        total = cfg.total_steps
        steps = run.checkpoint_steps()
        if not steps:
            raise RunError(f"{run.path} has no checkpoints, so nothing to rebuild its metrics log from")
        grid = [s for s in range(0, steps[-1] + 1) if s % tc.eval_every == 0 or s == total]
        state = run.load_state()
        finished = state is not None and int(state["step"]) >= total and total in steps
        precision = precision_of(run, at, resumed=True)
        splits = make_splits(cfg.task, cfg.seeds.data)
        val = splits["val"].take(np.arange(min(tc.eval_size, len(splits["val"]))))
        lines, done = [], []
        for step in grid:
            if step not in steps:
                continue
            model = run.load_model(step, device=at)
            metrics = evaluate(model, val, precision=precision)
            lines.append(MetricsRecord.from_json({"event": "eval", "step": step, "split": "val", **metrics,
                                                  "identity": run.identity}))
            done.append(step)
        if finished:
            model = run.load_model(total, device=at)
            metrics = evaluate(model, splits["test"], precision=precision)
            lines.append(MetricsRecord.from_json({"event": "final", "step": total, "split": "test", **metrics,
                                                  "precision": precision, "device": str(at),
                                                  "identity": run.identity}))
        atomic_write_text(file, "".join(json.dumps(r.to_json()) + "\n" for r in lines))
        (run.path / BEST).unlink(missing_ok=True)
        if finished:
            run.write_best()
        return RebuiltMetrics(tuple(done), tuple(s for s in grid if s not in steps), finished, kept)
