"""The verdict rules, one per kind of claim, each a pure function of per-seed values.

A claim is graded on the distribution over seeds, by a rule fixed before the result. No rule chooses,
among the readings our data allow, the one closest to the paper: a tie, or a layer whose interval
straddles γ, is resolved against the paper or not at all.

Verdicts (:data:`VERDICTS`): ``match``, ``partial``, ``differs``; ``uninformative`` where the paper's
value and ours both lie at the chance floor, so that agreement says nothing; ``ceiling``, its
counterpart at accuracy 1; ``verified`` for a check of our own code or of a formula against the
paper's (a construction, a plotted bound), which reproduces nothing and stays out of the empirical
tally; ``n/a`` where the evidence cannot judge the claim.

**A number, with uncertainty on both sides** (:func:`grade_accuracy`, :func:`grade_step`).

*Ours*: the interval in which a new seed's value should fall, a 95% t prediction interval over the
seeds' point estimates, mean ± t(0.975, n−1)·sd·√(1 + 1/n), on the log-odds scale for an accuracy
(the between-seed spread already holds each seed's own sampling noise). With one seed, or seeds
that all agree, it is the seeds' own intervals' hull.

*The paper's* (:class:`PaperValue`): its value, read off a figure to within ``tolerance`` (measured:
:data:`DIGITISATION`), and, for an accuracy, the 95% Wilson interval of a binomial proportion at a
stated number of evaluation inputs ``n``: the paper gives none, so claims show the verdict at 100,
500 and 2,400 inputs (:data:`PAPER_SAMPLE_SIZES`) and grade at :data:`GRADING_N` = 500.

The p-value of "the paper's run is one more draw of our seeds": a two-sided t test of the paper's
value against the seeds' mean, with variance sd²(1 + 1/n) plus the paper's own (its interval's
half-width / 1.96, squared), on the log-odds scale for an accuracy (with one seed, or no spread, a
normal test with the seeds' own interval as its 95%).

- match if p ≥ :data:`ALPHA` = 0.05: the paper's value is what a new seed of ours could give;
- partial if not, but the paper's interval meets ours once ours is widened by a stated band: a
  factor :data:`ODDS_PARTIAL` = 2 in odds at each end for an accuracy (about ±0.17 at 0.5, ±0.06 at
  0.9), :data:`STEP_PARTIAL` = 10% of the paper's value for a step;
- differs otherwise.

**At the floor and at the ceiling.** An accuracy is *at the floor* when its odds are within a
factor :data:`ODDS_FLOOR` = 10 of chance's: a ≤ expit(logit(c) + log 10); chance c = 1/(number of
possible answers): 1/120 on the number task (0.078 and below), 1/64 on the letter task (0.137 and
below). When the paper's value and every seed's point estimate are at the floor, the claim is
``uninformative``. Its counterpart at the top is ``ceiling``: the paper's value within its figure's
resolution of 1 (p ≥ 1 − tolerance) and every seed's point estimate too, so that the figure cannot
tell the two apart and agreement says only that both solve it. Neither counts as a match.

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
    'match'
    >>> seeds = [Estimate(0.33, 0.31, 0.35), Estimate(0.54, 0.52, 0.56), Estimate(0.37, 0.35, 0.39),
    ...          Estimate(0.50, 0.48, 0.52)]
    >>> g = grade_accuracy(seeds, paper=PaperValue(0.74, DIGITISATION, 500))
    >>> g.verdict, round(g.p_value, 3)
    ('match', 0.072)
    >>> grade_accuracy(seeds, paper=PaperValue(0.85, DIGITISATION, 500)).verdict
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
CEILING, VERIFIED = "ceiling", "verified"
VERDICTS = (MATCH, PARTIAL, DIFFERS, UNINFORMATIVE, CEILING, VERIFIED, NA)
EMPIRICAL = (MATCH, PARTIAL, DIFFERS, UNINFORMATIVE, CEILING)  # the tally of a reproduction: verified stays out
# How far a verdict is from agreeing with the paper: a tie is resolved towards the larger rank.
_RANK = {MATCH: 0, PARTIAL: 1, DIFFERS: 2}

ODDS_PARTIAL = 2.0  # an accuracy's partial band: odds within this factor beyond the widened seed range
ODDS_FLOOR = 10.0  # an accuracy is at the floor when its odds are within this factor of chance's
STEP_PARTIAL = 0.10  # a step's partial band: this fraction of the paper's value beyond the range
# How far a value read off one of the paper's figures can be from the figure's own: the largest gap
# between Fig. 5A's digitised points and the closed form they plot (0.005; possym.report.calibration
# .digitisation_error), rounded up to the 0.01 the digitisation notes state.
DIGITISATION = 0.01
PAPER_SAMPLE_SIZES = (100, 500, 2400)  # the paper's evaluation sample is unstated: verdicts at each
GRADING_N = 500  # the one that grades: the paper preset's inputs per length point (lengthgen.n = 500)
PREDICTION = 0.95  # the coverage of our prediction interval for a new seed
ALPHA = 0.05  # match: the paper's value is not significantly unlike a new seed of ours
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
    """A verdict and the words that say how the rule reached it; for a number, the p-value of the
    paper's value as one more draw of our seeds (NaN where not computed)."""

    verdict: str
    detail: str
    p_value: float = math.nan


