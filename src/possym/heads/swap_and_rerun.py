"""Swap-and-rerun through a Hugging Face model's own attention module: the reference for the exact engine.

For a layer ℓ, one prompt and the query at its last token q (paper A App. D):

1. run the model once and read what layer ℓ's attention module was called with: its input
   hidden states (the residual rows after the layer's input norm, which acts on each row alone, so
   swapping them is swapping residual rows), the cos/sin of positions 0..q and the attention mask;
2. for every pair of blocks, swap their rows and nothing else: positions, and so RoPE, stay put;
3. call the module itself on every variant, in one batch, with ``attn_implementation="eager"``, and
   read the query's post-softmax row from the attention weights it returns;
4. score the rows with :mod:`possym.scores.metric`.

This re-runs q/k/v projections, QK-norm, RoPE, GQA, soft-cap and masking exactly as the model does;
it is slow by design (C(M, 2) variants per layer) and checks :mod:`possym.heads.scores`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch
from torch import Tensor

from possym.errors import PossymError
from possym.heads.capture import attention_implementation, attention_module, capture_attention, decoder_layers
from possym.heads.layout import BlockLayout
from possym.heads.scores import layout_pairs
from possym.scores.metric import TAU, block_swaps, pair_scores

if TYPE_CHECKING:
    from transformers import PreTrainedModel


@dataclass(frozen=True)
class RerunRows:
    """The query's clean row and its row after every swap, as the model's attention module re-computes them."""

    row: Tensor  # [head, key_pos]
    swapped: Tensor  # [head, swap, key_pos]
    blocks: Tensor  # [swap, 2]
    layout: BlockLayout

    def scores(self, tau: float = TAU) -> tuple[Tensor, Tensor]:
        """(s_POS, s_SYM), each [head]."""
        return pair_scores(*layout_pairs(self.row, self.swapped, self.layout, self.blocks), tau)


def _expand(value: Any, n: int) -> Any:
    """Repeat a batch-1 tensor (or a tuple of them, like RoPE's (cos, sin)) n times along the batch."""
    if isinstance(value, Tensor) and value.ndim > 0 and value.shape[0] == 1:
        return value.expand(n, *value.shape[1:])
    if isinstance(value, tuple):
        return tuple(_expand(v, n) for v in value)
    return value


def rerun_swaps(model: PreTrainedModel, ids: Tensor, layer: int, layout: BlockLayout) -> RerunRows:
    """Clean and swapped rows of the last token of ``ids`` [1, pos] at ``layer``, by re-running its attention."""
    if ids.shape[0] != 1:
        raise PossymError(f"rerun_swaps takes one prompt, got a batch of {ids.shape[0]}")
    attn = attention_module(decoder_layers(model)[layer])
    calls: list[tuple[tuple, dict]] = []
    handle = attn.register_forward_pre_hook(lambda _m, args, kwargs: calls.append((args, kwargs)), with_kwargs=True)
    try:
        with torch.no_grad(), capture_attention(model, []):  # the capture's eager mask, as in scoring
            model(input_ids=ids, use_cache=False)
    finally:
        handle.remove()
    args, kwargs = calls[0]
    hidden = args[0] if args else kwargs.pop("hidden_states")
    query = ids.shape[1] - 1
    blocks, positions, contents = block_swaps(layout.n_blocks * layout.block_size, layout.block_size)
    perm = torch.arange(query + 1).repeat(blocks.shape[0] + 1, 1)  # variant 0 is the clean prompt
    perm[1:].scatter_(1, positions + layout.start, contents + layout.start)
    variants = hidden[0][perm]  # [variant, pos, d_model]
    n = variants.shape[0]
    kwargs = {key: _expand(value, n) for key, value in kwargs.items()}
    with torch.no_grad(), attention_implementation(model, "eager"):
        _, weights = attn(variants, *(_expand(a, n) for a in args[1:]), **kwargs)
    rows = weights[:, :, query, : query + 1].transpose(0, 1)  # [head, variant, key_pos]
    return RerunRows(rows[:, 0], rows[:, 1:], blocks, layout)
