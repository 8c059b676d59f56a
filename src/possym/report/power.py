"""Each rule kind validated by simulation: its size (how often it calls the paper different when the paper is one
more draw of our own distribution) and its power (how large a difference it detects, and how large one it can
still call a match), at each claim's own seed count and spread.

**Rule kind ``value``** (:func:`value_power`), simulated through the rule's own arithmetic
(:func:`possym.report.rules.value_core`): n seeds drawn normal on the rule's scale with our spread s; the paper

- for the *size*, one more draw of the same distribution, read with its own uncertainty σ_P: the share graded
  ``differs`` should be :data:`~possym.report.rules.ALPHA` (the t prediction is exact for normal seeds; with one
  seed, whose own interval stands in for the spread, it is not controlled, and the table says by how much);
- for the *power*, shifted by a gap δ from our mean (in the value's units, either side, then read with σ_P):
  ``differs_80`` the smallest |δ| graded ``differs`` in at least 80% of draws, ``match_05`` the largest |δ|
  still graded ``match`` in at least 5% (at most the margin: the equivalence test's size), ``match_at_0`` the
  share graded ``match`` when the paper equals our mean: below 0.8, a match was out of the evidence's reach.

**Rule kind ``seeds``** (:func:`seeds_power`): a statement that holds at each seed with probability q, its seeds
decided by their intervals. ``match`` needs it at every seed (probability qⁿ) and ``differs`` a failing majority;
``differs_80`` the smallest failure rate 1 − q graded ``differs`` 80% of the time, ``match_05`` the largest still
graded ``match`` 5% of the time; the size is 0 (a statement true at every seed is never called different).

:func:`power_table` gives both kinds at 1, 2, 3, 5 and 8 seeds (the committed ``rule_power.csv``).

Example:
    >>> p = seeds_power(3)
    >>> round(p.match_05, 2), round(p.differs_80, 2)
    (0.63, 0.72)
    >>> v = value_power(8, sd=1.0, paper_sd=0.0, margin=1.0, scale="linear", rng=np.random.default_rng(0), sims=400)
    >>> 0.02 < v.size < 0.09, v.differs_80 > 1.0
    (True, True)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from possym.report.rules import _inv, inverse, paper_side, seed_side, transform

__all__ = ["SeedsPower", "ValuePower", "power_table", "seeds_power", "value_power", "value_size"]

SIZES = (1, 2, 3, 5, 8)
POWER = 0.8  # the share at which a rule "detects" a difference
MATCH_RATE = 0.05  # the share at which a rule can still "match" a difference


@dataclass(frozen=True)
class ValuePower:
    """Rule kind ``value`` at n seeds (module docstring), gaps in the value's units; ``differs_80`` NaN where no gap
    in range reaches 80%."""

    n: int
    size: float
    differs_80: float
    match_05: float
    match_at_0: float

    def text(self, fmt: str = ".2g", units: str = "") -> str:
        u = f" {units}" if units else ""
        found = math.isfinite(self.differs_80)
        return (f"differs 80% at a gap ≥ {self.differs_80:{fmt}}{u}" if found else "differs 80% at no gap in range"
                ) + (f"; match ≥5% up to a gap of {self.match_05:{fmt}}{u}; match at no gap {self.match_at_0:.0%}"
                     f"; size {self.size:.3f}")


@dataclass(frozen=True)
class SeedsPower:
    """Rule kind ``seeds`` at n seeds (module docstring): failure rates 1 − q per seed."""

    n: int
    size: float
    differs_80: float
    match_05: float

    def text(self) -> str:
        d = f"{self.differs_80:.0%}" if math.isfinite(self.differs_80) else "no rate"
        return (f"differs 80% once it fails at ≥ {d} of seeds; match ≥5% while it fails at ≤ {self.match_05:.0%} "
                f"of seeds ({self.n} seeds)")


def _grade(seeds: dict[str, np.ndarray], paper: np.ndarray, *, scale: str, margin: float, paper_sd_t: float,
           own_sd_t: float) -> tuple[np.ndarray, np.ndarray]:
    """(differs, match) per simulated case, by the rule's own arithmetic."""
    cases = len(paper)
    out = paper_side(seeds, paper, scale=scale, margin=margin, paper_sd=np.full(cases, paper_sd_t),
                     own_sd=np.full(cases, own_sd_t))
    match = out["equivalent"]
    return (~match) & out["excluded"], match


