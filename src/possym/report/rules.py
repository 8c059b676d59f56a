"""The verdict rules, one per kind of claim, each a pure function of per-seed values.

A claim is graded on the distribution over seeds, by a rule fixed before the result. No rule chooses,
among the readings our data allow, the one closest to the paper: a tie, or a layer whose interval
straddles γ, is resolved against the paper or not at all.

Verdicts (:data:`VERDICTS`): ``match``, ``partial``, ``differs``; ``uninformative`` where the paper's
value and ours both lie at the chance floor, so that agreement says nothing; ``n/a`` where the
evidence cannot judge the claim.

**A number** (:func:`grade_accuracy`, :func:`grade_step`). Each seed s gives a point x_s and its own
interval [l_s, h_s] (an accuracy's per-prefix 95% interval; a step's evaluation spacing). With
R = [min_s l_s, max_s h_s], our seed range widened by each seed's own interval:

- match if the paper's value p lies in R;
- partial if p lies in R widened by a stated band: for an accuracy, a factor :data:`ODDS_PARTIAL` = 2
  in odds at each end (on the log-odds scale, logit(p) in [logit(min l) − log 2, logit(max h) + log 2]),
  about ±0.17 at 0.5, ±0.06 at 0.9 or 0.1, ±0.03 at 0.96 or 0.04, so that a gap near 0 or 1 counts
  for what it is in odds; for a step, :data:`STEP_PARTIAL` = 10% of the paper's value at each end;
- differs otherwise.

**A number within chance of the floor.** An accuracy is *at the floor* when its odds are within a
factor :data:`ODDS_FLOOR` = 10 of chance's: a ≤ expit(logit(c) + log 10); chance c = 1/(number of
possible answers): 1/120 on the number task (0.078 and below is the floor), 1/64 on the letter task
(its answer is one of 8 × 8 (letter, int) tokens; 0.137 and below). When the paper's value and every
seed's point estimate are at the floor, the claim is ``uninformative`` (its chance is stated), whatever
the distance between them.

**A layer set or a count** (:func:`grade_set`, :func:`grade_count`). Each seed's point estimates give
its set (or count); the verdict is on the set that most seeds give. On a tie for most, the verdict
is the worst of the tied sets' (the one furthest from the paper), never the best. Sets: with J the
Jaccard index against the paper's set, match if J = 1, partial if J ≥ 0.5. Counts: match if within
:data:`COUNT_MATCH` = 1 of the paper's, partial if within :data:`COUNT_PARTIAL` = 3. Layers whose
interval straddles γ are listed by the caller beside the set; they never enter it.

**An ordering or a statement per seed** (:func:`grade_holds`): match if it holds at every seed,
partial if at most (more than half), differs otherwise. Where a claim also states a weaker form,
partial also when the weaker form holds at every seed.

**Two groups of seeds** (:func:`compare_groups`): the exact permutation test of the difference in
means (two-sided) beside Welch's t; with 3 seeds against 3, the smallest p the exact test can give is
2/20 = 0.1, so complete separation is suggestive, not significant at 0.05.

Example:
    >>> grade_accuracy([Estimate(0.33, 0.28, 0.38), Estimate(0.54, 0.50, 0.58)], paper=0.70).verdict
    'partial'
    >>> grade_accuracy([Estimate(0.02, 0.01, 0.03)], paper=0.04, chance=1 / 120).verdict
    'uninformative'
    >>> grade_set([frozenset({1}), frozenset({1, 2, 3}), frozenset({1, 2, 3})], frozenset({0, 1, 2, 3})).verdict
    'partial'
    >>> grade_holds([True, True, False])
    'partial'
    >>> round(compare_groups([1.0, 2.0, 3.0], [4.0, 5.0, 6.0]).p_permutation, 3)
    0.1
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from itertools import combinations, product
from typing import TypeVar

import numpy as np

MATCH, PARTIAL, DIFFERS, UNINFORMATIVE, NA = "match", "partial", "differs", "uninformative", "n/a"
VERDICTS = (MATCH, PARTIAL, DIFFERS, UNINFORMATIVE, NA)
# How far a verdict is from agreeing with the paper: a tie is resolved towards the larger rank.
_RANK = {MATCH: 0, PARTIAL: 1, DIFFERS: 2}

ODDS_PARTIAL = 2.0  # an accuracy's partial band: odds within this factor beyond the widened seed range
ODDS_FLOOR = 10.0  # an accuracy is at the floor when its odds are within this factor of chance's
STEP_PARTIAL = 0.10  # a step's partial band: this fraction of the paper's value beyond the range
JACCARD_PARTIAL = 0.5
COUNT_MATCH, COUNT_PARTIAL = 1, 3

T = TypeVar("T", bound=Hashable)


@dataclass(frozen=True)
class Estimate:
    """One seed's point estimate and its own interval (low <= value <= high).

    >>> Estimate.of(0.5, float("nan"), float("nan"))
    Estimate(value=0.5, low=0.5, high=0.5)
    """

    value: float
    low: float
    high: float

    @classmethod
    def of(cls, value: float, low: float | None = None, high: float | None = None) -> Estimate:
        """An estimate whose missing or NaN bounds collapse onto the point (no interval: the point alone)."""
        lo = value if low is None or math.isnan(low) else min(low, value)
        hi = value if high is None or math.isnan(high) else max(high, value)
        return cls(value, lo, hi)


@dataclass(frozen=True)
class SeedSummary:
    """Mean, sample sd (None for one seed) and range of per-seed values."""

    n: int
    mean: float
    sd: float | None
    min: float
    max: float

    def text(self, fmt: str = ".2f") -> str:
        """``0.41 ± 0.11 (0.33–0.54, 3 seeds)``; one seed: its value."""
        if self.n == 1:
            return f"{self.mean:{fmt}} (1 seed)"
        return f"{self.mean:{fmt}} ± {self.sd:{fmt}} ({self.min:{fmt}}–{self.max:{fmt}}, {self.n} seeds)"


def summarise(values: Sequence[float]) -> SeedSummary:
    """:class:`SeedSummary` of ``values`` (at least one)."""
    x = np.asarray(values, dtype=float)
    if x.size == 0:
        raise ValueError("no values to summarise")
    sd = float(x.std(ddof=1)) if x.size > 1 else None
    return SeedSummary(int(x.size), float(x.mean()), sd, float(x.min()), float(x.max()))


@dataclass(frozen=True)
class Grade:
    """A verdict and the words that say how the rule reached it."""

    verdict: str
    detail: str


def logit(p: float) -> float:
    """log(p / (1 − p)), ±inf at 0 and 1."""
    if p <= 0.0:
        return -math.inf
    if p >= 1.0:
        return math.inf
    return math.log(p / (1.0 - p))


def expit(x: float) -> float:
    """The inverse of :func:`logit`."""
    if x == math.inf:
        return 1.0
    if x == -math.inf:
        return 0.0
    return 1.0 / (1.0 + math.exp(-x))


def floor_ceiling(chance: float) -> float:
    """The largest accuracy at the floor: odds within :data:`ODDS_FLOOR` of chance's.

    >>> round(floor_ceiling(1 / 120), 3), round(floor_ceiling(1 / 64), 3)
    (0.078, 0.137)
    """
    return expit(logit(chance) + math.log(ODDS_FLOOR))


def _in(x: float, lo: float, hi: float) -> bool:
    return lo <= x <= hi


def grade_accuracy(seeds: Sequence[Estimate], paper: float, chance: float | None = None) -> Grade:
    """The rule for an accuracy (module docstring): the widened seed range, a factor 2 in odds beyond it,
    and ``uninformative`` when the paper's value and every seed's are at the floor of ``chance``."""
    if not seeds:
        return Grade(NA, "no seed")
    if chance is not None:
        ceiling = floor_ceiling(chance)
        if paper <= ceiling and all(e.value <= ceiling for e in seeds):
            return Grade(UNINFORMATIVE, f"paper and every seed at the floor (≤ {ceiling:.3f}; chance {chance:.4f})")
    lo, hi = min(e.low for e in seeds), max(e.high for e in seeds)
    band = math.log(ODDS_PARTIAL)
    wide_lo, wide_hi = expit(logit(lo) - band), expit(logit(hi) + band)
    if _in(paper, lo, hi):
        return Grade(MATCH, f"paper {paper:.3g} in the seeds' widened range [{lo:.3f}, {hi:.3f}]")
    where = f"the seeds' widened range [{lo:.3f}, {hi:.3f}]; ×{ODDS_PARTIAL:g} in odds: [{wide_lo:.3f}, {wide_hi:.3f}]"
    if _in(paper, wide_lo, wide_hi):
        return Grade(PARTIAL, f"paper {paper:.3g} outside {where}")
    return Grade(DIFFERS, f"paper {paper:.3g} outside {where}")


def grade_step(seeds: Sequence[Estimate], paper: float) -> Grade:
    """The rule for a step (module docstring): the widened seed range, then :data:`STEP_PARTIAL` of the
    paper's value beyond it."""
    if not seeds:
        return Grade(NA, "no seed")
    lo, hi = min(e.low for e in seeds), max(e.high for e in seeds)
    pad = STEP_PARTIAL * abs(paper)
    if _in(paper, lo, hi):
        return Grade(MATCH, f"paper {paper:g} in the seeds' widened range [{lo:g}, {hi:g}]")
    where = f"the seeds' widened range [{lo:g}, {hi:g}] (± {pad:g}: [{lo - pad:g}, {hi + pad:g}])"
    return Grade(PARTIAL if _in(paper, lo - pad, hi + pad) else DIFFERS, f"paper {paper:g} outside {where}")


