"""Every worked example in the package's docstrings runs, module by module (as ``--doctest-modules``
would, but under the suite's own configuration, so that ``make test`` and a bare ``pytest`` agree).

Only modules with an example that runs are collected (one whose every example is ``+SKIP`` documents
a call it cannot make here), and each must run at least one: no case passes with nothing to run."""

from __future__ import annotations

import doctest
import importlib
import pkgutil
import re
from pathlib import Path

import pytest

import possym

SRC = Path(possym.__file__).parent
_RUNNABLE = re.compile(r"^\s*>>> (?!.*doctest: \+SKIP)", re.M)


def _source(name: str) -> Path:
    rel = Path(*name.split(".")[1:])
    package = SRC / rel / "__init__.py"
    return package if package.is_file() else SRC / rel.with_suffix(".py")


MODULES = sorted(m.name for m in pkgutil.walk_packages(possym.__path__, "possym.")
                 if not m.name.endswith("__main__") and _RUNNABLE.search(_source(m.name).read_text()))


def test_most_modules_carry_an_example_that_runs():
    every = [m.name for m in pkgutil.walk_packages(possym.__path__, "possym.") if not m.name.endswith("__main__")]
    assert len(MODULES) > len(every) / 2, sorted(set(every) - set(MODULES))


@pytest.mark.parametrize("name", MODULES)
def test_the_docstring_examples_of_every_module_run(name, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # an example that writes files writes them here
    try:
        module = importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name and exc.name.split(".")[0] != "possym":
            pytest.skip(f"{name} needs the optional package {exc.name}")
        raise
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE, verbose=False)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples in {name} failed (see the output above)"
    assert result.attempted > 0, f"{name}'s examples did not run"
