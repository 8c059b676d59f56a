"""Summaries of a run's accuracy curves (the paper's Fig. 2A reading).

Example:
    >>> evals = [{"step": 0, "acc_hop1": 0.1}, {"step": 50, "acc_hop1": 0.95}, {"step": 100, "acc_hop1": 0.97}]
    >>> first_step_reaching(evals, "acc_hop1", 0.9)
    50
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
