"""How sure is a mean score? The spread of per-input scores and a bootstrap interval of their mean.

A head's score over a set S of inputs is the mean of its per-input scores (paper A App. D). A mixed
head's per-input scores vary a lot: on the quick number model, L0's s_POS was 0.436 on one sample
of 100 inputs and 0.347 and 0.342 on two others of 300, each exact. So a score is reported with

    sd        the standard deviation of the per-input scores (ddof = 1), the spread over inputs;
    low, high the percentile bootstrap 95% interval of the mean: B resamples of the n inputs, with
              replacement, and the 2.5% and 97.5% quantiles of their means.

One resample of the inputs serves every head and layer at once (the inputs are the sampling unit),
so the draws cost one [B, n] table of counts per call. The resamples come from a passed-in
:class:`numpy.random.Generator`; :data:`BOOTSTRAP_SEED` seeds the default, so a score file is the
same on every rerun.

Example (a head that is 1 on half the inputs and 0 on the rest):
    >>> values = torch.tensor([[1.0], [0.0]]).repeat(50, 1)
    >>> s = mean_spread(values, np.random.default_rng(0))
    >>> float(s.mean[0]), round(float(s.sd[0]), 3), 0.35 < float(s.low[0]) < 0.45 < 0.55 < float(s.high[0]) < 0.65
    (0.5, 0.503, True)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

BOOTSTRAP_SEED = 0
N_BOOT = 1000  # percentile intervals at 95% settle to ~0.005 of the sd at this many resamples
LEVEL = 0.95


@dataclass(frozen=True)
class MeanSpread:
    """Per column of a [input, ...] table: the mean over inputs (NaN rows skipped), the sd over inputs,
    and the bootstrap interval (low, high) of the mean. Each [...] (the table's trailing dims)."""

    mean: Tensor
    sd: Tensor
    low: Tensor
    high: Tensor
    n: Tensor  # inputs that count, per column


def mean_spread(
    values: Tensor, rng: np.random.Generator | None = None, n_boot: int = N_BOOT, level: float = LEVEL
) -> MeanSpread:
    """Mean, sd and percentile-bootstrap interval of the mean over the first axis of ``values`` [input, ...].

    NaN entries (an input a head was not scored on) are left out of every statistic. A column with one
    scored input has sd NaN and the interval [x, x]; with none, everything NaN.
    """
    if not 0 < level < 1:
        raise ValueError(f"level={level} must lie in (0, 1)")
    if n_boot < 1:
        raise ValueError(f"n_boot={n_boot} must be >= 1")
    rng = np.random.default_rng(BOOTSTRAP_SEED) if rng is None else rng
    x = values.detach().to("cpu", torch.float64)
    ok = ~x.isnan()
    n = ok.sum(0)
    mean = x.nansum(0) / n
    dev = torch.where(ok, x - mean, 0.0)
    sd = (dev.square().sum(0) / (n - 1)).sqrt()
    sd = torch.where(n > 1, sd, float("nan"))
    rows = x.shape[0]
    if rows == 0:
        nan = torch.full(x.shape[1:], float("nan"), dtype=torch.float64)
        return MeanSpread(nan, nan, nan, nan, n)
    # A resample as how often it draws each input: [boot, input] counts, so the resampled sums are one
    # matmul and memory stays boot x (input + column), whatever the number of heads.
    times = torch.from_numpy(rng.multinomial(rows, np.full(rows, 1.0 / rows), size=n_boot)).to(torch.float64)
    flat_x, flat_ok = torch.where(ok, x, 0.0).reshape(rows, -1), ok.reshape(rows, -1).to(torch.float64)
    means = ((times @ flat_x) / (times @ flat_ok)).reshape(n_boot, *x.shape[1:])  # NaN: no scored input drawn
    q = torch.tensor([(1 - level) / 2, (1 + level) / 2], dtype=torch.float64)
    low, high = means.nanquantile(q[0], dim=0), means.nanquantile(q[1], dim=0)
    return MeanSpread(mean, sd, low, high, n)