def value_size(n: int, *, sd: float, paper_sd: float, margin: float, scale: str, centre: float = 0.5,
               rng: np.random.Generator, sims: int = 2000, own_sd: float | None = None) -> float:
    """The size of rule kind ``value``: the share of papers drawn from our own distribution (normal on the rule's
    scale, spread ``sd``, read with their own sd ``paper_sd``) that it grades ``differs``, against ``n`` seeds.

    >>> size = value_size(3, sd=1.0, paper_sd=0.0, margin=1.0, scale="linear", rng=np.random.default_rng(1),
    ...                   sims=4000)
    >>> 0.03 < size <= 0.05   # an equivalence, shown within the margin, comes before a difference
    True
    """
    f, inv = transform(scale), inverse(scale)
    c = f(centre) if scale == "accuracy" else centre
    own = sd / 2 if own_sd is None else own_sd
    slope = (inv(c + 1e-6) - inv(c - 1e-6)) / 2e-6
    seeds = seed_side(_inv(scale, rng.normal(c, sd, size=(sims, n))), scale=scale,
                      paper_sd_natural=np.full(sims, abs(slope) * paper_sd))
    paper = _inv(scale, c + rng.normal(0, sd, sims) + rng.normal(0, paper_sd, sims))
    differs, _ = _grade(seeds, paper, scale=scale, margin=margin, paper_sd_t=paper_sd, own_sd_t=own)
    return float(differs.mean())


def value_power(n: int, *, sd: float, paper_sd: float, margin: float, scale: str, centre: float = 0.5,
                rng: np.random.Generator, sims: int = 2000, own_sd: float | None = None,
                gaps: Sequence[float] | None = None) -> ValuePower:
    """:class:`ValuePower` of rule kind ``value`` at ``n`` seeds whose spread is ``sd`` on the rule's scale (for an
    accuracy, the arcsine scale, around ``centre``); ``paper_sd``: the paper's own sd on that scale; ``own_sd``: a
    seed's own interval's sd there (one seed; default sd / 2); ``gaps``: the gaps tried (default: a grid to 8 ×
    the larger of the spread, the paper's sd and the margin, in the value's units)."""
    f, inv = transform(scale), inverse(scale)
    c = f(centre) if scale == "accuracy" else centre
    own = sd / 2 if own_sd is None else own_sd
    # The sd of a value in its own units, for the equivalence test's paper term: the derivative of the inverse.
    slope = (inv(c + 1e-6) - inv(c - 1e-6)) / 2e-6
    paper_sd_nat = abs(slope) * paper_sd

    # Our seeds are drawn once and every paper is tried against the same draws (common random numbers).
    seeds = seed_side(_inv(scale, rng.normal(c, sd, size=(sims, n))), scale=scale,
                      paper_sd_natural=np.full(sims, paper_sd_nat))

    size = value_size(n, sd=sd, paper_sd=paper_sd, margin=margin, scale=scale, centre=centre, rng=rng, sims=sims,
                      own_sd=own)
    unit = max(abs(slope) * sd, paper_sd_nat, margin)
    grid = np.linspace(0, 8 * unit, 161) if gaps is None else np.asarray(gaps, dtype=float)
    mean_nat = inv(c)
    d80, m05, m0 = math.nan, 0.0, math.nan
    for sign in (1.0, -1.0):
        found = math.nan
        for gap in grid:
            target = mean_nat + sign * gap
            if scale == "accuracy" and not 0.0 <= target <= 1.0:
                break
            t = f(target) + rng.normal(0, paper_sd, sims)
            paper = _inv(scale, t)
            differs, match = _grade(seeds, paper, scale=scale, margin=margin, paper_sd_t=paper_sd, own_sd_t=own)
            if gap == 0 and math.isnan(m0):
                m0 = float(match.mean())
            if match.mean() >= MATCH_RATE:
                m05 = max(m05, float(gap))
            if math.isnan(found) and differs.mean() >= POWER:
                found = float(gap)
        d80 = found if math.isnan(d80) else max(d80, found) if math.isfinite(found) else d80
    return ValuePower(n, size, d80, m05, m0)


