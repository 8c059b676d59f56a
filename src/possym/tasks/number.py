"""Number task (positional multi-hop; paper App. B.1): integers are backward offsets.

A window holds ``n_target`` letters, ``n_pretarget`` integers and one integer query (8 + 8 + 1 = 17
tokens at defaults). The integer at window position p points to position p - offset. The hops start
at the query and follow the pointers until they land on a letter in the target window; that letter
is the answer. What matters is *where* a token is, not what it is: a positional task.

Worked example (paper Fig. 3A, defaults, ids from ``vocab``)::

    position  0  1  2  3  4  5  6  7 | 8  9 10 11 12 13 14 15 | 16
    token     n  h  n  v  h  y  r  s | 6  3  2  7  7  8  4  7 |  2
    id       30 24 30 38 24 41 34 35 | 6  3  2  7  7  8  4  7 |  2

    16 -(2)-> 14 -(4)-> 10 -(2)-> 8 -(6)-> 2 = n     answer n (id 30), 4 hops, path (16, 14, 10, 8, 2)

Generation, the authors' recipe (paper App. B.1): target letters are uniform over the alphabet, then the
answer position is overwritten with the answer letter. Every integer position p gets a pointer
uniform over the earlier window positions 0..p-1 (a distractor may point at a letter or at another
integer), written as the offset p - pointer in 1..p. Then the chain's pointers are forced: query ->
a_{h-1} -> ... -> a_1 -> answer position, with a_1 < ... < a_{h-1} distinct pre-target positions, so
the chain moves strictly leftwards. Extra tokens are uniform letters put before the window; offsets
are relative, so they move every position by ``extra`` and change no answer. For the same reason any
window may follow any prefix of letters (``draw_prefix``, ``sample_after``), which lets the
length-generalisation evaluator share one prefix among many windows.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from possym.errors import require
from possym.tasks.base import Solution, Task
from possym.tasks.samples import TaskSamples
from possym.tasks.vocab import PAD, Vocab, number_alphabet
from possym.tasks.window import WindowTaskConfig, leftward_paths

MAX_LETTERS = 26 + 26 * 26  # a..z, then the bigrams aa..zz


@dataclass(frozen=True)
class NumberTaskConfig(WindowTaskConfig):
    """The number task: ``n_letters`` letter tokens (the paper: 120, a..z then aa..dp) in the target
    window, and the offsets 1..n_target+n_pretarget as the pre-targets and the query."""

    name: str = "number"
    n_letters: int = 120

    def __post_init__(self) -> None:
        super().__post_init__()
        require(1 <= self.n_letters <= MAX_LETTERS,
                f"task.n_letters={self.n_letters} must lie in 1..{MAX_LETTERS} (a..z then the bigrams aa..zz)")


def offsets(cfg: NumberTaskConfig) -> tuple[str, ...]:
    """The offset tokens ``"1"..str(n_target + n_pretarget)``, the longest possible backward jump."""
    return tuple(str(d) for d in range(1, cfg.n_target + cfg.n_pretarget + 1))


@functools.lru_cache(maxsize=32)
def vocab(cfg: NumberTaskConfig) -> Vocab:
    """``PAD`` = 0, the offsets ``"1".."N"`` -> 1..N, then the letters: at defaults "1".."16" -> 1..16
    and a..z, aa..dp -> 17..136, 137 ids."""
    return Vocab((PAD, *offsets(cfg), *number_alphabet(cfg.n_letters)))


def combinations(cfg: NumberTaskConfig) -> np.ndarray:
    """Every balanced class: (n_combos, 3) int64 rows (answer position, answer letter index, n_hops).

    At defaults 8 positions x 120 letters x 4 hop counts = 3840 rows.
    """
    grid = np.meshgrid(np.arange(cfg.n_target), np.arange(cfg.n_letters), np.array(cfg.hops), indexing="ij")
    return np.stack([g.ravel() for g in grid], axis=1).astype(np.int64)


def sample(cfg: NumberTaskConfig, combos: np.ndarray, rng: np.random.Generator, extra: int = 0) -> TaskSamples:
    """One instance per row of ``combos`` (batch, 3), as ``combinations`` lays them out."""
    ids = vocab(cfg)
    letter_ids = ids.encode(number_alphabet(cfg.n_letters))
    offset_ids = ids.encode(offsets(cfg))  # offset d has id offset_ids[d - 1]
    answer_pos, answer_letter, n_hops = (np.asarray(c, dtype=np.int64) for c in np.asarray(combos).T)
    batch, rows = len(n_hops), np.arange(len(n_hops))

    letters = rng.integers(0, cfg.n_letters, size=(batch, cfg.n_target))
    letters[rows, answer_pos] = answer_letter
    int_pos = np.arange(cfg.n_target, cfg.seq_len)
    pointer = rng.integers(0, int_pos, size=(batch, len(int_pos)))  # distractors: U{0..p-1}

    path = leftward_paths(cfg, answer_pos, n_hops, rng)
    for k in range(cfg.max_hops):  # one pass per hop index; every sample is handled at once
        on_chain = path[:, k + 1] >= 0
        pointer[rows[on_chain], path[on_chain, k] - cfg.n_target] = path[on_chain, k + 1]

    window = np.concatenate([letter_ids[letters], offset_ids[int_pos - pointer - 1]], axis=1)
    before = letter_ids[rng.integers(0, cfg.n_letters, size=(batch, extra))]
    return TaskSamples(
        tokens=np.concatenate([before, window], axis=1),
        answer=letter_ids[answer_letter],
        n_hops=n_hops,
        path=np.where(path >= 0, path + extra, -1),
        extra=extra,
    )


PREFIX_PER_HOP = False  # any window may follow any prefix, so one prefix serves every hop count


def draw_prefix(
    cfg: NumberTaskConfig, length: int, n_hops: int, rng: np.random.Generator, tokens: str = "targets"
) -> np.ndarray:
    """(length,) uniform letters, the extra tokens ``sample`` puts before a window; ``n_hops`` is unused.

    ``tokens``: "targets" (letters, the default), "pretargets" (offsets uniform in 1..n_target+n_pretarget),
    "mixed" (each token a letter or an offset with probability 1/2) or "windows" (blocks laid out as a
    window's n_target letters then n_pretarget offsets, repeated and cut at ``length``). Offsets are
    relative and the chain never leaves the window, so no prefix token changes an answer.
    """
    if tokens not in PREFIX_TOKENS:
        raise ValueError(f"tokens={tokens!r}; allowed: {PREFIX_TOKENS}")
    letter_ids = vocab(cfg).encode(number_alphabet(cfg.n_letters))
    out = letter_ids[rng.integers(0, cfg.n_letters, size=length)]
    if tokens == "targets":
        return out  # the draw as it always was, so today's curves do not move
    offset_ids = vocab(cfg).encode(offsets(cfg))
    ints = offset_ids[rng.integers(0, len(offset_ids), size=length)]
    if tokens == "pretargets":
        is_int = np.ones(length, dtype=bool)
    elif tokens == "mixed":
        is_int = rng.random(length) < 0.5
    else:  # "windows": ending where the real window starts
        block = cfg.n_target + cfg.n_pretarget
        is_int = ((np.arange(length) - length) % block) >= cfg.n_target
    return np.where(is_int, ints, out)


PREFIX_TOKENS = ("targets", "pretargets", "mixed", "windows")


def random_prefix(cfg: NumberTaskConfig, batch: int, k: int, rng: np.random.Generator) -> np.ndarray:
    """(batch, k) uniform letters, a fresh prefix per row: offsets are relative, so they change no answer."""
    letter_ids = vocab(cfg).encode(number_alphabet(cfg.n_letters))
    return letter_ids[rng.integers(0, cfg.n_letters, size=(batch, k))]


def sample_after(
    cfg: NumberTaskConfig, combos: np.ndarray, rng: np.random.Generator, prefix: np.ndarray, length: int
) -> TaskSamples:
    """One instance per row of ``combos``, every one after ``prefix[:length]`` (letters)."""
    return sample(cfg, combos, rng).prepend(prefix[:length])


_OFFSET = re.compile(r"[0-9]+")


def solve(tokens: Sequence[str]) -> Solution:
    """The independent oracle: follow the offsets from the last token, on token strings alone.

    A token of decimal digits is a backward offset pointing ``offset`` positions to its left; any
    other token is a symbol, and the hops stop there. It knows nothing of windows, alphabets or hop
    limits, so it checks every generated instance and solves the paper's examples at any length.
    ValueError if the input is ill-posed (an offset reaching before the start, or offset 0).

    >>> solve("c b a 1 4 1 3 2 1".split())       # paper Fig. 1
    Solution(answer='c', n_hops=4, path=(8, 7, 5, 4, 0))
    """
    tokens = list(tokens)
    if not tokens:
        raise ValueError("cannot solve an empty input: there is no query")
    pos = len(tokens) - 1
    if not _OFFSET.fullmatch(tokens[pos]):
        raise ValueError(f"ill-posed number input: the query {tokens[pos]!r} at position {pos} is not an offset")
    path = [pos]
    while _OFFSET.fullmatch(tokens[pos]):
        offset = int(tokens[pos])
        if offset == 0:
            raise ValueError(f"ill-posed number input: cycle, offset 0 at position {pos} points to itself")
        if offset > pos:
            raise ValueError(
                f"ill-posed number input: no match, offset {offset} at position {pos} points before the start "
                f"(path so far {path})"
            )
        pos -= offset
        path.append(pos)
    return Solution(answer=tokens[pos], n_hops=len(path) - 1, path=tuple(path))


def chance(cfg: NumberTaskConfig) -> float:
    """A uniform guess among the letters: 1 / n_letters (1/120 in the paper)."""
    return 1.0 / cfg.n_letters


TASK = Task(
    name="number",
    config=NumberTaskConfig,
    vocab=vocab,
    combinations=combinations,
    sample=sample,
    solve=solve,
    chance=chance,
    draw_prefix=draw_prefix,
    sample_after=sample_after,
    prefix_per_hop=PREFIX_PER_HOP,
    random_prefix=random_prefix,
    mechanism="positional",
    summary="positional multi-hop: integers are backward offsets (paper App. B.1)",
)
