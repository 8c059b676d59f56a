"""Summaries of a run's accuracy curves (the paper's Fig. 2A reading), from its metrics log.

Example:
    >>> log = MetricsLog.from_json([{"event": "eval", "step": s, "accuracy": a, "acc_hop1": a}
    ...                             for s, a in ((0, 0.1), (50, 0.95), (100, 0.97))])
    >>> learning_summary(log)["first_step"]
    {'acc_hop1': 50, 'accuracy': 50}
    >>> other = MetricsLog.from_json([{"event": "eval", "step": s, "accuracy": a} for s, a in ((0, 0.1), (50, 0.75))])
    >>> curve_gap(log, other)["accuracy"]
    {'max': 0.2, 'mean': 0.1, 'at_step': 50, 'steps': 2}
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping, Sequence
from typing import Any

from possym.errors import PossymError
from possym.records import SOLVED, MetricsLog


def learning_summary(log: MetricsLog | Sequence[Mapping[str, Any]], threshold: float = SOLVED) -> dict[str, Any]:
    """Per-hop first-passage steps (:meth:`~possym.records.MetricsLog.first_step`), the step of maximum
    accuracy, and the final test accuracy, from a run's metrics log (or its lines as JSON objects, as
    :meth:`possym.runs.RunDir.metrics` gives them). ``threshold`` is an accuracy, a number in [0, 1]."""
    ok = isinstance(threshold, numbers.Real) and not isinstance(threshold, bool) and 0 <= threshold <= 1
    if not ok:  # nan fails the comparison too
        raise PossymError(f"threshold={threshold!r} must be an accuracy, a number in [0, 1]")
    log = log if isinstance(log, MetricsLog) else MetricsLog.from_json(log)
    first = log.first_steps(threshold)
    best = log.best_step(r.step for r in log.evals)
    final = log.final
    return {
        "first_step": first,
        "threshold": threshold,
        "best_step": best,
        "best_accuracy": next((r.accuracy for r in log.evals if r.step == best), None),
        "final_test": {} if final is None else {k: a for k, a in final.accuracies().items() if k in first},
        "final_step": None if final is None else final.step,
    }


def curve_gap(a: MetricsLog, b: MetricsLog) -> dict[str, dict[str, Any]]:
    """How far apart two runs' evaluation curves are, per accuracy key, on the steps both evaluated.

    For each key: the largest and the mean |a - b| (rounded to 4 places), the step of the largest,
    and the number of shared steps. Use it to show that a change (precision, kernel) leaves the
    accuracy curves where they were.
    """
    curves = [{r.step: r.accuracies() for r in log.evals} for log in (a, b)]
    shared = sorted(set(curves[0]) & set(curves[1]))
    keys = sorted({k for r in curves[0].values() for k in r})
    out = {}
    for key in keys:
        gaps = [
            (abs(curves[0][s][key] - curves[1][s][key]), s)
            for s in shared
            if key in curves[0][s] and key in curves[1][s]
        ]
        if gaps:
            worst = max(gaps, key=lambda g: (g[0], -g[1]))
            out[key] = {
                "max": round(worst[0], 4),
                "mean": round(sum(g for g, _ in gaps) / len(gaps), 4),
                "at_step": worst[1],
                "steps": len(gaps),
            }
    return out
