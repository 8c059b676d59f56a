"""Rotary position embeddings, GPT-J convention, as pure functions.

RoPE rotates plane k (dimensions ``2k, 2k+1`` of the rotated part of a head) by the angle
``p * theta_k`` at position p, with ``theta_k = base ** (-2k / rot_dim)`` for k = 0..rot_dim/2-1
(the paper's 1-based "frequency ID" is k+1). Then ``<R_i q, R_j k> = q^T R_{j-i} k``: the logit
depends on positions only through i - j (paper B, Sec. 2).

Pitfall: GPT-J pairs *adjacent* dimensions (``rotate_every_two``); GPT-NeoX/Llama pair the two
*halves* of the head. The two are not interchangeable: loading NeoX weights with this rotation
silently scrambles every head.

Angles are computed in float64 from integer positions and cast at the end, so a 5,000-token input
is as exact as a 17-token one and no position table limits the length. (HF GPT-J builds a float32
table of ``n_positions`` rows, whose angles drift by ~1e-4 rad at position 5,000.)

Example:
    >>> import torch
    >>> x = torch.tensor([[[[1.0, 0.0]]]])                   # batch=1, pos=1, head=1, d_head=2
    >>> cos, sin = rope_cos_sin(torch.tensor([1]), rot_dim=2, base=10_000.0, dtype=torch.float64)
    >>> apply_rope(x.double(), cos, sin)[0, 0, 0]               # rotated by 1 rad
    tensor([0.5403, 0.8415], dtype=torch.float64)
"""

from __future__ import annotations

import torch
from torch import Tensor

from possym.config import ModelConfig


def rope_frequencies(rot_dim: int, base: float) -> Tensor:
    """theta_k = base^(-2k/rot_dim), k = 0..rot_dim/2-1, in float64.  Shape: [rot_dim/2]."""
    k = torch.arange(0, rot_dim // 2, dtype=torch.float64)
    return base ** (-2.0 * k / rot_dim)


def layer_frequencies(cfg: ModelConfig, layer: int) -> Tensor:
    """The angle per position each plane of ``layer`` actually turns by: θ_k, or 0 for a NoPE plane
    (``p_rope``, ``nope_from_layer``; see :class:`~possym.config.ModelConfig`).  Shape: [rot_dim/2], float64.

    A plane with θ = 0 is the identity at every position, so the score engine can treat it like any
    other plane. Example: half the planes kept by p-RoPE.
        >>> layer_frequencies(ModelConfig(d_model=8, p_rope=0.5), layer=0)
        tensor([1.0000, 0.1000, 0.0000, 0.0000], dtype=torch.float64)
    """
    rotates = torch.tensor(cfg.plane_rotates(layer), dtype=torch.bool)
    return torch.where(rotates, rope_frequencies(cfg.rot_dim, cfg.rope_base), 0.0)


def rope_cos_sin(positions: Tensor, rot_dim: int, base: float, dtype: torch.dtype) -> tuple[Tensor, Tensor]:
    """cos and sin of ``positions[..., None] * theta``.  positions: [...pos] -> each [...pos, rot_dim/2]."""
    angles = positions.to(torch.float64)[..., None] * rope_frequencies(rot_dim, base).to(positions.device)
    return angles.cos().to(dtype), angles.sin().to(dtype)


def apply_rope(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """Rotate the first ``2 * cos.shape[-1]`` dims of each head, GPT-J style (adjacent pairs).

    x: [batch, pos, head, d_head]; cos, sin: [pos, rot_dim/2] or [batch, pos, rot_dim/2].
    Dimensions past rot_dim pass through unrotated (partial rotary); rot_dim = 0 is NoPE.
    """
    half = cos.shape[-1]
    if half == 0:
        return x
    rot, rest = x[..., : 2 * half], x[..., 2 * half :]
    pairs = rot.unflatten(-1, (half, 2))
    x0, x1 = pairs[..., 0], pairs[..., 1]
    c, s = cos.unsqueeze(-2), sin.unsqueeze(-2)  # broadcast over heads
    out = torch.stack((x0 * c - x1 * s, x1 * c + x0 * s), dim=-1).flatten(-2)
    return out if rest.shape[-1] == 0 else torch.cat((out, rest), dim=-1)
