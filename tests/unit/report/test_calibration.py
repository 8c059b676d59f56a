"""The controls: every calibrated rule grades the paper's own data as agreeing through the path that grades us,
no negative control (the other task's evidence, our seeds moved past the margin) grades a match, and the counts
keep derived, identity and n/a rows apart."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import pytest

from possym.paper import paper_numbers
from possym.report.calibration import (
    AGREEING,
    CalibrationRecord,
    calibrate,
    calibration_counts,
    digitisation_error,
    paper_evidence,
    swap_tasks,
)
from possym.report.evidence import Evidence
from possym.report.grading import check_claims, spec_of

DOCS = Path(__file__).resolve().parents[3] / "docs" / "reproduce_paper"


@pytest.fixture(scope="module")
def ours() -> Evidence:
    from possym.report.replication import evidence

    return evidence([DOCS, DOCS / "seeds_letter", DOCS / "hop_queries", DOCS / "hop_flow"])


def test_every_derived_rule_grades_the_papers_own_data_as_agreeing_at_our_seed_counts(ours):
    rows = calibrate(ours)
    derived = [r for r in rows if r.calibration == "derived"]
    assert len(derived) >= 10 and all(r.verdict in AGREEING for r in derived), \
        [(r.claim, r.verdict, r.detail) for r in derived if r.verdict not in AGREEING]
    assert all(r.passes is None and r.verdict == "n/a" for r in rows if r.calibration == "n/a")


def test_no_negative_control_grades_a_match_where_the_rule_tells_the_tasks_apart(ours):
    rows = {r.id: r for r in calibrate(ours)}
    for claim_id in ("number-hop-order", "letter-no-positional", "number-positional-layers", "number-table1",
                     "letter-extrapolates", "letter-length-800", "number-length-100"):
        assert rows[claim_id].other_task not in ("", "match"), (claim_id, rows[claim_id].other_task)
    moved = [r for r in rows.values() if r.shifted]
    assert moved and all(r.shifted != "match" for r in moved)


def test_the_control_can_fail_a_paper_that_contradicts_a_claim():
    """The paper's evidence with the 4-hop curve learned before the 1-hop one fails the hop-order rule."""
    ev = paper_evidence()
    number = ev.tasks["number"][0]
    solved = dict(number.solved or {})
    solved["acc_hop1"], solved["acc_hop4"] = solved["acc_hop4"], solved["acc_hop1"]
    swapped = Evidence({"number": [dataclasses.replace(number, solved=solved)]})
    row = next(r for r in calibrate(swapped, [spec_of("number-hop-order")]))
    assert row.calibration == "derived"
    c = next(c for c in check_claims(swapped, [spec_of("number-hop-order")], power=False))
    assert c.verdict == "differs"


def test_swapping_the_tasks_moves_every_table_with_its_task():
    ev = paper_evidence()
    swapped = swap_tasks(ev)
    assert swapped.tasks["letter"] == ev.tasks["number"] and swapped.tasks["number"] == ev.tasks["letter"]


def test_the_counts_never_count_an_n_a_row_as_a_pass():
    rows = [CalibrationRecord("a", "a", "derived", "", "match", "", passes=True),
            CalibrationRecord("b", "b", "identity", "", "consistent", "", passes=False),
            CalibrationRecord("c", "c", "n/a", "", "n/a", "")]
    assert calibration_counts(rows) == {"derived": (1, 1), "identity": (0, 1), "n/a": (0, 1)}


def test_the_digitisation_error_is_measured_on_the_figure_whose_truth_is_known():
    """Fig. 5A plots closed forms: the digitised points lie within 0.001 of them; the tolerance used (0.01) is
    the digitisation notes' own, ten times that."""
    err = digitisation_error()
    assert 0 < err < 0.001
    fig = paper_numbers()["fig5a_discrepancy_bounds"]
    assert math.isclose(fig["index"][0], 1 - math.cos(0.8), abs_tol=0.001)
