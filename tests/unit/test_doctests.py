"""Every worked example in the package's docstrings runs, module by module (as ``--doctest-modules``
would, but under the suite's own configuration, so that ``make test`` and a bare ``pytest`` agree)."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import possym

MODULES = sorted(m.name for m in pkgutil.walk_packages(possym.__path__, "possym.") if not m.name.endswith("__main__"))


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
