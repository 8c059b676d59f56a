"""Curve summaries: first passage and the gap between two runs' curves."""

from __future__ import annotations

import pytest

from possym.evaluate.curves import curve_gap
from possym.records import MetricsLog, first_step_at


def _evals(values: dict[int, float]) -> list[dict]:
    return [{"event": "eval", "step": s, "acc_hop1": v, "accuracy": v} for s, v in values.items()]


def test_first_passage_is_the_first_step_at_or_above_the_threshold():
    log = MetricsLog.from_json(_evals({100: 0.95, 0: 0.1, 50: 0.9}))
    assert log.first_step("acc_hop1") == 50  # 0.9 itself reaches 0.9
    assert log.first_step("acc_hop1", 0.99) is None
    assert log.first_step("acc_hop3") is None  # a hop count it never evaluated
    assert first_step_at([(100, 0.95), (0, 0.1), (50, 0.9 - 1e-12)]) == 100  # just short of it does not


def test_curve_gap_reads_shared_steps_only_and_finds_the_worst():
    a = _evals({0: 0.1, 50: 0.5, 100: 1.0, 150: 1.0})
    b = _evals({0: 0.1, 50: 0.8, 100: 0.9}) + [{"event": "final", "step": 100, "accuracy": 0.0}]
    a, b = MetricsLog.from_json(a), MetricsLog.from_json(b)
    gap = curve_gap(a, b)
    want = {"max": pytest.approx(0.3), "mean": pytest.approx(0.1333, abs=1e-4), "at_step": 50, "steps": 3}
    assert gap["acc_hop1"] == want
    assert curve_gap(a, a)["accuracy"]["max"] == 0.0  # a run against itself: no gap, the final record ignored
