"""The one registry of tasks: name -> the module that samples it.

``TaskConfig`` validates ``task.name`` against it, the command line offers its names, and
``possym.tasks.generate`` dispatches through it. A task is a module with the members in
``TASK_MEMBERS`` (``tasks/number.py`` is a worked example), added with :func:`register_task`.

Example:
    >>> list(TASKS)[:2]   # the paper's; other packages may register more
    ['number', 'letter']
    >>> TASKS["letter"].PREFIX_PER_HOP
    True
"""

from __future__ import annotations

from types import ModuleType

from possym.canonical import index, induction, retrieval
from possym.tasks import letter, number

# The paper's two tasks (App. B), in the order ``possym reproduce`` trains and reports them.
PAPER_TASKS = ("number", "letter")
TASK_MEMBERS = ("PREFIX_PER_HOP", "combinations", "sample", "draw_prefix", "sample_after")

TASKS: dict[str, ModuleType] = {
    "number": number,
    "letter": letter,
    # The metric paper's canonical tasks (issue 18); not paper tasks, so reproduce and sweeps leave them out.
    "index": index,
    "retrieval": retrieval,
    "induction": induction,
}


def register_task(name: str, module: ModuleType) -> None:
    """Add a task under ``name``; re-registering a name is an error, so two tasks never collide."""
    if name in TASKS:
        raise ValueError(f"task {name!r} is already registered (to {TASKS[name].__name__})")
    missing = [m for m in TASK_MEMBERS if not hasattr(module, m)]
    if missing:
        raise ValueError(f"task module {module.__name__} lacks {missing}; a task needs {TASK_MEMBERS}")
    TASKS[name] = module
