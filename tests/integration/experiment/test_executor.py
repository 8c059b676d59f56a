"""The one executor: a stage defined in this file runs through a reproduction and through a sweep; a rerun
does only what is missing; a changed stage setting reruns that stage alone; a changed run setting is
refused; a failing run is retried, then reported, while the others finish; the caller's threads stay."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pytest
import torch

from possym.errors import ConfigError, PossymError
from possym.experiment import apply_overrides, experiment_from_dict, run_experiment
from possym.experiment.reproduce import reproduction
from possym.runs import ARTIFACTS, Artifact, RunDir, StepSpec
from possym.stages.memo import ExperimentMemo
from possym.stages.registry import Execution, Stage, StageContext, get_stage, register_stage, unregister_stage
from possym.sweep.engines import LocalEngine
from possym.sweep.run import run_sweep


@dataclass(frozen=True)
class CountConfig:
    """A stage of this file: it counts the run's checkpoints and writes the count into the run directory."""

    tag: str = "a"


def count_checkpoints(ctx: StageContext, cfg: CountConfig) -> int:
    run = ctx.run
    n = len(run.checkpoint_steps())
    calls = run.path / "count_calls.txt"
    calls.write_text(calls.read_text() + f"{cfg.tag}\n" if calls.exists() else f"{cfg.tag}\n")
    (run.path / "count.json").write_text(json.dumps({"tag": cfg.tag, "checkpoints": n}))
    return n


COUNT = Stage("count_checkpoints", CountConfig, count_checkpoints, scope="run")


# ---- a new stage, its config and its table included, as a module of possym.stages would declare it -------------
# (toy stage: from here to NORMS, the lines test_a_new_stage_fits_in_about_80_lines counts)

@dataclass(frozen=True)
class NormsConfig(Execution):
    """The Frobenius norm of each layer's query weights at each of ``steps`` (where it runs: ``threads``,
    ``device``, :class:`~possym.stages.registry.Execution`, whose defaults the stage declares)."""

    steps: tuple[StepSpec, ...] = ("final",)
    scale: float = 1.0

    def __post_init__(self) -> None:
        if not self.scale > 0:
            raise ConfigError(f"weight_norms scale={self.scale} must be > 0")


# Its table is one spec line in the run directory's registry (at import: an engine's worker imports this file too).
ARTIFACTS.setdefault("toy", Artifact("toy"))
ARTIFACTS.setdefault("toy_norms", Artifact("toy/norms.csv", columns="step:int layer:int norm:float threads:int"))


def weight_norms(ctx: StageContext, cfg: NormsConfig) -> pd.DataFrame:
    """Loads (``ctx.model``), calls (a norm) and writes (``ctx.write_table``, ``ctx.record``): the executor holds the
    run's lock, has set the threads and resolved the device, and writes settings.json beside the table."""
    steps = list(dict.fromkeys(ctx.run.resolve_step(s) for s in cfg.steps))
    rows = [{"step": at, "layer": layer, "norm": cfg.scale * float(w.detach().norm()),
             "threads": torch.get_num_threads()} for at in steps for layer, w in enumerate(ctx.model(at).W_Q)]
    table = pd.DataFrame(rows)
    ctx.write_table("toy_norms", table)
    ctx.record(steps_measured=steps, device_used=str(ctx.device))
    return table


NORMS = Stage("weight_norms", NormsConfig, weight_norms, scope="run", threads=1, device="cpu", record="toy")


@pytest.fixture
def count_stage():
    register_stage(COUNT, replace=True)
    register_stage(NORMS, replace=True)
    yield COUNT
    unregister_stage(COUNT.name)
    unregister_stage(NORMS.name)


