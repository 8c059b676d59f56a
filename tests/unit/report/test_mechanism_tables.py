"""The committed mechanism tables are records: each reads back as its stage's record type and, written again the
way the stages and collectors write it (its records' frame, with the stacked ``task``/``seed`` columns in front),
gives the committed file byte for byte; the summary read from them is the committed summary."""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path

import pandas as pd
import pytest

from possym.records import Record, frame
from possym.report.mechanisms import TABLES, mechanism_summary
from possym.runs import ARTIFACTS
from possym.stages.length_protocol import CLAIMS

ROOT = Path(__file__).resolve().parents[3] / "docs" / "reproduce_paper" / "mechanisms"
# A committed file's name, less its seed suffix, -> its record (a stacked run artifact takes the artifact's name).
KINDS: dict[str, type[Record]] = {**{k: a.record for k, a in ARTIFACTS.items() if a.record},
                                  "dilution_sharpen_controls_letter": ARTIFACTS["dilution_sharpen"].record,
                                  "length_protocol_claims": CLAIMS}
# Committed tables that are no stage's table, and why.
NOT_RECORDS = {
    "summary": "what each seed shows, computed from the stacked tables (checked below)",
    "summary_by_seed": "the summary pivoted, a column per seed",
    "length_protocol_claims_by_reading": "the claims pivoted, a column per reading",
    "dilution_controls_prediction_letter": "the letter seeds' dilution controls pooled and rounded by make.py",
    "dilution_controls_knockouts_letter": "the letter seeds' dilution controls pooled and rounded by make.py",
    "tau_letter_verdicts": "the swap-temperature sweep's verdicts, no mechanism stage's",
    "tau_number_verdicts": "the swap-temperature sweep's verdicts, no mechanism stage's",
}


def _name(path: Path) -> str:
    return re.sub(r"_s\d+$", "", path.stem)  # fp32_retrain/dilution_knockout_s3.csv: a seed's dilution_knockout


FILES = [p for p in sorted(ROOT.rglob("*.csv")) if _name(p) not in NOT_RECORDS]


def stacked(path: Path, kind: type[Record]) -> pd.DataFrame:
    """The committed table at ``path`` read as ``kind`` records, the stacking's ``task`` and ``seed`` columns apart,
    and framed again as the stages and the collectors frame it (collect_tables; make.py collect)."""
    rows = list(csv.DictReader(io.StringIO(path.read_text())))
    keys = [k for k in ("task", "seed") if rows and k in rows[0] and k not in kind.columns()]
    table = frame([kind.from_csv({k: v for k, v in r.items() if k not in keys}) for r in rows], kind)
    for i, key in enumerate(keys):
        table.insert(i, key, [int(r[key]) if key == "seed" else r[key] for r in rows])
    return table


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_committed_mechanism_table_reads_as_its_record_and_writes_back_byte_for_byte(path):
    name = _name(path)
    assert name in KINDS, f"{path}: a committed table no record reads; give it one or say why in NOT_RECORDS"
    assert stacked(path, KINDS[name]).to_csv(index=False) == path.read_text()


def test_the_summary_read_from_the_committed_tables_is_the_committed_summary():
    tables = {name: stacked(ROOT / f"{name}.csv", KINDS[name]) for name in TABLES if (ROOT / f"{name}.csv").is_file()}
    assert mechanism_summary(tables).to_csv(index=False) == (ROOT / "summary.csv").read_text()
