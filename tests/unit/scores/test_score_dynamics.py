"""Purity, its first-passage tally, normalised entropy and the max-accuracy step (paper A §3.1, App. E)."""

from __future__ import annotations

import pytest

from possym.records import ScoreRecord, TallyRecord
from possym.scores.dynamics import (
    first_pure_steps,
    normalise_entropy,
    purity,
    purity_tally,
)


def test_purity_thresholds_are_inclusive_and_mirror_each_other():
    assert purity(0.9, 0.1, 0.1) == "positional"
    assert purity(0.1, 0.9, 0.1) == "symbolic"
    assert purity(0.95, 0.06, 0.05) == ""
    assert purity(1.0, 1.0, 0.1) == ""  # uniform attention is neither
    with pytest.raises(ValueError, match="gamma"):
        purity(1.0, 0.0, 0.5)


def _rows(layer, series):
    return [ScoreRecord(step=s, query="last", layer=layer, head=0, s_pos=p, s_sym=y, entropy=e, n_inputs=4)
            for s, p, y, e in series]


def test_first_passage_counts_a_head_from_its_first_pure_step_even_if_it_drifts():
    rows = _rows(0, [(0, 1, 1, 3.0), (50, 0.95, 0.02, 1.0), (100, 0.4, 0.6, 0.5)])  # the paper's number-task L0
    rows += _rows(1, [(0, 1, 1, 3.0), (50, 0.5, 0.5, 2.0), (100, 0.01, 0.99, 0.1)])
    rows += _rows(2, [(0, 1, 1, 3.0), (50, 1, 1, 3.0), (100, 0.9, 0.9, 2.9)])
    rows += _rows(3, [(0, 0.02, 0.98, 3.0), (50, 1, 1, 3.0), (100, 0.99, 0.01, 2.9)])  # symbolic, then positional
    first = {f.layer: f for f in first_pure_steps(rows, gamma=0.1)}
    assert (first[0].kind, first[0].step, first[0].final_kind) == ("positional", 50, "")
    assert first[0].final_kind_step is None
    assert (first[1].kind, first[1].step, first[1].final_kind_step) == ("symbolic", 100, 100)
    assert first[2].step is None
    assert (first[3].kind, first[3].step, first[3].final_kind, first[3].final_kind_step) == (
        "symbolic", 0, "positional", 100)
    del first[3]
    tally = purity_tally(first.values(), [0, 50, 100], 0.1)
    assert tally == [
        TallyRecord(gamma=0.1, step=0, positional=0, symbolic=0),
        TallyRecord(gamma=0.1, step=50, positional=1, symbolic=0),
        TallyRecord(gamma=0.1, step=100, positional=1, symbolic=1),
    ]
    assert first_pure_steps(rows, gamma=0.1, query="hop1") == []


def test_entropy_is_min_max_normalised_per_layer_across_steps():
    rows = _rows(0, [(0, 1, 1, 3.0), (50, 1, 1, 2.0), (100, 1, 1, 1.0)]) + _rows(1, [(0, 1, 1, 2.0), (50, 1, 1, 2.0)])
    out = normalise_entropy(rows)
    assert [r.entropy_norm for r in out] == [1.0, 0.5, 0.0, 0.0, 0.0]
    assert rows[0].entropy_norm is None  # new records: the inputs are left as they were
