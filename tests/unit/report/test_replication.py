"""docs/replication.md and docs/reproduce_paper/claims.csv cannot drift: from each other, or from the rules."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from possym.records import ClaimRecord, read_records
from possym.report.replication import claim_summary, read, regrade, table_rows, tally

ROOT = Path(__file__).resolve().parents[3]
DOCS = ROOT / "docs"
TABLES = [DOCS / "reproduce_paper", *sorted((DOCS / "reproduce_paper").glob("seeds_*")),
          DOCS / "reproduce_paper" / "hop_queries", DOCS / "reproduce_paper" / "hop_flow"]


def _md_rows(text: str) -> list[list[str]]:
    """The rows of the page's first table (the whole claims table)."""
    block = text.split("| claim | paper | ours over seeds |", 1)[1].split("\n\n", 1)[0]
    rows = [line for line in block.splitlines()[2:] if line.startswith("|")]
    return [[c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", row)[1:-1]] for row in rows]


def test_every_number_in_replication_md_is_the_one_in_claims_csv():
    claims, _ = read(DOCS / "reproduce_paper")
    page = (DOCS / "replication.md").read_text("utf-8")
    empirical = [c for c in claims if c.kind == "empirical"]
    rows = _md_rows(page)
    assert len(rows) == len(empirical)
    for row, want in zip(rows, table_rows(empirical), strict=True):
        assert row == list(want.values())
    counts = tally(claims)
    for verdict in ("match", "partial", "differs"):
        if counts.get(verdict):
            assert f"{counts[verdict]} {verdict}" in page.split("**Tally**", 1)[1].splitlines()[0]


def test_the_committed_claims_are_what_todays_rules_give_on_the_committed_tables():
    """Regrading the committed tables reproduces claims.csv exactly: a rule changed without regrading fails here."""
    committed = read_records(DOCS / "reproduce_paper" / "claims.csv", ClaimRecord)
    again = regrade(TABLES)
    assert [c.claim for c in again] == [c.claim for c in committed]
    for new, old in zip(again, committed, strict=True):
        assert new.to_csv() == old.to_csv(), new.claim


def test_the_committed_calibration_passes_on_every_row():
    _, calibration = read(DOCS / "reproduce_paper")
    assert calibration and all(r.passes for r in calibration)


@pytest.mark.parametrize("verdict", ["match", "partial", "differs"])
def test_a_claims_summary_gives_mean_sd_range_and_seeds_for_a_number(verdict):
    c = ClaimRecord("x", "", "0.74", "", verdict, "", seeds="0,1,2", seed_mean=0.4, seed_sd=0.1, seed_min=0.3,
                    seed_max=0.5)
    assert claim_summary(c) == "0.40 ± 0.10 (0.30–0.50, 3 seeds)"
