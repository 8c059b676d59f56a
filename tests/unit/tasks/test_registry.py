"""One task registry: config validation, the command line and the samplers all read it, and nothing
outside a task's module needs to know its name."""

from dataclasses import dataclass

import pytest

from possym.config import ConfigError, load_config
from possym.errors import PossymError
from possym.tasks import TASKS, Task, TaskConfig, get_task, register_task, task_config, task_vocab
from possym.tasks import number as number_task


def test_config_accepts_exactly_the_registered_tasks():
    with pytest.raises(ConfigError, match="not a task; allowed: \\('number', 'letter'") as info:
        load_config("copy")
    assert all(name in str(info.value) for name in TASKS)


def test_a_task_registered_under_a_new_name_keeps_its_own_vocabulary_and_fields(monkeypatch):
    # Registering the number task's module under another name used to give the letter vocabulary and
    # the letter task's n_letters limit: the registry entry now carries everything.
    @dataclass(frozen=True)
    class CopyConfig(number_task.NumberTaskConfig):
        name: str = "copy"

    monkeypatch.setitem(TASKS, "copy", Task(**{**vars(number_task.TASK), "name": "copy", "config": CopyConfig}))
    cfg = load_config("copy", None, ["task.n_letters=120"])
    assert cfg.task.n_letters == 120 and len(task_vocab(cfg.task)) == 137


def test_register_task_refuses_a_taken_name_and_a_module_that_is_not_a_task():
    with pytest.raises(PossymError, match="already registered"):
        register_task(number_task.TASK)
    with pytest.raises(PossymError, match="possym.tasks.Task"):
        register_task(number_task)  # type: ignore[arg-type]


def test_a_task_whose_config_names_another_task_is_refused():
    with pytest.raises(ConfigError, match="names another task"):
        Task(**{**vars(number_task.TASK), "name": "other"})


def test_the_base_config_is_no_task_and_says_what_to_use():
    with pytest.raises(ConfigError, match="task_config"):
        TaskConfig()
    assert get_task("letter").config is type(task_config("letter"))
