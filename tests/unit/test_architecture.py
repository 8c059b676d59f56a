"""The package's structure: nothing imports the command line, data flows one way, and no import cycle
exists between files (imports inside functions count) or between packages (docs/architecture.md)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import possym

SRC = Path(possym.__file__).parent

# Each package may import only those at its own level or lower. There is no list of exceptions: a
# registry that a higher package fills is filled from above (possym.stages.registry, possym.tasks.registry).
LEVELS = {
    "errors": 0, "hardware": 0, "records": 0, "paper": 0, "dependencies": 0, "locks": 1,
    "settings": 1,
    "tasks": 1, "config": 2, "one_hop": 2,
    "devices": 3,
    "model": 4, "local_models": 4, "runs": 5, "train": 6, "scores": 7, "theory": 7, "evaluate": 7, "heads": 7, "llm": 7,
    "canonical": 8, "report": 8, "stages": 9, "experiment": 10, "sweep": 11, "api": 12, "cli": 13,
    "__main__": 14,
}


def _modules() -> dict[str, Path]:
    out = {}
    for path in SRC.rglob("*.py"):
        parts = path.relative_to(SRC.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


MODULES = _modules()


def _resolve(name: str) -> str:
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name


def _imports(path: Path) -> set[str]:
    """The possym modules ``path`` imports, at any depth of the file (imports inside functions count too);
    ``from possym.x import y`` counts as the module ``possym.x.y`` where that is one, else ``possym.x``."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("possym"):
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                out.add(full if full in MODULES else _resolve(node.module))
        elif isinstance(node, ast.Import):
            out |= {_resolve(a.name) for a in node.names if a.name.startswith("possym")}
    return out


GRAPH = {name: _imports(path) - {name, "possym", ""} for name, path in MODULES.items()}


def _part(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan), each a cycle of imports."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_cycle_finder_finds_a_cycle_and_only_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_file_imports_itself_back_through_others_counting_imports_inside_functions():
    assert _cycles(GRAPH) == []


def test_no_two_packages_import_each_other_through_any_files():
    packages: dict[str, set[str]] = {}
    for module, deps in GRAPH.items():
        here = _part(module)
        if here == "__init__":
            continue
        packages.setdefault(here, set()).update(_part(d) for d in deps if _part(d) not in (here, "__init__"))
    assert _cycles(packages) == []


def test_every_package_has_a_level_and_sweep_sits_above_the_executor():
    assert {_part(m) for m in MODULES} - {"__init__"} <= set(LEVELS)
    assert LEVELS["stages"] < LEVELS["experiment"] < LEVELS["sweep"] < LEVELS["api"]


def readme_layout(readme: str) -> list[str]:
    """The names the README's Layout block gives under ``src/possym/``, in its order (``tasks``, ``config``, ...)."""
    block = readme.split("## Layout", 1)[1].split("```")[1]
    lines = [line for line in block.splitlines() if line.startswith("  ")]
    return [word.rstrip("/").removesuffix(".py") for line in lines
            for word in line[:20].split() if word.endswith(("/", ".py"))]


def test_the_readme_layout_names_every_part_of_the_package_and_nothing_else_in_the_order_data_flows():
    readme = (SRC.parents[1] / "README.md").read_text()
    named = readme_layout(readme)
    modules = {p.stem for p in SRC.glob("*.py")} - {"__init__", "__main__"}
    there = modules | {p.name for p in SRC.iterdir() if p.is_dir() and p.name != "__pycache__"}
    assert sorted(named) == sorted(there)
    levels = [LEVELS[n] for n in named if n in LEVELS]
    assert levels == sorted(levels), "a line of the layout sits above a package it imports from"


def test_the_layout_reader_reads_names_and_order():
    text = ("## Layout\n\n```\nsrc/possym/         x\n  b.py              y/ names z.py\n  a/                w\n"
            "  c/  d/            v\nbenchmarks/  tests/\n```\n")
    assert readme_layout(text) == ["b", "a", "c", "d"]


def test_nothing_outside_the_command_line_imports_possym_cli():
    offenders = [m for m, deps in GRAPH.items() if _part(m) not in ("cli", "__main__")
                 and any(d == "possym.cli" or d.startswith("possym.cli.") for d in deps)]
    assert offenders == []


def test_imports_flow_from_tasks_through_stages_to_the_command_line():
    wrong = [f"{m} imports {d}" for m, deps in GRAPH.items() for d in deps
             if _part(m) != "__init__" and _part(d) not in ("__init__", _part(m))
             and LEVELS.get(_part(d), 0) > LEVELS.get(_part(m), 0)]
    assert sorted(wrong) == []


# A reference to the tracker by number ("issue" then a number, "#" or "-" between), which a reader of the code
# cannot follow.
ISSUE_CITATION = re.compile(r"\bissue[\s#-]*\d", re.IGNORECASE)


def issue_citations(text: str) -> list[int]:
    """Lines of ``text`` that cite an issue by number."""
    return [n for n, line in enumerate(text.splitlines(), 1) if ISSUE_CITATION.search(line)]


def test_no_code_cites_an_issue_it_says_what_it_means_instead():
    root = SRC.parents[1]
    files = [p for folder in ("src", "tests", "benchmarks", "docs") for p in (root / folder).rglob("*.py")]
    cited = [f"{p.relative_to(root)}:{n}" for p in files for n in issue_citations(p.read_text("utf-8"))]
    assert files and not cited, "say what the code means, not which issue asked for it:\n" + "\n".join(cited)


def test_the_citation_finder_finds_each_spelling_and_spares_other_uses_of_the_word():
    word = "issue"  # spelled apart, so that this file does not cite one itself
    assert issue_citations(f'"""Fixtures ({word} 36)."""\n# see {word.title()} #4\nx = 1  # {word}-12\n') == [1, 2, 3]
    assert issue_citations("# we issue BEGIN ourselves\n# the issues list\n") == []
