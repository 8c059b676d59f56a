"""Learning dynamics of the scores: normalised entropy, head purity and its first-passage tally (paper A §3.1, App. E).

All functions take and return plain records (dicts), as read from ``RUN/scores.csv``: at least
``step, layer, head, query, s_pos, s_sym, entropy``. Values may be strings (from a CSV); they are
converted where used.

- Normalised entropy (App. E): the entropy of the query's attention row, min–max normalised per
  layer across checkpoints, so every layer's curve spans [0, 1] (a constant curve maps to 0).
- Purity (footnote 3, Fig. 7): a head is *pure positional* at a step when s_POS ≥ 1 − γ and
  s_SYM ≤ γ, and *pure symbolic* in the mirror case, with γ ∈ {0.1, 0.05}. For γ < 0.5 the two
  cannot hold at once.
- First-passage tally (Fig. 2C, 7): a head counts from the first step at which it is pure, with the
  kind it had then, even if it later drifts (the paper's number-task L0 does).
- How sure a verdict is: a mean score is an estimate over a sample of inputs, with a bootstrap 95%
  interval (:mod:`possym.scores.spread`). :func:`purity_kinds` gives every verdict a head could get
  for (s_POS, s_SYM) anywhere in the box of its two intervals; a verdict *straddles* γ when the box
  admits more than one. :func:`layer_sets` gives, per kind, the layers that are surely pure and
  those that may be, which the claims table uses so that a claim never flips on sampling noise alone.

Example:
    >>> purity(0.97, 0.02, gamma=0.05), purity(0.97, 0.08, gamma=0.05), purity(0.01, 1.0, gamma=0.1)
    ('positional', '', 'symbolic')
    >>> sorted(purity_kinds(0.93, 0.04, 0.1, pos_interval=(0.88, 0.97), sym_interval=(0.02, 0.06)))
    ['', 'positional']
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import Any

KINDS = ("positional", "symbolic")


def purity(s_pos: float, s_sym: float, gamma: float) -> str:
    """'positional' if s_POS ≥ 1−γ and s_SYM ≤ γ; 'symbolic' if s_SYM ≥ 1−γ and s_POS ≤ γ; else ''."""
    if not 0 < gamma < 0.5:
        raise ValueError(f"gamma={gamma} must lie in (0, 0.5) so that a head cannot be both")
    if s_pos >= 1 - gamma and s_sym <= gamma:
        return "positional"
    if s_sym >= 1 - gamma and s_pos <= gamma:
        return "symbolic"
    return ""


def purity_kinds(
    s_pos: float,
    s_sym: float,
    gamma: float,
    pos_interval: tuple[float, float] | None = None,
    sym_interval: tuple[float, float] | None = None,
) -> frozenset[str]:
    """Every :func:`purity` verdict of a point in the box ``pos_interval`` × ``sym_interval``.

    Without intervals (or with a missing one), the point's own verdict alone. The pure regions are
    corners of the unit square, so the box meets the positional one iff high(s_POS) ≥ 1−γ and
    low(s_SYM) ≤ γ, lies inside it iff low(s_POS) ≥ 1−γ and high(s_SYM) ≤ γ (the mirror for symbolic),
    and is mixed somewhere iff it lies inside neither.
    """
    kind = purity(s_pos, s_sym, gamma)
    if pos_interval is None or sym_interval is None or any(_missing(v) for v in (*pos_interval, *sym_interval)):
        return frozenset({kind})
    (p_lo, p_hi), (s_lo, s_hi) = pos_interval, sym_interval
    kinds = {kind}
    if p_hi >= 1 - gamma and s_lo <= gamma:
        kinds.add("positional")
    if s_hi >= 1 - gamma and p_lo <= gamma:
        kinds.add("symbolic")
    inside_pos = p_lo >= 1 - gamma and s_hi <= gamma
    inside_sym = s_lo >= 1 - gamma and p_hi <= gamma
    if not (inside_pos or inside_sym):
        kinds.add("")
    return frozenset(kinds)


def _missing(v: Any) -> bool:
    return v is None or v == "" or v != v  # None, an empty CSV cell, NaN


def _intervals(r: dict[str, Any]) -> tuple[tuple[float, float] | None, tuple[float, float] | None]:
    """A score record's (s_POS, s_SYM) intervals, or None where it has none (scored before they were recorded)."""
    out = []
    for name in ("s_pos", "s_sym"):
        lo, hi = r.get(f"{name}_low"), r.get(f"{name}_high")
        out.append(None if _missing(lo) or _missing(hi) else (float(lo), float(hi)))
    return out[0], out[1]


def record_kinds(r: dict[str, Any], gamma: float) -> frozenset[str]:
    """:func:`purity_kinds` of one score record, with its intervals when it has them."""
    return purity_kinds(float(r["s_pos"]), float(r["s_sym"]), gamma, *_intervals(r))


