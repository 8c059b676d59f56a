"""Interventions at evaluation: a trained model's attention edited through its hook points, undone on exit.

Three edits, each a context manager over a :class:`~possym.model.gptj.GPTJ` (weights untouched; the
hooks are removed on exit, also when the forward pass raises):

- :func:`gate_planes`: RoPE plane k of a head gives every key the partial logit 0. The query's
  plane-k coordinates (``hook_q``, before RoPE) are set to 0, so ``ℓ_k(j) = (R_i q)_k · (R_j k_j)_k = 0``
  for every key j: the plane adds nothing to any logit, as a plane gated in training does. Planes are
  named by the paper's 1-based frequency ID (plane 1 turns by θ = 1 rad a position).
- :func:`knock_out_keys`: the queries at positions ≥ ``queries_from`` give the keys in ``keys`` the
  logit −∞ (``hook_attn_scores``), so softmax renormalises their attention over the other keys.
- :func:`sharpen_attention`: the logits are multiplied by β before the softmax, a temperature 1/β;
  β > 1 sharpens the pattern towards its maximum, β < 1 flattens it.

Positions are absolute: with a key-value cache (:meth:`GPTJ.forward_kv` with ``past=``) the hook sees
the new queries only, at positions ``past, ..., past + n − 1``, against every key.

Example:
    >>> import torch
    >>> from possym.config import ModelConfig
    >>> from possym.model.gptj import GPTJ
    >>> model = GPTJ(ModelConfig(n_layers=1, d_model=16, d_mlp=32, d_vocab=10), torch.Generator().manual_seed(0))
    >>> tokens = torch.tensor([[1, 2, 3, 4]])
    >>> with knock_out_keys(model, layers=[0], keys=range(0, 2), queries_from=2):
    ...     _, cache = model.run_with_cache(tokens)
    >>> cache["pattern", 0][0, 0, 3, :2].tolist()       # the last query gives keys 0 and 1 nothing
    [0.0, 0.0]
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager

import torch
from torch import Tensor

from possym.errors import PossymError
from possym.model.gptj import GPTJ
from possym.model.hooks import HookPoint


def _layers(model: GPTJ, layers: Iterable[int]) -> list[int]:
    out = sorted(set(layers))
    bad = [layer for layer in out if not 0 <= layer < model.cfg.n_layers]
    if not out or bad:
        raise PossymError(f"layers {bad or 'none'}: a layer must lie in 0..{model.cfg.n_layers - 1}")
    return out


@contextmanager
def gate_planes(model: GPTJ, planes: Mapping[int, Iterable[int]], heads: Iterable[int] | None = None) -> Iterator[GPTJ]:
    """Gate RoPE planes at evaluation: ``planes`` maps a layer to the 1-based frequency IDs to gate in it,
    in every head or in ``heads`` only (module docstring).

    >>> import torch
    >>> from possym.config import ModelConfig
    >>> model = GPTJ(ModelConfig(n_layers=1, d_model=16, d_mlp=32, d_vocab=10), torch.Generator().manual_seed(0))
    >>> with gate_planes(model, {0: range(1, model.cfg.n_planes + 1)}):   # every plane: content only
    ...     _, cache = model.run_with_cache(torch.tensor([[3, 3, 3]]))
    >>> torch.allclose(cache["pattern", 0][0, 0, 2], torch.full((3,), 1 / 3))   # equal keys, no position
    True
    """
    n_planes = model.cfg.n_planes
    layers = _layers(model, planes)
    chosen = {layer: sorted(set(planes[layer])) for layer in layers}
    for layer, ids in chosen.items():
        bad = [k for k in ids if not 1 <= k <= n_planes]
        if not ids or bad:
            raise PossymError(f"layer {layer}: plane IDs {bad or 'none'}; a plane ID must lie in 1..{n_planes}")
    head_ids = list(range(model.cfg.n_heads)) if heads is None else sorted(set(heads))
    if not head_ids or not all(0 <= h < model.cfg.n_heads for h in head_ids):
        raise PossymError(f"heads {head_ids}: a head must lie in 0..{model.cfg.n_heads - 1}")

    def gate(q: Tensor, hook: HookPoint) -> Tensor:  # q: [batch, pos, head, d_head], before RoPE
        dims = torch.tensor([d for k in chosen[hook.layer()] for d in (2 * (k - 1), 2 * (k - 1) + 1)])
        q = q.clone()
        q[:, :, torch.tensor(head_ids)[:, None], dims[None, :]] = 0.0
        return q

    with model.hooks([(f"blocks.{layer}.attn.hook_q", gate) for layer in layers]):
        yield model


@contextmanager
def knock_out_keys(model: GPTJ, layers: Iterable[int], keys: range, queries_from: int) -> Iterator[GPTJ]:
    """In ``layers``, the queries at absolute positions ≥ ``queries_from`` attend to no key in ``keys``
    (a range of absolute positions that ends at or before ``queries_from``, so that every such query
    keeps at least its own key)."""
    chosen = _layers(model, layers)
    if keys.step != 1 or keys.start < 0 or len(keys) == 0 or keys.stop > queries_from:
        raise PossymError(f"keys={keys} must be a non-empty range of positions, step 1, ending at or before "
                          f"queries_from={queries_from}")

    def knock(scores: Tensor, hook: HookPoint) -> Tensor:  # [batch, head, query, key]
        n_query, n_key = scores.shape[-2:]
        first = n_key - n_query  # the absolute position of the first query (a cached past before it)
        rows = torch.arange(first, n_key, device=scores.device) >= queries_from
        cols = torch.zeros(n_key, dtype=torch.bool, device=scores.device)
        cols[keys.start:min(keys.stop, n_key)] = True
        return scores.masked_fill(rows[:, None] & cols[None, :], float("-inf"))

    with model.hooks([(f"blocks.{layer}.attn.hook_attn_scores", knock) for layer in chosen]):
        yield model


@contextmanager
def sharpen_attention(model: GPTJ, layers: Iterable[int], beta: float) -> Iterator[GPTJ]:
    """In ``layers``, every attention logit times ``beta`` (> 0) before the softmax.

    >>> import torch
    >>> from possym.config import ModelConfig
    >>> model = GPTJ(ModelConfig(n_layers=1, d_model=16, d_mlp=32, d_vocab=10), torch.Generator().manual_seed(0))
    >>> tokens = torch.tensor([[1, 2, 3, 4]])
    >>> peak = lambda: model.run_with_cache(tokens)[1]["pattern", 0][0, 0, 3].max().item()
    >>> with sharpen_attention(model, [0], beta=50.0):
    ...     sharp = peak()
    >>> sharp > peak()
    True
    """
    chosen = _layers(model, layers)
    if isinstance(beta, bool) or not isinstance(beta, int | float) or not beta > 0:
        raise PossymError(f"beta={beta!r} must be a number > 0 (1 leaves the model as it is)")

    def sharpen(scores: Tensor, hook: HookPoint) -> Tensor:
        return scores * beta  # the mask's -inf stays -inf

    with model.hooks([(f"blocks.{layer}.attn.hook_attn_scores", sharpen) for layer in chosen]):
        yield model
