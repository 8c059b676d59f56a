"""The canonical tasks as members of possym's task registry (:mod:`possym.tasks.registry`).

A run config names a canonical task as any other: ``task.name=index`` with ``task.n_target`` = the
length L, ``task.n_letters`` = the symbols S, ``task.n_ints`` = the attributes A, ``task.n_pretarget=0``
and one hop (see :class:`~possym.config.TaskConfig`). Then ``make_splits``, ``possym train`` and the
training loop work unchanged: the balanced classes are (answer slot, answer value, 1).

Length generalisation of the canonical tasks is longer *content* (:func:`possym.canonical.tasks.generate`
with ``length=``), not a prefix before a window, so ``draw_prefix``/``sample_after`` refuse with a
message that says so.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from possym.canonical import tasks as _tasks
from possym.config import TaskConfig


def spec_of(cfg: TaskConfig) -> _tasks.CanonicalSpec:
    """The :class:`CanonicalSpec` a canonical ``TaskConfig`` stands for."""
    return _tasks.CanonicalSpec(cfg.name, length=cfg.n_target, n_symbols=cfg.letters, n_attributes=cfg.n_ints)


def members(task: str) -> tuple[Any, ...]:
    """(PREFIX_PER_HOP, combinations, sample, draw_prefix, sample_after) of ``task`` for its registry module."""

    def combinations(cfg: TaskConfig) -> np.ndarray:
        spec = spec_of(cfg)
        slot, value = np.meshgrid(np.arange(spec.n_slots()), np.arange(spec.n_values), indexing="ij")
        return np.stack([slot.ravel(), value.ravel(), np.ones(slot.size, dtype=np.int64)], 1).astype(np.int64)

    def sample(cfg: TaskConfig, combos: np.ndarray, rng: np.random.Generator, extra: int = 0) -> Any:
        if extra:
            raise ValueError(f"the canonical task {task!r} takes no extra tokens (extra={extra}); use a longer length")
        spec = spec_of(cfg)
        return _tasks.build(spec, combos[:, 0], combos[:, 1], rng, spec.length)

    def no_prefix(*_args: Any, **_kwargs: Any) -> Any:
        raise ValueError(
            f"the canonical task {task!r} has no prefix windows; evaluate other lengths with "
            "possym.canonical.generate(spec, n, rng, length=...)"
        )

    unavailable: Callable[..., Any] = no_prefix
    return False, combinations, sample, unavailable, unavailable
