"""Measures of the trained heads' mechanisms over many inputs: the information flow along the hops (Sec. 3.2, Fig.
3), L1's geometry on its dominant plane (Sec. 3.4, Fig. 4B), and where the number model's length cliff lands.

Example:
    >>> from possym.records import HopFlowRecord
    >>> rows = [HopFlowRecord("letter", 0, 3000, 2, d, layer, 50, 0.9 if layer == 1 else 0.1, 0.5)
    ...         for d in (1, 2) for layer in range(3)]
    >>> best_layer_per_depth(rows)
    {1: 1, 2: 1}
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from possym.records import HopFlowRecord
from possym.report.evidence import Evidence
from possym.report.measures.base import MEASURES, Measured, Reading, SeedReading, measure, not_measured
from possym.report.rules import SeedVerdict

__all__ = ["MEASURES", "best_layer_per_depth"]

# A share of inputs "most" inputs reach: a hop query's attention lands on the next hop at more than half of them.
FLOW_MAJORITY = 0.5
# Keys "aligned" as T_Index's (where all keys are one vector v, alignment 1): the mean of the unit keys at least
# this long, i.e. their angles within a circular sd of sqrt(−2 ln 0.9) ≈ 26° of one direction.
KEYS_ALIGNED = 0.9


def best_layer_per_depth(rows: Sequence[HopFlowRecord]) -> dict[int, int]:
    """Per depth (hops from the answer), the layer whose attention maximum lands on the next hop most often."""
    depths = sorted({r.depth for r in rows})
    return {d: max((r for r in rows if r.depth == d), key=lambda r: r.on_next).layer for d in depths}


@measure("hop_flow")
def hop_flow(ev: Evidence, spec) -> Measured:
    """Per seed, on correctly solved inputs with the most hops (``hop_flow.csv``): at every hop query, layer d − 1
    (d hops from the answer) has its attention maximum on the next position of the hop path at more than half of
    them (``layer_per_hop``; the weaker form, and the claim where the paper names no layer: some layer does)."""
    rows = [r for r in ev.hop_flow if r.task == spec.task]
    if not rows:
        return not_measured("no hop_flow.csv among the tables (possym.scores.flow.hop_flow_records makes it)")
    layer_per_hop = bool(spec.arg("layer_per_hop", False))
    strict, some = [], []
    for seed in sorted({r.seed for r in rows}):
        cells = {(r.depth, r.layer): r for r in rows if r.seed == seed}
        depths = sorted({d for d, _ in cells})
        best = {d: max((c for (dd, _), c in cells.items() if dd == d), key=lambda c: c.on_next) for d in depths}
        at_layer = {d: cells.get((d, d - 1)) for d in depths}
        first = next(iter(cells.values()))
        one = " / ".join(f"{c.on_next:.2f}" if c is not None else "-" for c in at_layer.values())
        most = ", ".join(f"d{d} L{c.layer} {c.on_next:.2f}" for d, c in best.items())
        text = (f"{first.n_inputs} inputs at step {first.step}; depth 1..{len(depths)} at L0..L{len(depths) - 1}: "
                f"{one}; best layer per depth: {most}")
        by_layer = all(c is not None and c.on_next > FLOW_MAJORITY for c in at_layer.values())
        any_layer = all(c.on_next > FLOW_MAJORITY for c in best.values())
        strict.append(SeedReading(seed, text, verdict=SeedVerdict.holds(by_layer, weak=any_layer, text=text)))
        some.append(SeedReading(seed, text, verdict=SeedVerdict.holds(any_layer, text=text)))
    if not layer_per_hop:
        return Measured((Reading("some layer per hop query", tuple(some)),))
    return Measured((Reading("one hop per layer (Fig. 3A's text)", tuple(strict)),
                     Reading("some layer per hop query", tuple(some))))


@measure("plane_geometry")
def plane_geometry(ev: Evidence, spec) -> Measured:
    """Per seed, in layer ``layer`` of the ``task`` model on each input's dominant plane (``plane_geometry.csv``):
    the keys' median alignment is at least :data:`KEYS_ALIGNED` and the plane's partial logit from the last token
    is largest at the offset its number asks for at more than half of the inputs (weaker: the keys aligned only).
    Readings: the head's whole attention; the query's aim as an angle (added after the result: a fast plane's
    argmax can land on an alias 2π/θ positions away)."""
    layer = int(spec.arg("layer", 1))
    rows = [r for r in ev.geometry if r.task == spec.task and r.layer == layer]
    if not rows:
        return not_measured("no plane_geometry.csv among the tables (possym.scores.flow.geometry_records makes it)")
    plane, head, angle = [], [], []
    for seed in sorted({r.seed for r in rows}):
        mine = [r for r in rows if r.seed == seed]
        align = float(np.median([r.key_alignment for r in mine]))
        aim = float(np.mean([r.plane_argmax == r.pointed for r in mine]))
        whole = float(np.mean([r.head_argmax == r.pointed for r in mine]))
        error = float(np.median([r.aim_error / r.theta for r in mine if r.theta > 0] or [math.nan]))
        ids = sorted({r.frequency_id for r in mine}, key=lambda i: -sum(r.frequency_id == i for r in mine))
        text = (f"{len(mine)} inputs at step {mine[0].step}; dominant plane ID {ids[0]} (of {len(ids)} seen); "
                f"median key alignment {align:.2f}; plane's argmax at the asked offset {aim:.2f}, head's {whole:.2f}; "
                f"median aim error {error:.2f} positions")
        aligned = align >= KEYS_ALIGNED
        plane.append(SeedReading(seed, text, verdict=SeedVerdict.holds(aligned and aim > FLOW_MAJORITY, weak=aligned,
                                                                       text=text)))
        head.append(SeedReading(seed, text, verdict=SeedVerdict.holds(aligned and whole > FLOW_MAJORITY, weak=aligned,
                                                                      text=text)))
        angle.append(SeedReading(seed, text, verdict=SeedVerdict.holds(aligned and error <= 0.5, weak=aligned,
                                                                       text=text)))
    readings = [Reading("the dominant plane's logit", tuple(plane)), Reading("the head's whole attention", tuple(head))]
    if not any(math.isnan(r.aim_error) for r in rows):
        readings.append(Reading("the plane's aim as an angle, within half a position (added after the result)",
                                tuple(angle)))
    return Measured(tuple(readings))


# ---- the number model's length cliff as RoPE aliasing (a finding beyond the paper's text) -----------------------

# The rule, chosen after the observation it explains (docs/replication.md): the fast planes are the three with the
# largest mean |margin| in L1 at every seed (IDs 1-3, θ ≥ 0.75 rad); an offset d is one of their joint near-periods
# when their margin-weighted phase agreement there, S(d) = Σ w_k cos(d θ_k) / Σ w_k, is at least cos(π/4).
CLIFF_PLANES = (1, 2, 3)
CLIFF_CONTROL = (4, 5, 6)
CLIFF_OFFSETS = range(1, 101)
CLIFF_AGREEMENT = math.cos(math.pi / 4)


def near_periods(weights: dict[int, float], planes: Sequence[int], n_planes: int = 64,
                 offsets: Sequence[int] = CLIFF_OFFSETS, agreement: float = CLIFF_AGREEMENT) -> list[int]:
    """The offsets −d (d in ``offsets``) at which the RoPE planes ``planes`` (1-based frequency IDs), weighted by
    ``weights``, jointly return near their phase at the right key: S(d) = Σ_k w_k cos(d θ_k) / Σ_k w_k ≥
    ``agreement``, with θ_k = 10000^(−(k − 1)/n_planes). A key d before the right one then looks to those planes
    as the right one does: the aliasing of Theorem 3.2's positional mechanism.

    >>> near_periods({1: 1.0}, [1])[-4:]   # plane 1 alone (θ = 1 rad): within π/4 of a turn every 2π ≈ 6.3 positions
    [-13, -12, -7, -6]
    """
    from possym.report.measures.length import frequency_angle

    w = {k: weights.get(k, 0.0) for k in planes}
    total = sum(w.values())
    if total <= 0:
        return []
    thetas = {k: frequency_angle(k, n_planes) for k in planes}
    return sorted(-d for d in offsets if sum(w[k] * math.cos(d * thetas[k]) for k in planes) / total >= agreement)


def _commonest_wrong(row: Mapping[str, Any]) -> int | None:
    """The commonest offset other than the right key's (0) in a landing summary's ``top_offsets``."""
    for part in str(row.get("top_offsets") or "").split():
        offset = int(part.split(":")[0])
        if offset != 0:
            return offset
    return None


@measure("cliff_aliasing")
def cliff_aliasing(ev: Evidence, spec) -> Measured:
    """Per seed (``cliff_plane_margins.csv``, ``cliff_landing_summary.csv``; layer ``layer``, the first hop query,
    failing inputs whose alias key exists): the commonest wrong landing is one of the joint near-periods of the
    fast planes (:func:`near_periods`, weights the planes' mean |margin| over the missed landings). Beside it, the
    control: the same rule on planes 4-6, and the share of candidate offsets the predicted set covers."""
    layer = int(spec.arg("layer", 1))
    margins = [r for r in ev.cliff_margins if int(r["layer"]) == layer and int(r["query"]) == 0
               and not r["on_alias"] and r["task"] == spec.task]
    landing = [r for r in ev.cliff_landing if int(r["layer"]) == layer and int(r["query"]) == 0
               and not r["correct"] and r["alias_exists"] and int(r["plane"]) == 1 and r["task"] == spec.task]
    if not margins or not landing:
        return not_measured("no cliff_plane_margins.csv / cliff_landing_summary.csv among the tables")
    out, control_hits, coverage = [], 0, []
    for seed in sorted({int(r["seed"]) for r in landing}):
        w = {int(r["plane"]): float(r["mean_abs_margin"]) for r in margins if int(r["seed"]) == seed}
        row = next(r for r in landing if int(r["seed"]) == seed)
        observed = _commonest_wrong(row)
        predicted = near_periods(w, CLIFF_PLANES)
        control = near_periods(w, CLIFF_CONTROL)
        control_hits += observed in control
        coverage.append(len(predicted) / len(CLIFF_OFFSETS))
        text = (f"commonest wrong landing {observed} ({row['top_offsets']}); near-periods of planes 1-3: "
                f"{', '.join(map(str, predicted))}")
        out.append(SeedReading(seed, text, verdict=SeedVerdict.holds(observed in predicted, text=text)))
    extra = (f"control: the same rule on planes 4-6 holds at {control_hits} of {len(out)} seeds; the predicted set "
             f"covers {np.mean(coverage):.0%} of the offsets 1..{len(CLIFF_OFFSETS)} (a random landing's chance)")
    return Measured((Reading("planes 1-3, agreement ≥ cos(π/4) (chosen after the observation)", tuple(out)),),
                    extra=extra, step="best checkpoint")
