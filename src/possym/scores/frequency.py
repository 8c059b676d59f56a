"""Which RoPE frequencies a head uses: frequency use, per-frequency scores and the geometry of one plane
(paper A §3.4, Fig. 4, Fig. 8, Table 1; paper B's frequency-level scores).

Plane k (1-based ID, θ_k = base^{−2(k−1)/d_rot}; ID 1 fastest) contributes the partial logit
ℓ_k(j) = (R_q q)_k · (R_j k_j)_k / sqrt(d_head) to the logit of key j. Frequency use, our reading of Fig. 4C
and Fig. 8 (the paper gives no prose definition; docs/results.md, "Table 1: frequency use"):

    use_k = mean over inputs of max_{j ≤ q} ℓ_k(j);   dominant = argmax_k use_k;
    weighted ID = Σ_k k · use_k⁺ / Σ_k use_k⁺   (use_k⁺ = max(use_k, 0); NaN if no plane raises a key).

Weighing by the positive part keeps the ID a convex combination in 1..n_planes (the signed use once gave IDs such
as −5). It reproduces Table 1's pattern on our paper-preset runs, not its exact entries (docs/results.md).
Per-frequency scores (paper B's "projection heads"): the metric on one plane's logits alone, from
:func:`possym.scores.swaps.content_position_logits`. A p-RoPE or NoPE plane has θ = 0, a gated one q = k = 0 (use
0, and a projection head of uniform attention); both are read from the model, layer by layer. Geometry (Fig. 4B):
on one plane, the keys k_j and the rotated query R_δ q for offsets δ; a positional head collapses the keys onto one
direction and lets the offset pick the key."""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from possym.devices import model_device
from possym.model.gptj import GPTJ
from possym.model.rope import layer_frequencies
from possym.scores.metric import TAU
from possym.scores.swaps import (
    _check_eval,
    layer_tables,
    query_positions,
    rope_planes,
    rotated_qk,
    swap_attention,
)


def partial_logits(q_rot: Tensor, k_rot: Tensor, rot_dim: int, scale: float) -> Tensor:
    """ℓ_k(j) for clean positions: q_rot [..., d_head], k_rot [..., key, d_head] -> [..., key, plane]."""
    q0, q1, _ = rope_planes(q_rot[..., None, :], rot_dim)
    k0, k1, _ = rope_planes(k_rot, rot_dim)
    return (q0 * k0 + q1 * k1) * scale


def _per_query(model, tokens, query, layers):
    _check_eval(model)
    layers = list(range(model.cfg.n_layers)) if layers is None else list(layers)
    return layers, query_positions(tokens, query), rotated_qk(model, tokens.to(model_device(model)), layers)


