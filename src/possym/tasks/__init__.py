"""The tasks: the paper's two (App. B) and the metric paper's three canonical ones, each one module.

A task module declares its config, vocabulary, generator, independent solver and length extension
(:class:`Task`); the registry finds them by name (:mod:`possym.tasks.registry`).

>>> import numpy as np
>>> cfg = task_config("number")
>>> samples = generate(cfg, 4, np.random.default_rng(0))
>>> record = samples.records(task_vocab(cfg))[0]
>>> solve("number", record["tokens"]).answer == record["answer"]
True
"""

from possym.tasks.base import Solution, Task, TaskConfig
from possym.tasks.dataset import (
    SPLITS,
    balanced_combinations,
    draw_prefix,
    generate,
    generate_after,
    make_splits,
    prefix_per_hop,
    prefix_plan,
    row_hashes,
)
from possym.tasks.registry import (
    PAPER_TASKS,
    TASKS,
    discover_tasks,
    get_task,
    register_task,
    task_config,
    task_vocab,
    unregister_task,
)
from possym.tasks.samples import TaskSamples
from possym.tasks.solve import solve
from possym.tasks.vocab import PAD, Vocab, number_alphabet

__all__ = [
    "PAD",
    "PAPER_TASKS",
    "SPLITS",
    "TASKS",
    "Solution",
    "Task",
    "TaskConfig",
    "TaskSamples",
    "Vocab",
    "balanced_combinations",
    "discover_tasks",
    "draw_prefix",
    "generate",
    "generate_after",
    "get_task",
    "make_splits",
    "number_alphabet",
    "prefix_per_hop",
    "prefix_plan",
    "register_task",
    "row_hashes",
    "solve",
    "task_config",
    "task_vocab",
    "unregister_task",
]

# Last, once every name above exists: the task modules import this package's registry and dataset.
discover_tasks()
