"""A task's config refuses inputs that cannot be generated, naming the field (each task module)."""

import numpy as np
import pytest

from possym.config import ConfigError
from possym.tasks import generate, solve, task_config, task_vocab


def test_more_hops_than_pretarget_positions_allow_is_an_error_naming_max_hops():
    with pytest.raises(ConfigError, match="max_hops=10"):
        task_config("number", max_hops=10)


def test_a_letter_alphabet_too_small_for_unique_chains_is_an_error_naming_n_letters():
    with pytest.raises(ConfigError, match="n_letters=4"):
        task_config("letter", n_letters=4, max_hops=4)


@pytest.mark.parametrize("task", ["number", "letter"])
def test_a_window_without_pretargets_holds_one_hop_inputs_and_no_more(task):
    cfg = task_config(task, n_pretarget=0, max_hops=1)
    samples = generate(cfg, 8, np.random.default_rng(0))
    for record in samples.records(task_vocab(cfg)):
        assert solve(task, record["tokens"]).n_hops == 1 and len(record["tokens"]) == cfg.n_target + 1
    with pytest.raises(ConfigError, match="max_hops=2"):
        task_config(task, n_pretarget=0, max_hops=2)
    with pytest.raises(ConfigError, match="n_pretarget=-1"):
        task_config(task, n_pretarget=-1, max_hops=1)


def test_the_longest_possible_chains_are_allowed():
    assert task_config("number", max_hops=9).hops[-1] == 9
    assert task_config("letter", n_letters=5, max_hops=4).n_letters == 5


def test_each_task_has_the_paper_alphabet_as_its_own_default():
    assert task_config("number").n_letters == 120 and task_config("letter").n_letters == 8


@pytest.mark.parametrize(
    ("task", "kwargs", "field"),
    [
        ("number", {"min_hops": 0}, "min_hops"),
        ("number", {"min_hops": 3, "max_hops": 2}, "min_hops"),
        ("number", {"n_letters": 703}, "n_letters"),
        ("letter", {"n_letters": 27}, "n_letters"),
        ("letter", {"n_ints": 10}, "n_ints"),
        ("number", {"n_val": -1}, "n_val"),
        ("index", {"length": 1}, "length"),
        ("retrieval", {"length": 40}, "n_symbols"),
        ("retrieval", {"n_attributes": 1}, "n_attributes"),
    ],
)
def test_an_impossible_task_is_an_error_naming_the_field(task, kwargs, field):
    with pytest.raises(ConfigError, match=field):
        task_config(task, **kwargs)


def test_a_field_of_another_task_is_refused():
    with pytest.raises(TypeError, match="n_ints"):
        task_config("number", n_ints=8)
