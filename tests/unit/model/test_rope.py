import math

import pytest
import torch
from transformers.models.gptj import modeling_gptj

from possym.model.rope import apply_rope, rope_cos_sin, rope_frequencies


def explicit_rotation(x: torch.Tensor, positions: torch.Tensor, rot_dim: int, base: float) -> torch.Tensor:
    """Oracle: a loop applying a 2x2 rotation matrix to each adjacent pair (2k, 2k+1)."""
    out = x.clone()
    for b in range(x.shape[0]):
        for p in range(x.shape[1]):
            for k in range(rot_dim // 2):
                angle = float(positions[p]) * base ** (-2 * k / rot_dim)
                rot = torch.tensor([[math.cos(angle), -math.sin(angle)], [math.sin(angle), math.cos(angle)]])
                out[b, p, :, 2 * k : 2 * k + 2] = x[b, p, :, 2 * k : 2 * k + 2] @ rot.T.to(x.dtype)
    return out


@pytest.mark.parametrize("rot_dim", [0, 2, 4, 8])
def test_rope_equals_an_explicit_rotation_loop(rot_dim):
    x = torch.randn(2, 5, 3, 8, dtype=torch.float64)
    pos = torch.tensor([0, 1, 7, 100, 4999])
    cos, sin = rope_cos_sin(pos, rot_dim, 10_000.0, torch.float64)
    torch.testing.assert_close(apply_rope(x, cos, sin), explicit_rotation(x, pos, rot_dim, 10_000.0))


def test_rope_logit_depends_only_on_relative_position():
    q, k = torch.randn(1, 1, 1, 16, dtype=torch.float64), torch.randn(1, 1, 1, 16, dtype=torch.float64)

    def logit(i: int, j: int) -> float:
        ci, si = rope_cos_sin(torch.tensor([i]), 16, 10_000.0, torch.float64)
        cj, sj = rope_cos_sin(torch.tensor([j]), 16, 10_000.0, torch.float64)
        return float((apply_rope(q, ci, si) * apply_rope(k, cj, sj)).sum())

    assert logit(10, 3) == pytest.approx(logit(107, 100), abs=1e-12)
    assert logit(5000, 4990) == pytest.approx(logit(10, 0), abs=1e-10)
    assert logit(10, 3) != pytest.approx(logit(10, 4), abs=1e-6)


def test_rope_matches_hf_gptj_rotate_every_two_convention():
    x = torch.randn(2, 6, 1, 8)
    pos = torch.arange(6)
    table = modeling_gptj.create_sinusoidal_positions(6, 8)
    sin, cos = table[pos].chunk(2, dim=-1)
    hf = modeling_gptj.apply_rotary_pos_emb(x, sin[None], cos[None])
    c, s = rope_cos_sin(pos, 8, 10_000.0, torch.float32)
    torch.testing.assert_close(apply_rope(x, c, s), hf, atol=1e-6, rtol=1e-6)


def test_neox_half_pairing_is_not_the_same_rotation():
    # The pitfall named in rope.py: pairing halves instead of neighbours gives a different result.
    x = torch.randn(1, 4, 1, 8, dtype=torch.float64)
    c, s = rope_cos_sin(torch.arange(4), 8, 10_000.0, torch.float64)
    neox_order = torch.tensor([0, 4, 1, 5, 2, 6, 3, 7])
    assert not torch.allclose(apply_rope(x, c, s), apply_rope(x[..., neox_order], c, s))


def test_partial_rotary_leaves_the_tail_untouched():
    x = torch.randn(1, 3, 2, 8, dtype=torch.float64)
    c, s = rope_cos_sin(torch.arange(3), 4, 10_000.0, torch.float64)
    out = apply_rope(x, c, s)
    torch.testing.assert_close(out[..., 4:], x[..., 4:])
    assert torch.equal(apply_rope(x, *rope_cos_sin(torch.arange(3), 0, 1e4, torch.float64)), x)


def test_frequencies_are_the_papers_table_1_values():
    theta = rope_frequencies(128, 10_000.0)
    # 1-based IDs of Table 1 -> 0-based plane index k = ID - 1 (paper Table 1).
    for freq_id, value in {1: 1.0, 2: 0.8660, 10: 0.2738, 18: 0.0866, 32: 0.0115, 42: 0.0027}.items():
        assert float(theta[freq_id - 1]) == pytest.approx(value, abs=6e-5)
