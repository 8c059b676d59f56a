"""The exact swap engine against swap-and-rerun, and against oracles (paper A App. D; paper B Thm. 1)."""

from __future__ import annotations

import copy
import itertools
import math

import pytest
import torch
from score_fixtures import random_model, random_tokens

from possym.model.rope import apply_rope, rope_cos_sin, rope_frequencies
from possym.scores.swap_and_rerun import reference_head_scores, reference_swap_attention
from possym.scores.swaps import (
    content_position_logits,
    head_scores,
    layer_tables,
    rotated_qk,
    swap_attention,
)

TOL = 1e-6  # the bound the exact engine promises; in float64 the two agree to ~1e-13


def assert_engine_matches_reference(model, tokens, layer, query, block_size):
    q_rot, k_rot = rotated_qk(model, tokens, [layer])[layer]
    fast = swap_attention(layer_tables(model, q_rot, k_rot, query), block_size)
    slow = reference_swap_attention(model, tokens, layer=layer, query=query, block_size=block_size)
    assert torch.equal(fast.blocks, slow.blocks)
    assert (fast.row - slow.row).abs().max() <= TOL
    assert (fast.swapped_rows() - slow.swapped_rows()).abs().max() <= TOL
    for a, b in zip(fast.pairs(), slow.pairs(), strict=True):
        assert (a - b).abs().max() <= TOL
    for a, b in zip(fast.scores(), slow.scores(), strict=True):
        assert (a - b).abs().nan_to_num().max() <= TOL


@pytest.mark.parametrize(
    ("n_heads", "rotary_dim"), [(1, None), (2, None), (2, 4), (4, 0)], ids=["rope", "2heads", "partial", "nope"]
)
@pytest.mark.parametrize("block_size", [1, 2, 3])
@pytest.mark.parametrize("query", [9, 6], ids=["last", "hop"])
def test_engine_matches_swap_and_rerun_on_random_models(n_heads, rotary_dim, block_size, query):
    model = random_model(n_heads=n_heads, rotary_dim=rotary_dim)
    assert_engine_matches_reference(model, random_tokens(), layer=1, query=query, block_size=block_size)


@pytest.mark.parametrize("block_size", [1, 2])
@pytest.mark.parametrize("query", [9, 5])
def test_engine_matches_swap_and_rerun_on_a_trained_model(trained_model, block_size, query):
    tokens = random_tokens(batch=8, seed=3)
    for layer in range(trained_model.cfg.n_layers):
        assert_engine_matches_reference(trained_model, tokens, layer, query, block_size)


def test_head_scores_match_the_reference_with_a_query_per_input(trained_model):
    tokens = random_tokens(batch=6, seed=4)
    query = torch.tensor([9, 4, -1, 7, 9, 2])  # hop-like positions; -1: input not scored
    for block_size in (1, 2):
        fast = head_scores(trained_model, tokens, query=query, block_size=block_size)
        slow = reference_head_scores(trained_model, tokens, query=query, block_size=block_size)
        for a, b in ((fast.s_pos, slow.s_pos), (fast.s_sym, slow.s_sym), (fast.entropy, slow.entropy)):
            assert torch.equal(a.isnan(), b.isnan())
            assert (a - b).nan_to_num().abs().max() <= TOL
        assert fast.s_pos[2].isnan().all()
    records = fast.records(step=0)  # block_size 2: query 2 has one block, nothing to swap, so 4 inputs count
    assert len(records) == 2 * 2 and records[0]["n_inputs"] == 4 and records[0]["step"] == 0


def test_table_diagonal_is_the_models_own_attention_logits(trained_model):
    tokens = random_tokens(batch=3)
    _, cache = trained_model.run_with_cache(tokens, ["blocks.1.attn.hook_attn_scores"])
    q_rot, k_rot = rotated_qk(trained_model, tokens, [1])[1]
    table = layer_tables(trained_model, q_rot, k_rot, 9)
    want = cache["blocks.1.attn.hook_attn_scores"][:, :, 9]
    assert torch.allclose(table.diagonal(dim1=-2, dim2=-1), want, atol=1e-12)


