"""The one registry of tasks: name -> the :class:`~possym.tasks.base.Task` its module declares.

The run config's ``task`` section is built from the registered task's config class, the command
line offers the registered names, and every sampler, vocabulary and solver is found here. A task is
one module ending in ``TASK = Task(...)`` (``tasks/number.py`` is a worked example), added with
:func:`register_task`; nothing outside a task's module branches on its name.

Example:
    >>> list(TASKS)[:2]   # the paper's; other packages and notebooks may register more
    ['number', 'letter']
    >>> get_task("letter").prefix_per_hop, task_config("letter", n_ints=4).n_ints
    (True, 4)
"""

from __future__ import annotations

import functools
from typing import Any

from possym.errors import ConfigError, PossymError
from possym.tasks import index, induction, letter, number, retrieval
from possym.tasks.base import Task, TaskConfig
from possym.tasks.vocab import Vocab

# The paper's two tasks (App. B), in the order a reproduction trains and reports them.
PAPER_TASKS = ("number", "letter")

TASKS: dict[str, Task] = {t.name: t for t in (number.TASK, letter.TASK, index.TASK, retrieval.TASK, induction.TASK)}


def register_task(task: Task) -> None:
    """Add ``task`` under its name; re-registering a name is an error, so two tasks never collide."""
    if not isinstance(task, Task):
        raise PossymError(f"register_task takes a possym.tasks.Task (a task module's TASK), not {type(task).__name__}")
    if task.name in TASKS:
        raise PossymError(f"task {task.name!r} is already registered")
    TASKS[task.name] = task


def get_task(name: str) -> Task:
    """The registered task called ``name``; an unknown name is a ConfigError listing the known ones."""
    try:
        return TASKS[name]
    except KeyError:
        raise ConfigError(f"task.name={name!r} is not a task; allowed: {tuple(TASKS)}") from None


def task_config(name: str, **fields: Any) -> TaskConfig:
    """The config of task ``name`` with ``fields`` set (validated by the task's own class).

    >>> task_config("number", max_hops=2).hops
    (1, 2)
    """
    return get_task(name).config(**fields)


@functools.lru_cache(maxsize=64)
def task_vocab(cfg: TaskConfig) -> Vocab:
    """The vocabulary of ``cfg``'s task, as its module lays it out."""
    return get_task(cfg.name).vocab(cfg)
