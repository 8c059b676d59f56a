"""The rule kinds that grade a claim over seeds, each a pure function of per-seed values, each defined once.

A claim (:mod:`possym.report.claimspec`) names a measure and one of three rule kinds, written before it is
graded. ``value`` (:func:`grade_value`): a number per seed; *match* when the gap G = P − mean(x) to the
paper's value P has its 90% interval inside (−M, M), the claim's margin (two one-sided tests at :data:`ALPHA`),
*differs* when P lies outside what our seeds predict for a new seed (two-sided p < :data:`ALPHA`, on arcsin √p
for an accuracy, with P's own uncertainty σ_P of :class:`PaperValue` added), else *consistent*; floor and
ceiling first for accuracies. ``seeds`` (:func:`grade_seeds`): a statement, set (Jaccard J, partial if
J ≥ :data:`JACCARD_PARTIAL`) or count per seed, each seed's best and worst verdict (:class:`SeedVerdict`);
match if all surely match, differs if more than half surely differ. ``check``: a verification. Every verdict
(:data:`VERDICTS`) and both rules in full: docs/reproduce.md, "How the claims are graded"; the choices behind
them (margins, the predictive distribution, the arcsine scale): docs/choices.md, "Calibrated verdicts".

Example:
    >>> seeds = [Estimate.of(v) for v in (0.46, 0.52, 0.49, 0.55, 0.50)]
    >>> g = grade_value(seeds, PaperValue(0.51, 0.01), margin=0.05, scale="accuracy")
    >>> g.verdict, round(g.gap, 3), round(g.percentile, 2)
    ('match', 0.006, 0.56)
    >>> grade_value(seeds, PaperValue(0.56, 0.01), margin=0.05, scale="accuracy").verdict
    'consistent'
    >>> grade_value(seeds, PaperValue(0.74, 0.01), margin=0.05, scale="accuracy").verdict
    'differs'
    >>> grade_seeds([SeedVerdict.holds(True), SeedVerdict.holds(True), SeedVerdict.holds(False)]).verdict
    'partial'
    >>> grade_seeds([SeedVerdict.holds(True), SeedVerdict.of("differs", "match")]).verdict   # one seed undecided
    'consistent'"""

from __future__ import annotations

import functools
import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import combinations, product

import numpy as np

MATCH, CONSISTENT, PARTIAL, DIFFERS = "match", "consistent", "partial", "differs"
UNINFORMATIVE, CEILING, UNRESOLVED, VERIFIED, NA = "uninformative", "ceiling", "unresolved", "verified", "n/a"
VERDICTS = (MATCH, CONSISTENT, PARTIAL, DIFFERS, UNINFORMATIVE, CEILING, UNRESOLVED, VERIFIED, NA)
# The tally of a reproduction: every verdict a claim about the paper's results can get (verified stays out).
EMPIRICAL = (MATCH, CONSISTENT, PARTIAL, DIFFERS, UNINFORMATIVE, CEILING, UNRESOLVED)
# A seed's verdict on a statement, a set or a count, from agreeing with the paper to not.
ORDINAL = (MATCH, PARTIAL, DIFFERS)

ALPHA = 0.05  # the level of every test: the prediction's two-sided test and each one-sided test of equivalence
ODDS_FLOOR = 10.0  # an accuracy is at the floor when its odds are within this factor of chance's
JACCARD_PARTIAL = 0.5
COUNT_MATCH, COUNT_PARTIAL = 1, 3
# How far a value read off one of the paper's figures can be from the figure's own: the largest gap between Fig.
# 5A's digitised points and the closed form they plot (0.0005; possym.report.calibration.digitisation_error),
# rounded up to the 0.01 the digitisation notes state.
DIGITISATION = 0.01
PAPER_SAMPLE_SIZES = (50, 100, 500, 2400)  # the paper's evaluation sample is unstated: verdicts at each
GRADING_N = 500  # the one that grades: the paper preset's inputs per length point (lengthgen.n = 500)
SCALES = ("accuracy", "linear")
_Z95 = 1.959963984540054


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
        return cls(float(value), float(lo), float(hi))


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