def test_a_new_stage_fits_in_about_80_lines_and_gets_its_context_from_the_executor(tmp_path, tiny_overrides,
                                                                                   count_stage):
    lines = Path(__file__).read_text().split("\n")
    start = next(i for i, line in enumerate(lines) if line.startswith("# (toy stage"))
    end = next(i for i, line in enumerate(lines) if line.startswith("NORMS = Stage("))
    assert end - start + 1 <= 80, f"the toy stage takes {end - start + 1} lines"
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        exp = tiny_experiment(tiny_overrides, {"weight_norms": {"steps": ["best", "final"], "scale": 2.0}})
        assert run_experiment(exp, tmp_path, progress=False).failed == {}
        assert torch.get_num_threads() == 2  # the stage ran with its own (1), and the caller's came back
    finally:
        torch.set_num_threads(before)
    run = RunDir.open(tmp_path / "runs" / "number-s0")
    table = run.read_table("toy_norms")
    steps = list(dict.fromkeys(run.resolve_step(s) for s in ("best", "final")))
    model = run.load_model(steps[-1])
    assert list(table.threads.unique()) == [1] and sorted(table.step.unique()) == sorted(steps)
    want = [2 * float(w.detach().norm()) for w in model.W_Q]
    assert table[table.step == steps[-1]].norm.tolist() == pytest.approx(want)
    settings = json.loads((run.path / "toy" / "settings.json").read_text())
    assert settings == {"steps": ["best", "final"], "scale": 2.0, "threads": None, "device": None,
                        "steps_measured": steps, "device_used": "cpu"}
    # the memo has it done: a rerun, on more threads, measures nothing again
    assert run_experiment(apply_overrides(exp, ["weight_norms.threads=2"]), tmp_path, progress=False).ran == []
    with pytest.raises(ConfigError, match="weight_norms.threads=0 must be a whole number >= 1"):
        apply_overrides(exp, ["weight_norms.threads=0"])


def tiny_experiment(tiny, stages, **fields):
    return experiment_from_dict({"tasks": ["number"], "seeds": [0, 1], "overrides": tiny, "retries": 0,
                                 "stages": stages, **fields})


def calls(out: Path, rid: str) -> list[str]:
    return (out / "runs" / rid / "count_calls.txt").read_text().split()


def test_a_stage_defined_in_a_test_file_runs_through_a_reproduction(tmp_path, tiny_overrides, count_stage):
    exp = reproduction("quick", seeds=(0,), skip=("data", "theory", "discrepancy", "lengthgen", "canonical", "score"),
                       overrides=tiny_overrides)
    exp = dataclasses.replace(exp, tasks=("number",),
                              stages=(*[(n, c) for n, c in exp.stages if n != "report"],
                                      ("count_checkpoints", CountConfig("r")), ("weight_norms", NormsConfig())))
    outcome = run_experiment(exp, tmp_path, progress=False)
    assert outcome.failed == {}
    assert json.loads((tmp_path / "runs" / "number-s0" / "count.json").read_text()) == {"tag": "r", "checkpoints": 4}
    assert len(RunDir.open(tmp_path / "runs" / "number-s0").read_table("toy_norms")) == 2  # its two layers


@pytest.mark.long
def test_a_stage_defined_in_a_test_file_runs_through_a_sweep_on_worker_processes(tmp_path, tiny_overrides,
                                                                                  count_stage):
    exp = tiny_experiment(tiny_overrides, {"count_checkpoints": {"tag": "s"}, "weight_norms": {}},
                          variants={"a": [], "b": []})
    outcome = run_sweep(exp, tmp_path, LocalEngine(2), summary=False)
    assert outcome.failed == {} and sorted(outcome.ran) == sorted(
        (f"{v}-number-s{s}", stage) for v in "ab" for s in (0, 1)
        for stage in ("training", "count_checkpoints", "weight_norms"))
    assert (tmp_path / "runs" / "b-number-s1" / "toy" / "settings.json").is_file()  # written on a worker
    for rid in ("a-number-s0", "b-number-s1"):
        assert calls(tmp_path, rid) == ["s"]


