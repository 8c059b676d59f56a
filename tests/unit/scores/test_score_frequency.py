"""Frequency use, per-frequency scores and plane geometry (paper A Fig. 4, 8, Table 1; paper B)."""

from __future__ import annotations

import math

import pytest
import torch
from score_fixtures import random_model, random_tokens

from possym.scores.frequency import (
    dominant_frequency_id,
    frequency_use,
    partial_logits,
    plane_geometry,
    plane_scores,
    weighted_frequency_id,
)
from possym.scores.swaps import head_scores, layer_tables, rotated_qk


def test_partial_logits_sum_to_the_models_attention_logits(trained_model):
    tokens = random_tokens(batch=3)
    _, cache = trained_model.run_with_cache(tokens, ["blocks.0.attn.hook_attn_scores"])
    q_rot, k_rot = rotated_qk(trained_model, tokens, [0])[0]
    cfg = trained_model.cfg
    ell = partial_logits(q_rot[:, 9], k_rot.transpose(1, 2), cfg.rot_dim, 1 / math.sqrt(cfg.d_head))
    assert torch.allclose(ell.sum(-1), cache["blocks.0.attn.hook_attn_scores"][:, :, 9], atol=1e-12)


def test_plane_tables_and_the_unrotated_rest_sum_to_the_full_table():
    model = random_model(n_heads=2, rotary_dim=4)
    q_rot, k_rot = rotated_qk(model, random_tokens(), [1])[1]
    planes, rest = layer_tables(model, q_rot, k_rot, 8, per_plane=True)
    assert planes.shape == (6, 2, 2, 9, 9)
    assert torch.allclose(planes.sum(-3) + rest[..., None], layer_tables(model, q_rot, k_rot, 8), atol=1e-12)


def test_weighted_and_dominant_frequency_ids():
    use = torch.tensor([[0.0, 0.0, 2.0, 0.0], [1.0, 1.0, 1.0, 1.0]], dtype=torch.float64)
    assert weighted_frequency_id(use).tolist() == [3.0, 2.5]
    assert dominant_frequency_id(use).tolist() == [3, 1]


def test_the_weighted_id_never_leaves_the_plane_range_whatever_the_signs_of_the_uses():
    use = torch.randn(2000, 64, generator=torch.Generator().manual_seed(0), dtype=torch.float64) - 0.5
    ids = weighted_frequency_id(use)
    some = (use > 0).any(-1)
    assert ((ids[some] >= 1) & (ids[some] <= 64)).all() and ids[~some].isnan().all()
    # The mean of the IDs weighted by the positive uses, computed plane by plane.
    row = use[0].tolist()
    brute = sum((k + 1) * max(u, 0.0) for k, u in enumerate(row)) / sum(max(u, 0.0) for u in row)
    assert math.isclose(float(ids[0]), brute)
    assert weighted_frequency_id(-torch.ones(3, 8)).isnan().all()


def _signed_planes_model(positive: dict[int, float], negative: dict[int, float]):
    """Layer 0's head with key = +c·query on the ``positive`` planes and key = −c·query on the ``negative`` ones
    (0-based planes, GPT-J dims 2k, 2k+1), every other plane silent. On an input of one repeated token every
    position has the same query and key, so plane k's partial logit at offset δ is ±c·|q_k|²·cos(δθ_k)/√d_head:
    its maximum over keys is positive on a positive plane (δ = 0) and negative on a slow negative plane."""
    model = random_model()
    with torch.no_grad():
        w = model.blocks[0].attn.qkv.weight
        w_q, w_k = w[:16], w[16:32]
        w_k.zero_()
        signs = {**{k: c for k, c in positive.items()}, **{k: -c for k, c in negative.items()}}
        for plane in range(8):
            rows = slice(2 * plane, 2 * plane + 2)
            if plane in signs:
                w_k[rows] = signs[plane] * w_q[rows]
            else:
                w_q[rows] = 0.0
    return model


