"""The demo's quick preset is a check of the pipeline at small scale, not a replication: graded from its
committed tables, no claim whose paper value depends on the paper's depth, training length or width is held
against that value (each is n/a and says why), and the claims that do not depend on them are graded."""

from __future__ import annotations

from pathlib import Path

import pytest

from possym.report.claimspec import load_claims
from possym.report.grading import check_claims
from possym.report.replication import evidence

QUICK = Path(__file__).resolve().parents[3] / "docs" / "reproduce_quick"


@pytest.fixture(scope="module")
def claims():
    return check_claims(evidence([QUICK]), power=False)


def test_no_step_layer_or_accuracy_claim_of_the_paper_is_graded_on_the_quick_preset(claims):
    # The quick preset has half the paper's depth and 4,000 of its 6,750 steps, at its width (64 RoPE planes).
    scaled = {s.id for s in load_claims() if {"depth", "steps"} & set(s.preset)}
    assert {"number-max-step", "number-hop1-step", "number-positional-layers", "letter-length-800",
            "number-table1"} <= scaled
    for c in claims:
        if c.id in scaled:
            assert c.verdict == "n/a", (c.id, c.verdict)
            assert "the paper's value holds for its" in c.ours and "these seeds have" in c.ours


def test_the_quick_presets_scale_free_claims_are_graded(claims):
    graded = {c.id: c.verdict for c in claims if c.verdict != "n/a"}
    assert {"number-hop-order", "letter-before-number", "positional-number-only", "letter-extrapolates",
            "fast-rotations"} <= set(graded)