@dataclass(frozen=True)
class PaperValue:
    """One of the paper's numbers with its uncertainty: ``tolerance``, how far a value read off a figure
    may be from the figure's own (0 for a table's number); ``n``, the evaluation inputs assumed behind
    an accuracy (None: no binomial error, as for a step).

    >>> lo, hi = PaperValue(1.0, 0.01, 500).interval()
    >>> round(lo, 3), hi
    (0.982, 1.0)
    >>> PaperValue(4800, 100).interval()
    (4700, 4900)
    """

    value: float
    tolerance: float = 0.0
    n: int | None = None

    def interval(self) -> tuple[float, float]:
        """The 95% Wilson interval at ``n`` (the point where ``n`` is None), widened by ``tolerance``."""
        lo = hi = self.value
        if self.n is not None:
            lo, hi = wilson(self.value, self.n)
        lo, hi = lo - self.tolerance, hi + self.tolerance
        if self.n is not None:  # a proportion
            lo, hi = max(lo, 0.0), min(hi, 1.0)
        return lo, hi

    def text(self) -> str:
        lo, hi = self.interval()
        parts = [f"±{self.tolerance:g} read off the figure"] if self.tolerance else []
        if self.n is not None:
            parts.append(f"binomial at n = {self.n}")
        return f"{self.value:g} [{lo:.3g}, {hi:.3g}]" + (f" ({'; '.join(parts)})" if parts else "")


def paper_value(paper: float | PaperValue) -> PaperValue:
    return paper if isinstance(paper, PaperValue) else PaperValue(float(paper))


def wilson(p: float, n: int, z: float = 1.959963984540054) -> tuple[float, float]:
    """The Wilson score interval of a proportion ``p`` observed on ``n`` trials.

    >>> [round(x, 4) for x in wilson(1.0, 100)]
    [0.963, 1.0]
    """
    if n < 1:
        raise ValueError(f"n={n} must be >= 1")
    denom = 1.0 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


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


def _overlap(a: tuple[float, float], b: tuple[float, float]) -> bool:
    return a[0] <= b[1] and b[0] <= a[1]


# Accuracies of exactly 0 or 1 have infinite log-odds; on this scale they sit at the resolution of
# the largest sample anyone evaluates on (1 in 10^4).
_CLIP = 1e-4


def _clipped_logit(p: float) -> float:
    return logit(min(max(p, _CLIP), 1 - _CLIP))


@dataclass(frozen=True)
class Prediction:
    """Where a new seed's value should fall: ``low``..``high`` (on the value's own scale), from ``n``
    seeds; ``how`` says which construction gave it; ``centre``, ``scale``: the mean and the standard
    deviation of a new seed on the transformed scale (NaN where the hull stands in)."""

    low: float
    high: float
    n: int
    how: str
    centre: float = math.nan
    scale: float = math.nan


def prediction_interval(seeds: Sequence[Estimate], *, log_odds: bool) -> Prediction:
    """The 95% t prediction interval for a new seed (module docstring); with fewer than 2 seeds, or no
    spread, the hull of the seeds' own intervals.

    >>> p = prediction_interval([Estimate(0.4, 0.38, 0.42), Estimate(0.5, 0.48, 0.52), Estimate(0.6, 0.58, 0.62)],
    ...                         log_odds=True)
    >>> round(p.low, 3), round(p.high, 3), p.how
    (0.118, 0.882, 't prediction interval over 3 seeds')
    """
    from scipy import stats

    f, inv = (_clipped_logit, expit) if log_odds else ((lambda v: v), (lambda v: v))
    x = np.array([f(e.value) for e in seeds], dtype=float)
    hull = (min(e.low for e in seeds), max(e.high for e in seeds))
    if len(x) < 2 or float(np.ptp(x)) == 0.0:
        return Prediction(hull[0], hull[1], len(x), "the seeds' own intervals (no spread over seeds to use)")
    mean, sd = float(x.mean()), float(x.std(ddof=1))
    scale = sd * math.sqrt(1.0 + 1.0 / len(x))
    half = float(stats.t.ppf(0.5 + PREDICTION / 2, len(x) - 1)) * scale
    return Prediction(inv(mean - half), inv(mean + half), len(x), f"t prediction interval over {len(x)} seeds",
                      mean, scale)


