"""The one registry of tasks: name -> the :class:`~possym.tasks.base.Task` its module declares.

The run config's ``task`` section is built from the registered task's config class, the command
line offers the registered names, and every sampler, vocabulary and solver is found here. A task is
one module of :mod:`possym.tasks` ending in ``TASK = Task(...)`` (``tasks/number.py`` is a worked
example): :func:`discover_tasks` finds it, as :func:`possym.stages.registry.stages` finds stages, so
adding a task is one new file. A notebook or another package adds its own with :func:`register_task`
and takes it away with :func:`unregister_task`; nothing outside a task's module branches on its name.

Example:
    >>> list(TASKS)[:2]   # the paper's first; then the rest by module name, then any registered since
    ['number', 'letter']
    >>> get_task("letter").prefix_per_hop, task_config("letter", n_ints=4).n_ints
    (True, 4)
"""

from __future__ import annotations

import functools
import importlib
import pkgutil
from pathlib import Path
from typing import Any

from possym.errors import ConfigError, PossymError
from possym.tasks.base import Task, TaskConfig
from possym.tasks.vocab import Vocab

# The paper's two tasks (App. B), in the order a reproduction trains and reports them.
PAPER_TASKS = ("number", "letter")

# Filled by discover_tasks(), which possym.tasks calls once its own imports are done: the task modules
# import this registry (through possym.tasks.dataset and .solve), so it cannot import them while it loads.
TASKS: dict[str, Task] = {}


def discover_tasks() -> dict[str, Task]:
    """Register the ``TASK`` of every module of :mod:`possym.tasks` not registered yet, the paper's tasks
    first (:data:`PAPER_TASKS`), then the others by module name, so the order never depends on the file
    system; returns :data:`TASKS`."""
    package = __name__.rpartition(".")[0]  # by name and folder: importing the package here would be a cycle
    found = {}
    for info in sorted(pkgutil.iter_modules([str(Path(__file__).parent)]), key=lambda i: i.name):
        task = getattr(importlib.import_module(f"{package}.{info.name}"), "TASK", None)
        if isinstance(task, Task):
            found[task.name] = task
    for name in [n for n in PAPER_TASKS if n in found] + sorted(set(found) - set(PAPER_TASKS)):
        if name not in TASKS:
            register_task(found[name])
    return TASKS


def register_task(task: Task) -> None:
    """Add ``task`` under its name; re-registering a name is an error, so two tasks never collide."""
    if not isinstance(task, Task):
        raise PossymError(f"register_task takes a possym.tasks.Task (a task module's TASK), not {type(task).__name__}")
    if task.name in TASKS:
        raise PossymError(f"task {task.name!r} is already registered")
    TASKS[task.name] = task


def unregister_task(name: str) -> Task:
    """Remove the task called ``name`` and return it: the inverse of :func:`register_task`, for tests and
    notebooks that clean up after themselves. Any registered task may go, the paper's too (a caller that
    removes one owns putting it back); an unknown name is a ConfigError listing the known ones.

    >>> retrieval = unregister_task("retrieval")
    >>> "retrieval" in TASKS, register_task(retrieval), list(TASKS)[-1]
    (False, None, 'retrieval')
    """
    if name not in TASKS:
        raise ConfigError(f"cannot unregister task {name!r}: it is not registered; registered: {tuple(TASKS)}")
    task_vocab.cache_clear()  # a later task of the same name must not meet this one's vocabularies
    return TASKS.pop(name)


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
