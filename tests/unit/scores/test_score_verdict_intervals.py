"""Purity verdicts with the intervals of their scores: which verdicts a box admits, sure and possible layers."""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np
import pytest

from possym.records import ScoreRecord
from possym.scores.dynamics import first_pure_steps, layer_sets, purity, purity_kinds


def test_the_kinds_of_a_box_are_the_verdicts_of_its_points_by_brute_force():
    """purity_kinds against a dense grid of points in the box, for random boxes around the thresholds."""
    rng = np.random.default_rng(0)
    for gamma in (0.1, 0.05):
        for _ in range(300):
            a, b = np.sort(rng.choice([rng.uniform(0, 1), rng.uniform(0.8, 1), rng.uniform(0, 0.2)], 2))
            c, d = np.sort(rng.choice([rng.uniform(0, 1), rng.uniform(0.8, 1), rng.uniform(0, 0.2)], 2))
            grid = {purity(p, s, gamma) for p, s in itertools.product(np.linspace(a, b, 41), np.linspace(c, d, 41))}
            got = purity_kinds((a + b) / 2, (c + d) / 2, gamma, pos_interval=(a, b), sym_interval=(c, d))
            assert got == grid, (gamma, a, b, c, d)


def test_a_box_clear_of_gamma_keeps_one_verdict_and_a_missing_interval_means_the_point():
    assert purity_kinds(0.99, 0.01, 0.1, (0.97, 1.0), (0.0, 0.03)) == {"positional"}
    assert purity_kinds(0.5, 0.5, 0.1, (0.4, 0.6), (0.45, 0.55)) == {""}
    assert purity_kinds(0.92, 0.05, 0.1, None, None) == {"positional"}
    assert purity_kinds(0.92, 0.05, 0.1, (float("nan"), 0.95), (0.0, 0.1)) == {"positional"}


def _row(step, layer, s_pos, s_sym, half=None):
    box = {} if half is None else dict(s_pos_low=s_pos - half, s_pos_high=s_pos + half, s_sym_low=s_sym - half,
                                       s_sym_high=s_sym + half)
    return ScoreRecord(step=step, query="last", layer=layer, head=0, s_pos=s_pos, s_sym=s_sym, entropy=1.0,
                       n_inputs=4, **box)


def _plain(rows):
    return [dataclasses.replace(r, s_pos_low=None, s_pos_high=None, s_sym_low=None, s_sym_high=None) for r in rows]


def test_layer_sets_separate_sure_from_possible_and_ever_from_final():
    rows = [
        _row(1, 0, 0.95, 0.02, 0.01),  # L0 surely positional at step 1, then mixed
        _row(2, 0, 0.60, 0.40, 0.05),
        _row(1, 1, 0.50, 0.50, 0.05),
        _row(2, 1, 0.91, 0.05, 0.03),  # L1 ends positional within noise only
        _row(2, 2, 0.02, 0.97, 0.02),  # L2 ends surely symbolic
    ]
    assert layer_sets(rows, "positional", 0.1, ever=True) == ({0}, {0, 1})
    assert layer_sets(rows, "positional", 0.1, ever=False) == (set(), {1})
    assert layer_sets(rows, "symbolic", 0.1, ever=False) == ({2}, {2})
    assert layer_sets(_plain(rows), "positional", 0.1, ever=False) == ({1}, {1})


def test_first_passage_says_whether_the_final_verdict_straddles_gamma():
    rows = [_row(1, 0, 0.5, 0.5, 0.02), _row(2, 0, 0.91, 0.05, 0.03), _row(1, 1, 0.5, 0.5, 0.02),
            _row(2, 1, 0.99, 0.01, 0.005)]
    first = {r.layer: r for r in first_pure_steps(rows, 0.1)}
    assert first[0].final_kind == "positional" and first[0].final_straddles is True
    assert first[1].final_kind == "positional" and first[1].final_straddles is False
    assert all(r.final_straddles is None for r in first_pure_steps(_plain(rows), 0.1))


@pytest.mark.parametrize("gamma", [0.0, 0.5])
def test_gamma_outside_its_range_is_refused(gamma):
    with pytest.raises(ValueError, match="must lie in"):
        purity_kinds(0.5, 0.5, gamma)
