"""One memo: a run's resume entries live in the run (RUN/resume.json), so that a stage run from the command
line, by a notebook (run_stage) or inside an experiment runs once; a per-step stage does only the
checkpoints it lacks; redo reruns; a changed setting reruns that stage alone; an experiment directory of
the previous layout (OUT/log/ID.json) is read into the runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from possym.cli import main
from possym.errors import EarlierLayoutError
from possym.experiment import apply_overrides, experiment_from_dict, run_experiment, run_stage
from possym.experiment.migrate import migrate
from possym.records import ScoreRecord
from possym.runs import RunDir
from possym.stages.memo import MEMO_FILE, ExperimentMemo, run_memo
from possym.stages.registry import get_stage

SMALL = {"n_inputs": 4, "figures": False, "frequency": False}
SMALL_ARGS = [f"score.{k}={str(v).lower()}" for k, v in SMALL.items()]
CURVE = {"grid": [0, 5], "n": 4, "n_prefixes": 2}
CURVE_ARGS = ["lengthgen.grid=[0,5]", "lengthgen.n=4", "lengthgen.n_prefixes=2", "--no-figures"]
RID = "number-s0"


def experiment(tiny: list[str], stages: dict):
    return experiment_from_dict({"tasks": ["number"], "seeds": [0], "overrides": tiny, "retries": 0,
                                 "stages": stages})


def files(run: Path) -> dict[str, int]:
    """Every file of the run with its modification time: what a stage that ran would change."""
    return {str(p.relative_to(run)): p.stat().st_mtime_ns for p in run.rglob("*") if p.is_file()}


@pytest.fixture
def trained(tmp_path, tiny_overrides) -> Path:
    """An experiment directory whose one run is trained (checkpoints 0, 10, 20, 30) and nothing else."""
    outcome = run_experiment(experiment(tiny_overrides, {"training": {}}), tmp_path, progress=False)
    assert outcome.failed == {} and outcome.ran == [(RID, "training")]
    return tmp_path


def test_a_stage_run_from_the_cli_then_inside_an_experiment_runs_once(trained, tiny_overrides, capsys):
    run = trained / "runs" / RID
    assert main(["score", str(run), *SMALL_ARGS]) == 0
    assert main(["lengthgen", str(run), *CURVE_ARGS]) == 0
    before = files(run)
    outcome = run_experiment(experiment(tiny_overrides, {"score": SMALL, "lengthgen": CURVE}), trained,
                             progress=False)
    assert outcome.failed == {} and outcome.ran == []
    assert sorted(outcome.skipped) == [(RID, "lengthgen"), (RID, "score"), (RID, "training")]
    assert files(run) == before  # nothing rewritten, the memo included


def test_a_stage_run_inside_an_experiment_then_from_the_cli_is_read_back(trained, tiny_overrides, capsys):
    run = trained / "runs" / RID
    run_experiment(experiment(tiny_overrides, {"score": SMALL}), trained, progress=False)
    before = files(run)
    capsys.readouterr()
    assert main(["score", str(run), *SMALL_ARGS]) == 0
    assert f"score: done with these settings at steps [0, 10, 20, 30] (the memo {run / MEMO_FILE})" in \
        capsys.readouterr().out
    assert files(run) == before


def test_scoring_some_checkpoints_then_all_scores_only_the_new_ones(trained, tiny_overrides):
    run = RunDir.open(trained / "runs" / RID)
    score = get_stage("score")
    first = run_stage(run, score, score.settings_from({**SMALL, "steps": [0, 10]}))
    assert first.ran and first.steps == (0, 10) and first.kept == ()
    rows = {r.step: r for r in run.read("scores", ScoreRecord)}
    assert sorted(rows) == [0, 10]
    every = run_stage(run, score, score.settings_from(SMALL))  # steps: None, every checkpoint
    assert every.steps == (20, 30) and every.kept == (0, 10)
    assert run_memo(run.path).entry("score")["steps"] == [0, 10, 20, 30]
    after = {r.step: r for r in run.read("scores", ScoreRecord)}
    assert sorted(after) == [0, 10, 20, 30]
    assert all(after[s].s_pos == rows[s].s_pos and after[s].s_sym == rows[s].s_sym for s in (0, 10))
    # the experiment asks for every checkpoint with these settings: the memo has them all
    outcome = run_experiment(experiment(tiny_overrides, {"score": SMALL}), trained, progress=False)
    assert outcome.ran == [] and (RID, "score") in outcome.skipped
    # a setting the scores do not depend on (the frequency tables) reruns the stage, but no checkpoint
    tables = run_stage(run, score, score.settings_from({**SMALL, "frequency": True}))
    assert tables.ran and tables.steps == () and tables.kept == (0, 10, 20, 30)
    assert run.artifact("table1").is_file()


def test_redo_reruns_a_stage_the_memo_has_done(trained, capsys):
    run = trained / "runs" / RID
    assert main(["score", str(run), *SMALL_ARGS]) == 0
    stamp = (run / "scores.csv").stat().st_mtime_ns
    capsys.readouterr()
    assert main(["score", str(run), *SMALL_ARGS, "--redo"]) == 0
    assert "scored 4 checkpoints" in capsys.readouterr().out
    assert (run / "scores.csv").stat().st_mtime_ns != stamp
    assert run_memo(run).entry("score")["attempts"] == 2
    redone = run_stage(run, "score", get_stage("score").settings_from({**SMALL, "steps": [10]}), redo=True)
    assert redone.steps == (10,) and redone.kept == (0, 20, 30)  # the steps not asked for are kept


def test_redo_in_an_experiment_reruns_the_stages_it_names_alone(trained, tiny_overrides):
    exp = experiment(tiny_overrides, {"score": SMALL, "lengthgen": CURVE})
    run_experiment(exp, trained, progress=False)
    outcome = run_experiment(exp, trained, progress=False, redo=["lengthgen"])
    assert outcome.ran == [(RID, "lengthgen")]
    assert sorted(outcome.skipped) == [(RID, "score"), (RID, "training")]


def test_a_changed_setting_reruns_that_stage_alone(trained, tiny_overrides):
    exp = experiment(tiny_overrides, {"score": SMALL, "lengthgen": CURVE})
    assert sorted(run_experiment(exp, trained, progress=False).ran) == [(RID, "lengthgen"), (RID, "score")]
    outcome = run_experiment(apply_overrides(exp, ["lengthgen.n=6"]), trained, progress=False)
    assert outcome.ran == [(RID, "lengthgen")] and (RID, "score") in outcome.skipped
    run = trained / "runs" / RID
    assert run_memo(run).entry("lengthgen")["settings"]["n"] == 6
    # and from the command line, a changed scoring setting rescores every checkpoint
    assert run_stage(run, "score", get_stage("score").settings_from({**SMALL, "n_inputs": 5})).steps == (0, 10, 20, 30)


def test_an_experiment_of_the_previous_layout_is_refused_and_once_migrated_keeps_its_finished_stages(
        trained, tiny_overrides):
    exp = experiment(tiny_overrides, {"score": SMALL, "lengthgen": CURVE})
    run_experiment(exp, trained, progress=False)
    run = trained / "runs" / RID
    # The previous layout: the run's entries in OUT/log/ID.json, a per-step stage's steps among its settings.
    stages = run_memo(run).read()
    for name, asked in (("score", None), ("lengthgen", ["final"])):
        stages[name]["settings"]["steps"] = asked
        del stages[name]["steps"]
    (trained / "log").mkdir(exist_ok=True)
    (trained / "log" / f"{RID}.json").write_text(json.dumps({"owner": RID, "stages": stages}))
    (run / MEMO_FILE).unlink()
    before = files(run)
    with pytest.raises(EarlierLayoutError, match="the memo of an earlier executor"):
        run_experiment(exp, trained, progress=False)
    notes = migrate(trained)
    assert any("moved the memo" in note for note in notes), notes
    outcome = run_experiment(exp, trained, progress=False)
    assert outcome.ran == [] and outcome.failed == {}
    assert (trained / "log.v1" / f"{RID}.json").is_file() and not (trained / "log" / f"{RID}.json").exists()
    memo = run_memo(run)
    assert memo.entry("score")["steps"] == [0, 10, 20, 30] and memo.entry("lengthgen")["steps"] == [30]
    assert "steps" not in memo.entry("score")["settings"]
    assert {k: v for k, v in files(run).items() if k != MEMO_FILE} == before
    assert [r.stage for r in ExperimentMemo(trained).records() if r.owner == RID] == ["training", "score", "lengthgen"]
