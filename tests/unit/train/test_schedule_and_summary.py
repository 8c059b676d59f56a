import pytest

from possym.evaluate.curves import learning_summary
from possym.records import MetricsLog
from possym.train.schedule import lr_factor


def test_schedule_warms_up_linearly_then_decays_to_zero():
    assert lr_factor(0, 750, 6750) == 0.0
    assert lr_factor(375, 750, 6750) == pytest.approx(0.5)
    assert lr_factor(750, 750, 6750) == pytest.approx(1.0)
    assert lr_factor(3750, 750, 6750) == pytest.approx(0.5)
    assert lr_factor(6750, 750, 6750) == 0.0
    assert lr_factor(9999, 750, 6750) == 0.0


def test_learning_summary_reads_first_passage_and_best_step():
    metrics = [
        {"event": "eval", "step": 0, "accuracy": 0.1, "acc_hop1": 0.1, "acc_hop2": 0.1},
        {"event": "eval", "step": 50, "accuracy": 0.6, "acc_hop1": 0.95, "acc_hop2": 0.3},
        {"event": "eval", "step": 100, "accuracy": 0.97, "acc_hop1": 0.99, "acc_hop2": 0.95},
        {"event": "eval", "step": 150, "accuracy": 0.97, "acc_hop1": 0.98, "acc_hop2": 0.96},
        {"event": "final", "step": 150, "accuracy": 0.96, "acc_hop1": 0.99, "acc_hop2": 0.94},
    ]
    s = learning_summary(MetricsLog.from_json(metrics))
    assert learning_summary(metrics) == s  # the log's lines as JSON objects read the same
    assert s["first_step"] == {"acc_hop1": 50, "acc_hop2": 100, "accuracy": 100}
    assert s["best_step"] == 100  # ties go to the earliest step
    assert s["final_test"]["acc_hop2"] == 0.94
    assert MetricsLog.from_json(metrics).first_step("acc_hop3") is None