def seeds_power(n: int, sims: int = 0, rng: np.random.Generator | None = None) -> SeedsPower:
    """:class:`SeedsPower` of rule kind ``seeds`` at ``n`` seeds, each deciding the statement: in closed form
    (``sims`` = 0), or simulated with ``sims`` draws per failure rate (the two agree: a test holds them so)."""
    from scipy import stats

    rates = np.linspace(0, 1, 101)
    if sims:
        rng = np.random.default_rng(0) if rng is None else rng
        fails = rng.random((len(rates), sims, n)) < rates[:, None, None]
        k = fails.sum(axis=2)
        p_match = (k == 0).mean(axis=1)
        p_differs = (2 * k > n).mean(axis=1)
    else:
        p_match = (1 - rates) ** n
        p_differs = stats.binom.sf(n // 2, n, rates)
    reach = rates[p_differs >= POWER]
    return SeedsPower(n, float(p_differs[0]), float(reach[0]) if len(reach) else math.nan,
                      float(rates[p_match >= MATCH_RATE].max()))


def power_table(rng: np.random.Generator | None = None, sims: int = 2000) -> pd.DataFrame:
    """Size and power of each rule kind at 1, 2, 3, 5 and 8 seeds (``rule_power.csv``): rule kind ``value`` on a
    linear scale (a step: gaps in units of the between-seed sd s, the margin s, the paper's sd s/4), and on the
    accuracy scale at 0.5 as the length claims have it (gaps in accuracy; seeds spread 0.05, the paper's own sd
    0.027, its binomial error at 500 inputs with the digitisation's ±0.01, the margin 0.10); a seed's own
    interval's sd is half the spread (it stands in for the spread with one seed); and rule kind ``seeds``,
    failure rates per seed."""
    rng = np.random.default_rng(0) if rng is None else rng
    rows = []
    for n in SIZES:
        p = value_power(n, sd=1.0, paper_sd=0.25, margin=1.0, scale="linear", rng=rng, sims=sims)
        rows.append({"rule": "value (linear)", "seeds": n, "size": p.size, "differs_80": p.differs_80,
                     "match_05": p.match_05, "match_at_0": p.match_at_0,
                     "units": "gap in between-seed sds; margin 1 sd, the paper's sd 1/4"})
        p = value_power(n, sd=0.05, paper_sd=0.027, margin=0.10, scale="accuracy", rng=rng, sims=sims)
        rows.append({"rule": "value (accuracy)", "seeds": n, "size": p.size, "differs_80": p.differs_80,
                     "match_05": p.match_05, "match_at_0": p.match_at_0,
                     "units": "gap in accuracy at 0.5; seeds' spread 0.05, the paper's sd 0.027, margin 0.10"})
        s = seeds_power(n)
        rows.append({"rule": "seeds", "seeds": n, "size": s.size, "differs_80": s.differs_80, "match_05": s.match_05,
                     "match_at_0": 1.0, "units": "failure rate per seed"})
    return pd.DataFrame(rows)


def claim_power(n: int, *, scale: str, sd_t: float, paper_sd_t: float, margin: float, centre: float,
                own_sd_t: float, rng: np.random.Generator, sims: int = 1000) -> ValuePower:
    """:func:`value_power` at one claim's own seeds (n, their spread ``sd_t`` and mean ``centre``), the paper's sd
    and the claim's margin."""
    return value_power(n, sd=sd_t, paper_sd=paper_sd_t, margin=margin, scale=scale, centre=centre, rng=rng,
                       sims=sims, own_sd=own_sd_t)

