"""Theorem 3.1 as running code: T_Index and T_Retrieval are real weights in the project's attention module,
and under average-hard attention they compute Selective Index and Retrieval exactly (App. F.2)."""

import math

import numpy as np
import pytest
import torch

from possym.model.gptj import Attention
from possym.tasks import generate, task_config, task_vocab
from possym.theory.constructions import (
    IndexConstruction,
    RetrievalConstruction,
    average_hard_pattern,
    construction_model,
    rotation,
    run_construction,
)
from possym.theory.functions import (
    IndexSymbols,
    RetrievalSymbols,
    all_index_inputs,
    all_proper_inputs,
    retrieval,
    retrieval_defined,
    selective_index,
)
from possym.theory.verify import check_construction

IDX = IndexConstruction(IndexSymbols(n_letters=2, n_ints=3), theta=0.8)
RET = RetrievalConstruction(RetrievalSymbols(n_letters=3, n_ints=1), theta=0.1)


def test_index_weights_are_the_papers():
    v = np.array([0.0, 1.0])
    e = IDX.embedding()
    q, k = (IDX.W_Q() @ e.T).T, (IDX.W_K() @ e.T).T
    for sigma in range(IDX.symbols.size):
        offset = IDX.symbols.offset(sigma)
        np.testing.assert_allclose(q[sigma], rotation(-offset * IDX.theta) @ v, atol=1e-15)
        np.testing.assert_allclose(k[sigma], v)
    np.testing.assert_array_equal(np.diag(IDX.W_V())[:3], [2.0, 2.0, 0.0])  # alpha on letters only


def test_the_model_holds_the_weights_in_its_fused_qkv_and_scales_queries_by_beta():
    model = construction_model(IDX, beta=3.0)
    attn = model.blocks[0].attn
    assert isinstance(attn, Attention) and model.cfg.rot_dim == 2
    d = IDX.d_model
    np.testing.assert_allclose(attn.W_Q[0].T[:2].detach().numpy(), 3.0 * math.sqrt(d) * IDX.W_Q())
    np.testing.assert_allclose(attn.W_K[0].T[:2].detach().numpy(), IDX.W_K())
    np.testing.assert_allclose(attn.W_V[0].T.detach().numpy(), IDX.W_V())


@pytest.mark.parametrize("c", [IDX, RET], ids=["index", "retrieval"])
def test_attention_scores_from_the_module_equal_the_papers_logit_formula(c):
    ids = all_index_inputs(c.symbols, 5) if c.name == "index" else all_proper_inputs(c.symbols, 4)
    scores = run_construction(c, ids, beta=2.5).scores.numpy()
    want = c.logit(ids)
    finite = np.isfinite(want)
    assert (np.isfinite(scores) == finite).all()
    np.testing.assert_allclose(scores[finite], want[finite], atol=1e-12)
    assert scores.dtype == np.float64


def test_average_hard_attention_spreads_weight_evenly_over_ties():
    s = torch.tensor([[[1.0, 0.5, 1.0 - 1e-15, -math.inf]]], dtype=torch.float64)
    np.testing.assert_allclose(average_hard_pattern(s)[0, 0].numpy(), [0.5, 0.0, 0.5, 0.0])


def test_t_index_computes_selective_index_on_every_valid_input_with_decoding_gap_one():
    ids = all_index_inputs(IDX.symbols, 6)
    chk = check_construction(IDX, ids, beta=None)
    assert chk.n_failed == 0 and chk.n_positions == ids.size
    assert chk.min_gap == pytest.approx(1.0, abs=1e-12)  # the paper's decoding gap delta >= 1
    out = run_construction(IDX, ids[:50], beta=None).logits.argmax(-1).numpy()
    np.testing.assert_array_equal(out, selective_index(ids[:50], IDX.symbols))


def test_t_retrieval_computes_retrieval_on_every_proper_input_with_decoding_gap_one():
    ids = all_proper_inputs(RET.symbols, 4)
    chk = check_construction(RET, ids, beta=None)
    assert chk.n_failed == 0 and chk.n_positions == ids.size
    assert chk.min_gap == pytest.approx(1.0, abs=1e-12)
    out = run_construction(RET, ids[:50], beta=None).logits.argmax(-1).numpy()
    np.testing.assert_array_equal(out, retrieval(ids[:50], RET.symbols))


def test_t_index_is_exact_on_number_task_instances_with_the_papers_vocabulary():
    task = task_config("number")
    c = IndexConstruction(IndexSymbols(120, 16), theta=0.8)
    vocab = task_vocab(task)
    ids = np.stack([c.symbols.encode(vocab.decode(r)) for r in generate(task, 400, np.random.default_rng(0)).tokens])
    assert check_construction(c, ids, beta=None).n_failed == 0


def test_t_retrieval_is_exact_on_letter_task_instances_where_retrieval_is_defined():
    task = task_config("letter")
    c = RetrievalConstruction(RetrievalSymbols(8, 8), theta=0.0027)
    vocab = task_vocab(task)
    ids = np.stack([c.symbols.encode(vocab.decode(r)) for r in generate(task, 400, np.random.default_rng(0)).tokens])
    chk = check_construction(c, ids, beta=None)
    assert chk.n_failed == 0 and chk.n_positions == retrieval_defined(ids, c.symbols).sum()
