""""U-shaped" as a statistic: the two-sided middle-versus-ends contrast with a bootstrap interval.

A curve a_0..a_{m-1} over answer positions (m >= 3) is split into thirds, ends L and R (⌊m/3⌋ each) and middle M:

    c_L = mean_M a − mean_L a,        c_R = mean_M a − mean_R a      (both 0 on any straight line).

**U-shaped** if the 95% intervals of c_L and c_R both lie below −``margin`` (:data:`U_MARGIN` = 0.02 accuracy),
**inverted-U** if both lie above +``margin``, else **none**; requiring both sides keeps a monotone convex curve
from counting as a U. The summary contrast is c = (c_L + c_R)/2. :func:`u_test` bootstraps hierarchically (seeds
with replacement, then each seed's per-position accuracy as Binomial(n_p, a_p)/n_p; 2.5-97.5 percentiles). See
docs/canonical.md, "Measurements".

Example:
    >>> p = np.arange(8)
    >>> curve_shape(0.5 + 0.02 * (p - 3.5) ** 2), curve_shape(1 - 0.02 * (p - 3.5) ** 2), curve_shape(0.1 * p)
    ('U', 'inverted-U', 'none')
    >>> correct = np.array([[90, 70, 50, 40, 40, 50, 70, 90]] * 3)          # 3 seeds, 100 inputs a position
    >>> u_test(correct, np.full_like(correct, 100), np.random.default_rng(0)).shape
    'U'"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

U_MARGIN = 0.02
"""The smallest contrast (in accuracy, or attention weight for Theorem 7) that counts as a bend."""

SHAPES = ("U", "inverted-U", "none")


def thirds(m: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(left, middle, right) index arrays of a curve of ``m`` >= 3 points."""
    if m < 3:
        raise ValueError(f"a U needs at least 3 positions, got {m}")
    k = m // 3
    idx = np.arange(m)
    return idx[:k], idx[k : m - k], idx[m - k :]


def contrasts(curve: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(c_L, c_R) of curves [..., m] -> each [...]."""
    curve = np.asarray(curve, dtype=np.float64)
    left, mid, right = thirds(curve.shape[-1])
    m = curve[..., mid].mean(-1)
    return m - curve[..., left].mean(-1), m - curve[..., right].mean(-1)


def classify(left_interval: tuple[float, float], right_interval: tuple[float, float], margin: float = U_MARGIN) -> str:
    """The rule of the module docstring on the two contrasts' intervals (lo, hi)."""
    if left_interval[1] < -margin and right_interval[1] < -margin:
        return "U"
    if left_interval[0] > margin and right_interval[0] > margin:
        return "inverted-U"
    return "none"


EXACT_MARGIN = 1e-9
"""The margin for exact curves (Theorem 7's w_max(j)): any bend above float rounding is real."""


def curve_shape(curve: np.ndarray, margin: float = EXACT_MARGIN) -> str:
    """The rule on one exact curve (m,), whose intervals are points (Theorem 7's w_max(j))."""
    c_l, c_r = contrasts(curve)
    return classify((float(c_l), float(c_l)), (float(c_r), float(c_r)), margin)


@dataclass(frozen=True)
class UTest:
    """The contrast of a seed-mean accuracy curve, its bootstrap intervals and the verdict."""

    contrast: float  # c = mean_M − mean_{L∪R} of the seed-mean curve
    lo: float  # 95% interval of c
    hi: float
    left: tuple[float, float]  # 95% interval of c_L
    right: tuple[float, float]  # 95% interval of c_R
    shape: str  # one of SHAPES
    n_seeds: int


def u_test(
    correct: np.ndarray, total: np.ndarray, rng: np.random.Generator, *, n_boot: int = 2000, margin: float = U_MARGIN
) -> UTest:
    """The two-sided contrast rule with a hierarchical bootstrap; correct, total: [seed, position] counts.

    A position no input reached (total 0) is an error: the curve must be defined everywhere.
    """
    correct, total = np.asarray(correct, dtype=np.float64), np.asarray(total, dtype=np.float64)
    if correct.shape != total.shape or correct.ndim != 2:
        raise ValueError(f"correct and total must both be [seed, position], got {correct.shape} and {total.shape}")
    if (total <= 0).any() or (correct < 0).any() or (correct > total).any():
        raise ValueError("every (seed, position) needs total > 0 and 0 <= correct <= total")
    acc = correct / total
    n_seeds = acc.shape[0]
    pick = rng.integers(0, n_seeds, (n_boot, n_seeds))  # seeds with replacement
    n = total.astype(np.int64)[pick]
    draws = rng.binomial(n, acc[pick]) / n  # [boot, seed, position]
    c_l, c_r = contrasts(draws.mean(1))
    c = (c_l + c_r) / 2
    pct = (2.5, 97.5)
    left, right = tuple(np.percentile(c_l, pct)), tuple(np.percentile(c_r, pct))
    lo, hi = np.percentile(c, pct)
    point_l, point_r = contrasts(acc.mean(0))
    return UTest(
        contrast=float((point_l + point_r) / 2),
        lo=float(lo),
        hi=float(hi),
        left=(float(left[0]), float(left[1])),
        right=(float(right[0]), float(right[1])),
        shape=classify(left, right, margin),
        n_seeds=n_seeds,
    )
