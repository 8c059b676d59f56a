"""Where a prompt's swap blocks lie: :class:`BlockLayout`, and the tokenized :class:`EncodedPrompt` that carries one.

``heads/prompts.py`` builds them (``encode``), ``heads/scores.py`` and ``heads/swap_and_rerun.py``
read them; living here, neither of those imports the other.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from possym.errors import PossymError
from possym.scores.swaps import query_positions


@dataclass(frozen=True)
class BlockLayout:
    """``n_blocks`` swap blocks of ``block_size`` tokens, contiguous from token ``start``.

    >>> BlockLayout(start=3, block_size=2, n_blocks=2).positions.tolist()
    [3, 4, 5, 6]
    """

    start: int
    block_size: int
    n_blocks: int

    def __post_init__(self) -> None:
        if self.start < 0:
            raise PossymError(f"start={self.start} must be >= 0")
        if self.block_size < 1:
            raise PossymError(f"block_size={self.block_size} must be >= 1")
        if self.n_blocks < 2:
            raise PossymError(f"n_blocks={self.n_blocks} must be >= 2 (a swap needs two blocks)")

    @property
    def end(self) -> int:
        """One past the last swapped position."""
        return self.start + self.block_size * self.n_blocks

    @property
    def positions(self) -> Tensor:
        return torch.arange(self.start, self.end)


@dataclass(frozen=True)
class EncodedPrompt:
    """A tokenized prompt, its block layout, and the first token of its answer (None: no answer)."""

    ids: tuple[int, ...]
    layout: BlockLayout
    answer_id: int | None
    task: str


def token_prompts(tokens: Tensor, block_size: int = 1, query: int | Tensor | None = None) -> list[EncodedPrompt]:
    """Token ids [batch, pos] as prompts scored the way :func:`possym.scores.swaps.head_scores` scores a
    possym model: the query is the last token, or ``query`` (a position, or one per input [batch]; see
    :func:`possym.scores.swaps.query_positions`), and blocks of ``block_size`` tokens tile the keys before
    it from position 0 (a remainder nearest the query is never swapped). A prompt ends at its query: causal
    attention there sees nothing later, so cutting the rest changes no score.

    >>> token_prompts(torch.tensor([[5, 6, 7, 8, 9]]), block_size=2)[0].layout
    BlockLayout(start=0, block_size=2, n_blocks=2)
    >>> token_prompts(torch.tensor([[5, 6, 7, 8, 9]]), query=2)[0].ids
    (5, 6, 7)
    """
    tokens = torch.as_tensor(tokens)
    if tokens.ndim != 2:
        raise PossymError(f"tokens have shape {tuple(tokens.shape)}; expected [batch, pos]")
    try:
        queries = query_positions(tokens, query).tolist()
    except ValueError as e:
        raise PossymError(str(e)) from None
    if any(q < 0 for q in queries):
        raise PossymError("every prompt needs its query: a query position of -1 (no query) is not allowed here")
    return [EncodedPrompt(tuple(row[: q + 1]), BlockLayout(0, block_size, q // block_size), None, "tokens")
            for row, q in zip(tokens.tolist(), queries, strict=True)]


def check_token_ids(ids: Tensor, d_vocab: int) -> None:
    """Raise :class:`~possym.errors.PossymError` unless ``ids`` is a non-empty [batch, pos] batch of
    integer token ids in 0..d_vocab−1 (the model's embedding rows), so a bad batch reads as what it is,
    not as an ``IndexError`` deep inside the embedding.

    >>> check_token_ids(torch.tensor([[0, 9]]), d_vocab=10)
    >>> check_token_ids(torch.tensor([[0, 10]]), d_vocab=10)
    Traceback (most recent call last):
    ...
    possym.errors.PossymError: token ids must lie in 0..9 (the model's vocabulary of 10); got ids from 0 to 10
    """
    if ids.ndim != 2 or ids.shape[0] == 0 or ids.shape[1] == 0:
        raise PossymError(
            f"head_scores needs at least one input of at least one token, as token ids [batch, pos] "
            f"(or a non-empty list of prompts); got shape {tuple(ids.shape)}"
        )
    if ids.dtype.is_floating_point or ids.dtype.is_complex or ids.dtype == torch.bool:
        raise PossymError(f"token ids must be integers; got dtype {ids.dtype}")
    lo, hi = int(ids.min()), int(ids.max())
    if lo < 0 or hi >= d_vocab:
        raise PossymError(
            f"token ids must lie in 0..{d_vocab - 1} (the model's vocabulary of {d_vocab}); got ids from {lo} to {hi}"
        )
