"""Write docs/tested_versions.txt: the versions of every declared dependency installed when `make test` passed
(possym.dependencies.versions_passed_with). `make test` runs it after the suite; commit the file it changes."""

from pathlib import Path

from possym.dependencies import versions_passed_with

ROOT = Path(__file__).resolve().parent.parent
(ROOT / "docs" / "tested_versions.txt").write_text(versions_passed_with(ROOT / "pyproject.toml"))
