"""What a task is: a config class and a :class:`Task` record that its module declares.

A task module (``tasks/number.py`` is the worked example) declares everything the rest of possym needs, so that
nothing outside it branches on a task's name: its config (a frozen :class:`TaskConfig` subclass whose ``name``
field defaults to the task's name), vocabulary, balanced classes (``combinations``), generator (``sample``),
independent solver (``solve``: token strings in, :class:`Solution` out), length extension (``draw_prefix`` /
``sample_after`` with optional ``prefix_plan`` and ``tokens`` readings, or ``at_length``), ``random_prefix`` for
training with random extra tokens (:mod:`possym.train.augment`), ``chance``, ``mechanism`` (``"positional"``,
``"symbolic"``, ``"mixed"`` or ``""``), and where a stage looks (:meth:`Task.hop_queries`,
:meth:`Task.hop_keys`, :meth:`Task.extra_window`, from the path every generator records in
:class:`TaskSamples`). It ends with ``TASK = Task(...)``, found by :func:`possym.tasks.registry.discover_tasks`
or added with :func:`possym.tasks.registry.register_task`. See docs/architecture.md, "A task is one module".

Example (a toy task in a few lines; ``tests/integration/tasks/test_toy_task.py`` trains one end to end):
    >>> from dataclasses import dataclass
    >>> @dataclass(frozen=True)
    ... class CopyConfig(TaskConfig):
    ...     name: str = "copy"
    ...     length: int = 4
    ...     @property
    ...     def seq_len(self) -> int:
    ...         return self.length + 1
    ...     @property
    ...     def hops(self) -> tuple[int, ...]:
    ...         return (1,)
    >>> CopyConfig(n_train=10).seq_len
    5"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from possym.errors import require
from possym.tasks.samples import TaskSamples
from possym.tasks.vocab import Vocab

MECHANISMS = ("positional", "symbolic", "mixed", "")


@dataclass(frozen=True)
class Solution:
    """The answer token, the number of hops, and the positions visited from the query to the answer."""

    answer: str
    n_hops: int
    path: tuple[int, ...]


@dataclass(frozen=True)
class TaskConfig:
    """The fields every task shares: its name and its split sizes (paper App. B: 432,000 / 2,400 / 45,600).

    A task's own config derives from this class, sets ``name``'s default to the task's name and adds
    its fields; ``seq_len`` (tokens of an input without extra tokens) and ``hops`` (its hop counts)
    are what code outside the task reads.
    """

    name: str = ""
    n_train: int = 432_000
    n_val: int = 2_400
    n_test: int = 45_600

    def __post_init__(self) -> None:
        default = next(f.default for f in fields(self) if f.name == "name")
        require(bool(default), f"{type(self).__name__} is no task's config; use a task's own config class, "
                               "e.g. possym.tasks.task_config('number', ...)")
        require(self.name == default, f"task.name={self.name!r}: {type(self).__name__} is the config of {default!r}")
        for split in ("n_train", "n_val", "n_test"):
            require(getattr(self, split) >= 0, f"task.{split}={getattr(self, split)} must be >= 0")

    @property
    def seq_len(self) -> int:
        """Tokens per input without extra tokens."""
        raise NotImplementedError

    @property
    def hops(self) -> tuple[int, ...]:
        """The hop counts of the task's inputs, ascending."""
        raise NotImplementedError

    @property
    def max_hops(self) -> int:
        return max(self.hops)


@dataclass(frozen=True)
class Task:
    """A task module's declaration (see the module docstring for what each member means)."""

    name: str
    config: type[TaskConfig]
    vocab: Callable[[Any], Vocab]
    combinations: Callable[[Any], np.ndarray]
    sample: Callable[..., TaskSamples]
    solve: Callable[[Sequence[str]], Solution]
    chance: Callable[[Any], float]
    draw_prefix: Callable[..., np.ndarray] | None = None
    sample_after: Callable[..., TaskSamples] | None = None
    prefix_per_hop: bool = False
    prefix_plan: Callable[..., list[dict[str, Any]]] | None = None
    at_length: Callable[..., TaskSamples] | None = None
    random_prefix: Callable[..., np.ndarray] | None = None
    mechanism: str = ""
    summary: str = ""

    def __post_init__(self) -> None:
        require(self.mechanism in MECHANISMS, f"task {self.name!r}: mechanism={self.mechanism!r}; allowed: "
                                               f"{list(MECHANISMS)}")
        require(self.config.__dataclass_fields__["name"].default == self.name,
                f"task {self.name!r}: its config class {self.config.__name__} names another task")
        require((self.draw_prefix is None) == (self.sample_after is None),
                f"task {self.name!r}: draw_prefix and sample_after come together (the prefix length extension)")

    def hop_queries(self, samples: TaskSamples) -> np.ndarray:
        """[batch, max_hops]: the query position of hop k (k = 0 is the last token), −1 past an input's hops."""
        queries = samples.path[:, :-1].copy()
        queries[np.arange(queries.shape[1])[None, :] >= samples.n_hops[:, None]] = -1
        return queries

    def hop_keys(self, samples: TaskSamples) -> np.ndarray:
        """[batch, max_hops]: the key hop k should read (the next position of the path; the answer for the last
        hop), −1 past an input's hops."""
        return samples.path[:, 1:].copy()

    def extra_window(self, samples: TaskSamples) -> range:
        """The positions of the extra tokens before the window (empty for an input without any)."""
        return range(samples.extra)

    @property
    def extends_by_prefix(self) -> bool:
        """Longer inputs are extra tokens before a window (the paper's length protocol)."""
        return self.draw_prefix is not None
