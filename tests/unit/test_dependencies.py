"""The declared dependency floors against what is installed and against the committed tested versions
(docs/tested_versions.txt, written by `make test` when the suite passed, and docs/tested_versions_tl4.txt,
by `make test-tl4` in the TransformerLens 4 environment)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from packaging.utils import canonicalize_name
from packaging.version import Version

from possym.dependencies import TESTED_VERSIONS, below_floor, floor, installed, requirements, versions_passed_with

# Every test here runs in the TransformerLens 4 environment too (`make test-tl4`): its floors are checked there.
pytestmark = pytest.mark.tl4

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


def recorded_versions() -> dict[str, dict[str, Version]]:
    """Each environment's committed record: command -> distribution -> the version its suite passed with."""
    out: dict[str, dict[str, Version]] = {}
    for command, path in TESTED_VERSIONS.items():
        out[command] = {}
        for line in (ROOT / path).read_text().splitlines():
            if line and not line.startswith("#"):
                name, _, have = line.partition("==")
                out[command][name] = Version(have)
    return out


def test_every_requirement_holds_for_a_version_some_environment_passed_with():
    # Each of [tl] (transformer-lens 4.x) and [tl3] (3.x) is met by the environment that tests it.
    tested = recorded_versions()
    for req in requirements(PYPROJECT):
        if floor(req) is None:
            continue
        name = canonicalize_name(req.name)
        passed = {command: versions[name] for command, versions in tested.items() if name in versions}
        assert passed, f"{name} is declared but no docs/tested_versions*.txt records it"
        assert any(req.specifier.contains(v, prereleases=True) for v in passed.values()), (
            f"{req}: no environment passed with a version it allows ({passed})"
        )


def test_each_transformer_lens_major_is_recorded_by_its_own_environment():
    tested = recorded_versions()
    assert tested["make test"]["transformer-lens"].major == 3
    assert tested["make test-tl4"]["transformer-lens"].major == 4


def test_a_distribution_declared_twice_is_below_the_floor_only_below_the_lower_one(tmp_path):
    fake = tmp_path / "pyproject.toml"
    have = installed("packaging")
    fake.write_text(f'[project]\ndependencies = []\n[project.optional-dependencies]\n'
                    f'new = ["packaging>={have.major + 1}"]\nold = ["packaging>={have.major},<{have.major + 1}"]\n')
    assert below_floor(fake) == []
    old = f'old = ["packaging>={have.major},'
    fake.write_text(fake.read_text().replace(old, f'old = ["packaging>={have.major + 1},'))
    assert below_floor(fake) == [f"packaging {have} < floor {have.major + 1}"]


def test_the_tested_versions_file_lists_every_declared_distribution():
    names = {canonicalize_name(r.name) for r in requirements(PYPROJECT)}
    text = versions_passed_with(PYPROJECT)
    assert {line.split("==")[0].lstrip("# ").split(":")[0] for line in text.splitlines()[1:]} == names


def test_the_transformer_lens_4_environment_has_transformer_lens_4():
    if not os.environ.get("POSSYM_REQUIRE_TL4"):
        pytest.skip("outside `make test-tl4` (POSSYM_REQUIRE_TL4 unset), either major may be installed")
    have = installed("transformer-lens")
    assert have is not None and have.major >= 4, f"transformer-lens {have} in the TransformerLens 4 environment"
