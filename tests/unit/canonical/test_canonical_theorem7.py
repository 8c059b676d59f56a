"""Theorem 7's heads compiled into GPTJ weights, against their closed forms and the shapes the theorem states."""

from __future__ import annotations

import numpy as np
import pytest

from possym.canonical.theorem7 import (
    positional_wmax,
    positional_wmax_closed,
    symbolic_wmax,
    symbolic_wmax_closed,
    theorem7_curves,
)
from possym.canonical.ushape import curve_shape


@pytest.mark.parametrize(("n", "theta", "beta"), [(8, 0.2, 8.0), (16, 0.1, 4.0), (12, 1.0, 8.0), (5, 0.5, 2.0)])
def test_compiled_positional_head_equals_its_closed_form(n: int, theta: float, beta: float) -> None:
    assert np.allclose(positional_wmax(n, theta, beta), positional_wmax_closed(n, theta, beta), rtol=0, atol=1e-12)


@pytest.mark.parametrize(
    ("n", "theta", "beta", "centre"), [(8, 0.3, 4.0, None), (16, 0.15, 8.0, None), (8, 0.05, 3.0, 1.0)]
)
def test_compiled_symbolic_head_equals_its_closed_form(n: int, theta: float, beta: float, centre: float | None) -> None:
    got = symbolic_wmax(n, theta, beta, centre)
    assert np.allclose(got, symbolic_wmax_closed(n, theta, beta, centre), rtol=0, atol=1e-12)


@pytest.mark.parametrize(("n", "theta"), [(16, 0.05), (16, 0.19), (9, 0.3), (30, 0.1)])
def test_positional_wmax_is_a_symmetric_u_with_its_minimum_in_the_middle_when_n_theta_at_most_pi(
    n: int, theta: float
) -> None:
    w = positional_wmax(n, theta, 8.0)
    assert n * theta <= np.pi
    # keys 0..N (the query's own at N): w(j) = w(N - j), symmetric about N/2, falling until there
    assert np.allclose(w[1:], w[1:][::-1], atol=1e-12)
    assert np.all(np.diff(w[: n // 2 + 1]) < 0) and np.all(np.diff(w[n // 2 :]) > 0)
    assert curve_shape(w) == "U"


def test_positional_wmax_is_not_a_u_at_a_high_frequency() -> None:
    assert curve_shape(positional_wmax(16, 1.0, 8.0)) != "U"


@pytest.mark.parametrize(("n", "theta"), [(16, 0.05), (16, 0.19), (8, 0.3)])
def test_simplified_symbolic_wmax_is_an_inverted_u_and_flat_without_rotation(n: int, theta: float) -> None:
    w = symbolic_wmax(n, theta, 4.0)
    assert np.allclose(w, w[::-1], atol=1e-12) and curve_shape(w) == "inverted-U"
    assert np.ptp(symbolic_wmax_closed(n, 0.0, 4.0)) == 0  # NoPE: flat


def test_an_uncentred_symbolic_head_is_monotone_not_an_inverted_u() -> None:
    w = symbolic_wmax(8, 0.1, 4.0, centre=0.0)  # paper A's T_Retrieval alignment: best next to the query
    assert np.all(np.diff(w) > 0) and curve_shape(w) == "none"


def test_the_symbolic_head_refuses_the_regime_where_it_no_longer_retrieves() -> None:
    with pytest.raises(AssertionError, match="not the maximal"):
        symbolic_wmax(8, 0.6, 4.0)


def test_theorem7_curves_cover_both_heads() -> None:
    curves = theorem7_curves(n_content=8, pos_thetas=(0.1,), sym_thetas=(0.1,), uncentred_thetas=(0.1,))
    assert [(c.head, c.shape) for c in curves] == [("H_POS", "U"), ("H_SYM", "inverted-U"), ("H_SYM_c0", "none")]
