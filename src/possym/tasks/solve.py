"""The one oracle entry point: ``solve(task, tokens)`` follows a task's hops on token strings alone.

Each task module writes its own solver, independent of its generator (it parses token strings and
brute-forces the answer); this function finds it through the registry. An ill-posed input (a hop
with no match or two, a cycle) is a ValueError that says why.

Example (paper Fig. 1):
    >>> solve("number", "c b a 1 4 1 3 2 1".split())
    Solution(answer='c', n_hops=4, path=(8, 7, 5, 4, 0))
    >>> solve("letter", "c2 b1 a3 fa ec de hf gd ig".split())
    Solution(answer='c2', n_hops=4, path=(8, 7, 5, 4, 0))
"""

from __future__ import annotations

from collections.abc import Sequence

from possym.tasks.base import Solution, TaskConfig
from possym.tasks.registry import get_task


def solve(task: str | TaskConfig, tokens: Sequence[str]) -> Solution:
    """Solve one input of ``task`` (a task name or config) given as token strings."""
    name = task if isinstance(task, str) else task.name
    tokens = list(tokens)
    if not tokens:
        raise ValueError("cannot solve an empty input: there is no query")
    return get_task(name).solve(tokens)
