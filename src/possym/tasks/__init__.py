"""The two multi-hop tasks of the paper (App. B): vocabularies, generators, splits and an oracle.

>>> import numpy as np
>>> from possym.config import TaskConfig
>>> cfg = TaskConfig(name="number")
>>> samples = generate(cfg, 4, np.random.default_rng(0))
>>> record = samples.records(task_vocab(cfg))[0]
>>> solve(record["tokens"], "number").answer == record["answer"]
True
"""

from possym.tasks.dataset import (
    SPLITS,
    balanced_combinations,
    draw_prefix,
    generate,
    generate_after,
    make_splits,
    prefix_per_hop,
    row_hashes,
)
from possym.tasks.registry import PAPER_TASKS, TASKS, register_task
from possym.tasks.samples import TaskSamples
from possym.tasks.solve import Solution, solve
from possym.tasks.vocab import PAD, Vocab, number_alphabet, task_vocab

__all__ = [
    "PAD",
    "PAPER_TASKS",
    "SPLITS",
    "TASKS",
    "Solution",
    "TaskSamples",
    "Vocab",
    "balanced_combinations",
    "draw_prefix",
    "generate",
    "generate_after",
    "make_splits",
    "number_alphabet",
    "prefix_per_hop",
    "register_task",
    "row_hashes",
    "solve",
    "task_vocab",
]
