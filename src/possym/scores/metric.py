"""The positional and symbolic scores of an attention head on one input (paper A App. D; paper B Sec. 3).

d is the query's attention row; d_I the block-mean attention of block I (m contiguous keys; m = 1 in paper A);
a swap π = (I, J) exchanges two blocks' contents, every token keeping its position, and d' is the row after it:

    α(π)  = softmax_π( |d_I − d_J| / τ )                   (τ = 1e-4 in paper A: nearly a hard max)
    s_POS = Σ_π α(π) · cos((d'_I, d'_J), (d_I, d_J))         attention stays where it was: positional
    s_SYM = Σ_π α(π) · cos((d'_I, d'_J), (d_J, d_I))         attention follows the moved content: symbolic

Both lie in [0, 1]: uniform attention gives (1, 1), a sharp positional head (1, 0), a sharp symbolic one (0, 1). A
2-vector of zeros has cosine 0; vectors are rescaled by their largest entry first. ``cosine="exact"`` (the default,
the paper's formula) or ``"torch"`` (the authors' float32 ``cosine_similarity``, whose eps = 1e-8 clamps each
norm): docs/choices.md, "The cosine of the scores". Scores over inputs are plain means (the caller's). Block means,
as paper B: a block sum would only rescale |d_I − d_J| inside α. How a head's swaps are computed: docs/heads.md.

Example (a one-hot positional head on key 0 of 3, and the swaps (0,1), (0,2), (1,2)):
    >>> clean = torch.tensor([[1.0, 0.0], [1.0, 0.0], [0.0, 0.0]])
    >>> swapped = clean.clone()                                  # attention stays on position 0
    >>> float(positional_score(clean, swapped)), float(symbolic_score(clean, swapped))
    (1.0, 0.0)"""

from __future__ import annotations

from typing import Literal

import torch
import torch.nn.functional as F
from torch import Tensor

TAU = 1e-4  # paper A's swap temperature (App. D)
Cosine = Literal["exact", "torch"]
COSINES: tuple[str, ...] = ("exact", "torch")


def swap_weights(clean: Tensor, tau: float = TAU) -> Tensor:
    """α(π) = softmax over swaps of |d_I − d_J| / τ.  clean: [..., swap, 2] -> [..., swap].

    Swaps that move equal mass get equal weight, so uniform attention weighs every swap equally.
    """
    if tau <= 0:
        raise ValueError(f"tau={tau} must be > 0")
    return ((clean[..., 0] - clean[..., 1]).abs() / tau).softmax(dim=-1)


def pair_cosine(a: Tensor, b: Tensor, cosine: Cosine = "exact") -> Tensor:
    """cos(a, b) of 2-vectors along the last axis: [..., 2], [..., 2] -> [...]; 0 if either is zero.

    ``"exact"``: each vector is divided by its largest |entry| first, so the cosine of masses like
    1e-200 is exact instead of underflowing in the product of norms. ``"torch"``: the authors'
    ``F.cosine_similarity`` in float32 (eps 1e-8 on each norm), returned in ``a``'s dtype.

    >>> tiny = torch.tensor([[3e-9, 4e-9]], dtype=torch.float64)
    >>> float(pair_cosine(tiny, tiny)), round(float(pair_cosine(tiny, tiny, "torch")), 4)
    (1.0, 0.25)
    """
    if cosine == "torch":
        return F.cosine_similarity(a.float(), b.float(), dim=-1).to(a.dtype)
    if cosine != "exact":
        raise ValueError(f"cosine={cosine!r}; allowed: {COSINES}")
    a = a / a.abs().amax(dim=-1, keepdim=True).clamp_min(torch.finfo(a.dtype).tiny)
    b = b / b.abs().amax(dim=-1, keepdim=True).clamp_min(torch.finfo(b.dtype).tiny)
    norm = a.norm(dim=-1) * b.norm(dim=-1)
    return torch.where(norm > 0, (a * b).sum(-1) / norm.clamp_min(torch.finfo(a.dtype).tiny), 0.0)


def positional_score(clean: Tensor, swapped: Tensor, tau: float = TAU, cosine: Cosine = "exact") -> Tensor:
    """s_POS = Σ_π α(π) cos(v_IJ(πx), v_IJ(x)) in [0, 1] (paper A App. D).

    clean, swapped: [..., swap, 2], the block masses (d_I, d_J) before and (d'_I, d'_J) after swap π.
    Returns [...]. 1 when no swap changes the attention at the swapped blocks (a positional head).
    """
    return (swap_weights(clean, tau) * pair_cosine(swapped, clean, cosine)).sum(-1)


