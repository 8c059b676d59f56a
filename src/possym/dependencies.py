"""The declared dependency floors, and the versions the suite passed with.

``pyproject.toml`` declares a floor (``>=``) for every dependency, core and extra; each floor must be
a version the suite has passed with. ``make test`` writes the versions installed when the suite
passed to ``docs/tested_versions.txt`` (:func:`versions_passed_with`, by ``.ci/tested_versions.py``),
which is committed; ``tests/unit/test_dependencies.py`` fails when an installed version lies below a
declared floor (:func:`below_floor`), so an environment older than the floors says so rather than
failing somewhere inside transformers.

A distribution may be declared twice, in extras that cannot be installed together: ``[tl]`` is
transformer-lens 4.x (``TransformerBridge``), ``[tl3]`` is 3.x (``HookedTransformer``). An installed
version is below the floor when it lies below the lowest floor declared for it, and each major is
tested in its own environment: ``make test-tl4`` writes ``docs/tested_versions_tl4.txt``
(:data:`TESTED_VERSIONS`).

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

# The committed record of each environment's tested versions, by the command that passed there.
TESTED_VERSIONS = {"make test": "docs/tested_versions.txt", "make test-tl4": "docs/tested_versions_tl4.txt"}


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
    """``"name X < floor Y"`` for each installed distribution below the lowest floor declared for it (absent
    extras are skipped; transformer-lens 3.9 is not below ``[tl]``'s 4.3, since ``[tl3]`` declares 3.9)."""
    lowest: dict[str, tuple[str, Version]] = {}
    for req in requirements(pyproject):
        low, name = floor(req), canonicalize_name(req.name)
        if low is not None and (name not in lowest or low < lowest[name][1]):
            lowest[name] = (req.name, low)
    out = []
    for declared, low in lowest.values():
        have = installed(declared)
        if have is not None and have < low:
            out.append(f"{declared} {have} < floor {low}")
    return out


def versions_passed_with(pyproject: str | Path, command: str = "make test") -> str:
    """``name==version`` for every distribution ``pyproject`` declares (installed or not), sorted, with Python's;
    the header names the ``command`` (a key of :data:`TESTED_VERSIONS`) whose suite passed."""
    names = sorted({canonicalize_name(r.name) for r in requirements(pyproject)})
    python = platform.python_version()
    lines = [f"# the versions `{command}` passed with (written by .ci/tested_versions.py); python {python}"]
    for name in names:
        have = installed(name)
        lines.append(f"{name}=={have}" if have is not None else f"# {name}: not installed")
    return "\n".join(lines) + "\n"
