"""Swap-and-rerun: the paper's own procedure for the scores (paper A App. D), kept as the reference.

For a layer ℓ and a query at position q:

1. read the residual stream entering block ℓ (``blocks.{ℓ}.hook_resid_pre``) for positions 0..q;
2. for every pair I < J of key blocks before q, swap the two blocks of rows, keeping the original
   positions (RoPE is applied at positions 0..q whatever content sits there);
3. re-run block ℓ's real LayerNorm and attention modules on each variant and read the query's
   post-softmax row from ``hook_pattern``;
4. score the rows with :mod:`possym.scores.metric`.

The variants of one input are run as one batch (the paper does the same); this module is slow by
design and serves to check the exact engine (:mod:`possym.scores.swaps`) on every kind of model.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

import torch
from torch import Tensor

from possym.model.gptj import GPTJ, Block
from possym.model.rope import rope_cos_sin
from possym.scores.metric import TAU, attention_entropy, block_swaps, pair_scores, swap_pairs
from possym.scores.swaps import HeadScores, _check_eval, query_positions


@dataclass(frozen=True)
class RerunAttention:
    """The query's clean row and its full row after every swap, as re-run by the model."""

    row: Tensor  # [batch, head, key_pos]
    swapped: Tensor  # [batch, head, swap, key_pos]
    blocks: Tensor  # [swap, 2]
    block_size: int

    def swapped_rows(self) -> Tensor:
        return self.swapped

    def pairs(self) -> tuple[Tensor, Tensor]:
        return swap_pairs(self.row, self.swapped, self.blocks, self.block_size)

    def scores(self, tau: float = TAU) -> tuple[Tensor, Tensor]:
        return pair_scores(*self.pairs(), tau)


def reference_swap_attention(
    model: GPTJ,
    tokens: Tensor,
    *,
    layer: int,
    query: int,
    block_size: int = 1,
    chunk: int = 8,
) -> RerunAttention:
    """Clean and swapped attention rows of the query at position ``query`` by re-running block ``layer``.

    tokens: [batch, pos]. Returns rows [batch, head, q+1] and swapped rows [batch, head, swap, q+1],
    in the model's dtype. ``chunk`` inputs are re-run at a time to bound memory.
    """
    _check_eval(model)
    name = f"blocks.{layer}.hook_resid_pre"
    with torch.no_grad():
        _, cache = model.run_with_cache(tokens, [name])
    return rerun_swaps(model, cache[name], layer=layer, query=query, block_size=block_size, chunk=chunk)


def rerun_swaps(
    model: GPTJ, resid: Tensor, *, layer: int, query: int, block_size: int = 1, chunk: int = 8
) -> RerunAttention:
    """Steps 2-3 on a residual stream [batch, pos, d_model] read at ``blocks.{layer}.hook_resid_pre``."""
    x = resid[:, : query + 1]  # [batch, q+1, d_model]
    blocks, positions, contents = block_swaps(query, block_size)
    # Variant 0 is the clean input; variant s puts the content of position contents[s, t] at positions[s, t].
    perm = torch.arange(query + 1).repeat(blocks.shape[0] + 1, 1)
    perm[1:].scatter_(1, positions, contents)
    block = cast(Block, model.blocks[layer])  # nn.ModuleList indexes to a plain Module
    cfg = model.cfg
    cos, sin = rope_cos_sin(torch.arange(query + 1), cfg.rot_dim, cfg.rope_base, x.dtype)
    captured: list[Tensor] = []
    rows = []
    with torch.no_grad(), model.hooks({f"blocks.{layer}.attn.hook_pattern": lambda t, hook: captured.append(t)}):
        for start in range(0, x.shape[0], chunk):
            variants = x[start : start + chunk][:, perm]  # [chunk, variant, q+1, d_model]
            block.attn(block.ln(variants.flatten(0, 1)), cos, sin)
            pattern = captured.pop()[:, :, query]  # [chunk*variant, head, q+1]
            rows.append(pattern.unflatten(0, variants.shape[:2]).transpose(1, 2))  # [chunk, head, variant, q+1]
    out = torch.cat(rows)
    return RerunAttention(out[:, :, 0], out[:, :, 1:], blocks, block_size)


def reference_head_scores(
    model: GPTJ,
    tokens: Tensor,
    *,
    query: int | Tensor | None = None,
    layers: list[int] | None = None,
    block_size: int = 1,
    tau: float = TAU,
) -> HeadScores:
    """Same contract as :func:`possym.scores.swaps.head_scores`, by swap-and-rerun."""
    layers = list(range(model.cfg.n_layers)) if layers is None else list(layers)
    qpos = query_positions(tokens, query)
    _check_eval(model)
    dtype = next(model.parameters()).dtype
    names = [f"blocks.{layer}.hook_resid_pre" for layer in layers]
    with torch.no_grad():
        _, cache = model.run_with_cache(tokens, names)
    shape = (tokens.shape[0], len(layers), model.cfg.n_heads)
    s_pos, s_sym, ent = (torch.full(shape, float("nan"), dtype=dtype) for _ in range(3))
    for li, layer in enumerate(layers):
        for q in qpos.unique().tolist():
            if q < 0:
                continue
            idx = (qpos == q).nonzero().squeeze(1)
            resid = cache[f"blocks.{layer}.hook_resid_pre"][idx]
            sw = rerun_swaps(model, resid, layer=layer, query=q, block_size=block_size)
            s_pos[idx, li], s_sym[idx, li] = sw.scores(tau)
            ent[idx, li] = attention_entropy(sw.row)
    return HeadScores(s_pos, s_sym, ent, tuple(layers), qpos)
