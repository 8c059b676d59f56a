"""An audit of a task's splits, the first stage of a reproduction: sizes, balance, overlap, oracle agreement.

Example:
    >>> from possym.tasks import task_config
    >>> rows = audit_splits(task_config("letter", n_train=2048, n_val=256, n_test=256), seed=0, n_solve=50)
    >>> [(r["split"], r["n"], r["hop1"], r["solver_agrees"], r["overlap_earlier"]) for r in rows]
    [('train', 2048, 512, 50, 0), ('val', 256, 64, 50, 0), ('test', 256, 64, 50, 0)]
"""

from __future__ import annotations

from typing import Any

import numpy as np

from possym.tasks.base import TaskConfig
from possym.tasks.dataset import make_splits, row_hashes
from possym.tasks.registry import task_vocab
from possym.tasks.solve import solve


def audit_splits(cfg: TaskConfig, seed: int, n_solve: int = 500) -> list[dict[str, Any]]:
    """Per split: size, count per hop, distinct rows, rows shared with earlier splits, and how many of
    the first ``n_solve`` rows the independent solver answers exactly as generated (answer, hops, path)."""
    vocab, seen, rows = task_vocab(cfg), np.empty(0, dtype=np.uint64), []
    for name, samples in make_splits(cfg, seed).items():
        hashes = row_hashes(samples.tokens)
        checked = samples.take(np.arange(min(n_solve, len(samples)))).records(vocab)
        agree = 0
        for r in checked:
            s = solve(cfg, r["tokens"])
            agree += (s.answer, s.n_hops, list(s.path)) == (r["answer"], r["n_hops"], r["path"])
        hops = np.bincount(samples.n_hops, minlength=cfg.max_hops + 1)
        rows.append(
            {
                "task": cfg.name,
                "split": name,
                "n": len(samples),
                **{f"hop{h}": int(hops[h]) for h in cfg.hops},
                "distinct": int(len(np.unique(hashes))),
                "overlap_earlier": int(np.isin(hashes, seen).sum()),
                "solver_checked": len(checked),
                "solver_agrees": int(agree),
            }
        )
        seen = np.concatenate([seen, hashes])
    return rows
