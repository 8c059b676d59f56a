"""Index (f_POS, purely positional; the metric paper's canonical positional task).

Content: symbols ``s0..s{S-1}`` drawn uniformly (repeats allowed). Query ``@k`` names the position k
tokens back from the query, j = length - k; the answer is the symbol at j. Offsets run over 1..L,
L the training length, so at a longer evaluation length the answer lies in the last L tokens and
everything before is extra context.

Worked example (S = 4, length 4)::

    s2 s0 s3 s3 @3          answer s0   (position 4 - 3 = 1)

    >>> cfg = IndexTaskConfig(length=4, n_symbols=4)
    >>> solve(["s2", "s0", "s3", "s3", "@3"])
    Solution(answer='s0', n_hops=1, path=(4, 1))
    >>> s = at_length(cfg, 4, np.random.default_rng(0), length=6)
    >>> vocab(cfg).decode(s.tokens[0])[-1] in ("@1", "@2", "@3", "@4"), s.tokens.shape
    (True, (4, 7))
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from possym.tasks import canonical
from possym.tasks.base import Solution, Task
from possym.tasks.canonical import CanonicalTaskConfig, check_slots, full_match
from possym.tasks.samples import TaskSamples
from possym.tasks.vocab import PAD, Vocab


@dataclass(frozen=True)
class IndexTaskConfig(CanonicalTaskConfig):
    """Index: ``length`` symbols, then ``@k`` for k in 1..length."""

    name: str = "index"

    def symbols_needed(self, length: int) -> int:
        return 1

    def n_slots(self, length: int | None = None) -> int:
        """The offsets 1..min(L, length): slot = offset - 1."""
        return min(self.length, self.length if length is None else length)

    def answer_position(self, slots: np.ndarray, length: int) -> np.ndarray:
        return length - 1 - np.asarray(slots, dtype=np.int64)

    @property
    def n_values(self) -> int:
        return self.n_symbols


@functools.lru_cache(maxsize=32)
def vocab(cfg: IndexTaskConfig) -> Vocab:
    """PAD, ``s0..``, then ``@1..@L``.

    >>> vocab(IndexTaskConfig(length=2, n_symbols=2)).tokens
    ('<pad>', 's0', 's1', '@1', '@2')
    """
    return Vocab((PAD, *(f"s{i}" for i in range(cfg.n_symbols)), *(f"@{k}" for k in range(1, cfg.length + 1))))


def build(cfg: IndexTaskConfig, slots: np.ndarray, values: np.ndarray, rng: np.random.Generator,
          length: int) -> TaskSamples:
    """Inputs with the given answer slots and answer symbols (batch,), the other symbols uniform."""
    slots, values = check_slots(cfg, slots, length), np.asarray(values, dtype=np.int64)
    n, rows = len(slots), np.arange(len(slots))
    j = cfg.answer_position(slots, length)
    content = rng.integers(0, cfg.n_symbols, (n, length))
    content[rows, j] = values
    tokens = np.concatenate([content + 1, (1 + cfg.n_symbols + slots)[:, None]], axis=1)  # @k has id S + k
    return canonical.samples(tokens, values + 1, length, j)


def sample(cfg: IndexTaskConfig, combos: np.ndarray, rng: np.random.Generator, extra: int = 0) -> TaskSamples:
    """One input per (slot, value, 1) row of :func:`possym.tasks.canonical.combinations`, at the training length."""
    if extra:
        raise ValueError(f"index takes no extra tokens (extra={extra}); a longer input is longer content: at_length")
    return build(cfg, combos[:, 0], combos[:, 1], rng, cfg.length)


def at_length(cfg: IndexTaskConfig, n: int, rng: np.random.Generator, length: int | None = None) -> TaskSamples:
    """``n`` inputs of ``length`` content tokens, balanced over the offsets (the task's length extension)."""
    return canonical.generate_at(cfg, n, rng, length, build)


_OFFSET = re.compile(r"@(\d+)")


def solve(tokens: Sequence[str]) -> Solution:
    """The independent oracle: parse every token, then read the symbol ``k`` back from the query ``@k``."""
    *content, query = list(tokens)
    for t in content:
        full_match(re.compile(r"s(\d+)"), t, "a symbol s<i>")
    k = int(full_match(_OFFSET, query, "an offset query @<k>").group(1))
    if not 1 <= k <= len(content):
        raise ValueError(f"offset @{k} points outside the {len(content)} content tokens")
    pos = len(content) - k
    return Solution(content[pos], 1, (len(content), pos))


def chance(cfg: IndexTaskConfig) -> float:
    """A uniform guess among the symbols: 1 / n_symbols."""
    return 1.0 / cfg.n_symbols


TASK = Task(
    name="index",
    config=IndexTaskConfig,
    vocab=vocab,
    combinations=canonical.combinations,
    sample=sample,
    solve=solve,
    chance=chance,
    at_length=at_length,
    mechanism="positional",
    summary="the metric paper's canonical positional task: the symbol k tokens back",
)