def jaccard(a: frozenset[int], b: frozenset[int]) -> float:
    """|a ∩ b| / |a ∪ b|; 1 for two empty sets."""
    union = a | b
    return len(a & b) / len(union) if union else 1.0


def set_verdict(ours: frozenset[int], paper: frozenset[int]) -> str:
    """One set against the paper's: match if J = 1, partial if J >= :data:`JACCARD_PARTIAL`, else differs."""
    j = jaccard(ours, paper)
    return MATCH if j == 1.0 else PARTIAL if j >= JACCARD_PARTIAL else DIFFERS


def count_verdict(ours: int, paper: int, match_within: int = COUNT_MATCH, partial_within: int = COUNT_PARTIAL) -> str:
    """One count against the paper's: match within ``match_within``, partial within ``partial_within``."""
    gap = abs(ours - paper)
    return MATCH if gap <= match_within else PARTIAL if gap <= partial_within else DIFFERS


@dataclass(frozen=True)
class ModalGrade:
    """The verdict on the value most seeds give: ``chosen`` (given by ``support`` of ``n`` seeds);
    ``tied``: other values had as many seeds, and the worst of them was chosen."""

    verdict: str
    chosen: object
    support: int
    n: int
    tied: bool

    @property
    def detail(self) -> str:
        tie = "; a tie for most seeds, graded on the tied value furthest from the paper" if self.tied else ""
        return f"given by {self.support} of {self.n} seeds{tie}"