@pytest.mark.parametrize("pairing", ["gptj", "neox"])
def test_table_entries_equal_explicitly_rotated_keys(pairing):
    gen = torch.Generator().manual_seed(0)
    d, n, rot = 8, 6, 6
    q, k = torch.randn(d, generator=gen, dtype=torch.float64), torch.randn(n, d, generator=gen, dtype=torch.float64)
    theta = rope_frequencies(rot, 100.0)

    def rotate(x, p):  # an explicit loop over planes
        x = x.clone()
        for j in range(rot // 2):
            a, b = (2 * j, 2 * j + 1) if pairing == "gptj" else (j, j + rot // 2)
            c, s = math.cos(p * theta[j]), math.sin(p * theta[j])
            x[a], x[b] = x[a] * c - x[b] * s, x[b] * c + x[a] * s
        return x

    q_rot = rotate(q, n - 1)
    k_rot = torch.stack([rotate(k[c], c) for c in range(n)])
    table = content_position_logits(q_rot, k_rot, theta, scale=0.5, pairing=pairing)
    want = torch.tensor([[q_rot @ rotate(k[c], p) * 0.5 for p in range(n)] for c in range(n)], dtype=torch.float64)
    assert torch.allclose(table, want, atol=1e-12)
    if pairing == "gptj":  # and with the model's own rotation
        cos, sin = rope_cos_sin(torch.arange(n), rot, 100.0, torch.float64)
        assert torch.allclose(k_rot, apply_rope(k[None, :, None], cos, sin)[0, :, 0], atol=1e-12)


def test_nope_head_is_purely_symbolic():
    model = random_model(n_heads=2, rotary_dim=0)
    for block_size in (1, 2):
        s = head_scores(model, random_tokens(), block_size=block_size)
        assert (s.s_sym - 1).abs().max() <= 1e-12
        assert (reference_head_scores(model, random_tokens(), block_size=block_size).s_sym - 1).abs().max() <= 1e-12


def test_rope_head_with_all_keys_equal_is_purely_positional():
    model = random_model()
    with torch.no_grad():  # a zero LayerNorm gain makes every row's LN output its bias: equal keys
        model.blocks[1].ln.weight.zero_()
        model.blocks[1].ln.bias.normal_(0.0, 1.0, generator=torch.Generator().manual_seed(5))
    s = head_scores(model, random_tokens(), layers=[1])
    assert s.entropy.min() > 0  # not the uniform case: the logits vary with position
    assert (s.s_pos - 1).abs().max() <= 1e-12
    # and at the engine's core: keys R_j v for one v, any query
    gen = torch.Generator().manual_seed(1)
    theta = rope_frequencies(8, 10_000.0)
    cos, sin = rope_cos_sin(torch.arange(7), 8, 10_000.0, torch.float64)
    k_rot = apply_rope(torch.randn(8, generator=gen, dtype=torch.float64).expand(1, 7, 1, 8), cos, sin)[0, :, 0]
    q_rot = torch.randn(8, generator=gen, dtype=torch.float64) * 5
    sw = swap_attention(content_position_logits(q_rot, k_rot, theta, scale=1.0))
    assert sw.scores()[0].item() == pytest.approx(1.0, abs=1e-12)


def test_uniform_attention_scores_one_one():
    model = random_model(n_heads=2)
    with torch.no_grad():
        model.blocks[0].attn.qkv.weight[:16].zero_()  # W_Q = 0: every logit is 0
    s = head_scores(model, random_tokens(), layers=[0])
    assert (s.s_pos - 1).abs().max() <= 1e-12 and (s.s_sym - 1).abs().max() <= 1e-12
    assert torch.allclose(s.entropy, torch.full_like(s.entropy, math.log(10)))


def test_one_hot_attention_on_one_key_gives_the_expected_pair():
    n, i, big = 8, 3, 1e3
    c, p = torch.meshgrid(torch.arange(n), torch.arange(n), indexing="ij")
    positional = big * (p == i).double()  # logit depends on the position only
    symbolic = big * (c == i).double()  # logit depends on the content only
    for table, want in ((positional, (1.0, 0.0)), (symbolic, (0.0, 1.0))):
        sw = swap_attention(table)
        assert sw.row[i].item() == 1.0
        assert [x.item() for x in sw.scores()] == pytest.approx(want, abs=1e-12)


def test_engine_is_stable_when_swapped_blocks_hold_all_the_mass():
    # All mass on key 0 with logit gaps near float64's exp range; content 0 moved to position j gets a
    # logit far above every clean one. The closed form must neither cancel nor overflow.
    n = 6
    table = torch.full((n, n), -700.0, dtype=torch.float64)
    table[0, 0] = 0.0
    table[0, 1:] = 40.0
    sw = swap_attention(table)
    rows = sw.swapped_rows()
    assert torch.isfinite(rows).all() and torch.allclose(rows.sum(-1), torch.ones(rows.shape[0], dtype=torch.float64))
    assert sw.scores()[1].item() == pytest.approx(1.0, abs=1e-12)


def test_exclusion_principle_holds_on_random_heads():
    """Paper B Thm. 1: Var_j(λ_j) <= (‖δ_pos‖² + ‖δ_sym‖²) / ((n−1)!·(n−1)), over all permutations of the keys."""
    for seed in range(4):
        model = random_model(n_heads=2, seed=seed)
        tokens = random_tokens(batch=2, pos=6, seed=seed)
        q_rot, k_rot = rotated_qk(model, tokens, [1])[1]
        table = layer_tables(model, q_rot, k_rot, 5)[..., :5, :5]  # keys 1..n−1 = positions 0..4
        keys = table.shape[-1]
        lam = table.diagonal(dim1=-2, dim2=-1)
        var = lam.var(-1, unbiased=False)
        d_pos = torch.zeros_like(var)
        d_sym = torch.zeros_like(var)
        for perm in itertools.permutations(range(keys)):
            j, pj = torch.arange(keys), torch.tensor(perm)
            d_pos += ((table[..., pj, j] - lam) ** 2).sum(-1)  # content π(j) at position j
            d_sym += ((table[..., j, pj] - lam) ** 2).sum(-1)  # content j at position π(j)
        bound = (d_pos + d_sym) / (math.factorial(keys) * keys)
        assert (var <= bound + 1e-12).all()
        assert (var > 0).all()


def test_engine_refuses_a_model_in_training_mode():
    model = random_model().train()
    with pytest.raises(ValueError, match="eval mode"):
        head_scores(model, random_tokens())


def test_float32_model_scores_agree_with_float64_within_float32_rounding(trained_model):
    tokens = random_tokens(batch=4)
    s64 = head_scores(trained_model, tokens)
    s32 = head_scores(copy.deepcopy(trained_model).float(), tokens)  # the fixture is shared: copy it
    assert (s64.s_pos - s32.s_pos).abs().max() < 1e-4 and (s64.s_sym - s32.s_sym).abs().max() < 1e-4


def test_a_model_trained_to_count_back_has_a_pure_positional_head(trained_model):
    # The fixture's task: the answer sits (last token) positions back. Layer 0 learns to look there.
    tokens = random_tokens(batch=30, seed=7)
    tokens[:, :-1] = tokens[:, :-1].clamp_min(4)
    tokens[:, -1] = tokens[:, -1] % 3 + 1
    s = head_scores(trained_model, tokens, layers=[0])
    assert (s.s_pos.mean(0) > 0.95).all() and (s.s_sym.mean(0) < 0.05).all()
