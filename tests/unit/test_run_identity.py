"""A run's identity is what it computes: the execution keys (threads, device, compile, ...) are no part of it,
for a run as for a stage, and a run resumed with other ones trains on with them."""

from __future__ import annotations

import dataclasses

import pytest

from possym.config import EXECUTION_KEYS, RunConfig, TrainConfig, load_config
from possym.errors import RunError
from possym.runs import RunDir, config_differences, ensure_run

HOW = ["train.threads=3", "train.device=cpu", "train.compile=true", "train.log=tensorboard", "train.log_every=5",
       "train.state_every=7"]


def test_a_default_run_config_is_the_paper_number_task():
    assert RunConfig() == load_config("number") and RunConfig().task.name == "number"


def test_every_execution_key_of_a_run_is_a_training_field_and_named_by_the_overrides_here():
    train_keys = {f.name for f in dataclasses.fields(TrainConfig)} & set(EXECUTION_KEYS)
    assert {o.split("=")[0] for o in HOW} == {f"train.{k}" for k in train_keys}


def test_a_run_reopened_with_other_execution_keys_is_the_same_run_and_takes_them_for_this_session(tmp_path):
    cfg = load_config("number", "quick", ["train.threads=1"])
    ensure_run(tmp_path / "run", cfg)
    other = load_config("number", "quick", HOW)
    assert config_differences(cfg, other) == []
    reopened = ensure_run(tmp_path / "run", other)
    assert (reopened.config.train.threads, reopened.config.train.device, reopened.config.train.compile) == (3, "cpu",
                                                                                                          True)
    assert RunDir.open(tmp_path / "run").config == cfg  # config.yaml keeps what it was created with
    with pytest.raises(RunError, match=r"\(train.lr differ\)"):  # what it computes is still its identity
        ensure_run(tmp_path / "run", load_config("number", "quick", [*HOW, "train.lr=3e-4"]))


def test_a_stage_and_a_run_leave_out_the_same_execution_keys():
    from possym.stages.registry import Stage

    @dataclasses.dataclass(frozen=True)
    class Settings:
        n: int = 1
        threads: int | None = None
        device: str = "auto"

    stage = Stage("identity_probe", Settings, lambda ctx, cfg: [], scope="run")
    assert stage.key_of(Settings(2, threads=4, device="cpu")) == stage.key_of(Settings(2)) == {"n": 2}
    a, b = load_config("number", "quick"), load_config("number", "quick", ["train.threads=4", "train.device=cpu"])
    assert config_differences(a, b) == []


def test_a_run_resumed_with_other_threads_trains_on_to_its_end(tmp_path, tiny_overrides):
    from possym.api import train_model
    from possym.tasks import make_splits
    from possym.train.loop import train

    cfg = load_config("number", "quick", [*tiny_overrides, "train.state_every=10"])
    run = ensure_run(tmp_path / "run", cfg)

    class Stop(Exception):
        pass

    def stop(info):
        if info["step"] == 20:
            raise Stop

    with pytest.raises(Stop):
        train(run, make_splits(cfg.task, cfg.seeds.data), on_step=stop)
    resumed = train_model(load_config("number", "quick", [*tiny_overrides, "train.state_every=10",
                                                          "train.threads=2"]), tmp_path / "run", progress=False)
    assert resumed.finished and resumed.config.train.threads == 2
    final = resumed.dir.metrics_log().final
    assert final is not None and final.precision == resumed.dir.meta["precision"] in ("fp32", "bf16")  # what ran
    assert resumed.config.train.precision == "auto"
