"""Misuse: nothing vanishes, nothing is discarded. An empty metrics log is refused as a
missing one is, with the command that rebuilds it; a refused call changes nothing (a test per stage); damaged
checkpoints are named precisely; a missing or corrupt ``meta.json`` is named and rebuilt; orphan temporary files are
removed by the next writer; SIGTERM ends a command as Ctrl-C does. Every piece of advice is followed."""

from __future__ import annotations

import json
import logging
import re
import shutil
import signal
import subprocess
import sys
import time

import pytest
import yaml
from misuse_probes import comparable, copy_run, env, one_line_error, same_weights, tree

import possym
from possym.cli import main
from possym.config import load_config
from possym.errors import PossymError, RunError
from possym.experiment import run_stage
from possym.runs import CKPT_DIR, CONFIG, META, METRICS, STATE, RunDir
from possym.stages.memo import MEMO_FILE
from possym.stages.registry import get_stage
from possym.tasks import make_splits
from possym.train.loop import train

SCORE = ["score.n_inputs=2", "score.figures=false", "score.frequency=false"]


@pytest.fixture(scope="module")
def finished(tmp_path_factory, tiny_session_overrides) -> RunDir:
    """A finished tiny run, scored once (each test copies it before it damages it)."""
    run = RunDir.create(tmp_path_factory.mktemp("finished") / "run",
                        load_config("number", None, tiny_session_overrides), argv=["test"])
    train(run, make_splits(run.config.task, run.config.seeds.data))
    run_stage(run, "score", get_stage("score").from_overrides(SCORE))
    return run


# ---- an empty metrics log ------------------------------------------------------------------------

def test_an_empty_metrics_log_is_refused_as_a_missing_one_and_rebuilt_from_the_checkpoints(finished, tmp_path,
                                                                                          capsys):
    run = copy_run(finished, tmp_path / "run")
    (run.path / METRICS).write_text("")  # a crash's classic artefact
    says = f"{run.path / METRICS} is empty although the run has checkpoints; rebuild its evaluations from the " \
           f"checkpoints with `possym train --rebuild-metrics {run.path}`"
    for argv in (["summary", str(run.path)], ["train", "--resume", str(run.path)]):
        assert says in one_line_error(capsys, argv)  # before: nothing shown, and a resume "finished" with no history
    with pytest.raises(RunError, match="is empty although the run has checkpoints"):
        possym.open_run(run.path).metrics()
    assert (run.path / METRICS).read_text() == ""  # the refusals changed nothing
    command = re.search(r"`(possym train --rebuild-metrics \S+)`", says).group(1)
    assert main(command.split()[1:]) == 0  # the advice, followed
    assert comparable(run.metrics()) == comparable(finished.metrics()), "the same accuracies and losses, bitwise"
    assert run.best() == finished.best() and RunDir.open(run.path).finished
    assert main(["train", "--resume", str(run.path)]) == 0 and same_weights(run, finished, 30)


def test_rebuilding_a_log_that_reads_is_refused_and_one_with_gaps_names_them(finished, tmp_path, capsys,
                                                                             tiny_overrides):
    run = copy_run(finished, tmp_path / "run")
    assert "holds 5 records; --rebuild-metrics replaces only a missing, empty or damaged log" in one_line_error(
        capsys, ["train", "--rebuild-metrics", str(run.path)])
    # Evaluations finer than the checkpoints: those without one cannot come back, and are named.
    odd = RunDir.create(tmp_path / "odd", load_config("number", None, [*tiny_overrides, "train.eval_every=5"]))
    train(odd, make_splits(odd.config.task, 0))
    kept = [r for r in odd.metrics() if r["step"] % 10 == 0 or r["event"] == "final"]
    (odd.path / METRICS).unlink()
    assert main(["train", "--rebuild-metrics", str(odd.path)]) == 0
    assert "steps [5, 15, 25] had no checkpoint" in capsys.readouterr().out
    assert comparable(odd.metrics()) == comparable(kept)


# ---- a refused call changes nothing ---------------------------------------------------------------

# Each run-scope stage with a setting that names a checkpoint the run lacks (or no checkpoint at all).
REFUSED = [
    ("score", {"table_step": "bogus"}, "step 'bogus': give a checkpoint step number"),
    ("score", {"steps": [999]}, "no checkpoint for step 999"),
    ("lengthgen", {"steps": [999]}, "no checkpoint for step 999"),
    ("discrepancy", {"step": "bogus"}, "step 'bogus': give a checkpoint step number"),
    ("cliff", {"step": 999}, "no checkpoint for step 999"),
    ("dilution", {"step": 999, "tasks": ["number"]}, "no checkpoint for step 999"),
    ("dilution_controls", {"steps": ["best", 999]}, "no checkpoint for step 999"),
    ("l0", {"steps": [999]}, "no checkpoint for step 999"),
    ("l0", {"layers": [7]}, "l0 layers=[7] must lie in 0..1"),
    ("length_protocol", {"steps": [999]}, "no checkpoint for step 999"),
    ("lengthgen", {"grid": [10**9]}, "the largest K that fits is about"),
]


