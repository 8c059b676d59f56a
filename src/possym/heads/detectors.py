"""TransformerLens's head detectors: previous-token, duplicate-token and induction scores of every head.

As TransformerLens's ``detect_head`` (``error_measure="mul"``; ``"abs"`` is not implemented), for a pattern A
and a detection pattern D, score = Σ_{i,j} A[i, j] · D[i, j] / Σ_{i,j} A[i, j], the mean over inputs, with D[i, j]
= 1 iff j = i − 1 (``previous_token_head``), j < i and t_j = t_i (``duplicate_token_head``), 1 <= j <= i and
t_{j−1} = t_i (``induction_head``). ``exclude_bos`` zeroes key 0 (a perfect previous-token head then scores 1,
not (n − 1)/n), ``exclude_current_token`` the diagonal; a fully excluded head scores NaN. Read from the model's
own pattern (:func:`hooked_detector_scores`; a Hugging Face model's eager weights via
:func:`possym.heads.capture.capture_attention`) and reported by :func:`possym.head_scores`. See docs/heads.md,
"Head detectors beside the scores".

Example (a head that attends to the previous token, and to itself at position 0; on a repeated
sequence the token after the earlier copy is the previous token from position 2 on):
    >>> import torch
    >>> pattern = torch.eye(4).roll(-1, 1).tril()
    >>> pattern[0, 0] = 1.0
    >>> tokens = torch.tensor([5, 6, 5, 6])
    >>> [round(float(x), 3) for x in detector_scores(pattern, tokens)]        # previous, duplicate, induction
    [0.75, 0.0, 0.5]
    >>> [round(float(x), 3) for x in detector_scores(pattern, tokens, exclude_bos=True)]
    [1.0, 0.0, 1.0]"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

HEAD_NAMES = ("previous_token_head", "duplicate_token_head", "induction_head")  # TransformerLens's names


def previous_token_pattern(tokens: Tensor) -> Tensor:
    """D[i, j] = 1 where j = i − 1: tokens [..., pos] -> [..., pos, key_pos] (float)."""
    n = tokens.shape[-1]
    return torch.ones(n - 1, device=tokens.device).diag(-1).expand(*tokens.shape[:-1], n, n)


def duplicate_token_pattern(tokens: Tensor) -> Tensor:
    """D[i, j] = 1 where j < i and t_j = t_i: tokens [..., pos] -> [..., pos, key_pos] (float)."""
    same = tokens[..., :, None] == tokens[..., None, :]
    return same.float().tril(-1)


def induction_pattern(tokens: Tensor) -> Tensor:
    """D[i, j] = 1 where D_duplicate[i, j − 1] = 1, j >= 1: the duplicate pattern shifted one key to the right."""
    dup = duplicate_token_pattern(tokens)
    return torch.cat((torch.zeros_like(dup[..., :1]), dup[..., :-1]), -1)


DETECTION_PATTERNS: dict[str, Callable[[Tensor], Tensor]] = {
    "previous_token_head": previous_token_pattern,
    "duplicate_token_head": duplicate_token_pattern,
    "induction_head": induction_pattern,
}


def detector_scores(
    pattern: Tensor, tokens: Tensor, *, exclude_bos: bool = False, exclude_current_token: bool = False
) -> Tensor:
    """Every detector's score of attention ``pattern`` [..., pos, key_pos] on ``tokens`` [..., pos]
    (leading dims broadcast, e.g. pattern [batch, head, pos, pos] with tokens [batch, 1, pos]) ->
    [..., detector] in the order of :data:`HEAD_NAMES`, float64."""
    a = pattern.double()
    if exclude_bos or exclude_current_token:
        a = a.clone()
    if exclude_bos:
        a[..., 0] = 0
    if exclude_current_token:
        a.diagonal(dim1=-2, dim2=-1).zero_()
    total = a.sum((-2, -1))
    tokens = tokens.to(a.device)
    return torch.stack([(a * DETECTION_PATTERNS[name](tokens)).sum((-2, -1)) / total for name in HEAD_NAMES], -1)


def hooked_detector_scores(
    model: Any,
    tokens: Tensor,
    *,
    layers: list[int] | None = None,
    exclude_bos: bool = False,
    exclude_current_token: bool = False,
) -> Tensor:
    """Detector scores of every head of ``layers`` (default all) of a model with TransformerLens's
    ``run_with_cache`` and hook names (a possym GPT-J, a ``HookedTransformer``): tokens [batch, pos] ->
    [batch, layer, head, detector]; the options as :func:`detector_scores`."""
    layers = list(range(model.cfg.n_layers)) if layers is None else list(layers)
    names = [f"blocks.{layer}.attn.hook_pattern" for layer in layers]
    with torch.no_grad():
        _, cache = model.run_with_cache(tokens, names_filter=names)
    tokens = tokens.to(cache[names[0]].device)[:, None]  # [batch, 1 (head), pos]
    options = {"exclude_bos": exclude_bos, "exclude_current_token": exclude_current_token}
    return torch.stack([detector_scores(cache[name], tokens, **options) for name in names], 1)
