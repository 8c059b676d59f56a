"""``possym theory`` goes through the one memo (OUT/log/experiment.json): the theory run from the command line
then inside an experiment over the same OUT runs once, and the other way round; --redo and a changed setting
rerun it."""

from __future__ import annotations

from pathlib import Path

import pytest

from possym.cli import main
from possym.experiment import experiment_from_dict, run_experiment
from possym.stages.memo import EXPERIMENT, ExperimentMemo

THEORY = {"quick": True, "samples": 30, "n_max": 40}
THEORY_ARGS = ["theory.quick=true", "theory.samples=30", "theory.n_max=40"]


def experiment(tiny: list[str], stages: dict, seeds: tuple[int, ...] = (0,)):
    return experiment_from_dict({"tasks": ["number"], "seeds": list(seeds), "overrides": tiny, "retries": 0,
                                 "stages": stages})


def files(folder: Path) -> dict[str, int]:
    """Every file under ``folder`` with its modification time: what a stage that ran would change."""
    return {str(p.relative_to(folder)): p.stat().st_mtime_ns for p in folder.rglob("*") if p.is_file()}


@pytest.mark.long
def test_the_theory_run_from_the_cli_then_inside_an_experiment_runs_once(tmp_path, tiny_overrides, capsys):
    assert main(["theory", "--out", str(tmp_path), *THEORY_ARGS]) == 0
    tables = files(tmp_path / "theory")
    outcome = run_experiment(experiment(tiny_overrides, {"theory": THEORY}), tmp_path, progress=False)
    assert (EXPERIMENT, "theory") in outcome.skipped and (EXPERIMENT, "theory") not in outcome.ran
    assert files(tmp_path / "theory") == tables
    capsys.readouterr()
    assert main(["theory", "--out", str(tmp_path), *THEORY_ARGS]) == 0  # read back, with the same summary
    printed = capsys.readouterr().out
    assert "theory: done with these settings" in printed and "read back; 0 verification rows off" in printed
    assert "Theorem 3.2: where the bounds hold" in printed and files(tmp_path / "theory") == tables
    assert main(["theory", "--out", str(tmp_path), *THEORY_ARGS, "--redo"]) == 0
    assert ExperimentMemo(tmp_path).entry(EXPERIMENT, "theory")["attempts"] == 2
    assert main(["theory", "--out", str(tmp_path), "theory.quick=true", "theory.samples=31",
                 "theory.n_max=40"]) == 0  # another setting: the stage reruns
    assert ExperimentMemo(tmp_path).entry(EXPERIMENT, "theory")["settings"]["samples"] == 31


def test_the_theory_inside_an_experiment_then_from_the_cli_is_read_back(tmp_path, tiny_overrides, capsys):
    outcome = run_experiment(experiment(tiny_overrides, {"theory": THEORY}), tmp_path, progress=False)
    assert (EXPERIMENT, "theory") in outcome.ran
    tables = files(tmp_path / "theory")
    capsys.readouterr()
    assert main(["theory", "--out", str(tmp_path), *THEORY_ARGS]) == 0
    assert "theory: done with these settings" in capsys.readouterr().out
    assert files(tmp_path / "theory") == tables
