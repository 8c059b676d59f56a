"""Directories written before the executor by possym itself (a reproduction, a sweep and a canonical grid
of the previous layout, made with that version's own commands and kept in tests/fixtures) are refused by the
run path in one line that names them and ``possym migrate``; once migrated, nothing finished is retrained or
re-analysed, and what changed since reruns."""

from __future__ import annotations

import tarfile
from pathlib import Path

import pytest
import yaml
from safetensors.torch import load_file

from possym.cli import main
from possym.errors import EarlierLayoutError
from possym.experiment import apply_overrides, experiment_from_dict, load_experiment, run_experiment
from possym.experiment.migrate import migrate
from possym.experiment.reproduce import reproduction
from possym.runs import RunDir

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


def weights(folder: Path) -> list:
    """Every checkpoint's tensors below ``folder`` with its file name, in order: migrating moves runs and rewrites
    headers, never a weight."""
    return sorted((p.name, [(k, v.tolist()) for k, v in sorted(load_file(p).items())])
                  for p in folder.rglob("*.safetensors"))


def test_the_run_path_refuses_an_earlier_layout_in_one_line_naming_it_and_possym_migrate(old, tiny_overrides):
    exp = experiment_from_dict({"tasks": ["number"], "overrides": tiny_overrides, "retries": 0})
    for folder, what in (("reproduce", "a single-seed reproduction of an earlier possym (its stages.json)"),
                         ("sweep", "a sweep of an earlier possym (its trials/)"),
                         ("canonical", "a canonical grid of an earlier possym")):
        with pytest.raises(EarlierLayoutError) as refused:
            run_experiment(exp, old / folder, progress=False)
        assert str(refused.value).startswith(f"{old / folder} holds {what}")
        assert f"upgrade it once with `possym migrate {old / folder}`" in str(refused.value)
        assert "\n" not in str(refused.value) and not (old / folder / "experiment.yaml").exists()
    # a run an earlier possym saved: refused by every command that opens it, naming the file and the command
    with pytest.raises(EarlierLayoutError, match=r"an earlier possym saved it \(it lacks train.log.*`possym migrate "):
        RunDir.open(old / "reproduce" / "number")
    assert main(["score", str(old / "reproduce" / "number")]) == 2


def test_possym_migrate_says_what_it_did_and_a_second_call_has_nothing_to_do(old, capsys):
    before = weights(old / "sweep")
    assert main(["migrate", str(old / "sweep")]) == 0
    printed = capsys.readouterr().out
    assert "baseline-number-s0: score recognised as done" in printed
    assert f"{old / 'sweep' / 'runs' / 'baseline-number-s0' / 'config.yaml'}: rewritten" in printed
    assert weights(old / "sweep") == before  # headers rewritten, weights as they were
    assert RunDir.open(old / "sweep" / "runs" / "baseline-number-s0").finished
    assert main(["migrate", str(old / "sweep")]) == 0
    assert "in today's layout already: nothing to do" in capsys.readouterr().out
    assert migrate(old / "sweep") == []


@pytest.mark.long
def test_an_old_reproduction_is_moved_into_runs_and_its_finished_stages_are_not_redone(old):
    out = old / "reproduce"
    migrate(out)
    exp = reproduction("quick", skip=("canonical", "theory", "discrepancy"),
                       overrides=[*TINY, "task.n_test=200", "score.n_inputs=4", "lengthgen.n=8",
                                  "lengthgen.n_prefixes=2", "lengthgen.grid=[0,10]"])
    outcome = run_experiment(exp, out, progress=False)
    assert (out / "runs" / "number-s0" / "config.yaml").exists() and not (out / "number").exists()
    assert (out / "stages.v1.json").exists() and outcome.failed == {}
    assert [stage for _, stage in outcome.ran] == ["report"], outcome.ran  # data, train, score, lengthgen: done
    before = weights(out)
    again = run_experiment(apply_overrides(exp, ["score.n_inputs=5"]), out, progress=False)
    assert sorted(s for _, s in again.ran) == ["report", "score", "score"] and weights(out) == before


def test_an_old_sweep_keeps_its_runs_and_its_marked_stages_are_recognised(old):
    spec = yaml.safe_load((old / "sweep" / "spec.yaml").read_text())
    spec["overrides"] = [*spec["overrides"], *OLD_DEFAULTS]
    exp = experiment_from_dict(spec)
    before = weights(old / "sweep")
    migrate(old / "sweep")
    outcome = run_experiment(exp, old / "sweep", progress=False)
    assert outcome.ran == [] and len(outcome.skipped) == 3  # train, score, lengthgen of baseline-number-s0
    assert (old / "sweep" / "trials.v1").is_dir() and weights(old / "sweep") == before
    # without the old defaults the spec names another recipe, and the run says which keys differ
    with pytest.raises(ValueError, match="model.activation, model.embd_dropout"):
        run_experiment(experiment_from_dict(yaml.safe_load((old / "sweep" / "spec.yaml").read_text())),
                       old / "sweep", progress=False)


def test_an_old_canonical_grid_is_recognised_cell_by_cell(old):
    # The quick grid at 30 steps, as the fixture was made (its steps, data and evaluation follow the steps).
    grid = load_experiment("canonical_quick", overrides=[
        "experiment.tasks=[index]", "experiment.variants=[band1,nope]", "train.steps=30", "task.n_train=1920",
        "train.eval_every=10", "train.checkpoint_every=30", "train.state_every=10"])
    before = weights(old / "canonical")
    migrate(old / "canonical")
    outcome = run_experiment(grid, old / "canonical", progress=False)
    assert [s for _, s in outcome.ran] == ["canonical_report"], outcome.ran
    assert sorted(p.name for p in (old / "canonical" / "runs").iterdir()) == ["band1-index-s0", "nope-index-s0"]
    assert len(outcome.results["canonical_report"].runs) == 2
    assert weights(old / "canonical") == before and len(before) == 4  # moved, not retrained


def test_a_stage_under_its_old_name_is_refused_then_renamed_and_not_rerun(tmp_path, tiny_overrides):
    """The training stage was called ``train`` (the run's ``train.*`` section shared the word): an experiment whose
    experiment.yaml and memos say ``train`` is refused by the run path, and once migrated its runs are not
    retrained."""
    exp = experiment_from_dict({"tasks": ["number"], "overrides": tiny_overrides, "retries": 0})
    run_experiment(exp, tmp_path, progress=False)
    memo, spec = tmp_path / "runs" / "number-s0" / "resume.json", tmp_path / "experiment.yaml"
    for file in (memo, spec):
        file.write_text(file.read_text().replace('"training"', '"train"').replace("  training:", "  train:"))
    assert '"train"' in memo.read_text() and "  train:" in spec.read_text()
    with pytest.raises(EarlierLayoutError, match=r"a run memo of an earlier possym \(a stage under its old name: "
                                                 r"train -> training\).*possym migrate"):
        run_experiment(exp, tmp_path, progress=False)
    notes = migrate(tmp_path)
    assert f"{memo}: stage train renamed training" in notes and f"{spec}: stage train renamed training" in notes
    outcome = run_experiment(exp, tmp_path, progress=False)
    assert outcome.ran == [] and ("number-s0", "training") in outcome.skipped and migrate(tmp_path) == []
