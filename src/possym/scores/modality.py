"""Is a mixed head a mixture? Silverman's bootstrap test of unimodality on its per-input scores.

A mixed head (the number model's L0 at about (s_POS, s_SYM) = (0.4, 0.6)) may be positional on some inputs
and not others (bimodal per-input scores) or equally mixed on each (unimodal). Silverman's (1981) test:
h_crit is the smallest bandwidth at which the Gaussian KDE has one mode; p = P*(a resample's KDE at h_crit has
more than one mode), resamples y* = x̄ + (x*_i − x̄ + h_crit ε_i) / sqrt(1 + h_crit²/σ̂²). Chosen because its null
is exactly "unimodal" with no component shape assumed (a Gaussian-mixture BIC would reject any skewed sample in
[0, 1]; Hartigan's dip has no kept implementation here and is long to write); it is conservative (Hall and
York, 2001), so a detected mixture is safe and a miss at small n weak. :class:`ModalityTest` also gives the
antimode and the share of values above it. The ``l0`` stage uses it: docs/reproduce.md, "Stages".

Example (half the inputs near 0.05, half near 0.95; then one bump):
    >>> rng = np.random.default_rng(0)
    >>> mix = np.concatenate([rng.normal(0.05, 0.03, 50), rng.normal(0.95, 0.03, 50)])
    >>> t = unimodality_test(mix, np.random.default_rng(1), n_boot=100)
    >>> t.p_value < 0.05, round(t.share_above, 2)
    (True, 0.5)
    >>> unimodality_test(rng.normal(0.4, 0.1, 100), np.random.default_rng(1), n_boot=100).p_value > 0.05
    True"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from possym.errors import PossymError

__all__ = ["ModalityTest", "critical_bandwidth", "kde_modes", "unimodality_test"]


def _density(x: np.ndarray, bandwidth: float, grid_points: int) -> tuple[np.ndarray, np.ndarray]:
    """A Gaussian KDE (unnormalised) of ``x`` on a grid that resolves its bandwidth."""
    lo, hi = x.min() - 3 * bandwidth, x.max() + 3 * bandwidth
    n = int(min(max(grid_points, math.ceil(4 * (hi - lo) / bandwidth)), 20_000))
    grid = np.linspace(lo, hi, n)
    z = (grid[:, None] - x[None, :]) / bandwidth
    return grid, np.exp(-0.5 * z * z).sum(1)


def _peaks(dens: np.ndarray) -> np.ndarray:
    """Indices of the local maxima (a plateau counts once), ignoring rounding-level wiggles."""
    tol = 1e-9 * dens.max()
    d = np.diff(dens)
    sign = np.where(d > tol, 1, np.where(d < -tol, -1, 0))
    nz = np.flatnonzero(sign)
    if len(nz) == 0:
        return np.array([len(dens) // 2])
    s = sign[nz]
    ups = nz[np.flatnonzero((s[:-1] == 1) & (s[1:] == -1))]
    return ups + 1


def kde_modes(values: np.ndarray, bandwidth: float, grid_points: int = 512) -> int:
    """The number of modes of the Gaussian kernel density estimate of ``values`` at ``bandwidth``.

    >>> kde_modes(np.array([0.0, 0.0, 1.0, 1.0]), 0.1), kde_modes(np.array([0.0, 0.0, 1.0, 1.0]), 1.0)
    (2, 1)
    """
    x = np.asarray(values, dtype=np.float64)
    if not bandwidth > 0:
        raise PossymError(f"kde_modes: bandwidth={bandwidth} must be > 0")
    return len(_peaks(_density(x, bandwidth, grid_points)[1]))


def critical_bandwidth(values: np.ndarray, rel_tol: float = 1e-4) -> float:
    """Silverman's h_crit: the smallest Gaussian-KDE bandwidth with one mode (0 if every value is equal)."""
    x = np.asarray(values, dtype=np.float64)
    spread = float(x.max() - x.min())
    if spread == 0:
        return 0.0
    lo, hi = spread * 1e-6, spread
    while kde_modes(x, hi) > 1:  # a Gaussian KDE at h ≥ range/2 is unimodal; doubling is a safe guard
        hi *= 2
    if kde_modes(x, lo) == 1:
        return lo
    while hi - lo > rel_tol * hi:
        mid = math.sqrt(lo * hi)  # bisection on the log scale: h_crit may be small or large
        lo, hi = (mid, hi) if kde_modes(x, mid) > 1 else (lo, mid)
    return hi


@dataclass(frozen=True)
class ModalityTest:
    """Silverman's test of one sample (module docstring).

    n: values tested; critical_bandwidth: h_crit; p_value: the share of the ``n_boot`` smoothed
    resamples with more than one mode at h_crit (small: a mixture); antimode: the density's minimum
    between its two highest modes just below h_crit (NaN if the values are all equal); share_above: the
    share of values above the antimode; mean_below, mean_above: the values' means on either side.
    """

    n: int
    critical_bandwidth: float
    p_value: float
    n_boot: int
    antimode: float
    share_above: float
    mean_below: float
    mean_above: float

    def is_mixture(self, alpha: float = 0.05) -> bool:
        """Whether unimodality is rejected at level ``alpha``."""
        return self.p_value < alpha


def unimodality_test(values: np.ndarray, rng: np.random.Generator, n_boot: int = 500) -> ModalityTest:
    """Silverman's bootstrap test that ``values`` (1-d, NaN dropped, at least 3) come from a unimodal density."""
    x = np.asarray(values, dtype=np.float64).ravel()
    x = x[~np.isnan(x)]
    if len(x) < 3:
        raise PossymError(f"unimodality_test needs at least 3 values; got {len(x)}")
    if n_boot < 1:
        raise PossymError(f"unimodality_test: n_boot={n_boot} must be >= 1")
    h = critical_bandwidth(x)
    if h == 0:
        v = float(x[0])
        return ModalityTest(len(x), 0.0, 1.0, n_boot, math.nan, 0.0, v, math.nan)
    mean, var = x.mean(), x.var()
    scale = 1 / math.sqrt(1 + h * h / var)
    more = 0
    for _ in range(n_boot):
        star = rng.choice(x, size=len(x), replace=True) + h * rng.standard_normal(len(x))
        more += kde_modes(mean + (star - mean) * scale, h) > 1
    antimode = _antimode(x, h * 0.999)
    above = x > antimode
    return ModalityTest(len(x), h, more / n_boot, n_boot, antimode, float(above.mean()),
                        float(x[~above].mean()) if (~above).any() else math.nan,
                        float(x[above].mean()) if above.any() else math.nan)


def _antimode(x: np.ndarray, bandwidth: float) -> float:
    """The lowest density between the two highest modes of the KDE at ``bandwidth`` (the midpoint of the
    data if it has one mode)."""
    grid, dens = _density(x, bandwidth, 512)
    peaks = _peaks(dens)
    if len(peaks) < 2:
        return float((x.min() + x.max()) / 2)
    a, b = sorted(peaks[np.argsort(dens[peaks])[-2:]])
    return float(grid[a + int(np.argmin(dens[a : b + 1]))])
