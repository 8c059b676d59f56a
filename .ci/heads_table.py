"""Write a `possym heads` run's results into its row of docs/heads.md: `make heads-gemma` runs it after
scoring Gemma-3-270M. Arguments: the run's --out folder and the row's label (its first cell). Commit the
file it changes; `git diff docs/heads.md` shows whether the remade numbers differ from the committed ones."""

import json
import sys
from pathlib import Path

from possym.heads.table import replace_row, summary_row

ROOT = Path(__file__).resolve().parent.parent
out, label = Path(sys.argv[1]), sys.argv[2]
row = summary_row(label, json.loads((out / "summary.json").read_text()))
docs = ROOT / "docs" / "heads.md"
docs.write_text(replace_row(docs.read_text(), label, row))
sys.stdout.write(row + "\n")