def _facing(lo: float, centre: float, hi: float, toward: float) -> float:
    """The standard deviation an asymmetric 95% interval implies on the side facing ``toward``."""
    return ((centre - lo) if toward < centre else (hi - centre)) / 1.959963984540054


def _p_value(pred: Prediction, seeds: Sequence[Estimate], paper: PaperValue, f) -> float:
    """Two-sided p of the paper's value as a new draw of our seeds, with the paper's own variance added. An
    interval near 0 or 1 is lopsided on the log-odds scale: each side's spread is read on the side that faces
    the other's value."""
    from scipy import stats

    lo, hi = paper.interval()
    if paper.n is not None:  # an accuracy of 0 or 1 on n inputs: its log-odds at half an input's resolution
        paper = PaperValue(min(max(paper.value, 0.5 / paper.n), 1 - 0.5 / paper.n), paper.tolerance, paper.n)
    theirs = f(paper.value)
    if math.isnan(pred.scale):  # one seed, or no spread: the seeds' own interval as its normal 95%
        centre = float(np.mean([f(e.value) for e in seeds]))
        own = _facing(f(pred.low), centre, f(pred.high), theirs)
        sd = math.hypot(own, _facing(f(lo), theirs, f(hi), centre))
        if sd == 0:
            return 1.0 if theirs == centre else 0.0
        return float(2 * stats.norm.sf(abs(theirs - centre) / sd))
    sd = math.hypot(pred.scale, _facing(f(lo), theirs, f(hi), pred.centre))
    return float(2 * stats.t.sf(abs(theirs - pred.centre) / sd, pred.n - 1))


def grade_accuracy(seeds: Sequence[Estimate], paper: float | PaperValue, chance: float | None = None) -> Grade:
    """The rule for an accuracy (module docstring): our prediction interval for a new seed on the log-odds
    scale against the paper's interval; a factor 2 in odds beyond ours for partial; ``uninformative`` at
    the floor of ``chance``, ``ceiling`` at 1."""
    if not seeds:
        return Grade(NA, "no seed")
    pv = paper_value(paper)
    if chance is not None:
        top = floor_ceiling(chance)
        if pv.value <= top and all(e.value <= top for e in seeds):
            return Grade(UNINFORMATIVE, f"paper and every seed at the floor (≤ {top:.3f}; chance {chance:.4f})")
    if pv.tolerance > 0 and pv.value >= 1 - pv.tolerance and all(e.value >= 1 - pv.tolerance for e in seeds):
        return Grade(CEILING, f"paper and every seed within the figure's resolution ({pv.tolerance:g}) of 1")
    pred = prediction_interval(seeds, log_odds=True)
    band = math.log(ODDS_PARTIAL)
    wide = (expit(_clipped_logit(pred.low) - band), expit(_clipped_logit(pred.high) + band))
    p = _p_value(pred, seeds, pv, _clipped_logit)
    where = (f"paper {pv.text()}; ours [{pred.low:.3f}, {pred.high:.3f}] ({pred.how}; "
             f"×{ODDS_PARTIAL:g} in odds: [{wide[0]:.3f}, {wide[1]:.3f}]); p = {p:.2g}")
    verdict = MATCH if p >= ALPHA else PARTIAL if _overlap(wide, pv.interval()) else DIFFERS
    return Grade(verdict, where, p)