def test_a_constructed_head_whose_only_raising_plane_is_known_has_that_weighted_id():
    """Plane 1 (ID 1, the fastest) raises its key; plane 8 (ID 8, nearly static) lowers every key by almost as
    much. The signed weighting put the ID far outside 1..8; the weighted ID is exactly the raising plane's."""
    tokens = torch.arange(6)[:, None].expand(6, 10) + 3  # six inputs, each one token repeated
    model = _signed_planes_model({0: 1.0}, {7: 1.0})
    use = frequency_use(model, tokens, layers=[0])[0, 0]
    assert use[0] > 0 and use[7] < 0 and (use[1:7] == 0).all()
    signed = float((use * torch.arange(1, 9, dtype=use.dtype)).sum() / use.sum())
    assert not 1 <= signed <= 8  # the old definition leaves the plane range on this head
    assert float(weighted_frequency_id(use)) == 1.0 and int(dominant_frequency_id(use)) == 1
    two = _signed_planes_model({1: 1.0, 5: 1.0}, {7: 1.0})  # IDs 2 and 6 raise, ID 8 lowers
    use = frequency_use(two, tokens, layers=[0])[0, 0]
    want = (2 * use[1] + 6 * use[5]) / (use[1] + use[5])
    assert math.isclose(float(weighted_frequency_id(use)), float(want)) and 2 < float(want) < 6


def _one_plane_model(plane: int):
    """A head whose query and key projections live on a single RoPE plane (GPT-J dims 2k, 2k+1)."""
    model = random_model()
    keep = torch.zeros(16, dtype=torch.float64)
    keep[2 * plane : 2 * plane + 2] = 1.0
    with torch.no_grad():
        for block in model.blocks:
            block.attn.qkv.weight[:32] *= torch.cat([keep, keep])[:, None]  # rows of W_Q and W_K
    return model


def test_a_head_that_uses_one_plane_has_it_dominant_and_scores_as_its_plane():
    model = _one_plane_model(plane=2)  # frequency ID 3
    tokens = random_tokens()
    use = frequency_use(model, tokens)
    assert dominant_frequency_id(use).flatten().tolist() == [3, 3]
    assert (use[..., [0, 1, 3, 4, 5, 6, 7]] == 0).all()
    whole = head_scores(model, tokens)
    per_plane = plane_scores(model, tokens)
    assert per_plane.s_pos.shape == (6, 2, 1, 8)
    assert torch.allclose(per_plane.s_pos[..., 2], whole.s_pos, atol=1e-12)
    assert torch.allclose(per_plane.s_sym[..., 2], whole.s_sym, atol=1e-12)
    assert torch.allclose(per_plane.s_pos[..., 0], torch.ones(6, 2, 1, dtype=torch.float64))  # silent plane: uniform


def test_plane_geometry_reproduces_the_planes_partial_logits(trained_model):
    tokens = random_tokens(batch=1)[0]
    geo = plane_geometry(trained_model, tokens, layer=0, head=1)
    q_rot, k_rot = rotated_qk(trained_model, tokens[None], [0])[0]
    cfg = trained_model.cfg
    ell = partial_logits(q_rot[0, 9, 1], k_rot[0, :, 1], cfg.rot_dim, 1 / math.sqrt(cfg.d_head))
    ell = ell[:, geo.frequency_id - 1]
    # (R_q q)·(R_j k_j) = (R_{q−j} q)·k_j: the query rotated by the offset q − j meets the pre-RoPE key.
    from_geometry = torch.stack([geo.queries[9 - j] @ geo.keys[j] for j in range(10)]) / math.sqrt(cfg.d_head)
    assert torch.allclose(from_geometry, ell, atol=1e-12)
    assert geo.keys.shape == (10, 2) and geo.queries.shape == (10, 2) and geo.query == 9
    with pytest.raises(ValueError, match="NoPE"):
        plane_geometry(random_model(rotary_dim=0), tokens, layer=0)
