"""Number task (positional multi-hop; paper App. B.1): integers are backward offsets.

A window holds ``n_target`` letters, ``n_pretarget`` integers and one integer query (8 + 8 + 1 = 17
tokens at defaults). The integer at window position p points to position p - offset. The hops start
at the query and follow the pointers until they land on a letter in the target window; that letter
is the answer. What matters is *where* a token is, not what it is: a positional task.

Worked example (paper Fig. 3A, defaults, ids from ``task_vocab``)::

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

import numpy as np

from possym.config import TaskConfig
from possym.tasks.samples import TaskSamples, leftward_paths
from possym.tasks.vocab import number_alphabet, number_ints, task_vocab


def combinations(cfg: TaskConfig) -> np.ndarray:
    """Every balanced class: (n_combos, 3) int64 rows (answer position, answer letter index, n_hops).

    At defaults 8 positions x 120 letters x 4 hop counts = 3840 rows.
    """
    grid = np.meshgrid(np.arange(cfg.n_target), np.arange(cfg.letters), np.array(cfg.hops), indexing="ij")
    return np.stack([g.ravel() for g in grid], axis=1).astype(np.int64)


def sample(cfg: TaskConfig, combos: np.ndarray, rng: np.random.Generator, extra: int = 0) -> TaskSamples:
    """One instance per row of ``combos`` (batch, 3), as ``combinations`` lays them out."""
    vocab = task_vocab(cfg)
    letter_ids = vocab.encode(number_alphabet(cfg.letters))
    offset_ids = vocab.encode(number_ints(cfg))  # offset d has id offset_ids[d - 1]
    answer_pos, answer_letter, n_hops = (np.asarray(c, dtype=np.int64) for c in np.asarray(combos).T)
    batch, rows = len(n_hops), np.arange(len(n_hops))

    letters = rng.integers(0, cfg.letters, size=(batch, cfg.n_target))
    letters[rows, answer_pos] = answer_letter
    int_pos = np.arange(cfg.n_target, cfg.seq_len)
    pointer = rng.integers(0, int_pos, size=(batch, len(int_pos)))  # distractors: U{0..p-1}

    path = leftward_paths(cfg, answer_pos, n_hops, rng)
    for k in range(cfg.max_hops):  # one pass per hop index; every sample is handled at once
        on_chain = path[:, k + 1] >= 0
        pointer[rows[on_chain], path[on_chain, k] - cfg.n_target] = path[on_chain, k + 1]

    window = np.concatenate([letter_ids[letters], offset_ids[int_pos - pointer - 1]], axis=1)
    before = letter_ids[rng.integers(0, cfg.letters, size=(batch, extra))]
    return TaskSamples(
        tokens=np.concatenate([before, window], axis=1),
        answer=letter_ids[answer_letter],
        n_hops=n_hops,
        path=np.where(path >= 0, path + extra, -1),
        extra=extra,
    )


PREFIX_PER_HOP = False  # any window may follow any prefix, so one prefix serves every hop count


def draw_prefix(cfg: TaskConfig, length: int, n_hops: int, rng: np.random.Generator) -> np.ndarray:
    """(length,) uniform letters, the extra tokens ``sample`` puts before a window; ``n_hops`` is unused."""
    letter_ids = task_vocab(cfg).encode(number_alphabet(cfg.letters))
    return letter_ids[rng.integers(0, cfg.letters, size=length)]


def sample_after(
    cfg: TaskConfig, combos: np.ndarray, rng: np.random.Generator, prefix: np.ndarray, length: int
) -> TaskSamples:
    """One instance per row of ``combos``, every one after ``prefix[:length]`` (letters)."""
    return sample(cfg, combos, rng).prepend(prefix[:length])
