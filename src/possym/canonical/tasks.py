"""The metric paper's three canonical tasks (arXiv 2511.11579): Index, Retrieval, partial induction.

Each input is ``length`` content tokens at positions 0..length-1, then one query token at position
``length``; the model answers at the query (last-token prediction, as every possym task).

- **Index** (f_POS, purely positional). Content: symbols ``s0..s{S-1}`` drawn uniformly (repeats
  allowed). Query ``@k`` names the position k tokens back from the query, j = length - k; the answer
  is the symbol at j. Offsets run over 1..L, L = the training length, so at a longer evaluation
  length the answer lies in the last L tokens and everything before is extra context.
- **Retrieval** (f_SYM, purely symbolic). Content: bindings ``s{i}:a{k}`` (symbol i bound to
  attribute k; one atomic token, as paper B's Theorem 5 assumes one-hot embeddings), the symbols all
  distinct. Query ``s{i}?``; the answer is the attribute token ``a{k}`` bound to symbol i.
- **Partial induction** (f_MIX). As Retrieval, but the queried symbol occurs twice: at the answer
  position j >= 1 and at one earlier position d, uniform in 0..j-1, bound to a *different*
  attribute; the answer is the attribute of the **last** occurrence (j). Every other symbol occurs
  once. So the content alone cannot decide (needs recency) and position alone cannot (needs the
  symbol): the task needs both behaviours.

Balance: answer positions are exactly balanced (``n / n_positions`` each, the remainder spread one
per position) and, through :func:`possym.tasks.balanced_combinations` in the registry path, so are
the answer values within each position.

Worked example (S = 4, A = 3, length 4)::

    index      s2 s0 s3 s3 @3          answer s0   (position 4 - 3 = 1)
    retrieval  s1:a2 s3:a0 s0:a0 s2:a1 s0?    answer a0   (position 2)
    induction  s1:a2 s3:a1 s1:a0 s2:a1 s1?    answer a0   (last s1 at position 2; the s1 at 0 is the distractor)

Example:
    >>> spec = CanonicalSpec("retrieval", length=4, n_symbols=4, n_attributes=3)
    >>> s = generate(spec, 8, np.random.default_rng(0))
    >>> s.tokens.shape, np.bincount(s.path[:, 1]).tolist()
    ((8, 5), [2, 2, 2, 2])
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # possym.tasks' registry imports this package, so possym.tasks is imported where used
    from possym.tasks.samples import TaskSamples
    from possym.tasks.vocab import Vocab

CANONICAL_TASKS = ("index", "retrieval", "induction")
"""The three canonical tasks, by the names the task registry and the run configs use."""


@dataclass(frozen=True)
class CanonicalSpec:
    """One canonical task: its name, training ``length`` L, ``n_symbols`` S and ``n_attributes`` A.

    L is also the largest Index offset (the query vocabulary ``@1..@L``). Retrieval needs
    S >= length and partial induction S >= length - 1 at every length it is generated at (distinct
    symbols); induction needs A >= 2 (the distractor's attribute differs from the answer's).
    """

    task: str
    length: int = 8
    n_symbols: int = 32
    n_attributes: int = 8

    def __post_init__(self) -> None:
        if self.task not in CANONICAL_TASKS:
            raise ValueError(f"task={self.task!r} is not a canonical task; allowed: {CANONICAL_TASKS}")
        if self.length < 2:
            raise ValueError(f"length={self.length} must be >= 2")
        if self.n_symbols < 2:
            raise ValueError(f"n_symbols={self.n_symbols} must be >= 2")
        if self.n_attributes < 2:
            raise ValueError(f"n_attributes={self.n_attributes} must be >= 2")
        self.check_length(self.length)

    def check_length(self, length: int) -> None:
        """Raise a ValueError naming the limit if inputs of ``length`` content tokens cannot be made."""
        if length < 2:
            raise ValueError(f"length={length} must be >= 2")
        need = {"index": 1, "retrieval": length, "induction": length - 1}[self.task]
        if self.n_symbols < need:
            raise ValueError(
                f"{self.task} at length {length} needs n_symbols >= {need} distinct symbols; n_symbols={self.n_symbols}"
            )

    def n_slots(self, length: int | None = None) -> int:
        """How many answer positions an input of ``length`` has (Index: the offsets 1..min(L, length))."""
        length = self.length if length is None else length
        return {"index": min(self.length, length), "retrieval": length, "induction": length - 1}[self.task]

    def answer_position(self, slots: np.ndarray, length: int) -> np.ndarray:
        """Slot 0..n_slots-1 -> answer position (Index: slot = offset - 1, position length - offset)."""
        slots = np.asarray(slots, dtype=np.int64)
        if self.task == "index":
            return length - 1 - slots
        return slots + 1 if self.task == "induction" else slots

    @property
    def n_values(self) -> int:
        """How many answer values there are: symbols for Index, attributes otherwise."""
        return self.n_symbols if self.task == "index" else self.n_attributes

    @property
    def vocab(self) -> Vocab:
        return canonical_vocab(self)


@functools.lru_cache(maxsize=32)
def canonical_vocab(spec: CanonicalSpec) -> Vocab:
    """PAD, then Index: ``s0..``, ``@1..@L``; Retrieval/induction: ``s{i}:a{k}`` (symbol-major), ``s{i}?``, ``a{k}``.

    >>> canonical_vocab(CanonicalSpec("index", length=2, n_symbols=2)).tokens
    ('<pad>', 's0', 's1', '@1', '@2')
    >>> len(canonical_vocab(CanonicalSpec("retrieval", length=2, n_symbols=2, n_attributes=3)))
    12
    """
    from possym.tasks.vocab import PAD, Vocab

    symbols = tuple(f"s{i}" for i in range(spec.n_symbols))
    if spec.task == "index":
        return Vocab((PAD, *symbols, *(f"@{k}" for k in range(1, spec.length + 1))))
    pairs = tuple(f"{s}:a{k}" for s in symbols for k in range(spec.n_attributes))
    return Vocab((PAD, *pairs, *(f"{s}?" for s in symbols), *(f"a{k}" for k in range(spec.n_attributes))))


def balanced_slots(n: int, n_slots: int, rng: np.random.Generator) -> np.ndarray:
    """(n,) answer slots, each of 0..n_slots-1 used ⌊n/n_slots⌋ or one more times, shuffled."""
    extra = rng.permutation(n_slots)[: n % n_slots]
    return rng.permutation(np.concatenate([np.tile(np.arange(n_slots), n // n_slots), extra]))


def generate(spec: CanonicalSpec, n: int, rng: np.random.Generator, length: int | None = None) -> TaskSamples:
    """``n`` instances with ``length`` content tokens (default: the training length), balanced over answer positions.

    Answer values are uniform. Positions in ``path`` are (query, answer); ``n_hops`` is 1.
    """
    length = spec.length if length is None else length
    spec.check_length(length)
    if n < 0:
        raise ValueError(f"n={n} must be >= 0")
    slots = balanced_slots(n, spec.n_slots(length), rng)
    return build(spec, slots, rng.integers(0, spec.n_values, n), rng, length)


def build(
    spec: CanonicalSpec, slots: np.ndarray, values: np.ndarray, rng: np.random.Generator, length: int
) -> TaskSamples:
    """Instances with the given answer slots and answer values (batch,), everything else drawn from ``rng``."""
    from possym.tasks.samples import TaskSamples

    slots, values = np.asarray(slots, dtype=np.int64), np.asarray(values, dtype=np.int64)
    n, S, A = len(slots), spec.n_symbols, spec.n_attributes
    if slots.size and not (0 <= slots.min() and slots.max() < spec.n_slots(length)):
        raise ValueError(f"answer slots must lie in 0..{spec.n_slots(length) - 1} at length {length}")
    rows = np.arange(n)
    j = spec.answer_position(slots, length)
    if spec.task == "index":
        content = rng.integers(0, S, (n, length))
        content[rows, j] = values
        tokens = np.concatenate([content + 1, (1 + S + slots)[:, None]], axis=1)  # @k has id S + k
        answer = values + 1
    else:
        syms = rng.random((n, S)).argsort(axis=1)[:, :length]  # distinct symbols per row
        attrs = rng.integers(0, A, (n, length))
        attrs[rows, j] = values
        if spec.task == "induction":
            d = (rng.random(n) * j).astype(np.int64)  # uniform in 0..j-1
            syms[rows, d] = syms[rows, j]
            attrs[rows, d] = (values + rng.integers(1, A, n)) % A  # never the answer's attribute
        pair = 1 + syms * A + attrs
        query = 1 + S * A + syms[rows, j]
        tokens = np.concatenate([pair, query[:, None]], axis=1)
        answer = 1 + S * A + S + values
    path = np.stack([np.full(n, length), j], axis=1)
    return TaskSamples(tokens.astype(np.int64), answer.astype(np.int64), np.ones(n, dtype=np.int64), path, 0)
