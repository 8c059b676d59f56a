"""docs/replication.md and docs/reproduce_paper/claims.csv cannot drift: from each other, or from the rules; and
the page's first screen says what a reader can cite."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from possym.records import ClaimRecord, read_records
from possym.report.calibration import CalibrationRecord
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


@pytest.fixture(scope="module")
def committed() -> tuple[list[ClaimRecord], list[CalibrationRecord], str]:
    claims, calibration = read(DOCS / "reproduce_paper")
    return claims, calibration, (DOCS / "replication.md").read_text("utf-8")


def test_every_number_in_replication_md_is_the_one_in_claims_csv(committed):
    claims, _, page = committed
    tallied = [c for c in claims if c.kind in ("empirical", "finding")]
    rows = _md_rows(page)
    assert len(rows) == len(tallied)
    for row, want in zip(rows, table_rows(tallied), strict=True):
        assert row == list(want.values())
    counts = tally(claims)
    line = page.split("**Tally**", 1)[1].splitlines()[0]
    for verdict in ("match", "consistent", "partial", "differs", "unresolved"):
        if counts.get(verdict):
            assert f"{counts[verdict]} {verdict}" in line


def test_the_first_screen_summarises_before_the_table_and_names_every_unresolved_claim(committed):
    claims, _, page = committed
    head = page.split("| claim | paper | ours over seeds |", 1)[0]
    assert "## Summary" in head and "**Replicates" in head and "**Differs" in head
    for c in claims:
        if c.verdict == "unresolved":
            assert c.claim.split(" (Fig.")[0] in head
    assert "hop mix" in head and "Beyond the paper's text" in head
    assert "pre-registered" not in head.lower() or "no rule here has a dated pre-registration" in page.lower()


def test_the_committed_claims_are_what_todays_rules_give_on_the_committed_tables():
    """Regrading the committed tables reproduces claims.csv exactly: a rule changed without regrading fails here."""
    committed = read_records(DOCS / "reproduce_paper" / "claims.csv", ClaimRecord)
    again = regrade(TABLES)
    assert [c.claim for c in again] == [c.claim for c in committed]
    for new, old in zip(again, committed, strict=True):
        assert new.to_csv() == old.to_csv(), new.claim


def test_the_committed_calibration_counts_what_it_can_check_and_passes_every_derived_row(committed):
    _, calibration, page = committed
    derived = [r for r in calibration if r.calibration == "derived"]
    assert derived and all(r.passes for r in derived)
    assert all(r.passes is None for r in calibration if r.calibration == "n/a")
    assert f"derived: {len(derived)} of {len(derived)} pass" in page


@pytest.mark.parametrize("verdict", ["match", "consistent", "differs"])
def test_a_claims_summary_gives_mean_sd_range_and_seeds_for_a_number(verdict):
    c = ClaimRecord("x", "", "0.74", "", verdict, "", seeds="0,1,2", seed_mean=0.4, seed_sd=0.1, seed_min=0.3,
                    seed_max=0.5)
    assert claim_summary(c) == "0.40 ± 0.10 (0.30–0.50, 3 seeds)"


def test_the_packages_copy_of_the_replications_claims_is_the_committed_one():
    """The demo's page shows the replication's verdict beside its own from possym/data/replication_claims.csv: it
    must be docs/reproduce_paper/claims.csv, byte for byte (copy it after every regrade)."""
    copy = ROOT / "src" / "possym" / "data" / "replication_claims.csv"
    assert copy.read_bytes() == (DOCS / "reproduce_paper" / "claims.csv").read_bytes()
