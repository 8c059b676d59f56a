"""train.precision=auto: bf16 only where the processor has bfloat16 arithmetic, resolved by the trainer on
the machine that trains, recorded in meta.json; the config keeps "auto"."""

from __future__ import annotations

import pytest
import torch

import possym.hardware as hardware
from possym.config import ConfigError, TrainConfig, load_config


def test_cpu_flags_are_read_from_cpuinfo(tmp_path):
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nflags\t\t: fpu avx2 fma avx512_bf16\n\nprocessor\t: 1\nflags\t\t: fpu\n")
    assert hardware.cpu_flags(str(info)) == {"fpu", "avx2", "fma", "avx512_bf16"}  # the first CPU's
    assert hardware.cpu_flags(str(tmp_path / "absent")) == frozenset()


@pytest.mark.parametrize("flags, expected", [({"avx2", "fma"}, "fp32"), ({"avx2", "avx512_bf16"}, "bf16"),
                                             ({"amx_bf16"}, "bf16"), (set(), "fp32")])
def test_auto_is_bf16_exactly_where_the_cpu_has_bf16_instructions(monkeypatch, flags, expected):
    monkeypatch.setattr(hardware, "cpu_flags", lambda: frozenset(flags))
    assert hardware.auto_precision("cpu") == expected
    assert TrainConfig(precision="auto", device="cpu").precision == "auto"  # one file, one run on every machine
    assert load_config("number", "quick", ["train.device=cpu"]).train.precision == "auto"  # quick says auto


def test_the_trainer_resolves_auto_records_it_and_a_resumed_run_keeps_it_on_another_machine(tmp_path, monkeypatch):
    from possym.runs import RunDir, ensure_run
    from possym.train.trainee import run_precision

    cfg, cpu = load_config("number", "quick", ["train.device=cpu"]), torch.device("cpu")
    monkeypatch.setattr(hardware, "cpu_flags", lambda: frozenset({"amx_bf16"}))
    run = ensure_run(tmp_path / "run", cfg)
    assert run_precision(run, cpu, resumed=False) == "bf16" and run.meta["precision"] == "bf16"
    monkeypatch.setattr(hardware, "cpu_flags", lambda: frozenset({"avx2"}))  # another machine, without bf16
    assert ensure_run(tmp_path / "run", cfg).config.train.precision == "auto"  # the same file is the same run
    assert run_precision(run, cpu, resumed=True) == "bf16"  # it continues in the precision it started in
    assert run_precision(run, cpu, resumed=False) == "fp32" and run.meta["precision"] == "fp32"  # from scratch
    assert RunDir.open(run.path).config == cfg


def test_explicit_precisions_are_kept_and_a_wrong_one_names_auto():
    assert TrainConfig(precision="bf16").precision == "bf16"  # asked for, even where emulated
    assert hardware.auto_precision("meta") == "fp32"
    with pytest.raises(ConfigError, match="'auto'"):
        TrainConfig(precision="fp8")


def test_a_run_saved_as_bf16_or_fp32_is_reopened_by_auto_and_keeps_its_precision(tmp_path, monkeypatch):
    from possym.errors import RunError
    from possym.runs import ensure_run

    monkeypatch.setattr(hardware, "cpu_flags", lambda: frozenset({"avx2"}))  # auto: fp32 on this "machine"
    bf16 = ensure_run(tmp_path / "bf16", load_config("number", "quick", ["train.precision=bf16"]))
    reopened = ensure_run(tmp_path / "bf16", load_config("number", "quick"))  # quick says auto
    assert reopened.config.train.precision == bf16.config.train.precision == "bf16"
    from possym.train.trainee import run_precision

    assert run_precision(reopened, torch.device("cpu"), resumed=True) == "bf16"  # and it resumes in bf16
    with pytest.raises(RunError, match="train.precision"):  # an explicit request is still a request
        ensure_run(tmp_path / "bf16", load_config("number", "quick", ["train.precision=fp32"]))
    fp16 = ensure_run(tmp_path / "fp16", load_config("number", "quick", ["train.precision=fp16"]))
    assert fp16.config.train.precision == "fp16"
    with pytest.raises(RunError, match="train.precision"):  # auto never means fp16
        ensure_run(tmp_path / "fp16", load_config("number", "quick"))


def test_auto_runs_that_run_in_different_precisions_are_never_planned_into_one_group(tmp_path, monkeypatch):
    from possym.runs import ensure_run
    from possym.stages.training import plan_training
    from possym.train.trainee import GROUP_STATE

    monkeypatch.setattr(hardware, "cpu_flags", lambda: frozenset({"avx2"}))  # this machine: fp32
    runs = [ensure_run(tmp_path / f"r{s}", load_config("number", "quick", ["train.device=cpu", f"seeds.init={s}"]))
            for s in range(3)]
    runs[0].record_meta(precision="bf16")  # a member started in a group on a machine with bf16
    runs[0].save_state({"step": 50, GROUP_STATE: {"size": 3, "slot": 0, "models": []}})
    assert [[r.path.name for r in g] for g in plan_training(runs).groups] == [["r0"], ["r1", "r2"]]
    monkeypatch.setattr(hardware, "cpu_flags", lambda: frozenset({"amx_bf16"}))  # on a bf16 machine they may
    assert [[r.path.name for r in g] for g in plan_training(runs).groups] == [["r0", "r1", "r2"]]
