"""``possym train`` goes through the one memo: seeds trained from the command line are the runs an experiment
over the same OUT holds (nothing retrains), a run trained alone records its training in RUN/resume.json, and
the layout of an older ``possym train --seeds`` (OUT/seed{s}) is refused until ``possym migrate OUT`` moves it
into OUT/runs, once."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from possym.api import train_model, train_models
from possym.cli import main
from possym.config import load_config
from possym.errors import EarlierLayoutError, PossymError
from possym.experiment import experiment_from_dict, run_experiment
from possym.experiment.migrate import migrate
from possym.runs import RunDir
from possym.stages.memo import run_memo

SMALL = {"n_inputs": 4, "figures": False, "frequency": False}


def experiment(tiny: list[str], stages: dict, seeds: tuple[int, ...] = (0,)):
    return experiment_from_dict({"tasks": ["number"], "seeds": list(seeds), "overrides": tiny, "retries": 0,
                                 "stages": stages})


def files(folder: Path) -> dict[str, int]:
    """Every file under ``folder`` with its modification time: what a stage that ran would change."""
    return {str(p.relative_to(folder)): p.stat().st_mtime_ns for p in folder.rglob("*") if p.is_file()}


def checkpoints(out: Path) -> dict[str, int]:
    return {k: v for k, v in files(out).items() if "/checkpoints/" in k}


def test_seeds_trained_from_the_cli_are_the_runs_of_an_experiment_over_the_same_out(tmp_path, tiny_overrides):
    assert main(["train", "--task", "number", "--seeds", "0,1", "--out", str(tmp_path), *tiny_overrides]) == 0
    assert sorted(p.name for p in (tmp_path / "runs").iterdir()) == ["number-s0", "number-s1"]
    trained = checkpoints(tmp_path)
    outcome = run_experiment(experiment(tiny_overrides, {"training": {}, "score": SMALL}, (0, 1)), tmp_path,
                             progress=False)
    assert outcome.failed == {} and sorted(outcome.ran) == [("number-s0", "score"), ("number-s1", "score")]
    assert {("number-s0", "training"), ("number-s1", "training")} <= set(outcome.skipped)
    assert checkpoints(tmp_path) == trained  # nothing retrained


def test_a_run_trained_alone_records_its_training_in_its_memo_and_resume_trains_what_is_left(tmp_path,
                                                                                             tiny_overrides):
    run = tmp_path / "run"
    assert main(["train", "--task", "number", "--out", str(run), *tiny_overrides]) == 0
    entry = run_memo(run).entry("training")
    assert entry["status"] == "done" and entry["settings"]["monitor"] is True
    trained = checkpoints(run)
    assert main(["train", "--resume", str(run)]) == 0  # finished: trains nothing, whatever the memo says
    assert checkpoints(run) == trained and run_memo(run).entry("training")["attempts"] == 2


def test_a_run_trained_from_python_is_the_run_of_an_experiment_over_it(tmp_path, tiny_overrides):
    cfg = load_config("number", None, tiny_overrides)
    run = train_model(cfg, tmp_path / "runs" / "number-s0", monitor=False, progress=False)
    assert run_memo(run.path).entry("training")["status"] == "done"
    trained = checkpoints(tmp_path)
    outcome = run_experiment(experiment(tiny_overrides, {"training": {"monitor": False}}), tmp_path, progress=False)
    assert outcome.ran == [] and outcome.failed == {} and ("number-s0", "training") in outcome.skipped
    assert checkpoints(tmp_path) == trained  # nothing retrained


def test_runs_trained_together_from_python_are_the_runs_of_an_experiment_over_them(tmp_path, tiny_overrides):
    configs = [load_config("number", None, [*tiny_overrides, *(f"seeds.{f}={s}" for f in ("data", "init", "order",
                                                                                             "dropout"))])
               for s in (0, 1)]
    runs = train_models(configs, [tmp_path / "runs" / f"number-s{s}" for s in (0, 1)], monitor=False, progress=False)
    assert [run_memo(r.path).entry("training")["status"] for r in runs] == ["done", "done"]
    trained = checkpoints(tmp_path)
    again = train_models(configs, [r.path for r in runs], monitor=False, progress=False)  # done: read back
    assert [run_memo(r.path).entry("training")["attempts"] for r in again] == [1, 1]
    outcome = run_experiment(experiment(tiny_overrides, {"training": {"monitor": False}}, (0, 1)), tmp_path,
                             progress=False)
    assert outcome.ran == [] and outcome.failed == {}
    assert {("number-s0", "training"), ("number-s1", "training")} <= set(outcome.skipped)
    assert checkpoints(tmp_path) == trained  # nothing retrained


@pytest.fixture(scope="module")
def older_seeds(tmp_path_factory, tiny_session_overrides) -> Path:
    """An OUT/seed{s} group as an older ``possym train --seeds 0,1`` left it."""
    out = tmp_path_factory.mktemp("older")
    configs = [load_config("number", None, [*tiny_session_overrides,
                                            *(f"seeds.{f}={s}" for f in ("data", "init", "order", "dropout"))])
               for s in (0, 1)]
    train_models(configs, [out / f"seed{s}" for s in (0, 1)], progress=False)
    return out


def test_an_older_seeds_layout_is_refused_and_once_migrated_an_experiment_finds_it_trained(
        older_seeds, tmp_path, tiny_overrides):
    out = tmp_path / "out"
    shutil.copytree(older_seeds, out)
    trained = {k.replace("seed", "runs/number-s", 1): v for k, v in checkpoints(out).items()}
    exp = experiment(tiny_overrides, {"training": {}}, (0, 1))
    with pytest.raises(EarlierLayoutError, match=r"the seeds of an earlier `possym train --seeds`.*possym migrate"):
        run_experiment(exp, out, progress=False)
    assert f"moved {out / 'seed0'} to {out / 'runs' / 'number-s0'}" in migrate(out)
    outcome = run_experiment(exp, out, progress=False)
    assert outcome.ran == [] and outcome.failed == {}
    assert not (out / "seed0").exists() and RunDir.open(out / "runs" / "number-s1").finished
    assert checkpoints(out) == trained  # moved, not retrained
    assert run_memo(out / "runs" / "number-s0").entry("training")["migrated"] is True


def test_an_older_seeds_layout_resumes_from_the_cli_once_migrated(older_seeds, tmp_path, tiny_overrides, capsys):
    out = tmp_path / "out"
    shutil.copytree(older_seeds, out)
    assert main(["train", "--resume", str(out)]) == 2
    assert f"upgrade it once with `possym migrate {out}`, then resume" in capsys.readouterr().err
    assert main(["migrate", str(out)]) == 0
    printed = capsys.readouterr().out
    assert f"moved {out / 'seed1'} to {out / 'runs' / 'number-s1'}" in printed
    assert f"wrote {out / 'experiment.yaml'}: the training of 2 seed(s)" in printed
    assert main(["train", "--resume", str(out)]) == 0
    assert "test accuracy (number, number-s1) (trained already)" in capsys.readouterr().out
    # and the same command line as then finds them trained
    assert main(["train", "--task", "number", "--seeds", "0,1", "--out", str(out), *tiny_overrides]) == 0
    assert "test accuracy (number, number-s0) (trained already)" in capsys.readouterr().out


def test_a_migrated_seed_run_of_another_config_is_refused_naming_what_differs(older_seeds, tmp_path, tiny_overrides):
    out = tmp_path / "out"
    shutil.copytree(older_seeds, out)
    migrate(out)
    exp = experiment([*tiny_overrides, "train.lr=0.002"], {"training": {"monitor": False}}, (1,))
    with pytest.raises(PossymError, match="train.lr differ"):
        run_experiment(exp, out, progress=False)
