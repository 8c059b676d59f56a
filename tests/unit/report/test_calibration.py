"""The positive control: every rule grades the paper's own data as agreeing, and would catch one that does not."""

from __future__ import annotations

import dataclasses
import math

from possym.paper import paper_numbers
from possym.report.calibration import AGREEING, calibrate, digitisation_error, failing, paper_evidence
from possym.report.claims import Evidence, check_claims


def test_every_rule_grades_the_papers_own_data_as_agreeing_or_says_why_it_cannot():
    rows = calibrate()
    assert not failing(rows), [(r.claim, r.verdict, r.detail) for r in failing(rows)]
    assert all(r.verdict in AGREEING or (r.verdict == "n/a" and r.data.startswith("n/a")) for r in rows)
    graded = {r.claim for r in rows if r.verdict != "n/a"}
    assert len(graded) >= 30 and "number task: n hops need n pure positional layers" in graded


def test_the_pre_registered_hop_reading_fails_the_paper_and_the_mended_one_passes():
    """Fig. 2A/2C: 1 hop at 0.9 by 2000 before L1 is pure (2200); 4 hops by 3500 with 3 pure positional layers."""
    c = next(c for c in check_claims(paper_evidence()) if c.claim.startswith("number task: n hops need"))
    readings = dict(r.split(": ") for r in c.readings.split("; "))
    assert readings["k layers (pre-registered)"] == "differs"
    assert readings["k − 1 layers (calibrated on Fig. 2A/2C)"] == "match" == c.verdict


def test_the_control_can_fail_a_paper_that_contradicts_a_claim():
    """The same evidence with the 4-hop curve learned before the 1-hop one fails the hop-order rule."""
    ev = paper_evidence()
    number = ev.tasks["number"][0]
    solved = dict(number.solved or {})
    solved["acc_hop1"], solved["acc_hop4"] = solved["acc_hop4"], solved["acc_hop1"]
    swapped = Evidence({"number": [dataclasses.replace(number, solved=solved)]})
    c = next(c for c in check_claims(swapped) if c.claim == "number-task hops are learned in order")
    assert c.verdict == "differs"


def test_hops_in_order_needs_a_spread_the_letter_tasks_curves_do_not_have():
    """The paper's letter hops are learned together: the same first steps, read as the number task's, fail the
    order rule's minimum spread."""
    number = paper_evidence().tasks["number"][0]
    together = {f"acc_hop{h}": 3000 + 50 * h for h in range(1, 5)} | {"accuracy": 3100}
    ev = Evidence({"number": [dataclasses.replace(number, solved=together)]})
    c = next(c for c in check_claims(ev) if c.claim == "number-task hops are learned in order")
    assert c.verdict == "differs" and "spread 2% of 6750" in c.per_seed


def test_the_digitisation_error_is_measured_on_the_figure_whose_truth_is_known():
    """Fig. 5A plots closed forms: the digitised points lie within 0.001 of them; the tolerance used (0.01) is
    the digitisation notes' own, ten times that."""
    err = digitisation_error()
    assert 0 < err < 0.001
    fig = paper_numbers()["fig5a_discrepancy_bounds"]
    assert math.isclose(fig["index"][0], 1 - math.cos(0.8), abs_tol=0.001)