def test_a_rerun_does_only_what_is_missing_and_a_changed_setting_reruns_that_stage_alone(
        tmp_path, tiny_overrides, count_stage):
    exp = tiny_experiment(tiny_overrides, {"count_checkpoints": {"tag": "a"},
                                           "score": {"n_inputs": 4, "figures": False, "frequency": False}})
    first = run_experiment(exp, tmp_path, progress=False)
    assert len(first.ran) == 6 and first.changed == []
    ckpt = tmp_path / "runs" / "number-s0" / "checkpoints" / "step_000030.safetensors"
    before = ckpt.stat().st_mtime_ns
    again = run_experiment(exp, tmp_path, progress=False)
    assert again.ran == [] and len(again.skipped) == 6
    changed = run_experiment(apply_overrides(exp, ["count_checkpoints.tag=b"]), tmp_path, progress=False)
    assert sorted(changed.ran) == [("number-s0", "count_checkpoints"), ("number-s1", "count_checkpoints")]
    assert changed.changed == ["stages.count_checkpoints.tag"]
    assert calls(tmp_path, "number-s0") == ["a", "b"] and ckpt.stat().st_mtime_ns == before
    # threads or a device are where a stage runs, not what it computes: nothing reruns
    assert run_experiment(apply_overrides(exp, ["count_checkpoints.tag=b", "score.threads=2"]), tmp_path,
                          progress=False).ran == []


def test_a_changed_run_setting_is_refused_before_anything_runs(tmp_path, tiny_overrides):
    exp = tiny_experiment(tiny_overrides, {})
    run_experiment(exp, tmp_path, progress=False)
    with pytest.raises(PossymError, match="train.lr differ"):
        run_experiment(apply_overrides(exp, ["train.lr=0.5"]), tmp_path, progress=False)


def failing(ctx: StageContext, cfg: CountConfig) -> None:
    if ctx.run.config.seeds.init == 1:
        raise RuntimeError("seed 1 fails on purpose")


def test_a_failing_run_is_retried_then_reported_and_the_others_and_the_experiment_stages_go_on(
        tmp_path, tiny_overrides, count_stage):
    stage = register_stage(Stage("fails_for_seed_1", CountConfig, failing, scope="run"), replace=True)
    try:
        exp = tiny_experiment(tiny_overrides, {"fails_for_seed_1": {}, "count_checkpoints": {}}, retries=1)
        outcome = run_experiment(exp, tmp_path, progress=False)
    finally:
        unregister_stage(stage.name)
    assert list(outcome.failed) == ["number-s1"] and "on purpose" in outcome.failed["number-s1"]
    assert outcome.retried == ["number-s1"]
    assert (tmp_path / "runs" / "number-s0" / "count.json").exists()
    assert not (tmp_path / "runs" / "number-s1" / "count.json").exists()  # later stages leave it out
    entry = ExperimentMemo(tmp_path).entry("number-s1", "fails_for_seed_1")
    assert entry["status"] == "failed" and entry["attempts"] == 2
    # the line every command prints names the error and the log that holds all of it
    log = tmp_path / "logs" / "number-s1.log"
    assert outcome.failure_lines() == [f"FAILED number-s1: RuntimeError: seed 1 fails on purpose (see {log})"]
    assert "seed 1 fails on purpose" in log.read_text()


def test_the_executor_leaves_the_callers_thread_count_as_it_found_it(tmp_path, tiny_overrides):
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        exp = tiny_experiment(tiny_overrides, {"score": {"n_inputs": 4, "figures": False, "threads": 1}}, threads=1)
        run_experiment(exp, tmp_path, progress=False)
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)


def test_an_unknown_stage_or_setting_is_an_error_that_names_the_known_ones(tiny_overrides):
    with pytest.raises(PossymError, match="unknown stage 'scores'; known"):
        tiny_experiment(tiny_overrides, {"scores": {}})
    with pytest.raises(PossymError, match="unknown key 'score.inputs'"):
        tiny_experiment(tiny_overrides, {"score": {"inputs": 3}})
    exp = tiny_experiment(tiny_overrides, {"score": {}})
    with pytest.raises(PossymError, match="neither a run section"):
        apply_overrides(exp, ["lengthgen.n=5"])
    assert get_stage("score").settings_from({"n_inputs": 7}).n_inputs == 7


class InProcessEngine:
    """An engine that runs each unit here, reporting an exception as the unit's error (as the pool does)."""

    def __init__(self):
        self.units = []

    def map(self, fn, items):
        for item in items:
            self.units.append(item.id)
            try:
                yield item, fn(item), None
            except Exception as exc:
                yield item, None, repr(exc)