def grade_step(seeds: Sequence[Estimate], paper: float | PaperValue) -> Grade:
    """The rule for a step (module docstring): our prediction interval for a new seed against the paper's
    interval, then :data:`STEP_PARTIAL` of the paper's value beyond ours."""
    if not seeds:
        return Grade(NA, "no seed")
    pv = paper_value(paper)
    pred = prediction_interval(seeds, log_odds=False)
    pad = STEP_PARTIAL * abs(pv.value)
    p = _p_value(pred, seeds, pv, lambda v: v)
    lo, hi = pv.interval()
    paper_text = f"paper {pv.value:g}" + (f" [{lo:g}, {hi:g}]" if (lo, hi) != (pv.value, pv.value) else "")
    where = (f"{paper_text}; ours [{pred.low:.0f}, {pred.high:.0f}] ({pred.how}; ± {pad:g}: "
             f"[{pred.low - pad:.0f}, {pred.high + pad:.0f}]); p = {p:.2g}")
    verdict = MATCH if p >= ALPHA else PARTIAL if _overlap((pred.low - pad, pred.high + pad), (lo, hi)) else DIFFERS
    return Grade(verdict, where, p)


def per_seed_verdicts(verdicts: Sequence[str]) -> str:
    """How many seeds give each verdict, most first: ``partial at 2 seeds, differs at 1``.

    >>> per_seed_verdicts(["partial", "differs", "partial"])
    'partial at 2 seeds, differs at 1'
    """
    counts = Counter(verdicts)
    order = sorted(counts, key=lambda v: (-counts[v], VERDICTS.index(v) if v in VERDICTS else 99))
    return ", ".join(f"{v} at {counts[v]}" + (" seeds" if i == 0 and counts[v] > 1 else " seed" if i == 0 else "")
                     for i, v in enumerate(order))


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


def _exact_p(stats: np.ndarray, observed: float, tol: float) -> tuple[float, float]:
    """An exact test's p over every arrangement's statistic ``stats`` (the share at least ``observed``, within
    ``tol`` of rounding) and the smallest p those arrangements allow (the share at their maximum)."""
    return float(np.mean(stats >= observed - tol)), float(np.mean(stats >= stats.max() - tol))


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
    p, p_min = _exact_p(stat, observed, 1e-12 * max(1.0, float(stat.max())))
    return GroupComparison(len(x), len(y), float(x.mean()), float(y.mean()), float(y.mean() - x.mean()), p, p_min,
                           welch, separated, paired)


@dataclass(frozen=True)
class Correlation:
    """Spearman's rank correlation of two per-seed quantities, with its exact permutation p-value (every
    pairing of the seeds' values, two-sided) and the smallest p the number of seeds allows."""

    n: int
    rho: float
    p_permutation: float
    p_min: float


def rank_correlation(x: Sequence[float], y: Sequence[float]) -> Correlation:
    """Whether ``y`` tracks ``x`` across seeds: Spearman's ρ and its exact permutation test.

    With n seeds there are n! pairings; up to 9 seeds all are enumerated. The smallest attainable p
    (2/n! for untied values) is reported beside p, so that a small sample says how little it can show.

    >>> c = rank_correlation([1, 2, 3, 4, 5], [2, 4, 6, 8, 10])
    >>> round(c.rho, 3), round(c.p_permutation, 4), round(c.p_min, 4)
    (1.0, 0.0167, 0.0167)
    """
    from itertools import permutations

    a, b = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if len(a) != len(b) or len(a) < 3:
        raise ValueError(f"need two equal-length samples of at least 3 seeds, got {len(a)} and {len(b)}")
    if len(a) > 9:
        raise ValueError(f"{len(a)} seeds: the exact test enumerates n! pairings; allowed: up to 9")

    def ranks(v: np.ndarray) -> np.ndarray:
        order = v.argsort(kind="stable")
        r = np.empty(len(v))
        r[order] = np.arange(len(v), dtype=float)
        for value in np.unique(v):  # ties share their mean rank
            r[v == value] = r[v == value].mean()
        return r

    ra, rb = ranks(a), ranks(b)
    ra, rb = ra - ra.mean(), rb - rb.mean()
    denom = math.sqrt(float((ra ** 2).sum() * (rb ** 2).sum()))
    if denom == 0:
        return Correlation(len(a), math.nan, math.nan, math.nan)
    stats = np.array([abs(float((ra * rb[list(p)]).sum())) / denom for p in permutations(range(len(a)))])
    return Correlation(len(a), float((ra * rb).sum()) / denom,
                       *_exact_p(stats, abs(float((ra * rb).sum())) / denom, 1e-12))


# ---- shapes of curves: "the qualitative patterns of decay" (Sec. 3.6, Fig. 5A against Fig. 5B) ---------------

