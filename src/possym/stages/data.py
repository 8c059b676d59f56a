"""Task instances to look at or to feed another tool: freshly generated, or rows of the paper's splits.

Example:
    >>> from possym.tasks import task_config
    >>> samples = task_instances(task_config("number"), n=2, seed=0)
    >>> len(samples), sorted(samples.records(task_vocab(task_config("number")))[0])
    (2, ['answer', 'n_hops', 'path', 'tokens'])
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from possym.config import ConfigError, TaskConfig
from possym.runs import atomic_write_text
from possym.tasks import TaskSamples, generate, make_splits, task_vocab


def task_instances(task: TaskConfig, n: int, seed: int = 0, split: str | None = None, extra: int = 0) -> TaskSamples:
    """``n`` instances: generated from ``seed`` with ``extra`` tokens before the target window, or the first
    ``n`` rows of ``split`` of the dataset made from data seed ``seed``."""
    if n < 0:
        raise ConfigError(f"data n={n} must be >= 0")
    if extra < 0:
        raise ConfigError(f"data extra={extra} must be >= 0")
    if split is None:
        return generate(task, n, np.random.default_rng(seed), extra=extra)
    if extra:
        raise ConfigError("data extra applies to freshly generated instances; give no split to use it")
    rows = make_splits(task, seed)[split]
    if n > len(rows):
        raise ConfigError(f"data n={n} exceeds the {split} split's {len(rows)} instances")
    return rows.take(np.arange(n))


def write_jsonl(samples: TaskSamples, task: TaskConfig, out: Path) -> int:
    """One JSON object per instance (tokens, answer, n_hops, path), written atomically; returns the count."""
    import json

    lines = [json.dumps(r) for r in samples.records(task_vocab(task))]
    atomic_write_text(Path(out), "".join(line + "\n" for line in lines))
    return len(lines)