def test_runs_that_train_as_one_group_share_a_unit_and_a_failure_in_one_leaves_the_other_done(
        tmp_path, tiny_overrides, count_stage):
    stage = register_stage(Stage("fails_for_seed_1", CountConfig, failing, scope="run"), replace=True)
    try:
        exp = tiny_experiment(tiny_overrides, {"fails_for_seed_1": {}, "count_checkpoints": {}}, retries=1)
        engine = InProcessEngine()
        outcome = run_experiment(exp, tmp_path, engine=engine, progress=False)
    finally:
        unregister_stage(stage.name)
    # seeds 0 and 1 share a batched step, so they go as one unit; the retry sends only the run that failed
    assert engine.units == ["number-s0+1", "number-s1"]
    assert list(outcome.failed) == ["number-s1"] and outcome.retried == ["number-s1"]
    assert (tmp_path / "runs" / "number-s0" / "count.json").exists()  # its later stage ran despite its companion
    train = ExperimentMemo(tmp_path).entry("number-s0", "training")
    assert train["status"] == "done" and train["attempts"] == 1


def test_a_stage_an_engine_cannot_ship_is_refused_by_name_before_anything_runs(tmp_path, tiny_overrides):
    stage = register_stage(Stage("lambda_stage", CountConfig, lambda ctx, cfg: 1, scope="run"), replace=True)
    try:
        exp = tiny_experiment(tiny_overrides, {"lambda_stage": {}})
        with pytest.raises(PossymError, match="stage 'lambda_stage' cannot be sent to an engine's workers"):
            run_experiment(exp, tmp_path, engine=InProcessEngine(), progress=False)
        assert ExperimentMemo(tmp_path).entry("number-s0", "training") is None  # not even training started
        assert run_experiment(exp, tmp_path, progress=False).failed == {}  # in this process it is fine
    finally:
        unregister_stage(stage.name)


def write_summary(ctx: StageContext, cfg: CountConfig) -> int:
    (ctx.exp.path / "summary.txt").write_text(f"{sorted(ctx.exp.runs)}\n")
    return len(ctx.exp.runs)


def always_fails(ctx: StageContext, cfg: CountConfig) -> None:
    raise RuntimeError("every run fails on purpose")


def test_when_every_run_fails_the_experiment_stages_do_not_replace_what_the_last_call_made(
        tmp_path, tiny_overrides):
    summary = register_stage(Stage("summary", CountConfig, write_summary, scope="experiment", always=True),
                             replace=True)
    fails = register_stage(Stage("always_fails", CountConfig, always_fails, scope="run"), replace=True)
    try:
        first = run_experiment(tiny_experiment(tiny_overrides, {"summary": {}}), tmp_path, progress=False)
        assert first.results["summary"] == 2
        made = (tmp_path / "summary.txt").read_text()
        outcome = run_experiment(tiny_experiment(tiny_overrides, {"always_fails": {}, "summary": {}}), tmp_path,
                                 progress=False)
    finally:
        unregister_stage(summary.name)
        unregister_stage(fails.name)
    assert sorted(outcome.failed) == ["number-s0", "number-s1"]
    assert ("experiment", "summary") in outcome.skipped and "summary" not in outcome.results
    assert (tmp_path / "summary.txt").read_text() == made


def test_once_a_group_has_trained_its_runs_are_analysed_one_unit_each(tmp_path, tiny_overrides, count_stage):
    engine = InProcessEngine()
    run_experiment(tiny_experiment(tiny_overrides, {}), tmp_path, engine=engine, progress=False)
    assert engine.units == ["number-s0+1"]  # the two seeds train as one batched step
    engine = InProcessEngine()
    outcome = run_experiment(tiny_experiment(tiny_overrides, {"count_checkpoints": {}}), tmp_path, engine=engine,
                             progress=False)
    assert outcome.failed == {} and sorted(engine.units) == ["number-s0", "number-s1"]
    assert calls(tmp_path, "number-s1") == ["a"]