def summarise_seeds(values: Sequence[float]) -> SeedSummary:
    """:class:`SeedSummary` of ``values`` (at least one).

    >>> summarise_seeds([1.0, 2.0, 3.0]).text(".1f")
    '2.0 ± 1.0 (1.0–3.0, 3 seeds)'
    """
    x = np.asarray(values, dtype=float)
    if x.size == 0:
        raise ValueError("no values to summarise")
    sd = float(x.std(ddof=1)) if x.size > 1 else None
    return SeedSummary(int(x.size), float(x.mean()), sd, float(x.min()), float(x.max()))


def wilson(p: float, n: int, z: float = _Z95) -> tuple[float, float]:
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


@dataclass(frozen=True)
class PaperValue:
    """One of the paper's numbers with its uncertainty: ``tolerance``, how far a value read off a figure may be
    from the figure's own (0 for a table's number); ``n``, the evaluation inputs assumed behind an accuracy (None:
    no binomial error, as for a step).

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

    def sd(self, scale: str = "linear", toward: float | None = None) -> float:
        """The standard deviation its 95% interval implies on ``scale``; an interval lopsided there (a
        proportion near 0 or 1) is read on the side that faces ``toward`` (else its mean half-width)."""
        f = transform(scale)
        lo, hi = (f(x) for x in self.interval())
        centre = f(self.value)
        if toward is None:
            return (hi - lo) / 2 / _Z95
        return ((centre - lo) if toward < centre else (hi - centre)) / _Z95

    def text(self) -> str:
        lo, hi = self.interval()
        parts = [f"±{self.tolerance:g} read off the figure"] if self.tolerance else []
        if self.n is not None:
            parts.append(f"binomial at n = {self.n}")
        return f"{self.value:g} [{lo:.4g}, {hi:.4g}]" + (f" ({'; '.join(parts)})" if parts else "")


def transform(scale: str):
    """The scale a rule compares on: ``accuracy`` p → arcsin √p (clamped to [0, 1]), ``linear`` the identity.

    >>> round(transform("accuracy")(0.5), 4), transform("linear")(3.0)
    (0.7854, 3.0)
    """
    if scale == "accuracy":
        return lambda p: float(np.arcsin(np.sqrt(np.clip(p, 0.0, 1.0))))
    if scale == "linear":
        return float
    raise ValueError(f"scale {scale!r}; allowed: {SCALES}")


def inverse(scale: str):
    """The inverse of :func:`transform` (an accuracy's inverse clamped to the transform's range)."""
    if scale == "accuracy":
        return lambda y: float(np.sin(np.clip(y, 0.0, math.pi / 2)) ** 2)
    return float


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


# ---- rule kind ``value``: a number per seed ----------------------------------------------------------------------


@dataclass(frozen=True)
class ValueGrade:
    """A number's verdict (rule kind ``value``) and what the rule computed: ``p``, the two-sided p of the paper's
    value as one more draw of our seeds; ``percentile``, its place in our predictive distribution; ``gap`` = paper −
    our mean in the value's units, ``gap_low``..``gap_high`` its 90% interval (the equivalence test's), ``margin``
    the claim's; ``low``..``high`` our 95% prediction interval for a new seed. NaN where not computed."""

    verdict: str
    detail: str
    p: float = math.nan
    percentile: float = math.nan
    gap: float = math.nan
    gap_low: float = math.nan
    gap_high: float = math.nan
    margin: float = math.nan
    low: float = math.nan
    high: float = math.nan


def _f(scale: str, values: np.ndarray) -> np.ndarray:
    """:func:`transform`, elementwise."""
    if scale == "accuracy":
        return np.arcsin(np.sqrt(np.clip(values, 0.0, 1.0)))
    return np.asarray(values, dtype=float)


def _inv(scale: str, values: np.ndarray) -> np.ndarray:
    """:func:`inverse`, elementwise."""
    if scale == "accuracy":
        return np.sin(np.clip(values, 0.0, math.pi / 2)) ** 2
    return np.asarray(values, dtype=float)


