"""Partial induction (f_MIX; the metric paper's canonical mixed task).

As Retrieval, but the queried symbol occurs twice: at the answer position j >= 1 and at one earlier
position d, uniform in 0..j-1, bound to a *different* attribute; the answer is the attribute of the
**last** occurrence (j). Every other symbol occurs once. So the content alone cannot decide (it
needs recency) and position alone cannot (it needs the symbol): the task needs both behaviours.
Needs n_symbols >= length - 1 and n_attributes >= 2.

Worked example (S = 4, A = 3, length 4)::

    s1:a2 s3:a1 s1:a0 s2:a1 s1?    answer a0   (last s1 at position 2; the s1 at 0 is the distractor)

    >>> solve(["s1:a2", "s3:a1", "s1:a0", "s2:a1", "s1?"])
    Solution(answer='a0', n_hops=1, path=(4, 2))
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from possym.tasks import canonical
from possym.tasks.base import Solution, Task
from possym.tasks.retrieval import RetrievalTaskConfig, bound_inputs
from possym.tasks.retrieval import vocab as retrieval_vocab
from possym.tasks.samples import TaskSamples
from possym.tasks.vocab import Vocab


@dataclass(frozen=True)
class InductionTaskConfig(RetrievalTaskConfig):
    """Partial induction: Retrieval's bindings with the queried symbol repeated once earlier."""

    name: str = "induction"

    def symbols_needed(self, length: int) -> int:
        return length - 1

    def n_slots(self, length: int | None = None) -> int:
        """Answer positions 1..length-1 (position 0 leaves no room for the earlier occurrence)."""
        return (self.length if length is None else length) - 1

    def answer_position(self, slots: np.ndarray, length: int) -> np.ndarray:
        return np.asarray(slots, dtype=np.int64) + 1


@functools.lru_cache(maxsize=32)
def vocab(cfg: InductionTaskConfig) -> Vocab:
    """Retrieval's vocabulary: bindings, queries, attributes."""
    return retrieval_vocab(cfg)


def build(cfg: InductionTaskConfig, slots: np.ndarray, values: np.ndarray, rng: np.random.Generator,
          length: int) -> TaskSamples:
    return bound_inputs(cfg, slots, values, rng, length, repeat_earlier=True)


def sample(cfg: InductionTaskConfig, combos: np.ndarray, rng: np.random.Generator, extra: int = 0) -> TaskSamples:
    """One input per (slot, value, 1) row of :func:`possym.tasks.canonical.combinations`, at the training length."""
    if extra:
        raise ValueError(f"induction takes no extra tokens (extra={extra}); a longer input is longer content: "
                         "at_length")
    return build(cfg, combos[:, 0], combos[:, 1], rng, cfg.length)


def at_length(cfg: InductionTaskConfig, n: int, rng: np.random.Generator, length: int | None = None) -> TaskSamples:
    """``n`` inputs of ``length`` content tokens, balanced over answer positions (the length extension)."""
    return canonical.generate_at(cfg, n, rng, length, build)


def solve(tokens: Sequence[str]) -> Solution:
    """The independent oracle: the attribute of the *last* binding of the query's symbol."""
    *content, query = list(tokens)
    pos, answer = max(canonical.bindings(content, query))
    return Solution(answer, 1, (len(content), pos))


def chance(cfg: InductionTaskConfig) -> float:
    """A uniform guess among the attributes: 1 / n_attributes."""
    return 1.0 / cfg.n_attributes


TASK = Task(
    name="induction",
    config=InductionTaskConfig,
    vocab=vocab,
    combinations=canonical.combinations,
    sample=sample,
    solve=solve,
    chance=chance,
    at_length=at_length,
    mechanism="mixed",
    summary="the metric paper's canonical mixed task: the attribute of the queried symbol's last binding",
)