@pytest.mark.parametrize("name,settings,says", REFUSED, ids=[f"{n}-{next(iter(s))}" for n, s, _ in REFUSED])
def test_a_refused_stage_call_changes_nothing_in_the_run(finished, tmp_path, name, settings, says):
    run = copy_run(finished, tmp_path / "run")
    before, memo = tree(run.path), (run.path / MEMO_FILE).read_text()
    with pytest.raises(PossymError, match=re.escape(says)):
        run_stage(run, name, get_stage(name).settings_from(settings))
    assert (run.path / MEMO_FILE).read_text() == memo and tree(run.path) == before


def test_a_refused_score_keeps_every_checkpoint_scored_and_discrepancy_makes_no_folder(finished, tmp_path, capsys):
    run = copy_run(finished, tmp_path / "run")
    err = one_line_error(capsys, ["score", str(run.path), *SCORE, "score.table_step=bogus"])
    assert "step 'bogus'" in err
    err = one_line_error(capsys, ["discrepancy", str(run.path), "discrepancy.step=bogus"])
    assert "step 'bogus'" in err and not (run.path / "theory").exists()  # before: an empty RUN/theory
    err = one_line_error(capsys, ["discrepancy", str(run.path), "discrepancy.step=999", "--out", str(tmp_path / "d")])
    assert "no checkpoint for step 999" in err and not (tmp_path / "d").exists()
    done = run_stage(run, "score", get_stage("score").from_overrides(SCORE))  # the next correct call
    assert not done.ran and done.kept == (0, 10, 20, 30)  # before: all of them scored again


# ---- damaged checkpoints, named precisely ---------------------------------------------------------

def test_a_directory_in_a_checkpoints_place_is_named_on_analysis_and_resume(finished, tmp_path, capsys):
    run = copy_run(finished, tmp_path / "run")
    for step in (20, 30):
        run.checkpoint_path(step).unlink()
        run.checkpoint_path(step).mkdir()
    err = one_line_error(capsys, ["export", str(run.path), "--step", "20", "--out", str(tmp_path / "hf")])
    assert f"{run.checkpoint_path(20)} is a directory where a checkpoint file belongs" in err  # before: "no checkpoint"
    err = one_line_error(capsys, ["train", "--resume", str(run.path)])  # before: a silent no-op
    assert f"{run.checkpoint_path(20)} is a directory where a checkpoint file belongs (and 1 more); move it away" in err
    for step in (20, 30):  # the advice, followed
        run.checkpoint_path(step).rmdir()
    assert main(["train", "--resume", str(run.path)]) == 0
    assert same_weights(run, finished, 30)


def test_a_file_in_the_checkpoint_folders_place_is_named_and_its_advice_recovers(finished, tmp_path, capsys):
    run = copy_run(finished, tmp_path / "run")
    shutil.rmtree(run.path / CKPT_DIR)
    (run.path / CKPT_DIR).write_text("not a folder")
    says = f"{run.path / CKPT_DIR} is a file where the run's checkpoint folder belongs; move it away"
    for argv in (["score", str(run.path), *SCORE], ["train", "--resume", str(run.path)],
                 ["export", str(run.path), "--out", str(tmp_path / "hf")]):
        assert says in one_line_error(capsys, argv)  # before: "has no checkpoints yet", "exists already"
    (run.path / CKPT_DIR).unlink()  # the advice: move it away, resume re-creates the last one
    assert main(["train", "--resume", str(run.path)]) == 0
    assert RunDir.open(run.path).checkpoint_steps() == [30] and same_weights(run, finished, 30)


def test_a_deleted_checkpoint_is_named_on_resume_with_the_way_to_get_it_back(finished, tmp_path, caplog):
    run = copy_run(finished, tmp_path / "run")
    run.checkpoint_path(10).unlink()
    with caplog.at_level(logging.WARNING, logger="possym.train.trainee"):
        assert main(["train", "--resume", str(run.path)]) == 0  # before: a silent no-op
    advice = re.search(r"lacks the checkpoints of steps \[10\], and its resumable state \(step 30\) holds no weights "
                       r"of theirs, so resuming cannot re-create them; to get them back, retrain the run from scratch: "
                       r"delete (\S+) and run `possym train --resume (\S+)`", caplog.text)
    assert advice, caplog.text
    (run.path / STATE).unlink()  # the advice, followed
    assert main(["train", "--resume", advice.group(2)]) == 0
    assert same_weights(run, finished, 10) and same_weights(run, finished, 30)


# ---- meta.json and config.yaml, named and rebuilt -------------------------------------------------

