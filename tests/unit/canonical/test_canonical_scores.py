"""The score engine on toy heads against swap-and-rerun, and the analysis statistics on heads of known shape."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from possym.canonical.analysis import accuracy_by_position, plane_alignment
from possym.canonical.conditions import condition
from possym.config import ModelConfig
from possym.model.gptj import GPTJ
from possym.scores.swap_and_rerun import reference_head_scores
from possym.scores.swaps import head_scores
from possym.tasks import get_task, task_config, task_vocab

SPEC = task_config("retrieval", length=8, n_symbols=32, n_attributes=8)


def generate(spec, n, rng, length=None):
    return get_task(spec.name).at_length(spec, n, rng, length)


def _toy(cond: str, seed: int = 0, init_range: float = 0.5) -> GPTJ:
    c = condition(cond, 32, 8)
    cfg = ModelConfig(
        n_layers=1,
        d_model=32,
        mlp=False,
        dropout=0.0,
        d_vocab=len(task_vocab(SPEC)),
        p_rope=c.p_rope,
        freq_gate=c.freq_gate,
        init_range=init_range,
    )
    return GPTJ(cfg, torch.Generator().manual_seed(seed)).double().eval()


@pytest.mark.parametrize("cond", ["band1", "band5", "nope", "two_angle", "all"])
def test_exact_engine_equals_swap_and_rerun_on_a_gated_toy_head(cond: str) -> None:
    model = _toy(cond)
    tokens = torch.as_tensor(generate(SPEC, 6, np.random.default_rng(0)).tokens)
    fast, slow = head_scores(model, tokens), reference_head_scores(model, tokens)
    assert torch.allclose(fast.s_pos, slow.s_pos.double(), atol=1e-9)
    assert torch.allclose(fast.s_sym, slow.s_sym.double(), atol=1e-9)


def test_a_nope_toy_head_is_purely_symbolic() -> None:
    model = _toy("nope", init_range=1.0)
    s = head_scores(model, torch.as_tensor(generate(SPEC, 8, np.random.default_rng(1)).tokens))
    assert torch.allclose(s.s_sym, torch.ones_like(s.s_sym), atol=1e-9)


def test_a_head_whose_keys_are_all_equal_has_collapsed_keys_and_reads_no_offset() -> None:
    model = _toy("band1")
    block = model.blocks[0]
    with torch.no_grad():  # LayerNorm dim 0 is the constant 1 (weight 0, bias 1); W_K reads only it
        block.ln.weight[0], block.ln.bias[0] = 0.0, 1.0
        k = block.attn.qkv.weight[32:64]
        k.zero_()
        k[0, 0] = k[1, 0] = 3.0
    samples = generate(SPEC, 8, np.random.default_rng(2))
    s = head_scores(model, torch.as_tensor(samples.tokens))
    assert torch.allclose(s.s_pos, torch.ones_like(s.s_pos), atol=1e-9)  # all keys equal: positional
    assert (s.s_sym < 0.99).all()  # and not uniform
    collapse, _, _ = plane_alignment(
        model, torch.as_tensor(samples.tokens), samples.path[:, 1], head=0, frequency_id=1, rng=np.random.default_rng(0)
    )
    assert collapse > 0.999


def test_accuracy_by_position_counts_every_position_once_per_input() -> None:
    model = _toy("nope").float()
    rows = accuracy_by_position(model, SPEC, 16, 3, np.random.default_rng(0))
    assert [r["position"] for r in rows] == list(range(16)) and {r["total"] for r in rows} == {3}
