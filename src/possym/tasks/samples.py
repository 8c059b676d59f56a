"""A batch of task instances: token ids, answers, hop counts and hop paths, as every task returns them."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

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
