"""Definition 3.1 and Theorem 3.2: the exact discrepancy reductions against brute force over every input, and
the bounds where they hold and where they fail, with concrete counterexample inputs (all float64)."""

import itertools
import json
import math
from pathlib import Path

import numpy as np
import pytest

from possym.paper import paper_numbers
from possym.theory.constructions import IndexConstruction, RetrievalConstruction, run_construction
from possym.theory.discrepancy import (
    bound_checks,
    discrepancy_records,
    fig5a_records,
    index_bound,
    index_discrepancy,
    index_witness,
    retrieval_bound,
    retrieval_discrepancy,
    retrieval_witness,
)
from possym.theory.functions import IndexSymbols, RetrievalSymbols, all_index_inputs, all_proper_inputs, omega
from possym.theory.plots import PAPER_FIG5A

# The project's reference folder sits beside the repository (as in CI); the package ships a copy.
PAPER_NUMBERS = Path(__file__).resolve().parents[3].parent / "shared" / "reference" / "paper_numbers.json"


def _top_gap(scores: np.ndarray) -> np.ndarray:
    s = np.sort(scores, axis=-1)
    return s[..., -1] - s[..., -2]


def _query_gaps(c, ids: np.ndarray) -> np.ndarray:
    """top - second of the last query's attention logits, read from the construction's attention module."""
    return _top_gap(run_construction(c, ids, beta=1.0).scores[:, -1].numpy())


@pytest.mark.parametrize("theta", [0.8, 2.0, 2.6])
@pytest.mark.parametrize("m", [1, 3])
def test_index_reduction_equals_brute_force_over_every_valid_input(theta, m):
    c = IndexConstruction(IndexSymbols(2, m), theta)
    for n in range(2, 7):
        gaps = _query_gaps(c, all_index_inputs(c.symbols, n))
        d = index_discrepancy(theta, m, np.array([n]))
        assert gaps.max() == pytest.approx(d.maximum[0], abs=1e-12)
        assert gaps.min() == pytest.approx(d.minimum[0], abs=1e-12)


@pytest.mark.parametrize("theta", [0.1, 0.5, 1.3, 2.9])
def test_retrieval_reductions_equal_brute_force_over_every_proper_input(theta):
    c = RetrievalConstruction(RetrievalSymbols(3, 1), theta)
    for n in range(2, 5):
        gaps = _query_gaps(c, all_proper_inputs(c.symbols, n))
        d = retrieval_discrepancy(theta, 3, np.array([n]))
        assert gaps.max() == pytest.approx(d.maximum[0], abs=1e-12)
        assert gaps.min() == pytest.approx(d.minimum[0], abs=1e-12)


@pytest.mark.parametrize("theta", [0.0027, 0.05, 0.3, 0.77, 1.9])
@pytest.mark.parametrize("a", [2, 4, 8])
def test_retrieval_reductions_equal_enumeration_of_every_realisable_logit_vector(theta, a):
    for n in range(2, 6 if a == 8 else 7):
        logits = np.cos(np.arange(a)[None, :] * omega(a) + np.arange(n)[:, None] * theta)
        d_vectors = np.array(list(itertools.product(range(a), repeat=n)))
        d_vectors = d_vectors[(d_vectors == 0).any(axis=1)]  # a zero: some key has the looked-up letter
        gaps = _top_gap(logits[np.arange(n)[None, :], d_vectors])
        d = retrieval_discrepancy(theta, a, np.array([n]))
        assert gaps.max() == pytest.approx(d.maximum[0], abs=1e-12)
        assert gaps.min() == pytest.approx(d.minimum[0], abs=1e-12)


@pytest.mark.parametrize("theta", [0.0027, 0.3, 1.9])
def test_retrieval_witnesses_are_proper_inputs_that_realise_the_reported_discrepancy(theta):
    sym = RetrievalSymbols(8, 1)
    c = RetrievalConstruction(sym, theta)
    ns = np.array([2, 3, 7, 40, 300])
    d = retrieval_discrepancy(theta, 8, ns)
    for i in range(len(ns)):
        for value, config in ((d.maximum[i], d.max_config[i]), (d.minimum[i], d.min_config[i])):
            ids = sym.encode(retrieval_witness(sym, config))[None]
            assert _query_gaps(c, ids)[0] == pytest.approx(value, abs=1e-12)


def test_retrieval_proof_quantity_is_one_minus_cos_of_omega_minus_n_minus_one_theta():
    theta, ns = 0.0027, np.arange(2, 146)
    d = retrieval_discrepancy(theta, 8, ns, minimum=False)
    np.testing.assert_allclose(d.proof, 1 - np.cos(omega(8) - (ns - 1) * theta), atol=1e-14)


# ---- Theorem 3.2, checked -------------------------------------------------------------------------------


