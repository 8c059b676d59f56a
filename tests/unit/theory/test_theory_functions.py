"""The paper's basic functions (App. F.1) as oracles: worked examples, domains, enumeration and samplers."""

import numpy as np
import pytest

from possym.tasks import generate, task_config, task_vocab
from possym.theory.functions import (
    IndexSymbols,
    RetrievalSymbols,
    all_index_inputs,
    all_proper_inputs,
    is_proper,
    is_valid_index_input,
    retrieval,
    retrieval_defined,
    sample_index_inputs,
    sample_proper_inputs,
    selective_index,
)


def _index_loop(names: list[str]) -> list[str]:
    """Listing 1's ``index``, on names, without Python's negative-index wrap-around."""
    out = list(names)
    for n, tok in enumerate(names):
        if tok.isdigit():
            i = int(tok)
            assert n - i >= 0
            if not names[n - i].isdigit():
                out[n] = names[n - i]
    return out


def _retrieval_loop(names: list[str]) -> list[str]:
    """Listing 1's ``retrieval`` (first match strictly before n, else keep), on names."""
    out = list(names)
    for n, tok in enumerate(names):
        if tok[1].isalpha():
            for i in range(n):
                if names[i][0] == tok[1]:
                    out[n] = names[i]
                    break
    return out


def test_selective_index_copies_a_letter_and_keeps_an_integer_that_points_at_an_integer():
    sym = IndexSymbols(n_letters=3, n_ints=3)
    names = ["a", "b", "c", "2", "1", "3"]
    assert sym.decode(selective_index(sym.encode(names)[None], sym)[0]) == ["a", "b", "c", "b", "1", "c"]


def test_selective_index_agrees_with_listing_1_on_random_valid_inputs():
    sym = IndexSymbols(n_letters=4, n_ints=6)
    ids = sample_index_inputs(sym, 12, 200, np.random.default_rng(0))
    out = selective_index(ids, sym)
    for row, got in zip(ids, out, strict=True):
        assert sym.decode(got) == _index_loop(sym.decode(row))


def test_selective_index_refuses_an_integer_pointing_before_the_start():
    sym = IndexSymbols(n_letters=2, n_ints=3)
    with pytest.raises(ValueError, match="before the start"):
        selective_index(sym.encode(["a", "3"])[None], sym)


def test_retrieval_follows_the_right_letter_to_the_token_it_starts():
    sym = RetrievalSymbols(n_letters=3, n_ints=2)
    ids = sym.encode(["b1", "c2", "ab", "bc"])[None]
    assert sym.decode(retrieval(ids, sym)[0]) == ["b1", "c2", "b1", "c2"]
    assert is_proper(ids, sym)[0]


def test_a_pair_whose_letter_starts_two_different_tokens_is_improper():
    sym = RetrievalSymbols(n_letters=3, n_ints=2)
    assert not is_proper(sym.encode(["b1", "b2", "ab"])[None], sym)[0]
    assert not is_proper(sym.encode(["ab"])[None], sym)[0]  # nothing starts with b
    assert is_proper(sym.encode(["aa", "aa", "ba"])[None], sym)[0]  # aa matches itself


def test_retrieval_agrees_with_listing_1_on_proper_inputs():
    sym = RetrievalSymbols(n_letters=4, n_ints=3)
    ids = sample_proper_inputs(sym, 20, 200, np.random.default_rng(1))
    for row, got in zip(ids, retrieval(ids, sym), strict=True):
        assert sym.decode(got) == _retrieval_loop(sym.decode(row))


def test_enumeration_counts_match_a_direct_count():
    sym = IndexSymbols(n_letters=2, n_ints=3)
    # position j (0-based) may hold a letter or an integer 1..min(3, j)
    assert len(all_index_inputs(sym, 6)) == 2 * 3 * 4 * 5 * 5 * 5
    rs = RetrievalSymbols(n_letters=2, n_ints=1)
    proper = all_proper_inputs(rs, 3)
    assert is_proper(proper, rs).all()
    brute = [s for s in np.ndindex(*(rs.size,) * 3) if is_proper(np.array([s]), rs)[0]]
    assert len(proper) == len(brute)


def test_samplers_only_produce_inputs_in_the_domain():
    rng = np.random.default_rng(2)
    sym = IndexSymbols(n_letters=8, n_ints=63)
    assert is_valid_index_input(sample_index_inputs(sym, 64, 300, rng), sym).all()
    rs = RetrievalSymbols(n_letters=8, n_ints=8)
    ids = sample_proper_inputs(rs, 100, 300, rng)
    assert is_proper(ids, rs).all()
    assert rs.is_pair(ids).mean() > 0.05  # pairs (the interesting queries) do occur


def test_task_instances_are_in_the_domain_of_the_functions():
    number, letter = task_config("number"), task_config("letter")
    rng = np.random.default_rng(3)
    sym = IndexSymbols(120, 16)
    nv = task_vocab(number)
    ids = np.stack([sym.encode(nv.decode(r)) for r in generate(number, 200, rng).tokens])
    assert is_valid_index_input(ids, sym).all()
    rs = RetrievalSymbols(8, 8)
    lv = task_vocab(letter)
    samples = generate(letter, 200, rng)
    ids = np.stack([rs.encode(lv.decode(r)) for r in samples.tokens])
    defined = retrieval_defined(ids, rs)
    assert defined[:, -1].all()  # the query's hop is always well defined
    # Retrieval at the query is the first hop of the chain
    first_hop = samples.path[:, 1]
    assert (retrieval(ids, rs)[:, -1] == ids[np.arange(len(ids)), first_hop]).all()
