"""One task registry: config validation, the command line and the samplers all read it."""

from types import ModuleType

import pytest

from possym.config import ConfigError, TaskConfig
from possym.tasks import TASKS, register_task
from possym.tasks import number as number_task


def test_config_accepts_exactly_the_registered_tasks(monkeypatch):
    with pytest.raises(ConfigError, match="not a task; allowed: \\('number', 'letter'") as info:
        TaskConfig(name="copy")
    assert all(name in str(info.value) for name in TASKS)
    monkeypatch.setitem(TASKS, "copy", number_task)
    assert TaskConfig(name="copy").name == "copy"


def test_register_task_refuses_a_taken_name_and_an_incomplete_module():
    with pytest.raises(ValueError, match="already registered"):
        register_task("number", number_task)
    with pytest.raises(ValueError, match="lacks"):
        register_task("empty", ModuleType("empty"))
    assert "empty" not in TASKS
