"""Attention rows read along a hop path, for the paper's Fig. 3 (paper A §3.2).

Example:
    >>> import torch
    >>> from possym.config import ModelConfig
    >>> from possym.model.gptj import GPTJ
    >>> model = GPTJ(ModelConfig(n_layers=2, d_model=16, d_mlp=32, d_vocab=10)).eval()
    >>> hop_attention(model, torch.tensor([1, 2, 3, 4, 5]), [4, 2, 0]).shape   # layer, head, hop, key_pos
    torch.Size([2, 1, 2, 5])
"""

from __future__ import annotations

import torch
from torch import Tensor

from possym.model.gptj import GPTJ
from possym.scores.swaps import _check_eval


def hop_attention(model: GPTJ, tokens: Tensor, path: list[int]) -> Tensor:
    """The attention of every layer and head from each hop position of one input.

    tokens: [pos] one input; path: the positions from the query to the answer (the task's ``path``
    row without its −1 padding). The hop queries are every path position but the answer's.
    Returns [layer, head, hop, key_pos], rows zero past their query (causal).
    """
    _check_eval(model)
    names = [f"blocks.{layer}.attn.hook_pattern" for layer in range(model.cfg.n_layers)]
    with torch.no_grad():
        _, cache = model.run_with_cache(tokens.reshape(1, -1), names)
    queries = torch.as_tensor([p for p in path if p >= 0][:-1], dtype=torch.long)
    return torch.stack([cache[name][0][:, queries] for name in names])
