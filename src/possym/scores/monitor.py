"""Live scores during training: the paper's suggested future work (paper A §4, "monitoring positional
and symbolic scores while training").

:func:`monitor_scores` is what the training loop calls at every evaluation step. It costs one
forward pass over the monitor inputs plus the exact engine (:mod:`possym.scores.swaps`), a few
milliseconds per layer for the paper's model; ``benchmarks/bench_monitor.py`` measures its share of
training time.

Example (what ``possym.train.loop.train(..., monitor=monitor_scores)`` logs per evaluation):
    >>> import torch
    >>> from possym.config import ModelConfig
    >>> from possym.model.gptj import GPTJ
    >>> model = GPTJ(ModelConfig(n_layers=2, d_model=16, d_mlp=32, d_vocab=10)).eval()
    >>> records = monitor_scores(model, torch.randint(0, 10, (4, 7)))
    >>> sorted(records[0])[:7]
    ['entropy', 'head', 'layer', 'n_inputs', 'query', 's_pos', 's_pos_high']
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from possym.model.gptj import GPTJ
from possym.scores.metric import TAU
from possym.scores.swaps import head_scores


def monitor_scores(model: GPTJ, tokens: Tensor, *, tau: float = TAU) -> list[dict[str, Any]]:
    """Mean s_POS, s_SYM and attention entropy of every (layer, head) for the last-token query.

    model: a GPTJ in eval mode (a model in training mode is refused: dropout would perturb the
    scores); tokens: [batch, pos]. Returns one record per (layer, head):
    ``{"query": "last", "layer", "head", "s_pos", "s_sym", "entropy", "n_inputs"}``, means over the inputs,
    and each score's spread over them (``s_pos_sd``, ``s_pos_low``, ``s_pos_high``; the same for s_sym).
    """
    with torch.no_grad():
        return head_scores(model, tokens, tau=tau).records(query="last")
