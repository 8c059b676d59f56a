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

from possym.experiment.spec import RunSpec
from possym.report.claimspec import load_claims
from possym.report.evidence import Evidence, task_evidence
from possym.report.grading import check_claims
from possym.report.seeds import claims_markdown, claims_wide, robustness
from possym.runs import RunDir

__all__ = ["claims_by_seed", "claims_markdown", "claims_wide", "robustness"]

SWEEP_SKIPS = ("hop_flow", "plane_geometry", "cliff_aliasing")  # measures of tables a sweep's trials do not write


def claims_by_seed(finished: list[tuple[RunSpec, Path]]) -> list[dict[str, Any]]:
    """One record per (variant, seed, claim), from trials whose training finished (the caller knows
    which: :func:`possym.sweep.aggregate.trial_facts` has read their final records).

    Trials are grouped by (variant, seed); a group's evidence holds each of its tasks. Claims about
    a task a group lacks come back ``n/a`` from the rules themselves.
    """
    groups: dict[tuple[str, int], dict[str, list[Any]]] = {}
    for t, path in finished:
        groups.setdefault((t.variant, t.seed), {})[t.task] = [task_evidence(RunDir.open(path))]
    # The reproduction's own grading, over one seed: every claim about a trained run (the mechanism tables and the
    # theory are not a sweep trial's).
    specs = [s for s in load_claims() if s.kind == "empirical" and s.measure not in SWEEP_SKIPS]
    rows = []
    for (variant, seed), tasks in sorted(groups.items()):
        for c in check_claims(Evidence(tasks=tasks), specs, power=False):
            rows.append({"variant": variant, "seed": seed, **c.to_dict()})
    return rows