@pytest.mark.parametrize("damage", ["missing", "corrupt"])
def test_a_missing_or_corrupt_meta_json_is_named_and_rebuilt_from_the_runs_other_files(finished, tmp_path, caplog,
                                                                                      capsys, damage):
    run = copy_run(finished, tmp_path / "run")
    meta = run.meta
    if damage == "missing":
        (run.path / META).unlink()
    else:
        (run.path / META).write_text('{"created": ')
    with caplog.at_level(logging.WARNING, logger="possym.runs"):
        opened = RunDir.open(run.path)  # before: "does not exist; check the path", or a JSONDecodeError traceback
        assert opened.identity == meta["identity"] and opened.config == run.config
        assert main(["summary", str(run.path)]) == 0  # a reader works, and writes nothing
        assert not (run.path / META).is_file() or damage == "corrupt"
        assert main(["train", "--resume", str(run.path)]) == 0  # a writer writes it back
    assert f"{run.path / META} is {damage if damage == 'missing' else 'not valid JSON'}" in caplog.text
    assert f"wrote {run.path / META} back from {run.path / STATE}" in caplog.text
    rebuilt = json.loads((run.path / META).read_text())
    assert {k: rebuilt[k] for k in ("identity", "config", "history", "precision")} == \
           {k: meta[k] for k in ("identity", "config", "history", "precision")}
    assert (run.path / f"{META}.damaged").is_file() == (damage == "corrupt")  # nothing vanishes
    assert same_weights(run, finished, 30)
    capsys.readouterr()


def test_an_empty_config_yaml_is_named_read_from_the_recorded_config_and_written_back(finished, tmp_path, caplog):
    run = copy_run(finished, tmp_path / "run")
    original = yaml.safe_load((run.path / CONFIG).read_text())
    (run.path / CONFIG).write_text("")
    with caplog.at_level(logging.WARNING, logger="possym.runs"):
        assert RunDir.open(run.path).config == run.config
        assert main(["train", "--resume", str(run.path)]) == 0
    assert f"{run.path / CONFIG} is empty; read the run's config from {run.path / META}" in caplog.text
    assert yaml.safe_load((run.path / CONFIG).read_text()) == original


def test_a_config_yaml_that_does_not_read_is_one_line_naming_it(finished, tmp_path, capsys):
    run = copy_run(finished, tmp_path / "run")
    (run.path / CONFIG).write_text("train: [unclosed\n")
    err = one_line_error(capsys, ["summary", str(run.path)])
    assert f"{run.path / CONFIG} is not valid YAML" in err and f"recorded in {run.path / META}" in err


# ---- orphan temporary files and SIGTERM -------------------------------------------------------------

def test_the_temporary_files_of_interrupted_writes_are_removed_by_the_next_writer_alone(finished, tmp_path):
    run = copy_run(finished, tmp_path / "run")
    orphans = [run.path / ".state.pt.k2j4h5g6.tmp", run.path / CKPT_DIR / ".step_000040.safetensors.a1b2c3d4.tmp",
               run.path / ".metrics.jsonl.zz99yy88.tmp"]
    for path in orphans:
        path.write_bytes(b"half a write")
    mine = run.path / "notes.tmp"  # not one of possym's: left alone
    mine.write_text("mine")
    assert main(["summary", str(run.path)]) == 0 and all(p.exists() for p in orphans)  # a reader leaves them
    assert main(["train", "--resume", str(run.path)]) == 0  # before: never cleaned
    assert not any(p.exists() for p in orphans) and mine.read_text() == "mine"


def test_sigterm_is_exit_143_with_one_line_and_the_resume_hint_and_the_hint_works(tmp_path, make_run, tiny_overrides):
    longer = [*(o for o in tiny_overrides if not o.startswith("train.steps")), "train.steps=60"]
    reference = make_run("reference", "train.steps=60")
    train(reference, make_splits(reference.config.task, 0))
    run = tmp_path / "run"
    proc = subprocess.Popen([sys.executable, "-m", "possym", "train", "--task", "number", "--out", str(run), *longer,
                             "training.progress=false"], env=env(), stderr=subprocess.PIPE, stdout=subprocess.DEVNULL,
                            text=True)
    deadline = time.time() + 300
    while not (run / "checkpoints" / "step_000010.safetensors").exists():
        assert proc.poll() is None and time.time() < deadline, proc.stderr.read()[-2000:]
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 143 and "Traceback" not in err, (proc.returncode, err[-2000:])
    hint = err.strip().splitlines()[-1]  # before: no message at all
    assert hint == f"possym train: terminated (SIGTERM); `possym train --resume {run}` continues it"
    assert len(err.strip().splitlines()) == 1 and not (run / ".lock").exists()
    assert main(hint.split("`")[1].split()[1:]) == 0  # the hint, followed
    assert comparable(RunDir.open(run).metrics()) == comparable(reference.metrics())
    assert same_weights(RunDir.open(run), reference, 60)


def test_an_experiments_writer_removes_the_temporary_files_left_in_its_directory(tmp_path, tiny_overrides):
    from possym.experiment import Experiment, run_experiment

    out = tmp_path / "out"
    (out / "log").mkdir(parents=True)
    orphans = [out / ".experiment.yaml.q1w2e3r4.tmp", out / "log" / ".experiment.json.a5s6d7f8.tmp"]
    for path in orphans:
        path.write_text("half")
    run_experiment(Experiment(preset=None, tasks=("number",), seeds=(0,), overrides=tuple(tiny_overrides), stages=(),
                              retries=0, threads=None, name="t"), out, progress=False)
    assert not any(p.exists() for p in orphans)