# The predictive distribution's scale mixture is integrated over the chi-square's probability u = v², by
# Gauss-Legendre at this many nodes in v (the square takes out the tail's √q behaviour at q → 0): within 1e-4
# relative of scipy's adaptive quad on 1 to 7 degrees of freedom, tails from 1e-4 up (tests/unit/report/test_rules.py).
_QUADRATURE = 48


@functools.lru_cache(maxsize=64)
def _chi2_nodes(df: int) -> tuple[np.ndarray, np.ndarray]:
    """Nodes q and weights w (summing to 1) with Σ w g(q) ≈ E g(Q), Q ~ χ²(df)."""
    from scipy import stats

    x, w = np.polynomial.legendre.leggauss(_QUADRATURE)
    v = (x + 1) / 2
    return stats.chi2.ppf(v ** 2, df), w * v  # du = 2v dv, and dv = dx / 2


def _mixture_tail(d: np.ndarray, var: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Per case, the two-sided tail P(|X| ≥ d) of a scale mixture of normals: variances ``var`` [case, node] with
    ``weights`` [node]."""
    from scipy.special import erfc

    with np.errstate(divide="ignore", invalid="ignore"):
        z = np.where(var > 0, d[:, None] / np.sqrt(var), np.where(d[:, None] > 0, np.inf, 0.0))
    return erfc(z / math.sqrt(2)) @ weights


def _mixture_quantile(var: np.ndarray, weights: np.ndarray, tail: float) -> np.ndarray:
    """Per case, the half-width h with P(|X| ≥ h) = ``tail`` under the mixture of :func:`_mixture_tail`."""
    lo = np.zeros(len(var))
    hi = 50 * np.sqrt(var.max(axis=1)) + 1e-12
    for _ in range(34):  # bisection, to 1e-10 of the range: the tail falls monotonically in h
        mid = (lo + hi) / 2
        above = _mixture_tail(mid, var, weights) > tail
        lo, hi = np.where(above, mid, lo), np.where(above, hi, mid)
    return (lo + hi) / 2


def value_core(natural: np.ndarray, paper: np.ndarray, *, scale: str, margin: float, paper_sd: np.ndarray,
               paper_sd_natural: np.ndarray, own_sd: np.ndarray) -> dict[str, np.ndarray]:
    """The arithmetic of rule kind ``value`` over many cases at once: a grade is one case, a simulation
    (:mod:`possym.report.power`) many, so that what is simulated is the rule itself.

    natural: [case, seed] our seeds' values; paper: [case] the paper's, both in the value's own units;
    paper_sd: [case] the paper's sd on the transformed scale, paper_sd_natural in the value's units; own_sd: [case]
    the sd the seeds' own intervals imply on the transformed scale (used with one seed, or seeds without spread).

    With n seeds of spread s, a new seed's value is normal with variance σ²(1 + 1/n) about our mean, and σ² given s²
    is (n − 1)s²/χ²(n − 1): without the paper's own variance σ_P² the predictive is Student's t, and with it the
    same scale mixture of normals, of variance σ²(1 + 1/n) + σ_P² (integrated by Gauss-Legendre quadrature
    over the chi-square's probability, :data:`_QUADRATURE` nodes). Its two-sided tail at the paper's value is
    ``p``; the gap to our mean has the mixture of variance σ²/n + σ_P², whose 90% half-width makes
    ``gap_low``..``gap_high``. (Student's t with the paper's
    variance simply added would be far too cautious with few seeds: at 2 seeds it calls a paper of our own
    distribution different in 0.1% of draws, not 5%; :mod:`possym.report.power` measures this rule's size.)
    Returns per case ``p``, ``percentile`` (the paper's place in the t predictive, without σ_P), ``centre`` and
    ``spread`` (the predictive's, transformed scale), ``gap``, ``gap_low``, ``gap_high`` and the booleans
    ``equivalent`` and ``excluded``.

    >>> out = value_core(np.array([[0.0, 1.0, 2.0]]), np.array([1.0]), scale="linear", margin=5.0,
    ...                  paper_sd=np.zeros(1), paper_sd_natural=np.zeros(1), own_sd=np.zeros(1))
    >>> round(float(out["p"][0]), 3), bool(out["equivalent"][0]), bool(out["excluded"][0])
    (1.0, True, False)
    """
    seeds = seed_side(natural, scale=scale, paper_sd_natural=paper_sd_natural)
    return paper_side(seeds, paper, scale=scale, margin=margin, paper_sd=paper_sd, own_sd=own_sd)


def seed_side(natural: np.ndarray, *, scale: str, paper_sd_natural: np.ndarray) -> dict[str, np.ndarray]:
    """The half of :func:`value_core` that our seeds alone decide (a simulation draws them once per case and tries
    many papers against them): their centre and variance on the transformed scale, the chi-square mixture of σ²,
    and the 90% half-width of the gap to their mean."""

    natural = np.asarray(natural, dtype=float)
    cases, n = natural.shape
    x = _f(scale, natural)
    out = {"n": np.full(cases, n), "centre": x.mean(axis=1), "var": x.var(axis=1, ddof=1) if n > 1 else np.zeros(cases),
           "mean": natural.mean(axis=1)}
    if n > 1:
        q, w = _chi2_nodes(n - 1)
        out["weights"] = w
        out["sigma2"] = (n - 1) * out["var"][:, None] / q[None, :]  # [case, node]
        nat = (n - 1) * natural.var(axis=1, ddof=1)[:, None] / q[None, :]
        out["half"] = _mixture_quantile(nat / n + np.asarray(paper_sd_natural)[:, None] ** 2, w, 2 * ALPHA)
    else:
        out["half"] = np.full(cases, np.nan)
    return out


def paper_side(seeds: dict[str, np.ndarray], paper: np.ndarray, *, scale: str, margin: float, paper_sd: np.ndarray,
               own_sd: np.ndarray) -> dict[str, np.ndarray]:
    """The other half of :func:`value_core`: the paper's value against the seeds' side."""
    from scipy import stats

    n = int(seeds["n"][0])
    centre, var = seeds["centre"], seeds["var"]
    has_spread = var > 0
    theirs = _f(scale, paper)
    d = np.abs(theirs - centre)
    p_mix = (_mixture_tail(d, seeds["sigma2"] * (1 + 1 / n) + paper_sd[:, None] ** 2, seeds["weights"]) if n > 1
             else np.ones(len(d)))
    own = np.hypot(own_sd, paper_sd)
    with np.errstate(divide="ignore", invalid="ignore"):
        p_own = np.where(own > 0, 2 * stats.norm.sf(d / own), np.where(d > 0, 0.0, 1.0))
    p = np.where(has_spread, p_mix, p_own)
    spread = np.where(has_spread, np.sqrt(var * (1.0 + 1.0 / n)), own_sd)
    with np.errstate(divide="ignore", invalid="ignore"):
        zq = np.where(spread > 0, (theirs - centre) / spread, np.sign(theirs - centre) * np.inf)
    zq = np.where(np.isnan(zq), 0.0, zq)  # no spread and the paper on our value: its median
    percentile = np.where(has_spread, stats.t.cdf(zq, max(n - 1, 1)), stats.norm.cdf(zq))
    gap = paper - seeds["mean"]
    gap_low, gap_high = gap - seeds["half"], gap + seeds["half"]
    equivalent = (gap_low > -margin) & (gap_high < margin) if n > 1 else np.zeros(len(d), dtype=bool)
    return {"p": p, "percentile": percentile, "centre": centre, "spread": spread, "gap": gap, "gap_low": gap_low,
            "gap_high": gap_high, "equivalent": equivalent, "excluded": p < ALPHA}


def value_verdict(equivalent: bool, excluded: bool) -> str:
    """The order of rule kind ``value``'s verdicts (after floor and ceiling): match, then differs, else consistent."""
    return MATCH if equivalent else DIFFERS if excluded else CONSISTENT


def _hull_sd(seeds: Sequence[Estimate], scale: str, toward: float) -> float:
    """The sd on the transformed scale that the hull of the seeds' own intervals implies as a normal 95%,
    read on the side facing ``toward`` (transformed)."""
    lo, hi = (_f(scale, np.array([v]))[0] for v in (min(e.low for e in seeds), max(e.high for e in seeds)))
    centre = float(_f(scale, np.array([e.value for e in seeds])).mean())
    return float(((centre - lo) if toward < centre else (hi - centre)) / _Z95)


def grade_value(seeds: Sequence[Estimate], paper: PaperValue, *, margin: float, scale: str,
                chance: float | None = None, units: str = "") -> ValueGrade:
    """Rule kind ``value`` (module docstring): the paper's value against our seeds, on ``scale`` ("accuracy":
    floor and ceiling checked, given ``chance``; "linear": a step or a count), with the claim's ``margin`` in the
    value's units. ``units`` names them in the detail ("steps")."""
    if scale not in SCALES:
        raise ValueError(f"scale {scale!r}; allowed: {SCALES}")
    if not seeds:
        return ValueGrade(NA, "no seed")
    if margin <= 0 or not math.isfinite(margin):
        raise ValueError(f"margin={margin} must be a positive number")
    values = [e.value for e in seeds]
    if scale == "accuracy" and chance is not None:
        floor = floor_ceiling(chance)
        if paper.value <= floor and all(v <= floor for v in values):
            return ValueGrade(UNINFORMATIVE, f"paper and every seed at the floor (≤ {floor:.3f}; chance {chance:.2g})")
    if scale == "accuracy" and paper.value >= 1 - paper.tolerance and all(v >= 1 - paper.tolerance for v in values):
        return ValueGrade(CEILING, f"paper and every seed within the figure's resolution ({paper.tolerance:g}) of 1")
    natural = np.array([values])
    centre = float(_f(scale, natural).mean())
    theirs = float(_f(scale, np.array([paper.value]))[0])
    out = {k: float(v[0]) for k, v in value_core(
        natural, np.array([paper.value]), scale=scale, margin=margin,
        paper_sd=np.array([paper.sd(scale, toward=centre)]), paper_sd_natural=np.array([paper.sd("linear")]),
        own_sd=np.array([_hull_sd(seeds, scale, theirs)])).items()}
    from scipy import stats

    n = len(seeds)
    inv = inverse(scale)
    k = float(stats.t.ppf(0.975, n - 1)) if n > 1 and out["spread"] > 0 else _Z95
    low, high = inv(out["centre"] - k * out["spread"]), inv(out["centre"] + k * out["spread"])
    how = f"t over {n} seeds" if n > 1 and len(set(values)) > 1 else "the seeds' own intervals: no spread over seeds"
    fmt = ".3g" if scale == "accuracy" else ".0f"
    unit = f" {units}" if units else ""
    text = (f"paper {paper.text()}; a new seed of ours [{low:{fmt}}, {high:{fmt}}] ({how}): p = {out['p']:.2g}, the "
            f"paper at our {_ordinal(out['percentile'])} percentile; gap (paper − our mean) {out['gap']:+{fmt}}{unit}")
    text += (f", 90% [{out['gap_low']:+{fmt}}, {out['gap_high']:+{fmt}}]" if n > 1 else " (one seed: no interval)")
    text += f" against the margin ±{margin:g}{unit}"
    verdict = value_verdict(bool(out["equivalent"]), bool(out["excluded"]))
    return ValueGrade(verdict, text, out["p"], out["percentile"], out["gap"], out["gap_low"], out["gap_high"],
                      margin, low, high)


def grade_one_seed(seed: Estimate, paper: PaperValue, *, margin: float, scale: str,
                   chance: float | None = None) -> str:
    """One seed graded alone by the same definitions, its own interval standing in for the spread: match if the
    gap's 90% interval (the seed's own sd and the paper's, normal) lies inside the margin, differs if the paper
    lies outside the seed's own 95% (two-sided, on the rule's scale), else consistent; floor and ceiling first.

    >>> grade_one_seed(Estimate(0.50, 0.48, 0.52), PaperValue(0.51, 0.01), margin=0.10, scale="accuracy")
    'match'
    >>> grade_one_seed(Estimate(0.50, 0.48, 0.52), PaperValue(0.74, 0.01), margin=0.10, scale="accuracy")
    'differs'
    """
    g = grade_value([seed], paper, margin=margin, scale=scale, chance=chance)
    if g.verdict in (UNINFORMATIVE, CEILING, NA):
        return g.verdict
    own = (seed.high - seed.low) / 2 / _Z95
    half = 1.6448536269514722 * math.hypot(own, paper.sd("linear"))
    gap = paper.value - seed.value
    if -margin < gap - half and gap + half < margin:
        return MATCH
    return g.verdict


def _ordinal(q: float) -> str:
    """A percentile in words: 0.034 → '3rd'; beyond 0.5% of either end, '<1st' / '>99th'.

    >>> _ordinal(0.034), _ordinal(0.512), _ordinal(0.0001), _ordinal(0.9999)
    ('3rd', '51st', '<1st', '>99th')
    """
    if math.isnan(q):
        return "undefined"
    if q < 0.005:
        return "<1st"
    if q > 0.995:
        return ">99th"
    k = int(round(100 * q))
    suffix = "th" if 10 <= k % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(k % 10, "th")
    return f"{k}{suffix}"


# ---- rule kind ``seeds``: a statement, a set or a count per seed ------------------------------------------------


@dataclass(frozen=True)
class SeedVerdict:
    """One seed's verdict on a statement, a set or a count: the ``worst`` and the ``best`` its intervals allow
    (equal when they decide it), each in :data:`ORDINAL`; ``text`` what the seed shows.

    >>> SeedVerdict.holds(True).decided, SeedVerdict.of(DIFFERS, MATCH).decided
    (True, False)
    """

    worst: str
    best: str
    text: str = ""

    def __post_init__(self) -> None:
        if self.worst not in ORDINAL or self.best not in ORDINAL:
            raise ValueError(f"a seed's verdicts {self.worst!r}, {self.best!r}; allowed: {ORDINAL}")
        if ORDINAL.index(self.best) > ORDINAL.index(self.worst):
            raise ValueError(f"best {self.best!r} is worse than worst {self.worst!r}")

    @classmethod
    def of(cls, worst: str, best: str | None = None, text: str = "") -> SeedVerdict:
        return cls(worst, worst if best is None else best, text)

    @classmethod
    def holds(cls, surely: bool | None, possibly: bool | None = None, *, weak: bool | None = None,
              text: str = "") -> SeedVerdict:
        """A statement at one seed: ``surely`` holds under every reading its intervals allow, ``possibly`` under
        some (default: as ``surely``); ``weak``: its weaker form holds surely (a fail is then ``partial``)."""
        possibly = surely if possibly is None else possibly or bool(surely)
        fail = PARTIAL if weak else DIFFERS
        return cls(MATCH if surely else fail, MATCH if possibly else fail, text)

    @property
    def decided(self) -> bool:
        return self.worst == self.best

    @property
    def label(self) -> str:
        """``match``, or ``differs or match`` where the intervals leave it open."""
        return self.worst if self.decided else f"{self.worst} or {self.best}"


@dataclass(frozen=True)
class SeedsGrade:
    """The verdict of rule kind ``seeds`` and its counts: ``n`` seeds, ``surely_match``, ``surely_differs``,
    ``undecided``."""

    verdict: str
    detail: str
    n: int
    surely_match: int
    surely_differs: int
    undecided: int


def jaccard(a: frozenset[int], b: frozenset[int]) -> float:
    """|a ∩ b| / |a ∪ b|; 1 for two empty sets."""
    union = a | b
    return len(a & b) / len(union) if union else 1.0


def set_verdict(ours: frozenset[int], paper: frozenset[int]) -> str:
    """One set against the paper's: match if J = 1, partial if J >= :data:`JACCARD_PARTIAL`, else differs."""
    j = jaccard(ours, paper)
    return MATCH if j == 1.0 else PARTIAL if j >= JACCARD_PARTIAL else DIFFERS


def set_seed(sure: frozenset[int], possible: frozenset[int], paper: frozenset[int], text: str = "") -> SeedVerdict:
    """One seed's layer set, known to lie between ``sure`` and ``possible`` (its intervals): the best and worst
    :func:`set_verdict` over every set in between (enumerated: the undecided layers are few).

    >>> set_seed(frozenset({1, 2}), frozenset({1, 2, 3}), frozenset({1, 2, 3})).label
    'partial or match'
    """
    if not sure <= possible:
        raise ValueError(f"sure layers {sorted(sure)} must lie among the possible ones {sorted(possible)}")
    open_layers = sorted(possible - sure)
    if len(open_layers) > 12:
        raise ValueError(f"{len(open_layers)} undecided layers; at most 12 are enumerated")
    ranks = [ORDINAL.index(set_verdict(sure | frozenset(c), paper))
             for k in range(len(open_layers) + 1) for c in combinations(open_layers, k)]
    return SeedVerdict(ORDINAL[max(ranks)], ORDINAL[min(ranks)], text)


def count_verdict(ours: int, paper: int, match_within: int = COUNT_MATCH, partial_within: int = COUNT_PARTIAL) -> str:
    """One count against the paper's: match within ``match_within``, partial within ``partial_within``."""
    gap = abs(ours - paper)
    return MATCH if gap <= match_within else PARTIAL if gap <= partial_within else DIFFERS


def count_seed(low: int, high: int, paper: int, *, match_within: int = COUNT_MATCH,
               partial_within: int = COUNT_PARTIAL, text: str = "") -> SeedVerdict:
    """One seed's count, known to lie in ``low``..``high``: the best and worst :func:`count_verdict` there.

    >>> count_seed(9, 11, 11).label
    'partial or match'
    """
    ranks = [ORDINAL.index(count_verdict(c, paper, match_within, partial_within)) for c in range(low, high + 1)]
    return SeedVerdict(ORDINAL[max(ranks)], ORDINAL[min(ranks)], text)


def grade_seeds(seeds: Sequence[SeedVerdict]) -> SeedsGrade:
    """Rule kind ``seeds`` (module docstring): match if every seed surely matches; differs if more than half surely
    differ; partial if more than half are surely at least partial and some seed is surely not a match; else
    consistent; n/a with no seed."""
    n = len(seeds)
    if not n:
        return SeedsGrade(NA, "no seed", 0, 0, 0, 0)
    match = sum(s.worst == MATCH for s in seeds)
    differs = sum(s.best == DIFFERS for s in seeds)
    partial = sum(s.worst in (MATCH, PARTIAL) for s in seeds)
    undecided = sum(not s.decided for s in seeds)
    if match == n:
        verdict = MATCH
    elif 2 * differs > n:
        verdict = DIFFERS
    elif 2 * partial > n and any(s.best != MATCH for s in seeds):
        verdict = PARTIAL
    else:
        verdict = CONSISTENT
    parts = [f"surely matches at {match} of {n} seed{'s' if n > 1 else ''}"]
    if differs:
        parts.append(f"surely differs at {differs}")
    if undecided:
        parts.append(f"undecided by its intervals at {undecided}")
    words = ", ".join(parts)
    return SeedsGrade(verdict, words, n, match, differs, undecided)


def per_seed_verdicts(verdicts: Sequence[str]) -> str:
    """How many seeds give each verdict, most first: ``partial at 2 seeds, differs at 1``.

    >>> per_seed_verdicts(["partial", "differs", "partial"])
    'partial at 2 seeds, differs at 1'
    """
    counts = Counter(verdicts)
    order = sorted(counts, key=lambda v: (-counts[v], v))
    return ", ".join(f"{v} at {counts[v]}" + (" seeds" if i == 0 and counts[v] > 1 else " seed" if i == 0 else "")
                     for i, v in enumerate(order))


# ---- two groups of seeds: a supplementary test some statements show beside their verdict ----------------------


@dataclass(frozen=True)
class GroupComparison:
    """Two groups of per-seed values: their means, b − a, and two tests of "no difference".

    ``p_permutation``: exact two-sided permutation test of the difference in means (every split of the pooled
    values into groups of the same sizes; for ``paired``, every sign flip of the differences); ``p_min`` the
    smallest p that test can give at these sizes (0.1 for 3 against 3, 0.25 for 3 pairs); ``p_welch`` Welch's t
    test (paired: the paired t test), NaN where both groups have no spread. ``separated``: every b above every a,
    or every b below every a (paired: every difference of one sign).
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
