"""The declared dependency floors against what is installed and against the committed tested versions
(docs/tested_versions.txt, written by `make test` when the suite passed)."""

from __future__ import annotations

from pathlib import Path

from packaging.utils import canonicalize_name
from packaging.version import Version

from possym.dependencies import below_floor, floor, requirements, versions_passed_with

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = ROOT / "pyproject.toml"


def test_no_installed_dependency_lies_below_its_declared_floor():
    assert below_floor(PYPROJECT) == []


def test_an_installed_version_below_a_floor_is_named(tmp_path):
    fake = tmp_path / "pyproject.toml"
    fake.write_text('[project]\ndependencies = ["torch>=99", "numpy>=1"]\n'
                    '[project.optional-dependencies]\nx = ["not-a-package-possym-knows>=1"]\n')
    (line,) = below_floor(fake)
    assert line.startswith("torch ") and line.endswith("< floor 99")


def test_every_dependency_but_type_stubs_declares_a_floor():
    assert [str(r) for r in requirements(PYPROJECT) if floor(r) is None and not r.name.startswith("types-")] == []


def test_every_floor_is_at_most_the_version_the_suite_passed_with():
    tested = {}
    for line in (ROOT / "docs" / "tested_versions.txt").read_text().splitlines():
        if line and not line.startswith("#"):
            name, _, have = line.partition("==")
            tested[name] = Version(have)
    for req in requirements(PYPROJECT):
        low = floor(req)
        if low is not None:
            name = canonicalize_name(req.name)
            assert name in tested, f"{name} is declared but docs/tested_versions.txt does not record it"
            assert tested[name] >= low, f"{name}: floor {low} is above the tested {tested[name]}"


def test_the_tested_versions_file_lists_every_declared_distribution():
    names = {canonicalize_name(r.name) for r in requirements(PYPROJECT)}
    text = versions_passed_with(PYPROJECT)
    assert {line.split("==")[0].lstrip("# ").split(":")[0] for line in text.splitlines()[1:]} == names
