"""The training stage groups: its plan (the key, the memory budget, the runs that train alone and why,
the finished ones), what it prints and returns, the executor's use of it, and the caller's threads."""

from __future__ import annotations

import json

import pytest
import torch

from possym.config import load_config
from possym.errors import ConfigError
from possym.experiment import experiment_from_dict, run_experiment
from possym.runs import RunDir
from possym.stages.registry import get_stage
from possym.stages.training import TrainStageConfig, plan_training, train_group_runs, train_runs
from possym.train.group import member_memory_mb
from possym.train.trainee import GROUP_STATE


def _run(tmp_path, name, overrides):
    return RunDir.create(tmp_path / name, load_config("number", None, overrides), argv=["t"])


def test_the_plan_groups_by_key_within_the_budget_and_says_why_the_others_train_alone(tmp_path, tiny_overrides):
    same = [_run(tmp_path, f"s{i}", [*tiny_overrides, f"seeds.init={i}", f"train.lr={1e-3 * (i + 1)}"])
            for i in range(5)]
    wide = _run(tmp_path, "wide", [*tiny_overrides, "model.d_model=32"])
    extra = _run(tmp_path, "extra", [*tiny_overrides, "train.random_extra=2"])
    started = _run(tmp_path, "started", tiny_overrides)
    train_group_runs([started], progress=False)
    plan = plan_training([*same, wide, extra, started])
    assert [tuple(r.path.name for r in g) for g in plan.groups] == [("s0", "s1", "s2", "s3", "s4")]
    assert {r.path.name: why for r, why in plan.singles} == {
        "wide": "no other run shares its step",
        "extra": "train.random_extra gives its batches a new length every step",
    }
    assert [r.path.name for r in plan.skipped] == ["started"]

    budget = 2.5 * member_memory_mb(same[0].config)  # two members a group
    tight = plan_training(same, memory_budget_mb=budget)
    assert [len(g) for g in tight.groups] == [2, 2] and [r.path.name for r, _ in tight.singles] == ["s4"]
    assert "memory budget" in tight.singles[0][1]
    off = plan_training(same, group=False)
    assert not off.groups and {why for _, why in off.singles} == {"grouping is off"}


def test_train_runs_trains_groups_and_singles_prints_its_plan_and_restores_threads(tmp_path, tiny_overrides, capsys):
    runs = [_run(tmp_path, f"s{i}", [*tiny_overrides, f"seeds.init={i}"]) for i in range(2)]
    runs.append(_run(tmp_path, "wide", [*tiny_overrides, "model.d_model=32"]))
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        record = train_runs(runs, monitor=False, progress=False)
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)
    assert record.groups == ((str(runs[0].path), str(runs[1].path)),)
    assert record.singles == (str(runs[2].path),)
    assert list(record.finals) == [str(r.path) for r in runs]
    assert all(f["event"] == "final" for f in record.finals.values())
    out = capsys.readouterr()
    assert "training: group of 2 (number, fp32)" in out.out + out.err
    assert runs[0].load_state()["group"]["size"] == 2 and runs[2].load_state()["group"]["size"] == 1  # alone: of one
    again = train_runs(runs, monitor=False, progress=False)
    assert again.skipped == tuple(str(r.path) for r in runs) and again.finals == {}


def test_the_train_stage_groups_the_seeds_of_an_experiment(tmp_path, tiny_overrides):
    exp = experiment_from_dict({"tasks": ["number"], "seeds": [0, 1], "overrides": tiny_overrides, "retries": 0,
                                "stages": {"training": {"monitor": False, "progress": False}}})
    outcome = run_experiment(exp, tmp_path, progress=False)
    assert outcome.failed == {}
    states = [RunDir.open(tmp_path / "runs" / f"number-s{s}").load_state() for s in (0, 1)]
    assert all(st["group"]["size"] == 2 for st in states)
    logs = "".join(p.read_text() for p in (tmp_path / "logs").glob("*.log"))
    assert "group of 2" in logs


def test_units_for_several_workers_cut_a_fresh_group_into_balanced_groups_and_keep_a_resumed_one_whole(
        tmp_path, tiny_overrides):
    plan = get_stage("training").plan
    cfg = TrainStageConfig(progress=False)
    same = [_run(tmp_path, f"s{i}", [*tiny_overrides, f"seeds.init={i}"]) for i in range(5)]
    wide = _run(tmp_path, "wide", [*tiny_overrides, "model.d_model=32"])
    runs = [*same, wide]
    assert plan(runs, cfg, 1) == [[0, 1, 2, 3, 4], [5]]  # one worker: the whole group, one step
    assert plan(runs, cfg, 2) == [[0, 1, 2], [3, 4], [5]]  # two: no unit above ceil(6 / 2) runs
    assert sorted(i for u in plan(runs, cfg, 8) for i in u) == list(range(6))  # every run once, whatever
    # a group whose member has started (its state says it trained in a group) stays whole, as it was trained
    same[1].save_state({GROUP_STATE: {"size": 5, "models": []}})
    assert plan(runs, cfg, 2) == [[0, 1, 2, 3, 4], [5]]


def test_the_stage_settings_key_holds_grouping_and_budget_but_not_the_bar():
    stage = get_stage("training")
    key = stage.key_of(TrainStageConfig(progress=False, group=False, memory_budget_mb=100))
    assert key == {"monitor": True, "group": False, "memory_budget_mb": 100}
    assert json.dumps(key)  # plain data, as the memo writes it
    for bad in ({"group": "yes"}, {"memory_budget_mb": 0}, {"memory_budget_mb": True}):
        with pytest.raises(ConfigError):
            TrainStageConfig(**bad)  # type: ignore[arg-type]


def test_runs_that_share_a_task_and_data_seed_share_its_splits(tmp_path, tiny_overrides, monkeypatch):
    from possym.stages import training as stage

    made = []
    real = stage.make_splits
    monkeypatch.setattr(stage, "make_splits", lambda task, seed: made.append(seed) or real(task, seed))
    runs = [_run(tmp_path, f"{p}{s}", [*tiny_overrides, f"train.precision={p}", f"seeds.data={s}", f"seeds.init={s}"])
            for p in ("fp32", "bf16") for s in (0, 1)]
    record = train_runs(runs, monitor=False, progress=False)
    assert len(record.groups) == 2 and sorted(made) == [0, 1]  # two groups, each seed's data made once
