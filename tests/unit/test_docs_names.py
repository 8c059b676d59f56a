"""Every ``possym.…`` name the README and the guides in docs/ give in backticks exists: a module, or an
attribute of one; so does every such name in the package's own docstrings, comments and messages. A
rename that leaves a guide or a help text pointing at nothing fails here. The lab notebook
(docs/results.md) is left out: each of its entries is dated and names what existed then."""

from __future__ import annotations

import dataclasses
import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
GUIDES = [ROOT / "README.md", *sorted(p for p in (ROOT / "docs").glob("*.md") if p.name != "results.md")]
NAME = re.compile(r"`(possym(?:\.[A-Za-z_]\w*)+)")
IN_SOURCE = re.compile(r"\b(possym(?:\.[A-Za-z_]\w*)+)")
SOURCES = sorted((ROOT / "src" / "possym").rglob("*.py"))


def resolves(name: str) -> bool:
    """Whether ``name`` is an importable module, or a chain of attributes of the longest one that is."""
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attr in parts[cut:]:
            if dataclasses.is_dataclass(obj) and attr in {f.name for f in dataclasses.fields(obj)}:
                return True  # a field without a class default, e.g. possym.tasks.Task.chance
            if not hasattr(obj, attr):
                return False
            obj = getattr(obj, attr)
        return True
    return False


def test_a_name_resolves_as_a_module_or_its_attributes_and_nothing_else_does():
    assert resolves("possym.tasks") and resolves("possym.tasks.solve") and resolves("possym.Run.scores")
    assert resolves("possym.tasks.Task.chance")  # a dataclass field
    assert not resolves("possym.tasks.no_such_thing") and not resolves("possym.nowhere.x")


def test_the_name_finder_reads_backticked_dotted_names_only():
    text = "see `possym.tasks.solve(task, tokens)` and `possym.Run`, not possym.loose or `numpy.mean`"
    assert NAME.findall(text) == ["possym.tasks.solve", "possym.Run"]


@pytest.mark.parametrize("guide", GUIDES, ids=[p.name for p in GUIDES])
def test_every_possym_name_a_guide_gives_exists(guide):
    missing = sorted({n for n in NAME.findall(guide.read_text()) if not resolves(n)})
    assert missing == [], f"{guide.name} names what does not exist: {missing}"


def source_names(text: str) -> set[str]:
    """The ``possym.…`` names of a source file outside its import lines (a file name's suffix dropped)."""
    lines = [line for line in text.splitlines() if not line.lstrip().startswith(("import ", "from "))]
    return {n for line in lines for n in IN_SOURCE.findall(line) if not n.endswith(("py", "yaml", "json", "csv"))}


def test_the_source_reader_skips_imports_and_file_names():
    text = "from possym.x import y\n# see possym.tasks.solve and possym.paper.json\nraise E('a possym.Run')\n"
    assert source_names(text) == {"possym.tasks.solve", "possym.Run"}


def test_every_possym_name_in_the_package_s_own_text_exists():
    missing = sorted(f"{n} ({path.relative_to(ROOT)})" for path in SOURCES for n in source_names(path.read_text())
                     if not resolves(n))
    assert missing == []


PATH = re.compile(r"\b((?:docs|benchmarks|tests|src/possym)/[\w./-]+\.(?:md|py|yaml|csv|json|ipynb))(?:::(\w+))?")


def missing_paths(text: str) -> list[str]:
    """The repository files ``text`` names (``tests/x.py``, ``tests/x.py::test_y``) that are not there."""
    out = []
    for path, test in PATH.findall(text):
        if not (ROOT / path).exists():
            out.append(path)
        elif test and not re.search(rf"def {test}\(", (ROOT / path).read_text()):
            out.append(f"{path}::{test}")
    return out


def test_the_path_reader_finds_a_missing_file_and_a_missing_test():
    text = "see `tests/unit/test_docs_names.py::no_such_test`, docs/nowhere.md and tests/unit/test_docs_names.py"
    assert missing_paths(text) == ["tests/unit/test_docs_names.py::no_such_test", "docs/nowhere.md"]


def test_every_file_and_test_a_guide_or_the_source_names_is_there():
    files = [*GUIDES, *SOURCES, *sorted((ROOT / "benchmarks").glob("*.py"))]
    missing = [f"{name} (in {f.relative_to(ROOT)})" for f in files for name in missing_paths(f.read_text())]
    assert missing == []


def code_names(text: str) -> set[str]:
    """The ``possym`` names a Markdown file's Python code blocks import (``from possym.x import a, b``) or use."""
    names: set[str] = set()
    for block in re.findall(r"```python\n(.*?)```", text, re.S):
        for module, imported in re.findall(r"^from (possym[\w.]*) import ([\w, ]+)$", block, re.M):
            names |= {f"{module}.{n.strip()}" for n in imported.split(",")}
        names |= source_names(block)
    return names


def test_the_code_reader_reads_imports_and_uses():
    text = "```python\nfrom possym.tasks import solve, task_config\nrun = possym.open_run(x)\n```\n`possym.z`\n"
    assert code_names(text) == {"possym.tasks.solve", "possym.tasks.task_config", "possym.open_run"}


def test_every_possym_name_a_guide_s_python_imports_or_uses_exists():
    missing = sorted(f"{n} ({g.name})" for g in GUIDES for n in code_names(g.read_text()) if not resolves(n))
    assert missing == []
