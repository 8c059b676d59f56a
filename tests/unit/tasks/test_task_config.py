"""TaskConfig refuses tasks that cannot be generated, naming the field (config.py)."""

import pytest

from possym.config import ConfigError, TaskConfig


def test_more_hops_than_pretarget_positions_allow_is_an_error_naming_max_hops():
    with pytest.raises(ConfigError, match="max_hops=10"):
        TaskConfig(max_hops=10)


def test_a_letter_alphabet_too_small_for_unique_chains_is_an_error_naming_n_letters():
    with pytest.raises(ConfigError, match="n_letters=4"):
        TaskConfig(name="letter", n_letters=4, max_hops=4)


def test_the_longest_possible_chains_are_allowed():
    assert TaskConfig(max_hops=9).hops[-1] == 9
    assert TaskConfig(name="letter", n_letters=5, max_hops=4).letters == 5


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"name": "word"}, "task.name"),
        ({"min_hops": 0}, "min_hops"),
        ({"min_hops": 3, "max_hops": 2}, "min_hops"),
        ({"n_letters": 703}, "n_letters"),
        ({"name": "letter", "n_letters": 27}, "n_letters"),
        ({"name": "letter", "n_ints": 10}, "n_ints"),
        ({"n_val": -1}, "n_val"),
    ],
)
def test_an_impossible_task_is_an_error_naming_the_field(kwargs, field):
    with pytest.raises(ConfigError, match=field):
        TaskConfig(**kwargs)
