"""Aggregation: hop order, mean ± sd across seeds (against the standard library), tallies; retries and skips."""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from pathlib import Path

import pytest

from possym.experiment.spec import RunSpec, experiment_from_dict
from possym.records import MetricsLog, MetricsRecord
from possym.stages.memo import ExperimentMemo
from possym.sweep.aggregate import across_seeds, hop_order, summary_markdown
from possym.sweep.run import run_sweep


def evals(rows):
    return MetricsLog.from_json([{"event": "eval", "step": s, "accuracy": min(accs),
                                  **{f"acc_hop{h + 1}": a for h, a in enumerate(accs)}} for s, accs in rows])


@pytest.mark.parametrize(
    ("rows", "order"),
    [
        ([(100, [0.95, 0.2, 0.1, 0.1]), (200, [1, 0.91, 0.5, 0.4]), (300, [1, 1, 0.9, 0.97])], "1<2<3=4"),
        ([(100, [0.1, 0.1]), (200, [0.99, 0.95])], "1=2"),
        ([(100, [0.1, 0.95]), (200, [0.5, 0.96])], "2"),  # hop 1 never learned: left out
        ([(100, [0.1, 0.2])], ""),
    ],
)
def test_hop_order_sorts_hops_by_the_step_they_are_learned(rows, order):
    assert hop_order(evals(rows))[0] == order


def test_summary_is_mean_and_sample_sd_across_seeds_and_tallies_the_rest():
    facts = [{"variant": "v", "task": "number", "seed": s, "test_accuracy": a, "hop_order": o}
             for s, a, o in ((0, 0.9, "1<2"), (1, 0.7, "1<2"), (2, 0.95, "1=2"))]
    facts.append({"variant": "w", "task": "number", "seed": 0, "test_accuracy": 0.5, "hop_order": "1"})
    v, w = across_seeds(facts)
    mean, sd, n = v["test_accuracy"]
    assert n == 3 and mean == pytest.approx(statistics.mean([0.9, 0.7, 0.95]))
    assert sd == pytest.approx(statistics.stdev([0.9, 0.7, 0.95]))
    assert v["hop_order"] == "1<2 ×2, 1=2 ×1"
    assert w["test_accuracy"] == (0.5, 0.0, 1)  # one seed: no spread
    assert "0.850 ± 0.132" in summary_markdown([v])


class SequentialEngine:
    """An in-process engine for the retry logic: calls fn on each item, reports exceptions as errors."""

    def __init__(self):
        self.calls = []

    def map(self, fn, items):
        for item in items:
            self.calls.append(item.run.id)
            try:
                yield item, fn(item), None
            except Exception as exc:
                yield item, None, repr(exc)


@dataclass(frozen=True)
class NoSettings:
    pass


def fails_for_seed_1(ctx, cfg: NoSettings) -> None:
    if ctx.run.config.seeds.init == 1:
        raise RuntimeError("always fails")


@pytest.fixture
def flaky_stage():
    from possym.stages.registry import Stage, register_stage, unregister_stage

    stage = register_stage(Stage("fails_for_seed_1", NoSettings, fails_for_seed_1, scope="run"), replace=True)
    yield stage
    unregister_stage(stage.name)


def test_failed_runs_are_retried_a_bounded_number_of_times_then_reported(tmp_path, flaky_stage, tiny_overrides):
    exp = experiment_from_dict({"tasks": ["number"], "seeds": [0, 1], "retries": 2,
                                "overrides": [*tiny_overrides, "train.steps=2"],
                                "stages": {"training": {"group": False}, "fails_for_seed_1": {}}})
    engine = SequentialEngine()
    outcome = run_sweep(exp, tmp_path, engine, summary=False)
    assert engine.calls == ["number-s0", "number-s1", "number-s1", "number-s1"]
    assert list(outcome.failed) == ["number-s1"] and "always fails" in outcome.failed["number-s1"]
    assert outcome.retried == ["number-s1"]  # sent round again; number-s0 succeeded at once
    entry = ExperimentMemo(tmp_path).memo("number-s1").read()
    assert entry["fails_for_seed_1"]["attempts"] == 3 and entry["fails_for_seed_1"]["status"] == "failed"
    assert entry["training"]["attempts"] == 1  # the retries redo only the stage that failed
    # A second sweep skips the finished run and tries the failed one again.
    engine = SequentialEngine()
    outcome = run_sweep(exp, tmp_path, engine, summary=False)
    assert ("number-s0", "fails_for_seed_1") in outcome.skipped and engine.calls == ["number-s1"] * 3


