"""Learning dynamics of the scores: normalised entropy, head purity and its first-passage tally (paper A §3.1, App. E).

The functions over a run take and return records: :class:`~possym.records.ScoreRecord` rows
(``RUN/scores.csv``) in, :class:`~possym.records.PurityRecord` and :class:`~possym.records.TallyRecord`
out.

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

import dataclasses
from collections import defaultdict
from collections.abc import Iterable

from possym.records import PurityRecord, ScoreRecord, TallyRecord

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


def _missing(v: float | None) -> bool:
    return v is None or v != v  # absent, or NaN


def _intervals(r: ScoreRecord) -> tuple[tuple[float, float] | None, tuple[float, float] | None]:
    """A score record's (s_POS, s_SYM) intervals, or None where it has none."""
    def box(lo: float | None, hi: float | None) -> tuple[float, float] | None:
        return None if lo is None or hi is None or _missing(lo) or _missing(hi) else (lo, hi)

    return box(r.s_pos_low, r.s_pos_high), box(r.s_sym_low, r.s_sym_high)


def record_kinds(r: ScoreRecord, gamma: float) -> frozenset[str]:
    """:func:`purity_kinds` of one score record, with its intervals when it has them."""
    return purity_kinds(r.s_pos, r.s_sym, gamma, *_intervals(r))


def layer_sets(
    records: Iterable[ScoreRecord], kind: str, gamma: float, *, ever: bool, query: str = "last", head: int = 0
) -> tuple[set[int], set[int]]:
    """(sure, possible): the layers pure ``kind`` beyond sampling noise, and those pure within it.

    ``ever=True``: at some scored step (the paper's Fig. 2C, 7 "become pure"); ``ever=False``: at the
    last scored step (Fig. 6). A layer is *sure* when, at such a step, its whole interval box is pure
    ``kind``; *possible* when the box meets the ``kind`` region. Records without intervals count by
    their point estimate, so then sure = possible. Any set between the two is consistent with the data.

    >>> from possym.records import ScoreRecord
    >>> def row(layer, p, y, h):
    ...     return ScoreRecord(step=9, query="last", layer=layer, head=0, s_pos=p, s_sym=y, entropy=1.0, n_inputs=9,
    ...                        s_pos_low=p - h, s_pos_high=p + h, s_sym_low=y - h, s_sym_high=y + h)
    >>> layer_sets([row(0, 0.95, 0.03, 0.02), row(1, 0.92, 0.05, 0.03)], "positional", 0.1, ever=False)
    ({0}, {0, 1})
    """
    rows = [r for r in records if r.query == query and r.head == head]
    if not ever:
        last = max((r.step for r in rows), default=None)
        rows = [r for r in rows if r.step == last]
    sure, possible = set(), set()
    for r in rows:
        kinds = record_kinds(r, gamma)
        if kind in kinds:
            possible.add(r.layer)
            if kinds == {kind}:
                sure.add(r.layer)
    return sure, possible


def normalise_entropy(records: Iterable[ScoreRecord]) -> list[ScoreRecord]:
    """The records with ``entropy_norm``: min–max normalised entropy per (layer, head, query) across steps
    (App. E); a constant curve maps to 0."""
    records = list(records)
    groups: dict[tuple[int, int, str], list[float]] = defaultdict(list)
    for r in records:
        groups[r.layer, r.head, r.query].append(r.entropy)
    bounds = {k: (min(v), max(v)) for k, v in groups.items()}
    out = []
    for r in records:
        lo, hi = bounds[r.layer, r.head, r.query]
        out.append(dataclasses.replace(r, entropy_norm=(r.entropy - lo) / (hi - lo) if hi > lo else 0.0))
    return out


def first_pure_steps(records: Iterable[ScoreRecord], gamma: float, query: str = "last",
                     best_step: int | None = None) -> list[PurityRecord]:
    """Per (layer, head): the first step at which the head is pure and its kind then (step None: never).

    ``final_kind`` is the purity at the last scored step and ``final_kind_step`` the first step at
    which the head was pure of that kind (None if it ends impure), so that a head that drifted away,
    or passed through the other kind first, can be told apart. ``final_straddles``: whether the last
    step's interval box admits another verdict than ``final_kind`` (None when the records carry no
    intervals). ``best_step``: the run's best step, carried along (the paper's dashed line).
    """
    series: dict[tuple[int, int], list[ScoreRecord]] = defaultdict(list)
    for r in records:
        if r.query == query:
            series[r.layer, r.head].append(r)
    out = []
    for (layer, head), points in sorted(series.items()):
        points.sort(key=lambda p: p.step)
        first = next(((p.step, purity(p.s_pos, p.s_sym, gamma)) for p in points if purity(p.s_pos, p.s_sym, gamma)),
                     (None, ""))
        last = points[-1]
        final = purity(last.s_pos, last.s_sym, gamma)
        as_final = next((p.step for p in points if final and purity(p.s_pos, p.s_sym, gamma) == final), None)
        has_interval = None not in _intervals(last)
        out.append(PurityRecord(layer=layer, head=head, query=query, gamma=gamma, kind=first[1], step=first[0],
                                final_kind=final, final_kind_step=as_final, best_step=best_step,
                                final_straddles=len(record_kinds(last, gamma)) > 1 if has_interval else None))
    return out


def purity_tally(first: Iterable[PurityRecord], steps: Iterable[int], gamma: float) -> list[TallyRecord]:
    """The cumulative count of heads that have become pure at ``gamma``, per kind, at each of ``steps``
    (Fig. 2C, 7)."""
    became = [(f.kind, f.step) for f in first if f.step is not None]
    return [TallyRecord(gamma=gamma, step=s, **{k: sum(1 for kind, at in became if kind == k and at <= s)
                                               for k in KINDS})
            for s in sorted(set(steps))]
