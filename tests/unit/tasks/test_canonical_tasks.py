"""The canonical tasks' generators against the brute-force oracle, their balance, and the registry path."""

from __future__ import annotations

import numpy as np
import pytest

from possym.config import ConfigError, config_from_saved, load_config
from possym.tasks import get_task, make_splits, row_hashes, solve, task_config, task_vocab
from possym.tasks.canonical import CANONICAL_TASKS

SIZES = dict(length=8, n_symbols=32, n_attributes=8)
CANONICAL = ["task.n_train=512", "task.n_val=64", "task.n_test=64", "train.eval_size=64"]


def spec_of(task: str, **sizes):
    sizes = {**SIZES, **sizes}
    return task_config(task, **{k: v for k, v in sizes.items() if k in get_task(task).config.__dataclass_fields__})


def generate(spec, n, rng, length=None):
    return get_task(spec.name).at_length(spec, n, rng, length)


@pytest.mark.parametrize("task", CANONICAL_TASKS)
@pytest.mark.parametrize("length", [8, 16, 32])
def test_every_generated_instance_agrees_with_the_oracle(task: str, length: int) -> None:
    spec = spec_of(task)
    s = generate(spec, 300, np.random.default_rng(length), length=length)
    assert s.tokens.shape == (300, length + 1)
    for row, answer, path in zip(s.tokens, s.answer, s.path, strict=True):
        sol = solve(task, task_vocab(spec).decode(row))
        assert sol.answer == task_vocab(spec).tokens[answer]
        assert sol.path == (length, path[1]) and sol.n_hops == 1
        assert path[0] == length


@pytest.mark.parametrize("task", CANONICAL_TASKS)
def test_answer_positions_are_exactly_balanced(task: str) -> None:
    spec = spec_of(task)
    n_slots = spec.n_slots()
    s = generate(spec, 10 * n_slots + 3, np.random.default_rng(0))
    counts = np.bincount(s.path[:, 1], minlength=spec.length)
    used = counts[counts > 0]
    assert len(used) == n_slots and used.max() - used.min() <= 1 and used.sum() == 10 * n_slots + 3


def test_index_answers_lie_in_the_last_training_length_at_longer_inputs() -> None:
    spec = spec_of("index")
    s = generate(spec, 200, np.random.default_rng(1), length=32)
    assert set(np.unique(s.path[:, 1]).tolist()) == set(range(24, 32))


def test_induction_has_an_earlier_distractor_with_another_attribute() -> None:
    spec = spec_of("induction")
    s = generate(spec, 200, np.random.default_rng(2))
    for row in s.tokens:
        tokens = task_vocab(spec).decode(row)
        wanted = tokens[-1][:-1]
        hits = [(p, t.split(":")[1]) for p, t in enumerate(tokens[:-1]) if t.split(":")[0] == wanted]
        assert len(hits) == 2 and hits[0][1] != hits[1][1]  # the first-occurrence answer is always wrong
        others = [t.split(":")[0] for t in tokens[:-1] if t.split(":")[0] != wanted]
        assert len(set(others)) == len(others)


def test_the_same_seed_gives_the_same_instances_and_another_seed_others() -> None:
    spec = spec_of("retrieval")
    a, b = (generate(spec, 50, np.random.default_rng(7)) for _ in range(2))
    c = generate(spec, 50, np.random.default_rng(8))
    assert np.array_equal(a.tokens, b.tokens) and not np.array_equal(a.tokens, c.tokens)


def test_the_oracle_refuses_a_retrieval_input_with_the_symbol_bound_twice() -> None:
    with pytest.raises(ValueError, match="bound once"):
        solve("retrieval", ["s1:a0", "s1:a2", "s1?"])
    with pytest.raises(ValueError, match="outside"):
        solve("index", ["s1", "s2", "@3"])


def test_a_length_the_symbols_cannot_fill_is_an_error_that_names_the_need() -> None:
    spec = spec_of("retrieval", n_symbols=10)
    with pytest.raises(ValueError, match="n_symbols >= 16"):
        generate(spec, 4, np.random.default_rng(0), length=16)


@pytest.mark.parametrize("task", CANONICAL_TASKS)
def test_the_registry_path_makes_disjoint_balanced_splits_the_oracle_accepts(task: str) -> None:
    cfg = load_config(task, None, CANONICAL)
    splits = make_splits(cfg.task, 0)
    vocab = task_vocab(cfg.task)
    seen = np.concatenate([row_hashes(splits["train"].tokens), row_hashes(splits["val"].tokens)])
    assert not np.isin(row_hashes(splits["test"].tokens), seen).any()
    s = splits["train"]
    for row, answer in zip(s.tokens[:100], s.answer[:100], strict=True):
        assert solve(task, vocab.decode(row)).answer == vocab.tokens[answer]
    counts = np.bincount(s.path[:, 1])
    assert counts[counts > 0].max() - counts[counts > 0].min() <= 1


def test_a_canonical_task_has_its_own_fields_and_refuses_the_window_tasks_ones() -> None:
    assert load_config("retrieval", None, ["task.n_attributes=5"]).task.n_attributes == 5
    with pytest.raises(ConfigError, match="unknown key 'task.max_hops'; known task keys"):
        load_config("index", None, ["task.max_hops=1"])
    with pytest.raises(ConfigError, match="unknown key 'task.n_attributes'"):
        load_config("index", None, ["task.n_attributes=5"])  # Index has no attributes


def test_a_canonical_config_saved_with_the_window_fields_is_refused_and_migrates_to_its_own_fields() -> None:
    from possym.errors import EarlierLayoutError
    from possym.experiment.migrate import upgraded_config

    old = load_config("retrieval", None, CANONICAL).to_dict()
    old["task"] = {"name": "retrieval", "n_target": 12, "n_pretarget": 0, "min_hops": 1, "max_hops": 1,
                   "n_letters": 20, "n_ints": 5, "n_train": 512, "n_val": 64, "n_test": 64}
    with pytest.raises(EarlierLayoutError, match="it lacks task.length"):
        config_from_saved(old)
    task = config_from_saved(upgraded_config(old)).task
    assert (task.length, task.n_symbols, task.n_attributes) == (12, 20, 5)
