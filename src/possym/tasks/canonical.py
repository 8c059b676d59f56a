"""What the metric paper's three canonical tasks share (arXiv 2511.11579): content, then one query.

Each input is ``length`` content tokens at positions 0..length-1, then one query token at position
``length``; the model answers at the query (last-token prediction, as every possym task). The tasks
themselves are :mod:`possym.tasks.index` (f_POS), :mod:`possym.tasks.retrieval` (f_SYM) and
:mod:`possym.tasks.induction` (f_MIX); this module holds their common config and the balanced
sampler they share.

Balance: answer positions are exactly balanced (``n / n_slots`` each, the remainder spread one per
slot) and, through :func:`possym.tasks.balanced_combinations` in the registry path, so are the
answer values within each slot.

Length generalisation is longer *content* (``at_length``), not a prefix before a window: a canonical
task has no window for extra tokens to precede.

Example:
    >>> from possym.tasks.retrieval import RetrievalTaskConfig, at_length
    >>> cfg = RetrievalTaskConfig(length=4, n_symbols=4, n_attributes=3)
    >>> s = at_length(cfg, 8, np.random.default_rng(0))
    >>> s.tokens.shape, np.bincount(s.path[:, 1]).tolist()
    ((8, 5), [2, 2, 2, 2])
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from possym.errors import require
from possym.tasks.base import TaskConfig
from possym.tasks.samples import TaskSamples

CANONICAL_TASKS = ("index", "retrieval", "induction")
"""The three canonical tasks, by the names the task registry and the run configs use."""


@dataclass(frozen=True)
class CanonicalTaskConfig(TaskConfig):
    """A canonical task: ``length`` content tokens L (the training length) and ``n_symbols`` S symbols.

    Subclasses say how many answer slots an input of a given length has, where slot s puts the
    answer, how many answer values there are, and how many distinct symbols a length needs.
    """

    length: int = 8
    n_symbols: int = 32

    def __post_init__(self) -> None:
        super().__post_init__()
        require(self.length >= 2, f"task.length={self.length} must be >= 2")
        require(self.n_symbols >= 2, f"task.n_symbols={self.n_symbols} must be >= 2")
        try:
            self.check_length(self.length)
        except ValueError as exc:
            require(False, f"task: {exc}")

    @property
    def seq_len(self) -> int:
        return self.length + 1

    @property
    def hops(self) -> tuple[int, ...]:
        return (1,)

    def symbols_needed(self, length: int) -> int:
        """Distinct symbols an input of ``length`` content tokens needs."""
        raise NotImplementedError

    def n_slots(self, length: int | None = None) -> int:
        """How many answer positions an input of ``length`` has (default: the training length)."""
        raise NotImplementedError

    def answer_position(self, slots: np.ndarray, length: int) -> np.ndarray:
        """Slot 0..n_slots-1 -> answer position in an input of ``length`` content tokens."""
        raise NotImplementedError

    @property
    def n_values(self) -> int:
        """How many answer values there are."""
        raise NotImplementedError

    def check_length(self, length: int) -> None:
        """Raise a ValueError naming the limit if inputs of ``length`` content tokens cannot be made."""
        if length < 2:
            raise ValueError(f"length={length} must be >= 2")
        need = self.symbols_needed(length)
        if self.n_symbols < need:
            raise ValueError(f"{self.name} at length {length} needs n_symbols >= {need} distinct symbols; "
                             f"n_symbols={self.n_symbols}")


def balanced_slots(n: int, n_slots: int, rng: np.random.Generator) -> np.ndarray:
    """(n,) answer slots, each of 0..n_slots-1 used ⌊n/n_slots⌋ or one more times, shuffled.

    >>> np.bincount(balanced_slots(7, 3, np.random.default_rng(0))).tolist() in ([3, 2, 2], [2, 3, 2], [2, 2, 3])
    True
    """
    extra = rng.permutation(n_slots)[: n % n_slots]
    return rng.permutation(np.concatenate([np.tile(np.arange(n_slots), n // n_slots), extra]))


def combinations(cfg: CanonicalTaskConfig) -> np.ndarray:
    """Every balanced class: (answer slot, answer value, 1 hop) rows."""
    slot, value = np.meshgrid(np.arange(cfg.n_slots()), np.arange(cfg.n_values), indexing="ij")
    return np.stack([slot.ravel(), value.ravel(), np.ones(slot.size, dtype=np.int64)], 1).astype(np.int64)


Build = Callable[[Any, np.ndarray, np.ndarray, np.random.Generator, int], TaskSamples]


def generate_at(cfg: CanonicalTaskConfig, n: int, rng: np.random.Generator, length: int | None, build: Build
                ) -> TaskSamples:
    """``n`` instances with ``length`` content tokens (None: the training length), balanced over answer
    positions, answer values uniform, made by the task's ``build(cfg, slots, values, rng, length)``.
    Positions in ``path`` are (query, answer); ``n_hops`` is 1. Each task module's ``at_length`` is this."""
    length = cfg.length if length is None else length
    cfg.check_length(length)
    if n < 0:
        raise ValueError(f"n={n} must be >= 0")
    slots = balanced_slots(n, cfg.n_slots(length), rng)
    return build(cfg, slots, rng.integers(0, cfg.n_values, n), rng, length)


def samples(tokens: np.ndarray, answer: np.ndarray, length: int, j: np.ndarray) -> TaskSamples:
    """The :class:`TaskSamples` of canonical inputs: one hop from the query (position ``length``) to ``j``."""
    n = len(answer)
    path = np.stack([np.full(n, length), j], axis=1)
    return TaskSamples(tokens.astype(np.int64), answer.astype(np.int64), np.ones(n, dtype=np.int64), path, 0)


def check_slots(cfg: CanonicalTaskConfig, slots: np.ndarray, length: int) -> np.ndarray:
    slots = np.asarray(slots, dtype=np.int64)
    if slots.size and not (0 <= slots.min() and slots.max() < cfg.n_slots(length)):
        raise ValueError(f"answer slots must lie in 0..{cfg.n_slots(length) - 1} at length {length}")
    return slots


_SYMBOL = re.compile(r"s(\d+)")
_PAIR = re.compile(r"s(\d+):a(\d+)")
_QUERY = re.compile(r"s(\d+)\?")


def full_match(pattern: re.Pattern[str], token: str, what: str) -> re.Match[str]:
    """``pattern`` matched on the whole of ``token``, or a ValueError saying what it should have been."""
    m = pattern.fullmatch(token)
    if m is None:
        raise ValueError(f"{token!r} is not {what}")
    return m


def bindings(content: list[str], query: str) -> list[tuple[int, str]]:
    """Every (position, attribute token) bound to the query's symbol, by brute force over the content."""
    wanted = full_match(_QUERY, query, "a query s<i>?").group(1)
    matches = []
    for pos, t in enumerate(content):
        symbol, attribute = full_match(_PAIR, t, "a binding s<i>:a<k>").groups()
        if symbol == wanted:
            matches.append((pos, f"a{attribute}"))
    if not matches:
        raise ValueError(f"symbol s{wanted} is bound nowhere in the input")
    return matches
