"""No module branches on a task's name: what a stage needs from a task (its mechanism, hop positions, extra
window, chance) is declared on the task (:class:`possym.tasks.Task`), and what the papers say per task is data
keyed by name (a lookup such as ``FIG3_PANELS[task]``, not an ``if task == "number"``). The test walks the syntax
tree of every module of the package, with no exemption, and fails on a comparison (``==``, ``!=``, ``in``,
``not in``) between an expression that names a task and a registered task's name, so a new branch is caught
whatever its spelling."""

from __future__ import annotations

import ast
from pathlib import Path

import possym
from possym.tasks import TASKS

SRC = Path(possym.__file__).parent


def _names_a_task(node: ast.expr) -> bool:
    return "task" in ast.unparse(node).lower()


def _task_names(node: ast.expr) -> set[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return {node.value} & set(TASKS)
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return set().union(*(_task_names(e) for e in node.elts)) if node.elts else set()
    return set()


def task_name_branches(source: str) -> list[tuple[int, str]]:
    """(line, code) of each comparison of a task-naming expression with a registered task's name."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Compare):
            continue
        sides = [node.left, *node.comparators]
        named = {n for side in sides for n in _task_names(side)}
        if named and any(_names_a_task(side) for side in sides if not _task_names(side)):
            found.append((node.lineno, ast.unparse(node)))
    return sorted(found)


def test_no_module_compares_a_task_name():
    offenders = [f"{path.relative_to(SRC)}:{line}: {code}"
                 for path in sorted(SRC.rglob("*.py"))
                 for line, code in task_name_branches(path.read_text())]
    assert not offenders, "declare what differs on the Task instead of branching on its name:\n" + "\n".join(offenders)


def test_the_walk_catches_each_spelling_of_a_branch_and_spares_other_strings():
    caught = task_name_branches('if run.config.task.name != "number": pass\n'
                                'x = "letter" if task == "letter" else "number"\n'
                                'if cfg.task.name in ("number", "letter"): pass\n')
    assert [line for line, _ in caught] == [1, 2, 3]
    assert task_name_branches('if function == "index": pass\nif mode == "cached": pass\n') == []