def _modal(per_seed: Sequence[T], verdict, distance) -> ModalGrade:
    if not per_seed:
        return ModalGrade(NA, None, 0, 0, False)
    counts = Counter(per_seed)
    top = max(counts.values())
    tied = [v for v, c in counts.items() if c == top]
    worst = max(tied, key=lambda v: (_RANK[verdict(v)], distance(v)))
    return ModalGrade(verdict(worst), worst, top, len(per_seed), len(tied) > 1)


def grade_set(per_seed: Sequence[frozenset[int]], paper: frozenset[int]) -> ModalGrade:
    """The verdict on the set most seeds give (ties: the one furthest from ``paper``); see the module docstring."""
    return _modal(per_seed, lambda s: set_verdict(s, paper), lambda s: 1.0 - jaccard(s, paper))


def grade_count(per_seed: Sequence[int], paper: int, *, match_within: int = COUNT_MATCH,
                partial_within: int = COUNT_PARTIAL) -> ModalGrade:
    """The verdict on the count most seeds give (ties: the one furthest from ``paper``): match if within
    ``match_within`` of ``paper``, partial if within ``partial_within``.

    >>> grade_count([9, 10, 11], 12, match_within=2, partial_within=6).chosen  # Table 1: >= 10 of 12 agree
    9
    """
    return _modal(per_seed, lambda c: count_verdict(c, paper, match_within, partial_within), lambda c: abs(c - paper))


