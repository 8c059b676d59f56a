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

Example:
    >>> purity(0.97, 0.02, gamma=0.05), purity(0.97, 0.08, gamma=0.05), purity(0.01, 1.0, gamma=0.1)
    ('positional', '', 'symbolic')
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import Any

GAMMAS = (0.1, 0.05)
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
    or passed through the other kind first, can be told apart.
    """
    series: dict[tuple[int, int, str], list[tuple[int, float, float]]] = defaultdict(list)
    for r in records:
        if str(r.get("query", "last")) == query:
            series[_key(r)].append((int(r["step"]), float(r["s_pos"]), float(r["s_sym"])))
    out = []
    for (layer, head, q), points in sorted(series.items()):
        points.sort()
        first = next(((s, purity(p, y, gamma)) for s, p, y in points if purity(p, y, gamma)), (None, ""))
        final = purity(points[-1][1], points[-1][2], gamma)
        as_final = next((s for s, p, y in points if final and purity(p, y, gamma) == final), None)
        out.append(
            {"layer": layer, "head": head, "query": q, "gamma": gamma, "kind": first[1], "step": first[0],
             "final_kind": final, "final_kind_step": as_final}
        )
    return out


def purity_tally(first: Iterable[dict[str, Any]], steps: Iterable[int]) -> list[dict[str, Any]]:
    """The cumulative count of heads that have become pure, per kind, at each of ``steps`` (Fig. 2C, 7)."""
    first = [f for f in first if f["step"] is not None]
    return [
        {"step": s, **{k: sum(1 for f in first if f["kind"] == k and f["step"] <= s) for k in KINDS}}
        for s in sorted(set(steps))
    ]


def max_accuracy_step(metrics: Iterable[dict[str, Any]], key: str = "accuracy") -> int | None:
    """The first evaluation step at which accuracy reaches its maximum (the paper's dashed line), or None.

    ``metrics`` are the run's log records; only ``event == "eval"`` records with ``key`` are read.
    """
    evals = [(int(m["step"]), float(m[key])) for m in metrics if m.get("event") == "eval" and key in m]
    if not evals:
        return None
    best = max(a for _, a in evals)
    return min(s for s, a in evals if a == best)
