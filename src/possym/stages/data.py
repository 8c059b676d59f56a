"""Task instances to look at or to feed another tool: freshly generated, or rows of the paper's splits.

Example:
    >>> from possym.tasks import task_config
    >>> samples = task_instances(task_config("number"), n=2, seed=0)
    >>> len(samples), sorted(samples.records(task_vocab(task_config("number")))[0])
    (2, ['answer', 'n_hops', 'path', 'tokens'])
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from possym.config import ConfigError, TaskConfig
from possym.errors import PossymError
from possym.runs import atomic_write_text
from possym.stages.registry import Stage, StageContext
from possym.tasks import TaskSamples, generate, make_splits, task_vocab


@dataclass(frozen=True)
class DataConfig:
    """``possym data``'s settings, ``data.KEY=VALUE``: ``n`` instances, generated from ``seed`` with ``extra`` tokens
    before the target window, or the first ``n`` rows of ``split`` (train, val, test) of the dataset made from data
    seed ``seed``. The task's own settings are ``task.KEY=VALUE``.

    >>> DataConfig(n=5, split="val").split
    'val'
    """

    n: int = 100
    seed: int = 0
    split: str | None = None
    extra: int = 0

    def __post_init__(self) -> None:
        from possym.tasks import SPLITS

        if self.split is not None and self.split not in SPLITS:
            raise ConfigError(f"data.split={self.split!r}; allowed: {list(SPLITS)} or null (generate)")
        if self.n < 0:
            raise ConfigError(f"data.n={self.n} must be >= 0")
        if self.extra < 0:
            raise ConfigError(f"data.extra={self.extra} must be >= 0")


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


def jsonl_text(samples: TaskSamples, task: TaskConfig) -> str:
    """One JSON object per instance and line: its tokens, answer, n_hops and path."""
    import json

    return "".join(json.dumps(r) + "\n" for r in samples.records(task_vocab(task)))


def write_jsonl(samples: TaskSamples, task: TaskConfig, out: Path) -> int:
    """:func:`jsonl_text` written atomically to ``out``; returns the count."""
    text = jsonl_text(samples, task)
    atomic_write_text(Path(out), text)
    return text.count("\n")


@dataclass(frozen=True)
class AuditConfig:
    """The data audit: how many rows of each split the independent solver checks (all are hashed)."""

    n_solve: int = 500

    def __post_init__(self) -> None:
        if self.n_solve < 0:
            raise ConfigError(f"data n_solve={self.n_solve} must be >= 0")


def audit_experiment(ctx: StageContext, cfg: AuditConfig) -> list[dict]:
    """Audit the splits of every (task, data seed) the experiment's runs train on: sizes, hop balance,
    rows shared between splits, and the first ``n_solve`` rows of each split against the independent
    solver (:func:`possym.tasks.audit.audit_splits`). Writes ``OUT/tables/data.csv``; a failed audit
    raises, before any training."""
    from possym.runs import csv_text
    from possym.tasks.audit import audit_splits

    exp = ctx.exp
    rows: list[dict] = []
    seen = set()
    for run in exp.runs.values():
        key = (run.config.task, run.config.seeds.data)
        if key in seen:
            continue
        seen.add(key)
        rows += [{**r, "data_seed": run.config.seeds.data} for r in audit_splits(run.config.task, run.config.seeds.data,
                                                                                   cfg.n_solve)]
    atomic_write_text(exp.path / "tables" / "data.csv", csv_text(rows))
    bad = [r for r in rows if r["solver_agrees"] != r["solver_checked"] or r["overlap_earlier"]]
    if bad:
        raise PossymError(f"the data audit failed: {bad}")
    return rows


STAGE = Stage("data", AuditConfig, audit_experiment, scope="experiment",
              summary="audit every task's splits: sizes, balance, overlap, the independent solver")