def frequency_use(
    model: GPTJ,
    tokens: Tensor,
    *,
    query: int | Tensor | None = None,
    layers: list[int] | None = None,
) -> Tensor:
    """use_k of every (layer, head, plane): [layer, head, plane], averaged over the scored inputs.

    tokens: [batch, pos]; query as :func:`possym.scores.swaps.query_positions` (default: last token).
    """
    layers, qpos, acts = _per_query(model, tokens, query, layers)
    cfg = model.cfg
    out = torch.zeros(len(layers), cfg.n_heads, cfg.rot_dim // 2, dtype=torch.float64, device=model_device(model))
    ok = qpos >= 0
    for li, layer in enumerate(layers):
        q_rot, k_rot = (a.double() for a in acts[layer])
        for q in qpos[ok].unique().tolist():
            idx = (qpos == q).nonzero().squeeze(1)
            keys = k_rot[idx, : q + 1].transpose(1, 2)  # [batch, head, key, d_head]
            ell = partial_logits(q_rot[idx, q], keys, cfg.rot_dim, 1 / math.sqrt(cfg.d_head))
            out[li] += ell.amax(-2).sum(0)  # max over keys, summed over inputs: [head, plane]
    return out / ok.sum()


def weighted_frequency_id(use: Tensor) -> Tensor:
    """Σ_k k·use_k⁺ / Σ_k use_k⁺ with use_k⁺ = max(use_k, 0), over the last axis (1-based IDs):
    [..., plane] -> [...] (Table 1). In 1..n_planes; NaN where no plane has positive use.

    >>> weighted_frequency_id(torch.tensor([[3.0, 0.0, 1.0, -5.0], [-1.0, -2.0, -1.0, -1.0]])).tolist()
    [1.5, nan]
    """
    ids = torch.arange(1, use.shape[-1] + 1, dtype=use.dtype, device=use.device)
    weight = use.clamp(min=0)
    total = weight.sum(-1)
    return torch.where(total > 0, (weight * ids).sum(-1) / total.where(total > 0, torch.ones_like(total)),
                       torch.full_like(total, float("nan")))


def dominant_frequency_id(use: Tensor) -> Tensor:
    """argmax_k use_k as a 1-based ID: [..., plane] -> [...] (Fig. 4C)."""
    return use.argmax(-1) + 1


@dataclass(frozen=True)
class PlaneScores:
    """Per-frequency scores: the metric on each RoPE plane's partial logits alone."""

    s_pos: Tensor  # [batch, layer, head, plane]
    s_sym: Tensor  # [batch, layer, head, plane]
    layers: tuple[int, ...]


def plane_scores(
    model: GPTJ,
    tokens: Tensor,
    *,
    query: int | Tensor | None = None,
    layers: list[int] | None = None,
    block_size: int = 1,
    tau: float = TAU,
) -> PlaneScores:
    """s_POS and s_SYM of every plane's projection head, per input: [batch, layer, head, plane]."""
    layers, qpos, acts = _per_query(model, tokens, query, layers)
    cfg = model.cfg
    shape = (tokens.shape[0], len(layers), cfg.n_heads, cfg.rot_dim // 2)
    s_pos, s_sym = (torch.full(shape, float("nan"), dtype=torch.float64, device=model_device(model)) for _ in range(2))
    with torch.no_grad():
        for li, layer in enumerate(layers):
            for q in qpos.unique().tolist():
                if q < 0:
                    continue
                idx = (qpos == q).nonzero().squeeze(1)
                q_rot, k_rot = acts[layer]
                planes, _ = layer_tables(model, q_rot[idx], k_rot[idx], q, per_plane=True, layer=layer)
                s_pos[idx, li], s_sym[idx, li] = swap_attention(planes, block_size).scores(tau)
    return PlaneScores(s_pos, s_sym, tuple(layers))


def _rotate(v: Tensor, angle: Tensor) -> Tensor:
    """Rotate 2-vectors v [..., 2] by ``angle`` [...] (the RoPE rotation of one plane)."""
    c, s = angle.cos(), angle.sin()
    return torch.stack((v[..., 0] * c - v[..., 1] * s, v[..., 1] * c + v[..., 0] * s), -1)


@dataclass(frozen=True)
class PlaneGeometry:
    """One plane of one head for one input (Fig. 4B)."""

    frequency_id: int  # 1-based
    theta: float  # radians per position
    keys: Tensor  # [key, 2] pre-RoPE keys k_j, j = 0..q
    queries: Tensor  # [offset, 2] R_δ q for δ = offsets
    offsets: Tensor  # [offset]
    query: int  # the query position q


def plane_geometry(
    model: GPTJ,
    tokens: Tensor,
    *,
    layer: int,
    head: int = 0,
    frequency_id: int | None = None,
    query: int | None = None,
    offsets: Tensor | None = None,
) -> PlaneGeometry:
    """Keys and rotated queries of one input on one plane; default plane: this input's dominant one.

    tokens: [pos] one input; query: default the last token; offsets: default 0..q.
    """
    tokens = tokens.reshape(1, -1)
    layers, qpos, acts = _per_query(model, tokens, query, [layer])
    q = int(qpos[0])
    cfg = model.cfg
    if cfg.rot_dim == 0:
        raise ValueError("a NoPE model (rotary_dim=0) has no RoPE planes")
    if frequency_id is None:
        use = frequency_use(model, tokens, query=q, layers=[layer])[0, head]
        frequency_id = int(dominant_frequency_id(use))
    k = frequency_id - 1
    theta = layer_frequencies(cfg, layer)[k]  # 0 on a p-RoPE or NoPE-layer plane
    q_rot, k_rot = (a[0, :, head].double() for a in acts[layer])  # [pos, d_head]
    q0, q1, _ = rope_planes(q_rot[q], cfg.rot_dim)
    k0, k1, _ = rope_planes(k_rot[: q + 1], cfg.rot_dim)
    keys = _rotate(torch.stack((k0[:, k], k1[:, k]), -1), -torch.arange(q + 1) * theta)  # undo R_j
    q_pre = _rotate(torch.stack((q0[k], q1[k])), -q * theta)  # undo R_q
    offsets = torch.arange(q + 1) if offsets is None else offsets
    queries = _rotate(q_pre.expand(len(offsets), 2), offsets * theta)
    return PlaneGeometry(frequency_id, float(theta), keys, queries, offsets, q)
