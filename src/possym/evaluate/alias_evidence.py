"""The aliasing hypothesis for the number model's cliff, graded by a rule written before the result.

Hypothesis (Sec. 3.6, Fig. 5B): a positional layer dominated by RoPE plane p confuses the right key with the
key a_p tokens before it, a_p·θ_p ≈ 0 mod 2π (:func:`possym.evaluate.landing.alias_distance`; plane 1: 44,
plane 2: 29), and fails once such a key exists. Per (layer ℓ, plane p), from the cliff stage's landing summary
and gated curves: ``share_alias_fail`` / ``share_alias_pass`` (failing / passing inputs whose attention maximum
in ℓ lands on the alias key), ``acc_below`` (K < a_p − 15: no alias key), ``acc_above`` (K ≥ a_p), and both
with plane p gated in ℓ. ``supported`` needs both *landing*: share_alias_fail ≥ :data:`LANDING_SHARE` (0.2) and
≥ :data:`LANDING_RATIO` (3) × share_alias_pass, and *gate*: acc_above_gated − acc_above ≥ :data:`GATE_GAIN`
(0.05, about twice a ~2,000-window point's Wilson half-width; a gate that destroys the layer lowers both sides).
Refuted for a seed when no (ℓ, p) is supported. The stage: docs/reproduce.md, "Stages" (``cliff``).

Example:
    >>> summary = pd.DataFrame({"layer": 1, "plane": 1, "alias": 44, "alias_exists": True, "query": 0,
    ...                         "correct": [False, True], "n": [100, 300], "share_alias": [0.5, 0.05]})
    >>> gated = pd.DataFrame({"layer": [-1, -1, 1, 1], "plane": [0, 0, 1, 1], "extra": [25, 50, 25, 50],
    ...                       "n_hops": 1, "n": 100, "correct": [95, 40, 90, 70]})
    >>> row = alias_evidence(summary, gated).iloc[0]
    >>> float(row.share_alias_fail), float(row.acc_above), float(row.acc_above_gated), bool(row.supported)
    (0.5, 0.4, 0.7, True)"""

from __future__ import annotations

import math

import pandas as pd

from possym.errors import PossymError

__all__ = ["GATE_GAIN", "LANDING_RATIO", "LANDING_SHARE", "WINDOW_REACH", "alias_evidence"]

LANDING_SHARE = 0.2
LANDING_RATIO = 3.0
GATE_GAIN = 0.05
WINDOW_REACH = 15  # the last window position a hop's right key can hold (8 + 8 − 1 at the paper's sizes)


def _weighted(g: pd.DataFrame, column: str) -> float:
    n = g["n"].sum()
    return float((g[column] * g["n"]).sum() / n) if n > 0 else math.nan


def _accuracy(curve: pd.DataFrame, keep: pd.Series) -> float:
    part = curve[keep]
    return float(part["correct"].sum() / part["n"].sum()) if part["n"].sum() > 0 else math.nan


def alias_evidence(landing_summary: pd.DataFrame, gated: pd.DataFrame, window_reach: int = WINDOW_REACH
                   ) -> pd.DataFrame:
    """Per (layer, plane) of the landing summary that the gated curves also cover: the evidence columns
    and the rule's verdicts ``landing_supports``, ``gate_supports``, ``supported`` (module docstring)."""
    need_s = {"layer", "plane", "alias", "alias_exists", "correct", "n", "share_alias"}
    need_g = {"layer", "plane", "extra", "n", "correct"}
    if not need_s <= set(landing_summary.columns) or not need_g <= set(gated.columns):
        raise PossymError(f"alias_evidence needs summary columns {sorted(need_s)} and gated columns {sorted(need_g)}")
    base = gated[(gated["layer"] == -1) & (gated["plane"] == 0)]
    if base.empty:
        raise PossymError("alias_evidence: the gated curves hold no ungated baseline (layer -1, plane 0)")
    rows = []
    for (layer, plane, alias), g in landing_summary.groupby(["layer", "plane", "alias"], sort=True):
        curve = gated[(gated["layer"] == layer) & (gated["plane"] == plane)]
        if curve.empty:
            continue
        exists = g[g["alias_exists"].astype(bool)]
        fail = _weighted(exists[~exists["correct"].astype(bool)], "share_alias")
        ok = _weighted(exists[exists["correct"].astype(bool)], "share_alias")
        below, above = alias - window_reach, alias
        row = {
            "layer": int(layer), "plane": int(plane), "alias": int(alias),
            "n_fail_alias": int(exists[~exists["correct"].astype(bool)]["n"].sum()),
            "share_alias_fail": fail, "share_alias_pass": ok,
            "acc_below": _accuracy(base, base["extra"] < below), "acc_above": _accuracy(base, base["extra"] >= above),
            "acc_below_gated": _accuracy(curve, curve["extra"] < below),
            "acc_above_gated": _accuracy(curve, curve["extra"] >= above),
        }
        pass_share = 0.0 if math.isnan(ok) else ok  # no passing input has an alias key: nothing to compare
        row["landing_supports"] = bool(fail >= LANDING_SHARE and fail >= LANDING_RATIO * pass_share)
        row["gate_supports"] = bool(row["acc_above_gated"] - row["acc_above"] >= GATE_GAIN)
        row["supported"] = row["landing_supports"] and row["gate_supports"]
        rows.append(row)
    return pd.DataFrame(rows)
