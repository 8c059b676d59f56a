"""Every ``possym`` command the Makefile runs, or a guide's code block shows, parses with today's command
line: a flag that became a ``section.KEY=VALUE`` setting (``possym heads --n 100``) is refused by argparse,
and ``make heads-gemma`` once still passed six such flags. Parsing only: nothing runs."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from possym import cli

ROOT = Path(__file__).resolve().parents[3]
GUIDES = [ROOT / "README.md", *sorted(p for p in (ROOT / "docs").glob("*.md") if p.name != "results.md")]


def joined(lines: list[str]) -> list[str]:
    """Lines with their backslash continuations joined."""
    out: list[str] = []
    for line in lines:
        if out and out[-1].endswith("\\"):
            out[-1] = out[-1][:-1] + " " + line.strip()
        else:
            out.append(line.strip())
    return out


def commands(text: str, make: bool = False) -> list[list[str]]:
    """The argument lists of the ``possym`` commands in ``text``: a Makefile's recipe lines (``$(BIN)/possym``,
    its variables given placeholder values), or a Markdown file's fenced code blocks (``#`` comments dropped)."""
    lines = joined(text.splitlines()) if make else [
        line for block in re.findall(r"```[a-z]*\n(.*?)```", text, re.S) for line in joined(block.splitlines())]
    found = []
    for line in lines:
        line = re.sub(r"\$\((\w+)\)", lambda m: "" if m.group(1) == "BIN" else "VAR", line).split(" #")[0]
        line = line.removeprefix("$ ").removeprefix("/")
        if line.startswith("possym "):
            found.append(shlex.split(line)[1:])
    return found


def test_the_reader_finds_make_recipes_and_code_block_commands_with_continuations():
    make = "demo: setup\n\t$(BIN)/possym reproduce --out $(OUT) \\\n\t  engine.workers=2\n# possym in a comment\n"
    assert commands(make, make=True) == [["reproduce", "--out", "VAR", "engine.workers=2"]]
    guide = "text `possym score X` here\n```bash\npossym score RUN score.n_inputs=5   # a comment\n```\n"
    assert commands(guide) == [["score", "RUN", "score.n_inputs=5"]]


DOCUMENTED = [(f.name, argv) for f in [ROOT / "Makefile", *GUIDES]
              for argv in commands(f.read_text(), make=f.name == "Makefile")]


@pytest.mark.parametrize(("where", "argv"), DOCUMENTED, ids=[f"{w}: possym {' '.join(a)[:60]}" for w, a in DOCUMENTED])
def test_a_documented_command_parses(where, argv):
    try:
        cli.parse(argv)
    except SystemExit:
        pytest.fail(f"{where}: `possym {' '.join(argv)}` is refused by today's command line")
