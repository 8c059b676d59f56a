"""One task registry: config validation, the command line and the samplers all read it, and nothing
outside a task's module needs to know its name."""

import importlib
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

import possym.tasks
from possym.config import ConfigError, load_config
from possym.errors import PossymError
from possym.tasks import (
    PAPER_TASKS,
    TASKS,
    Task,
    TaskConfig,
    discover_tasks,
    get_task,
    register_task,
    task_config,
    task_vocab,
    unregister_task,
)
from possym.tasks import number as number_task


@pytest.fixture
def registry():
    """The registry as it was, put back after the test whatever the test removed or added."""
    before = dict(TASKS)
    yield TASKS
    TASKS.clear()
    TASKS.update(before)


def test_config_accepts_exactly_the_registered_tasks():
    with pytest.raises(ConfigError, match="not a task; allowed: \\('number', 'letter'") as info:
        load_config("copy")
    assert all(name in str(info.value) for name in TASKS)


def test_a_task_registered_under_a_new_name_keeps_its_own_vocabulary_and_fields(registry):
    # Registering the number task's module under another name used to give the letter vocabulary and
    # the letter task's n_letters limit: the registry entry now carries everything.
    @dataclass(frozen=True)
    class CopyConfig(number_task.NumberTaskConfig):
        name: str = "copy"

    register_task(Task(**{**vars(number_task.TASK), "name": "copy", "config": CopyConfig}))
    cfg = load_config("copy", None, ["task.n_letters=120"])
    assert cfg.task.n_letters == 120 and len(task_vocab(cfg.task)) == 137
    unregister_task("copy")
    with pytest.raises(ConfigError, match="not a task"):
        load_config("copy")


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


def test_every_task_module_of_the_package_is_found_the_papers_first():
    # The oracle reads the files: every module of possym.tasks whose text declares a module-level TASK.
    folder = Path(possym.tasks.__file__).parent
    declared = {importlib.import_module(f"possym.tasks.{path.stem}").TASK.name for path in folder.glob("*.py")
                if re.search(r"^TASK = Task\(", path.read_text(), re.M)}
    found = discover_tasks()
    assert set(found) == declared and {"number", "letter", "index", "retrieval", "induction"} <= declared
    assert tuple(found)[:2] == PAPER_TASKS
    assert list(found)[2:] == sorted(list(found)[2:])  # the rest by name, whatever the file system's order


def test_unregister_task_is_the_inverse_of_register_task(registry):
    before = list(TASKS)
    removed = unregister_task("letter")  # the paper's own tasks may go too; the caller puts them back
    assert removed.name == "letter" and "letter" not in TASKS
    with pytest.raises(ConfigError, match="not a task"):
        get_task("letter")
    register_task(removed)
    assert get_task("letter") is removed and sorted(TASKS) == sorted(before)


def test_unregister_task_refuses_an_unknown_name_and_names_the_registered_ones():
    with pytest.raises(ConfigError, match="cannot unregister task 'copy'") as info:
        unregister_task("copy")
    assert all(repr(name) in str(info.value) for name in TASKS)


def test_discovery_finds_a_removed_module_task_again_and_adds_no_second_copy(registry):
    names = set(TASKS)
    letter = unregister_task("letter")
    discover_tasks()
    assert TASKS["letter"] is letter and set(TASKS) == names
