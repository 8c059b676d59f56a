"""The package's structure: nothing imports the command line, and data flows one way (docs/architecture.md)."""

from __future__ import annotations

import ast
from pathlib import Path

import possym

SRC = Path(possym.__file__).parent

# Each package may import only those at its own level or lower; a package missing here imports nothing
# of possym beyond the base level.
LEVELS = {
    "errors": 0, "records": 0, "paper": 0, "config": 1, "tasks": 1, "devices": 1, "model": 2, "local_models": 2,
    "runs": 3, "train": 4, "scores": 5, "theory": 5, "evaluate": 5, "heads": 5, "llm": 5, "canonical": 6, "report": 6,
    "stages": 7, "sweep": 8, "pipeline": 8, "api": 9, "cli": 10, "__main__": 11,
}

# Upward imports made on purpose, each with its reason: a registry that lets a higher package plug in.
PLUG_INS = {
    "tasks/registry.py imports possym.canonical",  # issue 18: the canonical tasks register themselves
    "tasks/vocab.py imports possym.canonical.adapter",  # issue 18: a canonical task's vocabulary
}


def _imports(path: Path) -> set[str]:
    """The possym modules ``path`` imports, at any depth of the file (lazy imports count too)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("possym"):
            out.add(node.module)
        elif isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.startswith("possym")}
    return out


def _part(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def test_nothing_outside_the_command_line_imports_possym_cli():
    offenders = [str(p.relative_to(SRC)) for p in SRC.rglob("*.py")
                 if _part("possym." + str(p.relative_to(SRC)).replace("/", ".")) not in ("cli", "__main__")
                 and any(m == "possym.cli" or m.startswith("possym.cli.") for m in _imports(p))]
    assert offenders == []


def test_imports_flow_from_tasks_through_stages_to_the_command_line():
    wrong = []
    for path in SRC.rglob("*.py"):
        rel = path.relative_to(SRC)
        here = rel.parts[0].removesuffix(".py")
        if here == "__init__":
            continue
        for module in _imports(path):
            there = _part(module)
            if there in ("__init__", here):
                continue
            if LEVELS.get(there, 0) > LEVELS.get(here, 0):
                wrong.append(f"{rel} imports {module}")
    assert sorted(set(wrong) - PLUG_INS) == []
