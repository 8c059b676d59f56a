"""Silverman's test of unimodality on both sides: mixtures of per-input scores are detected, with the
right component weights; unimodal samples (symmetric, skewed, piled at a bound) are not, at about the
test's level or below; and h_crit is where the modes merge."""

from __future__ import annotations

import numpy as np
import pytest

from possym.errors import PossymError
from possym.scores.modality import critical_bandwidth, kde_modes, unimodality_test


def _clip(x: np.ndarray) -> np.ndarray:
    return np.clip(x, 0.0, 1.0)  # scores live in [0, 1]


@pytest.mark.parametrize("share", [0.3, 0.5])
def test_a_mixture_of_positional_and_mixed_inputs_is_detected_with_its_weights(share):
    rng = np.random.default_rng(4)
    n = 100
    k = int(share * n)
    values = _clip(np.concatenate([rng.normal(0.98, 0.015, k), rng.normal(0.3, 0.08, n - k)]))
    t = unimodality_test(values, np.random.default_rng(0), n_boot=200)
    assert t.is_mixture()
    assert t.share_above == pytest.approx(share, abs=0.02)
    assert t.mean_above > 0.9 and t.mean_below < 0.45


@pytest.mark.parametrize("draw", [
    lambda rng: rng.normal(0.4, 0.1, 100),  # every input equally mixed
    lambda rng: rng.beta(2, 6, 100),  # skewed
    lambda rng: _clip(rng.normal(0.97, 0.05, 100)),  # piled at the upper bound
])
def test_unimodal_samples_are_rarely_called_mixtures(draw):
    rejections = sum(unimodality_test(draw(np.random.default_rng(seed)), np.random.default_rng(seed + 100),
                                      n_boot=100).is_mixture() for seed in range(10))
    assert rejections <= 1  # level 0.05, and the test is conservative


def test_the_critical_bandwidth_is_where_the_modes_merge():
    x = np.random.default_rng(0).normal(0, 1, 60)
    h = critical_bandwidth(x)
    assert kde_modes(x, h) == 1 and kde_modes(x, h * 0.98) > 1
    assert critical_bandwidth(np.full(5, 0.3)) == 0.0
    assert unimodality_test(np.full(5, 0.3), np.random.default_rng(0)).p_value == 1.0


def test_bad_requests_say_what_is_wrong():
    with pytest.raises(PossymError, match="at least 3"):
        unimodality_test(np.array([0.1, np.nan, 0.2]), np.random.default_rng(0))
    with pytest.raises(PossymError, match="bandwidth"):
        kde_modes(np.array([0.0, 1.0]), 0.0)