# The letter curve's half-drop point must lie at least this many times further along the figure's x-range than the
# number curve's for "the number curve collapses early while the letter one decays slowly"; the paper's own figures
# give 4.1 (Fig. 5A, digitised) and 7.4 (Fig. 5B).
DECAY_RATIO = 2.0


def half_drop(curve: Sequence[tuple[float, float | None]], tol: float = DIGITISATION) -> float:
    """Where a curve has lost half of its drop, as a share of its own x-range.

    curve: (x, y) points in increasing x, on a figure's x-range (its first point the range's start, its last the
    end); points with y None (not read off the figure) are skipped. With y0 the first value and y1 the last,
    the drop is D = y0 − y1; the half-drop point x½ is the first x at which y ≤ y0 − D/2, linearly
    interpolated between the grid points around it; the result is h = (x½ − x_first) / (x_last − x_first)
    in [0, 1]. A curve that does not drop by more than ``tol`` (the figure's resolution) within its range never
    halves there: h = 1.

    >>> half_drop([(0, 1.0), (10, 0.5), (20, 0.0)]), half_drop([(0, 1.0), (10, 1.0)])
    (0.5, 1.0)
    >>> round(half_drop([(1, 0.303), (11, 0.163), (21, 0.045), (99, 0.002)]), 3)   # Fig. 5A's index bound
    0.111
    """
    pts = [(float(x), float(y)) for x, y in curve if y is not None]
    if len(pts) < 2:
        raise ValueError(f"a curve needs two points with a value, got {len(pts)}")
    (x0, y0), (x1, y1) = pts[0], pts[-1]
    drop = y0 - y1
    if drop <= tol:
        return 1.0
    half = y0 - drop / 2
    for (xa, ya), (xb, yb) in zip(pts, pts[1:], strict=False):
        if yb <= half:
            x = xb if ya == yb else xa + (ya - half) / (ya - yb) * (xb - xa)
            return (x - x0) / (x1 - x0)
    return 1.0  # not reached: the last point is below the half


@dataclass(frozen=True)
class DecayShape:
    """The shape features of one figure's two curves (number task or Index; letter task or Retrieval) that the
    paper's text names (Sec. 3.6): the number curve collapses early while the letter one decays slowly, and
    the letter curve lies above once the number one has collapsed.

    ``half_number``, ``half_letter``: :func:`half_drop` of each; ``ordered``: the letter curve is at least the
    number curve (within ``tol``) at every x, of the points both curves have, from the number curve's half-drop
    point to the end of the range. Before it both curves may sit on their plateaus in either order (Fig. 5A's
    index bound, 1 − cos 0.8 = 0.303, starts above the retrieval bound's 0.291 up to n = 8).
    """

    half_number: float
    half_letter: float
    ordered: bool

    @property
    def ratio(self) -> float:
        return self.half_letter / self.half_number if self.half_number > 0 else math.inf

    @property
    def holds(self) -> bool:
        """The pattern: ordered, and the letter curve halves at least :data:`DECAY_RATIO` times later."""
        return self.ordered and self.half_letter >= DECAY_RATIO * self.half_number

    @property
    def weak(self) -> bool:
        """Its weaker form: ordered, and the letter curve halves later at all."""
        return self.ordered and self.half_letter > self.half_number

    def text(self) -> str:
        return (f"half-drop at {self.half_number:.2f} (number) vs {self.half_letter:.2f} (letter) of the range, "
                f"×{self.ratio:.1f}; letter {'above' if self.ordered else 'not above'} number from there on")


def decay_shape(number: Sequence[tuple[float, float | None]], letter: Sequence[tuple[float, float | None]],
                tol: float = DIGITISATION) -> DecayShape:
    """The shape features (:class:`DecayShape`) of a figure's number and letter curves, on the same x-range.

    >>> s = decay_shape([(0, 1.0), (10, 0.2), (100, 0.0)], [(0, 1.0), (10, 0.9), (100, 0.5)])
    >>> round(s.half_number, 3), round(s.half_letter, 3), s.ordered, s.holds
    (0.062, 0.438, True, True)
    """
    h_number, h_letter = half_drop(number, tol), half_drop(letter, tol)
    xs = [float(x) for x, y in number if y is not None]
    x_half = xs[0] + h_number * (xs[-1] - xs[0])
    at_letter = {float(x): float(y) for x, y in letter if y is not None}
    ordered = all(at_letter[float(x)] >= float(y) - tol for x, y in number
                  if y is not None and float(x) >= x_half and float(x) in at_letter)
    return DecayShape(h_number, h_letter, ordered)