class DyingEngine:
    """An engine whose worker starts the unit's first stage and dies there, as a killed job or a lost node."""

    def map(self, fn, items):
        from possym.stages.memo import ExperimentMemo

        for item in items:
            stage, cfg = item.stages[0]
            ExperimentMemo(Path(item.out)).memo(item.run.id).start(stage.name, stage.key_of(cfg))
            yield item, None, "slurm job 7_0 ended CANCELLED without a result"


def test_a_run_whose_worker_died_mid_stage_has_the_engines_account_in_its_resume_log(tmp_path, tiny_overrides):
    exp = experiment_from_dict({"tasks": ["number"], "seeds": [0], "retries": 1, "overrides": tiny_overrides,
                                "stages": {"training": {"group": False}}})
    outcome = run_sweep(exp, tmp_path, DyingEngine(), summary=False)
    assert outcome.retried == ["number-s0"] and "CANCELLED" in outcome.failed["number-s0"]
    entry = ExperimentMemo(tmp_path).entry("number-s0", "training")
    # Not left 'running' with no error: failed, with what the engine saw, after two attempts.
    assert entry["status"] == "failed" and entry["attempts"] == 2 and "CANCELLED" in entry["error"]


def test_trial_facts_read_the_best_and_the_final_curve_and_the_layers_ever_pure(tmp_path, tiny_overrides):
    """A hand-made run: best = the earliest step at the maximum validation accuracy (50, not 100); the
    length curve of each checkpoint lands under its own key; L0 possibly positional, L1 surely."""


    from possym.config import load_config
    from possym.model.gptj import GPTJ
    from possym.records import LengthRecord, ScoreRecord
    from possym.runs import RunDir
    from possym.sweep.aggregate import arms_markdown, trial_facts

    run = RunDir.create(tmp_path / "run", load_config("number", None, tiny_overrides), argv=["test"])
    model = GPTJ(run.model_config)
    for step, acc in ((0, 0.1), (50, 0.95), (100, 0.95)):
        run.save_checkpoint(step, model.state_dict())
        run.log(MetricsRecord("eval", step, acc, hops={1: acc, 2: acc}))
    run.log(MetricsRecord("final", 100, 0.9, hops={1: 0.9}))
    point = dict(n_hops=0, seq_len=20, n=10, ci_low=0.0, ci_high=1.0, n_prefixes=1, prefix_sd=0.0,
                 cluster_low=0.0, cluster_high=1.0, mode="shared")
    run.write("lengthgen", [LengthRecord(extra=100, accuracy=a, correct=int(10 * a), step=s, **point)
                            for s, a in ((50, 0.7), (100, 0.4))])
    rows = []
    for step in (50, 100):
        for layer, (p, y, half) in enumerate(((0.88, 0.05, 0.04), (0.99, 0.01, 0.005))):
            rows.append(ScoreRecord(step=step, query="last", layer=layer, head=0, s_pos=p, s_sym=y, entropy=1.0,
                                    n_inputs=10, s_pos_low=p - half, s_pos_high=p + half, s_sym_low=y - half,
                                    s_sym_high=y + half))
    run.write("scores", rows)
    trial = RunSpec("B-number-s0", "B", "number", 0, None, tuple(tiny_overrides))
    facts = trial_facts(trial, run.path)
    assert facts["best_step"] == 50
    assert facts["len_best_100"] == 0.7 and facts["len_acc_100"] == 0.4
    assert facts["ever_positional"] == "L1 (+L0)" and facts["ever_symbolic"] == "none"
    assert facts["L0_s_pos_best"] == 0.88 and (facts["L0_peak_s_pos"], facts["L0_peak_step"]) == (0.88, 50)
    table = arms_markdown(across_seeds([facts]), lengths=(100,))
    assert "| B | number | 1 |" in table and "0.70 ± 0.00 / 0.40 ± 0.00" in table and "L1 (+L0)" in table