def grade_holds(holds: Sequence[bool], weak: Sequence[bool] | None = None) -> str:
    """An ordering or statement checked at each seed: match if it holds at every seed, partial if at most
    (more than half) or if its weaker form ``weak`` holds at every seed, differs otherwise; n/a for none.

    >>> grade_holds([True, False]), grade_holds([True, False], weak=[True, True]), grade_holds([])
    ('differs', 'partial', 'n/a')
    """
    if not holds:
        return NA
    n = sum(bool(h) for h in holds)
    if n == len(holds):
        return MATCH
    if 2 * n > len(holds) or (weak is not None and len(weak) and all(weak)):
        return PARTIAL
    return DIFFERS


@dataclass(frozen=True)
class GroupComparison:
    """Two groups of per-seed values: their means, b − a, and two tests of "no difference".

    ``p_permutation``: exact two-sided permutation test of the difference in means (every split of
    the pooled values into groups of the same sizes; for ``paired``, every sign flip of the
    differences); ``p_min`` the smallest p that test can give at these sizes (0.1 for 3 against 3,
    0.25 for 3 pairs); ``p_welch`` Welch's t test (paired: the paired t test), NaN where both groups
    have no spread. ``separated``: every b above every a, or every b below every a (paired: every
    difference of one sign).
    """

    n_a: int
    n_b: int
    mean_a: float
    mean_b: float
    difference: float
    p_permutation: float
    p_min: float
    p_welch: float
    separated: bool
    paired: bool

    def text(self, fmt: str = ".2f") -> str:
        test = "paired t" if self.paired else "Welch t"
        sizes = f"{self.n_a} pairs" if self.paired else f"{self.n_a} vs {self.n_b}"
        return (f"{self.mean_a:{fmt}} → {self.mean_b:{fmt}} ({sizes}): exact permutation p = {self.p_permutation:.2g} "
                f"(smallest possible {self.p_min:.2g}), {test} p = {self.p_welch:.2g}")


def compare_groups(a: Sequence[float], b: Sequence[float], *, paired: bool = False) -> GroupComparison:
    """Compare per-seed values ``a`` and ``b`` (:class:`GroupComparison`); ``paired``: a[i] and b[i] share seed i.

    >>> c = compare_groups([0.02, 0.03, 0.05], [0.19, 0.10, 0.15])
    >>> c.separated, round(c.p_permutation, 2), round(c.p_welch, 3)
    (True, 0.1, 0.038)
    """
    from scipy import stats

    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if len(x) < 2 or len(y) < 2:
        raise ValueError(f"need at least 2 values per group, got {len(x)} and {len(y)}")
    if paired:
        if len(x) != len(y):
            raise ValueError(f"paired groups need equal sizes, got {len(x)} and {len(y)}")
        d = y - x
        stat = np.array([abs(np.mean(d * np.array(s))) for s in product((1.0, -1.0), repeat=len(d))])
        observed = abs(d.mean())
        welch = float(stats.ttest_rel(y, x).pvalue) if np.ptp(d) > 0 else math.nan
        separated = bool(np.all(d > 0) or np.all(d < 0))
    else:
        pooled, k = np.concatenate([x, y]), len(x)
        total = pooled.sum()
        stat = np.array([abs(pooled[list(i)].sum() / k - (total - pooled[list(i)].sum()) / len(y))
                         for i in combinations(range(len(pooled)), k)])
        observed = abs(y.mean() - x.mean())
        spread = np.ptp(x) > 0 or np.ptp(y) > 0
        welch = float(stats.ttest_ind(y, x, equal_var=False).pvalue) if spread else math.nan
        separated = bool(y.min() > x.max() or y.max() < x.min())
    tol = 1e-12 * max(1.0, float(stat.max()))
    p = float(np.mean(stat >= observed - tol))
    p_min = float(np.mean(stat >= stat.max() - tol))
    return GroupComparison(len(x), len(y), float(x.mean()), float(y.mean()), float(y.mean() - x.mean()), p, p_min,
                           welch, separated, paired)
