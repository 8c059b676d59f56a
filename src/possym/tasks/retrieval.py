"""Retrieval (f_SYM, purely symbolic; the metric paper's canonical symbolic task).

Content: bindings ``s{i}:a{k}`` (symbol i bound to attribute k; one atomic token, as the metric
paper's Theorem 5 assumes one-hot embeddings), the symbols all distinct. Query ``s{i}?``; the answer
is the attribute token ``a{k}`` bound to symbol i. Needs n_symbols >= length.

Worked example (S = 4, A = 3, length 4)::

    s1:a2 s3:a0 s0:a0 s2:a1 s0?    answer a0   (position 2)

    >>> solve(["s1:a2", "s3:a0", "s0:a0", "s2:a1", "s0?"])
    Solution(answer='a0', n_hops=1, path=(4, 2))
    >>> len(vocab(RetrievalTaskConfig(length=2, n_symbols=2, n_attributes=3)))
    12
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from possym.errors import require
from possym.tasks import canonical
from possym.tasks.base import Solution, Task
from possym.tasks.canonical import CanonicalTaskConfig, check_slots
from possym.tasks.samples import TaskSamples
from possym.tasks.vocab import PAD, Vocab


@dataclass(frozen=True)
class RetrievalTaskConfig(CanonicalTaskConfig):
    """Retrieval: ``length`` bindings of distinct symbols to ``n_attributes`` attributes, then ``s{i}?``."""

    name: str = "retrieval"
    n_attributes: int = 8

    def __post_init__(self) -> None:
        super().__post_init__()
        require(self.n_attributes >= 2, f"task.n_attributes={self.n_attributes} must be >= 2")

    def symbols_needed(self, length: int) -> int:
        return length

    def n_slots(self, length: int | None = None) -> int:
        return self.length if length is None else length

    def answer_position(self, slots: np.ndarray, length: int) -> np.ndarray:
        return np.asarray(slots, dtype=np.int64)

    @property
    def n_values(self) -> int:
        return self.n_attributes


@functools.lru_cache(maxsize=32)
def vocab(cfg: RetrievalTaskConfig) -> Vocab:
    """PAD, the bindings ``s{i}:a{k}`` (symbol-major), the queries ``s{i}?``, the attributes ``a{k}``."""
    symbols = tuple(f"s{i}" for i in range(cfg.n_symbols))
    pairs = tuple(f"{s}:a{k}" for s in symbols for k in range(cfg.n_attributes))
    return Vocab((PAD, *pairs, *(f"{s}?" for s in symbols), *(f"a{k}" for k in range(cfg.n_attributes))))


def bound_inputs(cfg: RetrievalTaskConfig, slots: np.ndarray, values: np.ndarray, rng: np.random.Generator,
                 length: int, repeat_earlier: bool) -> TaskSamples:
    """Bindings of distinct symbols with the answer ``values`` at the answer positions; with
    ``repeat_earlier``, the queried symbol also occurs once at a uniform earlier position, bound to
    another attribute (partial induction's distractor)."""
    slots, values = check_slots(cfg, slots, length), np.asarray(values, dtype=np.int64)
    n, S, A = len(slots), cfg.n_symbols, cfg.n_attributes
    rows = np.arange(n)
    j = cfg.answer_position(slots, length)
    syms = rng.random((n, S)).argsort(axis=1)[:, :length]  # distinct symbols per row
    attrs = rng.integers(0, A, (n, length))
    attrs[rows, j] = values
    if repeat_earlier:
        d = (rng.random(n) * j).astype(np.int64)  # uniform in 0..j-1
        syms[rows, d] = syms[rows, j]
        attrs[rows, d] = (values + rng.integers(1, A, n)) % A  # never the answer's attribute
    tokens = np.concatenate([1 + syms * A + attrs, (1 + S * A + syms[rows, j])[:, None]], axis=1)
    return canonical.samples(tokens, 1 + S * A + S + values, length, j)


def build(cfg: RetrievalTaskConfig, slots: np.ndarray, values: np.ndarray, rng: np.random.Generator,
          length: int) -> TaskSamples:
    return bound_inputs(cfg, slots, values, rng, length, repeat_earlier=False)


def sample(cfg: RetrievalTaskConfig, combos: np.ndarray, rng: np.random.Generator, extra: int = 0) -> TaskSamples:
    """One input per (slot, value, 1) row of :func:`possym.tasks.canonical.combinations`, at the training length."""
    if extra:
        raise ValueError(f"{cfg.name} takes no extra tokens (extra={extra}); a longer input is longer content: "
                         "at_length")
    return build(cfg, combos[:, 0], combos[:, 1], rng, cfg.length)


def at_length(cfg: RetrievalTaskConfig, n: int, rng: np.random.Generator, length: int | None = None) -> TaskSamples:
    """``n`` inputs of ``length`` content tokens, balanced over answer positions (the length extension)."""
    return canonical.generate_at(cfg, n, rng, length, build)


def solve(tokens: Sequence[str]) -> Solution:
    """The independent oracle: the one binding of the query's symbol, by brute force over the content."""
    *content, query = list(tokens)
    matches = canonical.bindings(content, query)
    if len(matches) != 1:
        raise ValueError(f"retrieval needs the queried symbol bound once; it is bound {len(matches)} times")
    pos, answer = matches[0]
    return Solution(answer, 1, (len(content), pos))


def chance(cfg: RetrievalTaskConfig) -> float:
    """A uniform guess among the attributes: 1 / n_attributes."""
    return 1.0 / cfg.n_attributes


TASK = Task(
    name="retrieval",
    config=RetrievalTaskConfig,
    vocab=vocab,
    combinations=canonical.combinations,
    sample=sample,
    solve=solve,
    chance=chance,
    at_length=at_length,
    mechanism="symbolic",
    summary="the metric paper's canonical symbolic task: the attribute bound to the queried symbol",
)
