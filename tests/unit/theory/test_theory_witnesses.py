"""Remark 3.1 witnessed: the swap pairs of App. F.2.3, on which symbolic / positional heads cannot be right twice."""

import numpy as np
import torch

from possym.tasks import task_config, task_vocab
from possym.theory.constructions import IndexConstruction, RetrievalConstruction, run_construction
from possym.theory.functions import IndexSymbols, RetrievalSymbols, all_proper_inputs, retrieval
from possym.theory.witnesses import (
    index_swap_pair,
    positional_heads_on_swap,
    query_reading_positional_retrieval,
    retrieval_swap_pair,
    symbolic_heads_on_swap,
)

NUMBER, LETTER = task_config("number"), task_config("letter")


def _construction_answers(c, pair, task) -> list[str]:
    vocab = task_vocab(task)
    ids = np.stack([c.symbols.encode(vocab.decode(t)) for t in (pair.tokens_a, pair.tokens_b)])
    return c.symbols.decode(run_construction(c, ids, beta=None).logits[:, -1].argmax(-1).numpy())


def test_the_index_swap_pair_changes_the_answer_by_swapping_two_target_letters():
    pair = index_swap_pair(NUMBER, np.random.default_rng(0))
    p, q = pair.swapped
    assert p < NUMBER.n_target and q < NUMBER.n_target
    assert (pair.tokens_a != pair.tokens_b).sum() == 2 and pair.expected_a != pair.expected_b


def test_any_one_layer_nope_model_gives_the_same_output_on_the_index_swap_pair():
    pair = index_swap_pair(NUMBER, np.random.default_rng(1))
    trials = symbolic_heads_on_swap(pair, 10, torch.Generator().manual_seed(0))
    assert max(t.max_difference for t in trials) < 1e-10  # full blocks: LayerNorm, MLP, random N(0,1) weights
    assert not any(t.right_a and t.right_b for t in trials)
    (pointed,) = symbolic_heads_on_swap(pair, 1, torch.Generator(), pointed=True)
    assert pointed.right_a and not pointed.right_b and pointed.answer_a == pointed.answer_b


def test_t_index_a_positional_head_gets_both_inputs_of_the_index_pair_right():
    pair = index_swap_pair(NUMBER, np.random.default_rng(1))
    vocab = task_vocab(NUMBER)
    got = _construction_answers(IndexConstruction(IndexSymbols(120, 16), 0.8), pair, NUMBER)
    assert got == [vocab.tokens[pair.expected_a], vocab.tokens[pair.expected_b]]


def test_the_retrieval_swap_pair_keeps_the_answer_while_its_position_moves():
    pair = retrieval_swap_pair(LETTER, np.random.default_rng(0))
    assert pair.expected_a == pair.expected_b
    assert pair.tokens_a[pair.swapped[0]] == pair.tokens_b[pair.swapped[1]] == pair.expected_a


def test_no_positional_head_with_identity_values_gets_both_inputs_of_the_retrieval_pair_right():
    pair = retrieval_swap_pair(LETTER, np.random.default_rng(2))
    d_vocab = len(task_vocab(LETTER))
    trials = positional_heads_on_swap(pair, d_vocab, 10, torch.Generator().manual_seed(0))
    (pointed,) = positional_heads_on_swap(pair, d_vocab, 1, torch.Generator(), pointed=True)
    for t in [*trials, pointed]:
        assert t.max_difference < 1e-12  # the attention weights do not see the swap
        assert not (t.right_a and t.right_b)
    assert pointed.right_a  # looking exactly at input a's answer position is right on a only


def test_t_retrieval_a_symbolic_head_gets_both_inputs_of_the_retrieval_pair_right():
    pair = retrieval_swap_pair(LETTER, np.random.default_rng(2))
    vocab = task_vocab(LETTER)
    got = _construction_answers(RetrievalConstruction(RetrievalSymbols(8, 8), 0.0027), pair, LETTER)
    assert got == [vocab.tokens[pair.expected_a]] * 2


def test_scope_a_positional_head_with_a_query_reading_activation_computes_retrieval_exactly():
    sym = RetrievalSymbols(3, 2)
    ids = all_proper_inputs(sym, 4)
    outputs, gaps = query_reading_positional_retrieval(sym, ids, torch.Generator().manual_seed(0))
    assert (outputs == retrieval(ids, sym)).all() and (gaps > 0).all()