def symbolic_score(clean: Tensor, swapped: Tensor, tau: float = TAU, cosine: Cosine = "exact") -> Tensor:
    """s_SYM = Σ_π α(π) cos(v_IJ(πx), v_JI(x)) in [0, 1] (paper A App. D).

    clean, swapped: [..., swap, 2] as in :func:`positional_score`. Returns [...]. 1 when every swap
    exchanges the attention of the two blocks, i.e. attention follows content (a symbolic head).
    """
    return (swap_weights(clean, tau) * pair_cosine(swapped, clean.flip(-1), cosine)).sum(-1)


def block_mean(row: Tensor, block_size: int, n_blocks: int) -> Tensor:
    """Block-mean attention d_I = mean of ``row`` over positions I·m .. I·m+m−1.

    row: [..., key_pos] -> [..., n_blocks]; positions past ``n_blocks * block_size`` are ignored.
    """
    if n_blocks * block_size > row.shape[-1]:
        raise ValueError(f"{n_blocks} blocks of {block_size} do not fit in {row.shape[-1]} keys")
    return row[..., : n_blocks * block_size].unflatten(-1, (n_blocks, block_size)).mean(-1)


def attention_entropy(row: Tensor) -> Tensor:
    """Shannon entropy −Σ_j d_j log d_j (nats) of attention rows: [..., key_pos] -> [...].

    0 for one-hot attention, log(n) for uniform attention over n keys; 0·log 0 = 0.
    """
    return -torch.xlogy(row, row).sum(-1)


def block_swaps(n_keys: int, block_size: int = 1) -> tuple[Tensor, Tensor, Tensor]:
    """The swap set of a query at position ``n_keys``: every pair I < J of m-token blocks before it.

    Blocks tile positions 0 .. n_blocks·m − 1 with n_blocks = n_keys // m; when m does not divide
    n_keys, the last n_keys mod m keys (those nearest the query) are never swapped. The query's own
    key is never swapped either.

    Returns ``blocks`` [swap, 2] (I, J), ``positions`` [swap, 2m] (the positions of block I, then
    of block J) and ``contents`` [swap, 2m] (the original position of the content that the swap puts
    at each of those positions). Order: lexicographic in (I, J), as ``torch.combinations``.

    Example:
        >>> blocks, positions, contents = block_swaps(4, block_size=2)
        >>> blocks.tolist(), positions.tolist(), contents.tolist()
        ([[0, 1]], [[0, 1, 2, 3]], [[2, 3, 0, 1]])
    """
    if block_size < 1:
        raise ValueError(f"block_size={block_size} must be >= 1")
    if n_keys < 0:
        raise ValueError(f"n_keys={n_keys} must be >= 0")
    n_blocks = n_keys // block_size
    blocks = torch.combinations(torch.arange(n_blocks), 2)  # [swap, 2]; empty when n_blocks < 2
    blocks = blocks.reshape(-1, 2)
    offsets = torch.arange(block_size)
    pos_i = blocks[:, :1] * block_size + offsets
    pos_j = blocks[:, 1:] * block_size + offsets
    return blocks, torch.cat([pos_i, pos_j], -1), torch.cat([pos_j, pos_i], -1)


def swap_pairs(row: Tensor, swapped_rows: Tensor, blocks: Tensor, block_size: int = 1) -> tuple[Tensor, Tensor]:
    """The 2-vectors of every swap: v_IJ(x) = (d_I, d_J) and v_IJ(πx) = (d'_I, d'_J), block means.

    row: [..., key_pos] the clean query row; swapped_rows: [..., swap, key_pos] the row after each
    swap of ``blocks`` [swap, 2]. Returns (clean, swapped), each [..., swap, 2].
    """
    n_blocks = int(blocks.max()) + 1 if blocks.numel() else 0
    clean = block_mean(row, block_size, n_blocks)[..., blocks]  # [..., swap, 2]
    means = block_mean(swapped_rows, block_size, n_blocks)  # [..., swap, n_blocks]
    index = blocks.expand(*means.shape[:-1], 2)
    return clean, means.gather(-1, index)


def pair_scores(
    clean: Tensor, swapped: Tensor, tau: float = TAU, cosine: Cosine = "exact"
) -> tuple[Tensor, Tensor]:
    """(s_POS, s_SYM) from the swap 2-vectors [..., swap, 2]; NaN when there is no swap (fewer than two blocks)."""
    if clean.shape[-2] == 0:
        nan = torch.full(clean.shape[:-2], float("nan"), dtype=clean.dtype, device=clean.device)
        return nan, nan.clone()
    return positional_score(clean, swapped, tau, cosine), symbolic_score(clean, swapped, tau, cosine)
