"""``lengthgen.precision=train``: a length curve runs in bf16 (autocast) where the run trained in bf16 and in fp32
otherwise; the memo keys the precision used, so an fp32 run's fp32 curves are done for ``train`` too, and the
entries made before the setting existed are done at its default."""

from __future__ import annotations

import pytest
import torch

import possym.stages.lengthgen as lengthgen
from possym.cli import main
from possym.experiment import experiment_from_dict, run_experiment
from possym.runs import RunDir, read_csv
from possym.stages.memo import run_memo

CURVE = ["lengthgen.grid=[0,5]", "lengthgen.n=8", "lengthgen.n_prefixes=2"]


@pytest.fixture
def spied(monkeypatch):
    """Each curve's autocast state as it is measured."""
    seen: list[bool] = []
    measure = lengthgen.measure_length_curve

    def spy(*args, **kwargs):
        seen.append(torch.is_autocast_enabled("cpu"))
        return measure(*args, **kwargs)

    monkeypatch.setattr(lengthgen, "measure_length_curve", spy)
    return seen


def test_the_curve_runs_in_the_precision_the_run_trained_in(tmp_path, tiny_overrides, spied):
    run = tmp_path / "run"
    assert main(["train", "--task", "letter", "--out", str(run), *tiny_overrides, "train.precision=fp32"]) == 0
    assert main(["lengthgen", str(run), *CURVE]) == 0  # the default, fp32
    fp32 = read_csv(run / "lengthgen.csv")
    assert run_memo(run).entry("lengthgen")["facts"] == {"precision": "fp32"} and spied == [False]
    # an entry written before the setting existed (no precision among its settings) is done at its default
    with run_memo(run).update() as stages:
        del stages["lengthgen"]["settings"]["precision"]
    assert main(["lengthgen", str(run), *CURVE, "lengthgen.precision=fp32"]) == 0 and spied == [False]

    # a run that trained in fp32: train is fp32, the curves already measured (not measured again)
    assert main(["lengthgen", str(run), *CURVE, "lengthgen.precision=train"]) == 0
    assert spied == [False] and read_csv(run / "lengthgen.csv") == fp32
    # ... and measured again, the same curve to the bit
    assert main(["lengthgen", str(run), *CURVE, "lengthgen.precision=train", "--redo"]) == 0
    assert spied == [False, False] and read_csv(run / "lengthgen.csv") == fp32
    entry = run_memo(run).entry("lengthgen")
    assert entry["settings"]["precision"] == "fp32" and entry["facts"] == {"precision": "fp32"}

    # a run that trained in bf16 (as auto resolves on a CPU with AMX): train is bf16
    RunDir.open(run).record_meta(precision="bf16")
    assert main(["lengthgen", str(run), *CURVE, "lengthgen.precision=train"]) == 0  # not done in bf16: measured
    assert spied == [False, False, True]
    entry = run_memo(run).entry("lengthgen")
    assert entry["settings"]["precision"] == "bf16" and entry["facts"] == {"precision": "bf16"}
    bf16 = read_csv(run / "lengthgen.csv")
    assert [(r["extra"], r["n_hops"]) for r in bf16] == [(r["extra"], r["n_hops"]) for r in fp32]

    # fp32 asked of a bf16 run stays fp32; bf16 asked of it is what train measured
    assert main(["lengthgen", str(run), *CURVE, "lengthgen.precision=fp32"]) == 0
    assert spied[-1] is False and read_csv(run / "lengthgen.csv") == fp32
    assert main(["lengthgen", str(run), *CURVE, "lengthgen.precision=bf16"]) == 0
    assert spied[-1] is True and read_csv(run / "lengthgen.csv") == bf16


def test_a_precision_it_does_not_know_is_refused(tmp_path, capsys):
    assert main(["lengthgen", str(tmp_path), "lengthgen.precision=fp16"]) == 2
    assert "lengthgen.precision='fp16'; allowed: ['fp32', 'bf16', 'train']" in capsys.readouterr().err


def test_an_experiment_finds_curves_done_in_the_precision_train_means(tmp_path, tiny_overrides):
    """The executor's skip check reads the settings as the run resolves them, as run_stage does: curves an fp32
    run measured in fp32 are skipped, not sent to be found done, when the spec asks for ``train``."""
    stages = {"training": {}, "lengthgen": {"grid": [0, 5], "n": 8, "n_prefixes": 2, "precision": "fp32"}}
    spec = {"tasks": ["letter"], "overrides": [*tiny_overrides, "train.precision=fp32"], "retries": 0,
            "stages": stages}
    first = run_experiment(experiment_from_dict(spec), tmp_path, progress=False)
    assert ("letter-s0", "lengthgen") in first.ran and first.failed == {}
    stages["lengthgen"]["precision"] = "train"
    again = run_experiment(experiment_from_dict(spec), tmp_path, progress=False)
    assert again.ran == [] and ("letter-s0", "lengthgen") in again.skipped, (again.ran, again.skipped)
