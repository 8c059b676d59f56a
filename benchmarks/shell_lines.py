"""The shell's size: code lines by the AST (no docstrings, comments or blank lines) of the plumbing (what runs
anything) and of the whole shell, at a baseline revision and at another, with their ratio.

    python benchmarks/shell_lines.py                 # 328e745 against the working tree
    python benchmarks/shell_lines.py --base REV --head REV

A line counts when a token of code lies on it; the lines of a module's, class's or function's docstring do not.
Both revisions are read from git (the working tree for ``--head ''``), so the two counts come from one run of one
counter.
"""

from __future__ import annotations

import argparse
import ast
import io
import subprocess
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PKG = "src/possym"
# The plumbing: the executor, memo and registry, the configs and settings, run directories, the API, the commands,
# the locks and the sweep engines (the memo's module under both its names: stages/log.py before it was renamed).
PLUMBING = ("experiment/executor.py", "stages/memo.py", "stages/log.py", "stages/registry.py", "config.py",
            "settings.py", "runs.py", "api.py", "cli/", "locks.py", "sweep/engines.py")
# The shell: everything that is not the science (the packages that run and report it, with settings and locks).
SHELL = ("stages/", "experiment/", "sweep/", "cli/", "report/", "api.py", "config.py", "runs.py", "records.py",
         "settings.py", "locks.py")


def code_lines(source: str) -> int:
    """Lines carrying a code token, docstrings left out.

    >>> code_lines('\"\"\"doc\"\"\"\\n\\n# a comment\\nx = 1  # why\\ndef f():\\n    \"\"\"doc\"\"\"\\n    return x\\n')
    3
    """
    tree = ast.parse(source)
    docs: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value,
                                                                                                      str):
                docs.update(range(first.lineno, (first.end_lineno or first.lineno) + 1))
    lines: set[int] = set()
    skip = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER,
            tokenize.ENCODING}
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type not in skip:
            lines.update(range(tok.start[0], tok.end[0] + 1))
    return len(lines - docs)


def files_at(rev: str) -> dict[str, str]:
    """Every Python file of the package at ``rev`` ("" for the working tree), by its path under the package."""
    if not rev:
        return {str(p.relative_to(ROOT / PKG)): p.read_text("utf-8") for p in (ROOT / PKG).rglob("*.py")}
    names = subprocess.run(["git", "ls-tree", "-r", "--name-only", rev, PKG], cwd=ROOT, check=True,
                           capture_output=True, text=True).stdout.split()
    return {n[len(PKG) + 1:]: subprocess.run(["git", "show", f"{rev}:{n}"], cwd=ROOT, check=True, capture_output=True,
                                             text=True).stdout for n in names if n.endswith(".py")}


def count(files: dict[str, str], parts: tuple[str, ...]) -> int:
    return sum(code_lines(text) for name, text in files.items()
               if any(name == p or (p.endswith("/") and name.startswith(p)) for p in parts))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", default="328e745", help="the baseline revision")
    parser.add_argument("--head", default="", help="the revision to compare ('': the working tree)")
    args = parser.parse_args()
    base, head = files_at(args.base), files_at(args.head)
    print(f"{'':10} {args.base:>10} {args.head or 'worktree':>10} {'ratio':>7}")
    for name, parts in (("plumbing", PLUMBING), ("shell", SHELL)):
        b, h = count(base, parts), count(head, parts)
        print(f"{name:10} {b:>10,} {h:>10,} {h / b:>7.3f}")


if __name__ == "__main__":
    main()
