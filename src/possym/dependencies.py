"""The declared dependency floors, and the versions the suite passed with.

``pyproject.toml`` declares a floor (``>=``) for every dependency, core and extra; each floor must be
a version the suite has passed with. ``make test`` writes the versions installed when the suite
passed to ``docs/tested_versions.txt`` (:func:`versions_passed_with`, by ``.ci/tested_versions.py``),
which is committed; ``tests/unit/test_dependencies.py`` fails when an installed version lies below a
declared floor (:func:`below_floor`), so an environment older than the floors says so rather than
failing somewhere inside transformers.

Example:
    >>> from packaging.requirements import Requirement
    >>> floor(Requirement("transformer-lens>=3.9,<4"))
    <Version('3.9')>
    >>> floor(Requirement("ruff")) is None
    True
"""

from __future__ import annotations

import platform
import tomllib
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version


def requirements(pyproject: str | Path) -> list[Requirement]:
    """Every requirement ``pyproject`` declares: the core dependencies, then each extra's."""
    project = tomllib.loads(Path(pyproject).read_text())["project"]
    lines = list(project["dependencies"])
    for extra in project.get("optional-dependencies", {}).values():
        lines += extra
    return [Requirement(line) for line in lines]


def floor(requirement: Requirement) -> Version | None:
    """The version a requirement's ``>=`` names (the highest, if several), None without one."""
    floors = [Version(s.version) for s in requirement.specifier if s.operator == ">="]
    return max(floors) if floors else None


def installed(name: str) -> Version | None:
    """The installed version of distribution ``name`` (None: not installed)."""
    try:
        return Version(version(name))
    except PackageNotFoundError:
        return None


def below_floor(pyproject: str | Path) -> list[str]:
    """``"name X < floor Y"`` for each installed distribution below its declared floor (absent extras are skipped)."""
    out = []
    for req in requirements(pyproject):
        low, have = floor(req), installed(req.name)
        if low is not None and have is not None and have < low:
            out.append(f"{req.name} {have} < floor {low}")
    return out


def versions_passed_with(pyproject: str | Path) -> str:
    """``name==version`` for every distribution ``pyproject`` declares (installed or not), sorted, with Python's."""
    names = sorted({canonicalize_name(r.name) for r in requirements(pyproject)})
    python = platform.python_version()
    lines = [f"# the versions `make test` passed with (written by .ci/tested_versions.py); python {python}"]
    for name in names:
        have = installed(name)
        lines.append(f"{name}=={have}" if have is not None else f"# {name}: not installed")
    return "\n".join(lines) + "\n"
