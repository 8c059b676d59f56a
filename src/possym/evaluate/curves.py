"""Summaries of a run's accuracy curves (the paper's Fig. 2A reading).

Example:
    >>> evals = [{"step": 0, "acc_hop1": 0.1}, {"step": 50, "acc_hop1": 0.95}, {"step": 100, "acc_hop1": 0.97}]
    >>> first_step_reaching(evals, "acc_hop1", 0.9)
    50
    >>> curve_gap(evals, [{"step": 0, "acc_hop1": 0.1}, {"step": 50, "acc_hop1": 0.75}])["acc_hop1"]
    {'max': 0.2, 'mean': 0.1, 'at_step': 50, 'steps': 2}
"""

from __future__ import annotations

from typing import Any


def first_step_reaching(evals: list[dict[str, Any]], key: str, threshold: float) -> int | None:
    """The first evaluated step at which ``key`` >= ``threshold`` (None if never)."""
    for record in sorted(evals, key=lambda r: r["step"]):
        if key in record and record[key] >= threshold:
            return int(record["step"])
    return None


def learning_summary(metrics: list[dict[str, Any]], threshold: float = 0.9) -> dict[str, Any]:
    """Per-hop first-passage steps, the step of maximum accuracy, and the final test accuracy."""
    evals = [r for r in metrics if r.get("event") == "eval"]
    final = next((r for r in reversed(metrics) if r.get("event") == "final"), None)
    keys = sorted({k for r in evals for k in r if k.startswith("acc_hop")}) + ["accuracy"]
    best = max(evals, key=lambda r: (r["accuracy"], -r["step"])) if evals else None
    return {
        "first_step": {k: first_step_reaching(evals, k, threshold) for k in keys},
        "threshold": threshold,
        "best_step": best["step"] if best else None,
        "best_accuracy": best["accuracy"] if best else None,
        "final_test": {k: final[k] for k in keys if final and k in final},
        "final_step": final["step"] if final else None,
    }


def curve_gap(a: list[dict[str, Any]], b: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """How far apart two runs' evaluation curves are, per accuracy key, on the steps both evaluated.

    For each key: the largest and the mean |a - b| (rounded to 4 places), the step of the largest,
    and the number of shared steps. Use it to show that a change (precision, kernel) leaves the
    accuracy curves where they were.
    """
    curves = [{r["step"]: r for r in m if r.get("event", "eval") == "eval"} for m in (a, b)]
    shared = sorted(set(curves[0]) & set(curves[1]))
    keys = sorted({k for r in curves[0].values() for k in r if k.startswith("acc")})
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
