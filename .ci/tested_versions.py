"""Write the versions of every declared dependency installed when a suite passed (possym.dependencies.versions_passed_with)
to the committed file of that environment: `make test` runs it after the main suite, `make test-tl4` (the
TransformerLens 4 environment) with the argument "make test-tl4". Commit the file it changes."""

import sys
from pathlib import Path

from possym.dependencies import TESTED_VERSIONS, versions_passed_with

ROOT = Path(__file__).resolve().parent.parent
command = sys.argv[1] if len(sys.argv) > 1 else "make test"
(ROOT / TESTED_VERSIONS[command]).write_text(versions_passed_with(ROOT / "pyproject.toml", command))
