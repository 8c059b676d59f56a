"""Misuse: "final" means finished, and metrics that cannot double or vanish. Every
piece of advice an error gives is followed here, and the run recovers."""

from __future__ import annotations

import json
import logging
import re

import pytest
from misuse_probes import comparable, possym_cli, same_weights

import possym
from possym.cli import main
from possym.errors import RunError
from possym.runs import METRICS, STATE, RunDir
from possym.tasks import make_splits
from possym.train.loop import train


class Stop(Exception):
    pass


def stopped_at(run: RunDir, step: int) -> RunDir:
    """``run`` trained until an interruption after ``step`` (as a kill would leave it)."""
    def stop(info):
        if info["step"] == step:
            raise Stop
    with pytest.raises(Stop):
        train(run, make_splits(run.config.task, 0), on_step=stop)
    return RunDir.open(run.path)


def resume(run: RunDir) -> RunDir:
    train(RunDir.open(run.path), make_splits(run.config.task, 0))
    return RunDir.open(run.path)


def follow(advice: str) -> None:
    """Do what an error message says: delete the file it names, then resume."""
    deleted = re.search(r"delete (\S+?) and run `possym train --resume (\S+?)`", advice)
    assert deleted, advice
    __import__("pathlib").Path(deleted.group(1)).unlink()
    assert main(["train", "--resume", deleted.group(2)]) == 0


# ---- "final" means finished --------------------------------------------------------------------

def test_a_run_knows_whether_it_finished(make_run, reference):
    assert reference.finished and not stopped_at(make_run("cut"), 17).finished


def test_final_on_an_unfinished_run_is_refused_naming_its_last_step_unless_allowed(make_run):
    run = stopped_at(make_run("cut"), 17)
    with pytest.raises(RunError, match=r"is unfinished: step 10 \(unfinished, of 30\); finish it with `possym train "
                                       r"--resume .*`, or analyse that step with --allow-unfinished"):
        run.resolve_step("final")
    assert RunDir.open(run.path, allow_unfinished=True).resolve_step("final") == 10
    assert run.resolve_step(10) == 10  # asked by number, no refusal
    with pytest.raises(RunError, match="is unfinished"):
        possym.open_run(run.path).model()
    with pytest.raises(RunError, match=r"is unfinished: step 10 \(unfinished, of 30\)"):  # "the last": unlabelled
        possym.open_run(run.path).model(step=None)
    assert possym.open_run(run.path, allow_unfinished=True).model().cfg.n_layers == 2
    assert RunDir.open(run.path, allow_unfinished=True).resolve_step(None) == 10


def test_the_run_repr_says_finished_or_unfinished_and_where(make_run, reference):
    assert repr(possym.open_run(reference.path)).endswith("checkpoints=4, finished)")
    run = stopped_at(make_run("cut"), 17)
    assert repr(possym.open_run(run.path)).endswith("checkpoints=2, unfinished at step 10 of 30)")


def test_step_labels_say_final_only_once_training_ended(make_run, reference):
    run = stopped_at(make_run("cut"), 17)
    assert run.step_label(10) == "step 10 (unfinished, of 30)" and run.step_label(0) == "step 0 of 30"
    assert reference.step_label(30) == "step 30 (final)"


def test_the_claims_name_an_unfinished_runs_checkpoint_as_unfinished(make_run, reference):
    """The step label every claim carries (the report's records) says that the run did not finish."""
    from possym.report.evidence import _label

    run = stopped_at(make_run("cut"), 17)
    assert _label(run, 10).endswith("10 (unfinished, of 30)")
    assert _label(reference, 30) in ("final 30", "best = final 30")


def test_export_final_of_an_unfinished_run_is_refused_and_allowed_with_the_flag(make_run, tmp_path, capsys):
    run = stopped_at(make_run("cut"), 17)
    assert main(["export", str(run.path), "--out", str(tmp_path / "hf")]) == 2
    err = capsys.readouterr().err
    assert "is unfinished: step 10 (unfinished, of 30)" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "hf").exists()
    assert main(["export", str(run.path), "--out", str(tmp_path / "hf"), "--allow-unfinished"]) == 0
    assert "step 10 (unfinished, of 30)" in capsys.readouterr().out


