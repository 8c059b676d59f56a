"""The two-sided contrast rule on curves whose shape is known."""

from __future__ import annotations

import numpy as np
import pytest

from possym.canonical.ushape import contrasts, curve_shape, thirds, u_test

P = np.arange(9)


@pytest.mark.parametrize(
    ("curve", "shape"),
    [
        (0.4 + 0.03 * (P - 4) ** 2, "U"),
        (0.9 - 0.03 * (P - 4) ** 2, "inverted-U"),
        (0.1 + 0.1 * P, "none"),  # monotone
        (np.exp(-P / 2.0), "none"),  # monotone and convex: one contrast has the wrong sign
        (np.full(9, 0.7), "none"),
        (np.abs(P - 4) * 0.05, "U"),  # a V is a U
    ],
)
def test_exact_curves_get_their_known_shape(curve: np.ndarray, shape: str) -> None:
    assert curve_shape(curve) == shape


def test_both_contrasts_vanish_on_every_straight_line() -> None:
    rng = np.random.default_rng(0)
    for m in range(3, 20):
        a, b = rng.normal(size=2)
        c_l, c_r = contrasts(a + b * np.arange(m))
        # on a line the middle and the two ends are symmetric about the centre: c_L = -c_R and c_L + c_R = 0
        assert abs(c_l + c_r) < 1e-12


def test_thirds_partition_the_positions() -> None:
    for m in range(3, 12):
        left, mid, right = thirds(m)
        assert np.array_equal(np.concatenate([left, mid, right]), np.arange(m)) and len(left) == len(right) >= 1


def _counts(curve: np.ndarray, n: int, seeds: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    total = np.full((seeds, len(curve)), n)
    return rng.binomial(total, np.broadcast_to(curve, total.shape)), total


def test_bootstrap_finds_a_sampled_u_and_a_sampled_inverted_u() -> None:
    rng = np.random.default_rng(1)
    u = u_test(*_counts(0.4 + 0.03 * (P - 4) ** 2, 200, 3, rng), rng)
    inv = u_test(*_counts(0.9 - 0.03 * (P - 4) ** 2, 200, 3, rng), rng)
    assert u.shape == "U" and u.hi < 0 and inv.shape == "inverted-U" and inv.lo > 0


def test_bootstrap_does_not_call_a_flat_curve_or_a_thin_sample_a_u() -> None:
    rng = np.random.default_rng(2)
    flat = [u_test(*_counts(np.full(9, 0.5), 200, 3, rng), rng).shape for _ in range(10)]
    thin = u_test(*_counts(0.45 + 0.01 * (P - 4) ** 2, 5, 3, rng), rng)
    assert flat.count("none") >= 9 and thin.shape == "none"


def test_bad_counts_are_refused() -> None:
    with pytest.raises(ValueError, match="total > 0"):
        u_test(np.ones((2, 4)), np.zeros((2, 4)), np.random.default_rng(0))
