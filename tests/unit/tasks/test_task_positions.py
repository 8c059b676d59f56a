"""What a stage reads from a task instead of its name: the mechanism each task declares, each hop's query and
key (checked against the independent solver's path), and the extra window before a prefixed window."""

from __future__ import annotations

import numpy as np
import pytest

from possym.errors import PossymError
from possym.tasks import TASKS, Task, generate, get_task, solve, task_config, task_vocab


def test_the_papers_tasks_declare_how_a_hop_reads():
    assert get_task("number").mechanism == "positional" and get_task("letter").mechanism == "symbolic"
    assert all(t.mechanism in ("positional", "symbolic", "mixed", "") for t in TASKS.values())
    with pytest.raises(PossymError, match="mechanism"):
        Task(**{**{f: getattr(get_task("number"), f) for f in ("name", "config", "vocab", "combinations", "sample",
                                                               "solve", "chance")}, "mechanism": "both"})


@pytest.mark.parametrize("name", ["number", "letter"])
def test_hop_queries_and_keys_follow_the_solvers_path_and_the_extra_window_precedes_it(name):
    cfg = task_config(name)
    task = get_task(name)
    plain = generate(cfg, 16, np.random.default_rng(0))
    samples = generate(cfg, 16, np.random.default_rng(0), extra=5)
    queries, keys = task.hop_queries(samples), task.hop_keys(samples)
    for i, record in enumerate(samples.records(task_vocab(cfg))):
        path = solve(name, record["tokens"]).path
        h = record["n_hops"]
        assert queries[i, :h].tolist() == list(path[:-1]) and keys[i, :h].tolist() == list(path[1:])
        assert (queries[i, h:] == -1).all() and (keys[i, h:] == -1).all()
    assert task.extra_window(samples) == range(samples.extra) and task.extra_window(plain) == range(0)