@pytest.mark.parametrize("damage", ["deleted", "truncated"])
def test_resume_recreates_a_missing_or_corrupt_final_checkpoint_and_says_so(reference, make_run, caplog, damage):
    run = make_run("run")
    train(run, make_splits(run.config.task, 0))
    final = run.checkpoint_path(30)
    if damage == "deleted":
        final.unlink()
        assert run.resolve_step("final") == 20  # what "final" silently meant before
    else:
        final.write_bytes(final.read_bytes()[:1000])
        with pytest.raises(RunError, match=r"truncated or corrupt .*; run `possym train --resume .*`, which "
                                           r"re-creates it from state.pt"):
            run.load_model("final")
    with caplog.at_level(logging.WARNING, logger="possym.train.trainee"):
        assert main(["train", "--resume", str(run.path)]) == 0  # the advice
    assert f"re-created the {'missing' if damage == 'deleted' else 'corrupt'} checkpoint {final}" in caplog.text
    assert same_weights(run, reference, 30) and run.finished


def test_a_corrupt_earlier_checkpoint_names_the_way_to_re_create_it(reference, make_run):
    run = make_run("run")
    train(run, make_splits(run.config.task, 0))
    path = run.checkpoint_path(10)
    path.write_bytes(path.read_bytes()[:1000])
    with pytest.raises(RunError, match="delete it to analyse the other checkpoints, or retrain") as err:
        run.load_model(10)
    follow(str(err.value))
    assert same_weights(run, reference, 10) and same_weights(run, reference, 30)


def test_score_says_which_checkpoints_are_missing(reference, caplog):
    reference.checkpoint_path(10).unlink()
    assert reference.missing_checkpoints() == [10]
    with caplog.at_level(logging.WARNING, logger="possym.stages.registry"):
        possym.open_run(reference.path).scores(n_inputs=2, frequency=False)
    assert f"{reference.path} lacks the checkpoints of steps [10]" in caplog.text


# ---- metrics that cannot double or vanish -------------------------------------------------------

def test_a_restart_from_scratch_rewrites_the_metrics_instead_of_appending(reference, make_run):
    run = make_run("run")
    train(run, make_splits(run.config.task, 0))
    (run.path / STATE).unlink()  # "delete state.pt to restart from scratch"
    run = resume(run)
    assert comparable(run.metrics()) == comparable(reference.metrics())
    assert len(possym.open_run(run.path).metrics()) == len(possym.open_run(reference.path).metrics())


def test_a_missing_metrics_file_is_an_error_and_its_advice_recovers(reference, make_run):
    run = make_run("run")
    train(run, make_splits(run.config.task, 0))
    (run.path / METRICS).unlink()
    with pytest.raises(RunError, match=f"{run.path / METRICS} is missing although the run has checkpoints") as err:
        possym.open_run(run.path).metrics()
    follow(str(err.value))
    assert comparable(run.metrics()) == comparable(reference.metrics())


def test_a_corrupt_middle_line_is_an_error_naming_file_and_line_and_its_advice_recovers(reference, make_run):
    run = make_run("run")
    train(run, make_splits(run.config.task, 0))
    lines = (run.path / METRICS).read_text().splitlines()
    lines[1] = lines[1][:20]
    (run.path / METRICS).write_text("\n".join(lines) + "\n")
    with pytest.raises(RunError, match=f"{run.path / METRICS}, line 2: not a JSON record") as err:
        possym.open_run(run.path).metrics()
    follow(str(err.value))
    assert comparable(run.metrics()) == comparable(reference.metrics())


def test_a_duplicated_step_is_an_error_naming_both_lines(reference):
    lines = (reference.path / METRICS).read_text().splitlines()
    (reference.path / METRICS).write_text("\n".join([*lines[:3], lines[1], *lines[3:]]) + "\n")
    with pytest.raises(RunError, match=r"metrics.jsonl, line 4: a second 'eval' record of step 10 \(the first is "
                                       r"line 2; two writers at once\?\)"):
        possym.open_run(reference.path).metrics()


def test_a_torn_last_line_from_a_kill_is_dropped_with_a_note_and_resume_rewrites_it(make_run, reference, caplog):
    run = stopped_at(make_run("cut"), 17)
    with open(run.path / METRICS, "a") as f:
        f.write(json.dumps({"event": "eval", "step": 20, "accuracy": 0.5})[:25])  # a kill mid-write
    with caplog.at_level(logging.WARNING, logger="possym.runs"):
        assert [r["step"] for r in run.metrics()] == [0, 10]
    assert f"dropped the torn last line 3 of {run.path / METRICS}" in caplog.text
    run = resume(run)
    assert comparable(run.metrics()) == comparable(reference.metrics())


def test_two_cli_resumes_of_a_finished_run_keep_one_final_record(reference):
    for _ in range(2):
        done = possym_cli("train", "--resume", str(reference.path))
        assert done.returncode == 0, done.stderr[-2000:]
    assert [r["event"] for r in RunDir.open(reference.path).metrics()].count("final") == 1
