"""Directories written before the executor by possym itself (a reproduction, a sweep and a canonical grid
of the previous layout, made with that version's own commands and kept in tests/fixtures) are still
recognised: nothing finished is retrained or re-analysed, and what changed since reruns."""

from __future__ import annotations

import tarfile
from pathlib import Path

import pytest
import yaml

from possym.experiment import apply_overrides, experiment_from_dict, load_experiment, run_experiment
from possym.experiment.reproduce import reproduction

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "layouts_v1.tar.gz"
TINY = ["model.n_layers=1", "model.d_model=16", "model.d_mlp=32", "task.n_train=2000", "task.n_val=100",
        "train.steps=20", "train.eval_every=10", "train.checkpoint_every=10", "train.eval_size=50",
        "train.warmup_steps=2", "train.threads=1"]
# What the previous version's defaults were, now that the defaults are the paper preset's: a spec that named
# no preset names them (the migrated specs do the same).
OLD_DEFAULTS = ["model.embd_dropout=null", "model.activation=gelu_new", "train.state_every=null"]


@pytest.fixture
def old(tmp_path) -> Path:
    with tarfile.open(FIXTURE) as tar:
        tar.extractall(tmp_path, filter="data")
    return tmp_path


def mtimes(folder: Path) -> dict[str, int]:
    return {str(p.relative_to(folder)): p.stat().st_mtime_ns for p in folder.rglob("*.safetensors")}


@pytest.mark.long
def test_an_old_reproduction_is_moved_into_runs_and_its_finished_stages_are_not_redone(old):
    out = old / "reproduce"
    exp = reproduction("quick", skip=("canonical", "theory", "discrepancy"),
                       overrides=[*TINY, "task.n_test=200", "score.n_inputs=4", "lengthgen.n=8",
                                  "lengthgen.n_prefixes=2", "lengthgen.grid=[0,10]"])
    outcome = run_experiment(exp, out, progress=False)
    assert (out / "runs" / "number-s0" / "config.yaml").exists() and not (out / "number").exists()
    assert (out / "stages.v1.json").exists() and outcome.failed == {}
    assert [stage for _, stage in outcome.ran] == ["report"], outcome.ran  # data, train, score, lengthgen: done
    before = mtimes(out)
    again = run_experiment(apply_overrides(exp, ["score.n_inputs=5"]), out, progress=False)
    assert sorted(s for _, s in again.ran) == ["report", "score", "score"] and mtimes(out) == before


def test_an_old_sweep_keeps_its_runs_and_its_marked_stages_are_recognised(old):
    spec = yaml.safe_load((old / "sweep" / "spec.yaml").read_text())
    spec["overrides"] = [*spec["overrides"], *OLD_DEFAULTS]
    exp = experiment_from_dict(spec)
    before = mtimes(old / "sweep")
    outcome = run_experiment(exp, old / "sweep", progress=False)
    assert outcome.ran == [] and len(outcome.skipped) == 3  # train, score, lengthgen of baseline-number-s0
    assert (old / "sweep" / "trials.v1").is_dir() and mtimes(old / "sweep") == before
    # without the old defaults the spec names another recipe, and the run says which keys differ
    with pytest.raises(ValueError, match="model.activation, model.embd_dropout"):
        run_experiment(experiment_from_dict(yaml.safe_load((old / "sweep" / "spec.yaml").read_text())),
                       old / "sweep", progress=False)


def test_an_old_canonical_grid_is_recognised_cell_by_cell(old):
    # The quick grid at 30 steps, as the fixture was made (its steps, data and evaluation follow the steps).
    grid = load_experiment("canonical_quick", overrides=[
        "experiment.tasks=[index]", "experiment.variants=[band1,nope]", "train.steps=30", "task.n_train=1920",
        "train.eval_every=10", "train.checkpoint_every=30", "train.state_every=10"])
    before = {k.split("/")[-3:][0]: v for k, v in mtimes(old / "canonical").items()}
    outcome = run_experiment(grid, old / "canonical", progress=False)
    assert [s for _, s in outcome.ran] == ["canonical_report"], outcome.ran
    assert sorted(p.name for p in (old / "canonical" / "runs").iterdir()) == ["band1-index-s0", "nope-index-s0"]
    assert len(outcome.results["canonical_report"].runs) == 2 and before