def test_fig5a_curves_are_theorem_32s_bounds_at_the_papers_parameters():
    rows = {(r["function"], r["n"]): r["bound"] for r in fig5a_records()}
    for function in ("index", "retrieval"):
        for n, v in zip(PAPER_FIG5A["n"], PAPER_FIG5A[function], strict=True):
            if v is not None:
                assert rows[(function, n)] == pytest.approx(v, abs=0.006)


@pytest.mark.skipif(not PAPER_NUMBERS.exists(), reason="the shared reference folder is not beside the repository")
def test_the_packaged_paper_numbers_are_the_shared_reference():
    assert json.loads(PAPER_NUMBERS.read_text()) == paper_numbers()
    ref = paper_numbers()["fig5a_discrepancy_bounds"]
    assert {k: ref[k] for k in ("n", "index", "retrieval")} == PAPER_FIG5A


def test_index_bound_holds_for_the_worst_input_at_every_length_up_to_5000():
    ns = np.arange(2, 5001)
    for m in (16, None):
        d = index_discrepancy(0.8, m, ns)
        assert (d.minimum <= index_bound(0.8, ns) + 1e-12).all()
        assert (d.minimum <= 1 - np.cos(2 * np.pi / ns) + 1e-12).all()  # Dirichlet: the sharper bound


@pytest.mark.parametrize(("m", "n", "sigma"), [(None, 9, 4), (16, 54, 16)])
def test_index_bound_fails_for_definition_31s_maximum_with_a_concrete_input(m, n, sigma):
    d = index_discrepancy(0.8, m, np.array([n]))
    assert d.argmax_query[0] == sigma
    bound = index_bound(0.8, n)
    assert d.maximum[0] > bound
    tokens = index_witness(n, sigma, m)  # an integer query in the middle: offsets reach only half as far
    c = IndexConstruction(IndexSymbols(1, n - 1 if m is None else m), 0.8)
    measured = _query_gaps(c, c.symbols.encode(tokens)[None])[0]
    assert measured == pytest.approx(d.maximum[0], abs=1e-12) and measured > bound


def test_index_failures_are_all_in_the_two_pi_squared_term_one_minus_cos_theta_always_holds():
    ns = np.arange(2, 5001)
    for m in (16, None):
        assert (index_discrepancy(0.8, m, ns).maximum <= 1 - math.cos(0.8) + 1e-12).all()


def test_index_maximum_holds_before_the_first_counterexample():
    ns = np.arange(2, 9)
    d = index_discrepancy(0.8, None, ns)
    assert (d.maximum <= index_bound(0.8, ns) + 1e-12).all()


def test_retrieval_bound_fails_for_definition_31s_maximum_already_at_length_two():
    sym = RetrievalSymbols(8, 1)
    c = RetrievalConstruction(sym, 0.0027)
    tokens = ["e1", "a1"]  # the query matches itself (logit 1); "e" sits opposite (logit -cos theta)
    gap = _query_gaps(c, sym.encode(tokens)[None])[0]
    assert gap == pytest.approx(1 + math.cos(0.0027), abs=1e-12)
    assert gap > retrieval_bound(0.0027, 8, 2)
    assert retrieval_discrepancy(0.0027, 8, np.array([2])).maximum[0] == pytest.approx(gap, abs=1e-12)


def test_retrieval_bound_fails_for_the_proofs_own_quantity_by_an_off_by_one():
    sym = RetrievalSymbols(8, 1)
    c = RetrievalConstruction(sym, 0.0027)
    n = 100
    d = retrieval_discrepancy(0.0027, 8, np.array([n]), minimum=False)
    tokens = retrieval_witness(sym, d.proof_config[0])
    assert tokens[0] == "h1" and tokens[-1] == "a1"  # the letter just behind "a", as far back as it goes
    gap = _query_gaps(c, sym.encode(tokens)[None])[0]
    assert gap == pytest.approx(d.proof[0], abs=1e-12)
    assert gap > retrieval_bound(0.0027, 8, n)
    assert gap == pytest.approx(retrieval_bound(0.0027, 8, n - 1), abs=1e-12)  # the bound at n - 1 is exact


def test_records_summarise_where_each_bound_holds_and_fails():
    rows = discrepancy_records(n_max=200)
    assert all(isinstance(r["discrepancy"], float) for r in rows)
    checks = {(c["function"], c["definition"], c["domain"]): c for c in bound_checks(rows)}
    assert checks[("index", "min", "ints<=16")]["n_failed"] == 0
    assert checks[("index", "min", "ints<=n-1")]["n_failed"] == 0
    assert checks[("index", "max", "ints<=n-1")]["first_fail"] == 9
    assert checks[("index", "max", "ints<=16")]["fail_ranges"] == "54-71"
    assert checks[("index", "max", "ints<=n-1")]["fail_ranges"] == "9-15, 54-109"
    assert checks[("retrieval", "min", "A=8")]["n_failed"] == 0
    proof = checks[("retrieval", "proof", "A=8")]
    assert proof["premise_range"] == "2..145" and proof["n_failed"] == proof["n_checked"] == 144
    assert checks[("retrieval", "max", "A=8")]["n_failed"] == 144
