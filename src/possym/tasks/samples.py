"""A batch of task instances, and the hop paths both tasks share.

Both tasks lay out a window of ``n_target`` targets, ``n_pretarget`` hop tokens and one query, and
their chains visit the same positions: from the query, leftwards through ``n_hops - 1`` distinct
pre-target positions, to the answer position in the target window (paper App. B; its
Fig. 1 and 3 examples all move leftwards). Only what sits at those positions differs by task.

Example (defaults, window positions 0..16): a 3-hop path ``(16, 13, 10, 4, -1)`` starts at the
query (16), visits the pre-targets 13 and 10, and ends on the answer at position 4; the ``-1`` pads
it to ``max_hops + 1`` entries.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from possym.config import TaskConfig
from possym.tasks.vocab import Vocab


@dataclass(frozen=True)
class TaskSamples:
    """Instances of one task; positions index ``tokens`` (so they include the ``extra`` offset).

    tokens: (batch, pos) int64 token ids, pos = extra + seq_len.
    answer: (batch,) int64 token id of the answer.
    n_hops: (batch,) int64 hop count.
    path: (batch, max_hops + 1) int64 positions visited from the query (pos - 1) to the answer,
        padded with -1 at the end; ``path[i, n_hops[i]]`` is the answer position.
    extra: number of tokens inserted before the target window.
    """

    tokens: np.ndarray
    answer: np.ndarray
    n_hops: np.ndarray
    path: np.ndarray
    extra: int

    def __post_init__(self) -> None:
        if self.tokens.ndim != 2 or self.path.ndim != 2:
            raise ValueError(f"tokens and path must be (batch, ...), got {self.tokens.shape}, {self.path.shape}")
        batch = len(self.tokens)
        if not len(self.answer) == len(self.n_hops) == len(self.path) == batch:
            raise ValueError(
                f"batch sizes disagree: tokens {batch}, answer {len(self.answer)}, "
                f"n_hops {len(self.n_hops)}, path {len(self.path)}"
            )
        if not 0 <= self.extra < max(self.tokens.shape[1], 1):
            raise ValueError(f"extra={self.extra} must lie in 0..pos-1={self.tokens.shape[1] - 1}")

    def __len__(self) -> int:
        return len(self.answer)

    def take(self, idx: np.ndarray | slice | list[int] | int) -> TaskSamples:
        """The instances at ``idx`` (an index array, a boolean mask or a slice); an int keeps a batch of one."""
        if isinstance(idx, int | np.integer):
            idx = [int(idx)]
        return TaskSamples(self.tokens[idx], self.answer[idx], self.n_hops[idx], self.path[idx], self.extra)

    def prepend(self, prefix: np.ndarray) -> TaskSamples:
        """The same instances after ``prefix``, (k,) token ids shared by every row; positions move by k."""
        prefix = np.asarray(prefix, dtype=self.tokens.dtype)
        k = len(prefix)
        return TaskSamples(
            tokens=np.concatenate([np.broadcast_to(prefix, (len(self), k)), self.tokens], axis=1),
            answer=self.answer,
            n_hops=self.n_hops,
            path=np.where(self.path >= 0, self.path + k, -1),
            extra=self.extra + k,
        )

    def records(self, vocab: Vocab) -> list[dict]:
        """Plain records ``{"tokens": [str], "answer": str, "n_hops": int, "path": [int]}``, one per instance."""
        return [
            {
                "tokens": vocab.decode(row),
                "answer": vocab.tokens[answer],
                "n_hops": hops,
                "path": [p for p in path if p >= 0],
            }
            for row, answer, hops, path in zip(
                self.tokens, self.answer.tolist(), self.n_hops.tolist(), self.path.tolist(), strict=True
            )
        ]


def leftward_paths(cfg: TaskConfig, answer_pos: np.ndarray, n_hops: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Hop paths in window coordinates: (batch, max_hops + 1) int64, padded with -1.

    ``path[:, 0]`` is the query, then ``n_hops - 1`` distinct pre-target positions drawn uniformly
    and visited right to left, then ``answer_pos`` (batch,) at index ``n_hops`` (batch,).
    """
    batch = len(n_hops)
    n_mid = cfg.max_hops - 1
    # The first n_mid columns of a uniform random permutation, truncated to n_hops - 1 entries per
    # row, are a uniform random subset of that size.
    picked = rng.random((batch, cfg.n_pretarget)).argsort(axis=1)[:, :n_mid] + cfg.n_target
    picked = np.where(np.arange(n_mid) < (n_hops - 1)[:, None], picked, -1)
    path = np.full((batch, cfg.max_hops + 1), -1, dtype=np.int64)
    path[:, 0] = cfg.seq_len - 1
    path[:, 1 : cfg.max_hops] = np.sort(picked, axis=1)[:, ::-1]  # descending; the -1s go last
    path[np.arange(batch), n_hops] = answer_pos
    return path
