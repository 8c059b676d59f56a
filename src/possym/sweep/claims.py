"""The claims table seed by seed for a sweep: each (variant, seed)'s finished runs read as one
reproduction's evidence and checked by the claims table's own rules; the words across seeds are
:mod:`possym.report.seeds`'.

Example:
    >>> from possym.report.seeds import robustness
    >>> robustness(["match", "match"])
    'holds for every seed'
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from possym.experiment.config import RunSpec
from possym.report.claims import Evidence, frequency_claims, head_claims, learning_claims, length_claims
from possym.report.evidence import task_evidence
from possym.report.seeds import claims_markdown, claims_wide, robustness
from possym.runs import RunDir

__all__ = ["claims_by_seed", "claims_markdown", "claims_wide", "robustness"]


def claims_by_seed(finished: list[tuple[RunSpec, Path]]) -> list[dict[str, Any]]:
    """One record per (variant, seed, claim), from trials whose training finished (the caller knows
    which: :func:`possym.sweep.aggregate.trial_facts` has read their final records).

    Trials are grouped by (variant, seed); a group's evidence holds each of its tasks. Claims about
    a task a group lacks come back ``n/a`` from the rules themselves.
    """
    groups: dict[tuple[str, int], dict[str, list[Any]]] = {}
    for t, path in finished:
        groups.setdefault((t.variant, t.seed), {})[t.task] = [task_evidence(RunDir.open(path))]
    rows = []
    for (variant, seed), tasks in sorted(groups.items()):
        ev = Evidence(tasks=tasks)
        for c in learning_claims(ev) + head_claims(ev) + frequency_claims(ev) + length_claims(ev):
            rows.append({"variant": variant, "seed": seed, **c.to_dict()})
    return rows


