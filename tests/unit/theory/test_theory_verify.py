"""Lemma F.1 made exact: the smallest softmax beta for each n0, found in closed form and confirmed by the
construction itself on every input; and the theorem's conditions, violated, show up as failures."""

import math

import numpy as np
import pytest

from possym.theory.constructions import IndexConstruction, RetrievalConstruction
from possym.theory.functions import (
    IndexSymbols,
    RetrievalSymbols,
    all_index_inputs,
    all_proper_inputs,
    omega,
    sample_proper_inputs,
)
from possym.theory.verify import beta_threshold, check_construction, lemma_f1_beta, search_beta, witness_fails

IDX = IndexConstruction(IndexSymbols(n_letters=2, n_ints=3), theta=0.8)
RET = RetrievalConstruction(RetrievalSymbols(n_letters=3, n_ints=1), theta=0.1)


@pytest.mark.parametrize(("c", "n0"), [(IDX, 4), (IDX, 5), (RET, 3), (RET, 4)], ids=["idx4", "idx5", "ret3", "ret4"])
def test_the_closed_form_beta_is_the_smallest_that_the_construction_needs_on_every_input(c, n0):
    ids = all_index_inputs(c.symbols, n0) if c.name == "index" else all_proper_inputs(c.symbols, n0)
    t = beta_threshold(c, n0)
    found = search_beta(c, ids, lo=t.beta * 0.9, hi=t.beta * 1.1, iters=20)
    assert found == pytest.approx(t.beta, rel=1e-5)
    assert witness_fails(c, t.witness, t.beta * (1 - 1e-6))
    assert not witness_fails(c, t.witness, t.beta * (1 + 1e-6))
    assert check_construction(c, ids, t.beta * (1 + 1e-6)).n_failed == 0


def test_at_n0_two_any_positive_beta_is_exact():
    assert beta_threshold(IDX, 2).beta == 0.0
    assert check_construction(IDX, all_index_inputs(IDX.symbols, 2), beta=1e-3).n_failed == 0


@pytest.mark.parametrize("c", [IDX, RET], ids=["index", "retrieval"])
def test_lemma_f1s_choice_of_beta_is_sufficient_but_larger(c):
    for n0 in (3, 4):
        assert lemma_f1_beta(c, n0) >= beta_threshold(c, n0).beta * (1 - 1e-9)


def test_t_retrieval_at_the_papers_angle_is_exact_under_softmax_just_above_beta_star():
    c = RetrievalConstruction(RetrievalSymbols(8, 8), theta=0.0027)
    t = beta_threshold(c, 24)
    ids = sample_proper_inputs(c.symbols, 24, 300, np.random.default_rng(0))
    assert check_construction(c, ids, t.beta * (1 + 1e-6)).n_failed == 0
    assert witness_fails(c, t.witness, t.beta * (1 - 1e-6))


@pytest.mark.parametrize(("q", "first"), [(5, 7), (3, 4)])
def test_index_at_a_rational_multiple_of_two_pi_fails_exactly_from_length_q_plus_one_or_two(q, first):
    # ties q positions apart; an integer query equal to q (possible when q <= m = 3) ties at length q + 1
    c = IndexConstruction(IndexSymbols(2, 3), theta=2 * math.pi / q)
    chk = check_construction(c, all_index_inputs(c.symbols, first), beta=None)
    assert chk.first_failing_length == first
    assert beta_threshold(c, first).beta == math.inf  # no temperature separates a tie
    assert beta_threshold(c, first - 1).beta < math.inf


def test_retrieval_is_exact_up_to_n0_at_the_papers_boundary_theta_but_fails_at_n0_plus_two():
    n0, w = 4, omega(3)
    ids = all_proper_inputs(RET.symbols, n0)
    at_boundary = RetrievalConstruction(RET.symbols, theta=w / (2 * n0))  # violates theta < omega / 2n0
    assert check_construction(at_boundary, ids, beta=None).n_failed == 0
    # the match "a1" at distance n0 + 1, a key one letter behind ("c") at distance n0: (2 n0 + 1) theta > omega
    worst = RET.symbols.encode(["a1", "c1", "b1", "b1", "b1", "ba"])[None]
    assert check_construction(at_boundary, worst, beta=None).first_failing_length == n0 + 2


def test_retrieval_fails_within_n0_once_theta_reaches_omega_over_2n0_minus_3():
    n0, w = 4, omega(3)
    ids = all_proper_inputs(RET.symbols, n0)
    below = RetrievalConstruction(RET.symbols, theta=w / (2 * n0 - 3) * (1 - 1e-6))
    at = RetrievalConstruction(RET.symbols, theta=w / (2 * n0 - 3))
    assert check_construction(below, ids, beta=None).n_failed == 0
    assert check_construction(at, ids, beta=None).first_failing_length == n0


def test_retrieval_without_rope_ties_a_query_with_an_earlier_token_of_the_same_letter():
    nope = RetrievalConstruction(RET.symbols, theta=0.0)
    chk = check_construction(nope, RET.symbols.encode(["aa", "a1"])[None], beta=None)
    assert chk.n_failed == 1 and chk.failure_position == 1