def layer_sets(
    records: Iterable[dict[str, Any]], kind: str, gamma: float, *, ever: bool, query: str = "last", head: int = 0
) -> tuple[set[int], set[int]]:
    """(sure, possible): the layers pure ``kind`` beyond sampling noise, and those pure within it.

    ``ever=True``: at some scored step (the paper's Fig. 2C, 7 "become pure"); ``ever=False``: at the
    last scored step (Fig. 6). A layer is *sure* when, at such a step, its whole interval box is pure
    ``kind``; *possible* when the box meets the ``kind`` region. Records without intervals count by
    their point estimate, so then sure = possible. Any set between the two is consistent with the data.

    >>> rows = [dict(step=9, layer=0, head=0, s_pos=0.95, s_sym=0.03, s_pos_low=0.92, s_pos_high=0.97,
    ...              s_sym_low=0.01, s_sym_high=0.05),
    ...         dict(step=9, layer=1, head=0, s_pos=0.92, s_sym=0.05, s_pos_low=0.85, s_pos_high=0.96,
    ...              s_sym_low=0.02, s_sym_high=0.08)]
    >>> layer_sets(rows, "positional", 0.1, ever=False)
    ({0}, {0, 1})
    """
    rows = [r for r in records if str(r.get("query", "last")) == query and int(r["head"]) == head]
    if not ever:
        last = max((int(r["step"]) for r in rows), default=None)
        rows = [r for r in rows if int(r["step"]) == last]
    sure, possible = set(), set()
    for r in rows:
        kinds = record_kinds(r, gamma)
        if kind in kinds:
            possible.add(int(r["layer"]))
            if kinds == {kind}:
                sure.add(int(r["layer"]))
    return sure, possible


def _key(r: dict[str, Any]) -> tuple[int, int, str]:
    return int(r["layer"]), int(r["head"]), str(r.get("query", "last"))


def normalise_entropy(records: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Add ``entropy_norm``: min–max normalised entropy per (layer, head, query) across steps (App. E)."""
    records = [dict(r) for r in records]
    groups: dict[tuple[int, int, str], list[float]] = defaultdict(list)
    for r in records:
        groups[_key(r)].append(float(r["entropy"]))
    bounds = {k: (min(v), max(v)) for k, v in groups.items()}
    for r in records:
        lo, hi = bounds[_key(r)]
        r["entropy_norm"] = (float(r["entropy"]) - lo) / (hi - lo) if hi > lo else 0.0
    return records


def first_pure_steps(
    records: Iterable[dict[str, Any]], gamma: float, query: str = "last"
) -> list[dict[str, Any]]:
    """Per (layer, head): the first step at which the head is pure and its kind then (step None: never).

    Returns records ``{layer, head, query, gamma, kind, step, final_kind, final_kind_step}``:
    ``final_kind`` is the purity at the last scored step and ``final_kind_step`` the first step at
    which the head was pure of that kind (None if it ends impure), so that a head that drifted away,
    or passed through the other kind first, can be told apart. ``final_straddles``: whether the last
    step's interval box admits another verdict than ``final_kind`` (None when the records carry no
    intervals).
    """
    series: dict[tuple[int, int, str], list[tuple[int, float, float, dict[str, Any]]]] = defaultdict(list)
    for r in records:
        if str(r.get("query", "last")) == query:
            series[_key(r)].append((int(r["step"]), float(r["s_pos"]), float(r["s_sym"]), r))
    out = []
    for (layer, head, q), points in sorted(series.items(), key=lambda kv: kv[0]):
        points.sort(key=lambda p: p[0])
        first = next(((s, purity(p, y, gamma)) for s, p, y, _ in points if purity(p, y, gamma)), (None, ""))
        final = purity(points[-1][1], points[-1][2], gamma)
        as_final = next((s for s, p, y, _ in points if final and purity(p, y, gamma) == final), None)
        has_interval = None not in _intervals(points[-1][3])
        straddles = len(record_kinds(points[-1][3], gamma)) > 1 if has_interval else None
        out.append(
            {"layer": layer, "head": head, "query": q, "gamma": gamma, "kind": first[1], "step": first[0],
             "final_kind": final, "final_kind_step": as_final, "final_straddles": straddles}
        )
    return out


def purity_tally(first: Iterable[dict[str, Any]], steps: Iterable[int]) -> list[dict[str, Any]]:
    """The cumulative count of heads that have become pure, per kind, at each of ``steps`` (Fig. 2C, 7)."""
    first = [f for f in first if f["step"] is not None]
    return [
        {"step": s, **{k: sum(1 for f in first if f["kind"] == k and f["step"] <= s) for k in KINDS}}
        for s in sorted(set(steps))
    ]
