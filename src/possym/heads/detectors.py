"""TransformerLens's head detectors: previous-token, duplicate-token and induction scores of every head.

TransformerLens's ``head_detector.detect_head`` labels a head by how much of its attention lands on
the query–key pairs a *detection pattern* D [pos, key_pos] marks (its default ``error_measure="mul"``):

    score = Σ_{i,j} A[i, j] · D[i, j] / Σ_{i,j} A[i, j],

over every query i and key j of one input, A the head's attention pattern (rows sum to 1, so the
denominator is the number of positions). For a list of inputs the score is the mean over inputs.
The three patterns, for tokens t_0 .. t_{n−1}, all lower-triangular:

    previous_token_head   D[i, j] = 1  if j = i − 1
    duplicate_token_head  D[i, j] = 1  if j < i and t_j = t_i        (an earlier copy of the query's token)
    induction_head        D[i, j] = 1  if 1 <= j <= i and t_{j−1} = t_i
                                       (the token after an earlier copy of the query's token)

Range [0, 1]. Row 0 has no previous token and no earlier copy, so a head that attends perfectly to
the previous token scores (n − 1)/n on ``previous_token_head``, not 1; ``exclude_bos`` zeroes the
attention on key 0 before the sums (TransformerLens's option of that name), and then the perfect
previous-token head scores exactly 1. ``exclude_current_token`` zeroes the diagonal. A head whose
attention is entirely excluded scores NaN (0/0), as TransformerLens's does. TransformerLens's
``error_measure="abs"`` is not implemented.

Scores are read from the model's own attention pattern: ``hook_pattern`` of a possym GPT-J or a
TransformerLens model (:func:`hooked_detector_scores`), the weights the eager attention returns in a
Hugging Face model (:func:`possym.heads.capture.capture_attention`); :func:`possym.head_scores`
reports them beside s_POS and s_SYM.

Example (a head that attends to the previous token, and to itself at position 0; on a repeated
sequence the token after the earlier copy is the previous token from position 2 on):
    >>> import torch
    >>> pattern = torch.eye(4).roll(-1, 1).tril()
    >>> pattern[0, 0] = 1.0
    >>> tokens = torch.tensor([5, 6, 5, 6])
    >>> [round(float(x), 3) for x in detector_scores(pattern, tokens)]        # previous, duplicate, induction
    [0.75, 0.0, 0.5]
    >>> [round(float(x), 3) for x in detector_scores(pattern, tokens, exclude_bos=True)]
    [1.0, 0.0, 1.0]
"""

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
