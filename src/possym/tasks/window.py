"""The window both paper tasks share (paper App. B): targets, pre-target hop tokens, one query.

A window lays out ``n_target`` targets, ``n_pretarget`` hop tokens and one query, and a chain
visits the same positions in both tasks: from the query, leftwards through ``n_hops - 1`` distinct
pre-target positions, to the answer position in the target window (paper App. B; its Fig. 1 and
3 examples all move leftwards). Only what sits at those positions differs by task.

Example (defaults, window positions 0..16): a 3-hop path ``(16, 13, 10, 4, -1)`` starts at the
query (16), visits the pre-targets 13 and 10, and ends on the answer at position 4; the ``-1`` pads
it to ``max_hops + 1`` entries.

    >>> from possym.tasks.number import NumberTaskConfig
    >>> cfg = NumberTaskConfig()
    >>> path = leftward_paths(cfg, np.array([4]), np.array([3]), np.random.default_rng(0))
    >>> int(path[0, 0]), int(path[0, 3]), int(path[0, 4])
    (16, 4, -1)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from possym.errors import require
from possym.tasks.base import TaskConfig


@dataclass(frozen=True)
class WindowTaskConfig(TaskConfig):
    """A multi-hop window task: ``n_target`` targets, ``n_pretarget`` hop tokens, one query, and chains
    of ``min_hops..max_hops`` hops (the paper: 8, 8, 1..4)."""

    n_target: int = 8
    n_pretarget: int = 8
    min_hops: int = 1
    max_hops: int = 4  # a field here, a property of TaskConfig

    def __post_init__(self) -> None:
        super().__post_init__()
        require(self.n_target >= 1, f"task.n_target={self.n_target} must be >= 1")
        # No pre-target is a window of 1-hop inputs (the LLM experiment's prompts); max_hops is checked below.
        require(self.n_pretarget >= 0, f"task.n_pretarget={self.n_pretarget} must be >= 0")
        require(1 <= self.min_hops <= self.max_hops,
                f"task.min_hops={self.min_hops} must lie in 1..max_hops={self.max_hops}")
        # A k-hop chain visits k-1 distinct pre-target positions before landing in the target window.
        require(
            self.max_hops - 1 <= self.n_pretarget,
            f"task.max_hops={self.max_hops} is impossible: a {self.max_hops}-hop chain needs "
            f"{self.max_hops - 1} pre-target positions but n_pretarget={self.n_pretarget}; "
            f"allowed: max_hops <= n_pretarget + 1",
        )

    @property
    def seq_len(self) -> int:
        """Tokens per input without extra tokens: targets + pre-targets + the query."""
        return self.n_target + self.n_pretarget + 1

    @property
    def hops(self) -> tuple[int, ...]:
        return tuple(range(self.min_hops, self.max_hops + 1))


def leftward_paths(cfg: WindowTaskConfig, answer_pos: np.ndarray, n_hops: np.ndarray,
                   rng: np.random.Generator) -> np.ndarray:
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
