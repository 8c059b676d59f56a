"""Misuse: bad input refused before any work, leaving the filesystem as it was, and every
user error a one-line sentence naming the user's path and what to do (exit 2, 130 for Ctrl-C)."""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import time

import pytest
import torch
from misuse_probes import comparable, env, same_weights

import possym
from possym.cli import main, parse
from possym.config import load_config
from possym.errors import ConfigError, OptionError, PossymError, RunError
from possym.experiment.executor import run_experiment
from possym.experiment.spec import load_experiment
from possym.runs import BEST, RunDir, atomic_write_text
from possym.tasks import make_splits
from possym.train.loop import train


def tree(root) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def one_line_error(capsys, argv, code=2) -> str:
    assert main(argv) == code
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    return err


# ---- validate before any work, and make nothing on failure ----------------------------------------

@pytest.mark.parametrize("override,message", [
    ("task.n_val=0", "task.n_val=0 must be >= 1: a run evaluates on it"),
    ("task.n_test=0", "task.n_test=0 must be >= 1: a run evaluates on it"),
    ("seeds.data=-1", "seeds.data=-1 must be a whole number >= 0"),
    ("seeds.dropout=-3", "seeds.dropout=-3 must be a whole number >= 0"),
    ("model.d_model=0", "model.d_model=0 must be >= 2"),
])
def test_an_impossible_run_config_is_refused_before_a_folder_is_made(tmp_path, capsys, tiny_overrides, override,
                                                                     message):
    err = one_line_error(capsys, ["train", "--task", "number", "--out", str(tmp_path / "a" / "run"),
                                  *tiny_overrides, override])
    assert message in err and "divisible" not in err
    assert tree(tmp_path) == []


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_a_device_that_is_not_there_is_refused_before_a_folder_is_made(tmp_path, capsys, tiny_overrides):
    err = one_line_error(capsys, ["train", "--task", "number", "--out", str(tmp_path / "run"), *tiny_overrides,
                                  "train.device=cuda"])
    assert "device='cuda', but this torch sees no CUDA device" in err
    with pytest.raises(ConfigError, match="sees no CUDA device"):
        possym.train_model(load_config("number", None, [*tiny_overrides, "train.device=cuda"]), tmp_path / "api")
    assert tree(tmp_path) == []


def test_negative_experiment_seeds_are_refused_before_a_folder_is_made(tmp_path):
    with pytest.raises(ConfigError, match=r"seeds=\[-1\] must be a non-empty list of distinct integers >= 0"):
        load_experiment("quick", seeds=(-1,))
    with pytest.raises(ConfigError, match="seeds='0' must be a list of whole numbers"):
        load_experiment("quick", seeds="0")
    assert tree(tmp_path) == []


@pytest.mark.parametrize("spec,message", [
    ("", "sets nothing, and its defaults are a paper-scale experiment"),
    ("name: mine\n", "sets nothing, and its defaults are a paper-scale experiment"),
    ("- preset\n- quick\n", "must be a mapping of experiment keys"),
    ("preset: [quick\n", "line 2 is not valid YAML"),
])
def test_an_empty_keyless_or_malformed_sweep_spec_is_one_sentence_and_makes_nothing(tmp_path, capsys, spec, message):
    (tmp_path / "spec.yaml").write_text(spec)
    err = one_line_error(capsys, ["sweep", str(tmp_path / "spec.yaml"), "--out", str(tmp_path / "out")])
    assert f"experiment file {tmp_path / 'spec.yaml'}" in err and message in err
    assert tree(tmp_path) == ["spec.yaml"]


def test_sweep_overrides_are_accepted_after_out():
    args = parse(["sweep", "quick", "--out", "d", "train.steps=4", "score.n_inputs=2"])
    assert args.overrides == ["train.steps=4", "score.n_inputs=2"] and args.out == "d"
    with pytest.raises(SystemExit):
        parse(["sweep", "quick", "--out", "d", "--bogus"])


def test_run_experiment_of_a_string_is_refused_before_a_folder_is_made(tmp_path):
    with pytest.raises(PossymError, match="run_experiment takes an Experiment .*, not str"):
        run_experiment("quick", tmp_path / "out")
    assert tree(tmp_path) == []


def test_overrides_given_as_one_string_are_refused_not_read_by_character():
    for call in (lambda: load_config("number", None, "train.lr=1e-3"),
                 lambda: possym.load_config("number", None, "train.lr=1e-3"),
                 lambda: load_experiment("quick", overrides="train.steps=4")):
        with pytest.raises(ConfigError, match=r"is one string; give a list of them, e.g. \["):
            call()


def test_unknown_keyword_options_are_refused_naming_the_allowed_ones(tmp_path, reference):
    with pytest.raises(OptionError, match="unexpected keyword argument 'stpe'; its options: path, allow_unfinished"):
        possym.open_run(reference.path, stpe=3)
    with pytest.raises(OptionError, match="'workers'; its options: exp, out, engine, progress, on_unit"):
        run_experiment(load_experiment("quick"), tmp_path / "out", workers=2)
    with pytest.raises(OptionError, match=r"unknown key 'score.n_input'; known score keys: .*n_inputs"):
        possym.open_run(reference.path).scores(n_input=3)
    with pytest.raises(TypeError):  # an OptionError is the TypeError Python would raise, with the options
        possym.train_model(load_config("number", "quick"), tmp_path / "x", monitr=False)
    assert not (tmp_path / "out").exists() and not (tmp_path / "x").exists()


def test_load_model_of_a_directory_says_it_is_a_directory(reference):
    with pytest.raises(RunError, match="is a directory; give a checkpoint file"):
        possym.load_model(reference.path)


def test_heads_on_an_empty_directory_says_there_is_no_model_there(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    err = one_line_error(capsys, ["heads", "--model", str(tmp_path / "empty"), "--prompts", "binding",
                                  "--out", str(tmp_path / "out")])
    assert f"{tmp_path / 'empty'} is a directory without a Hugging Face model (no config.json)" in err
    assert "sentencepiece" not in err and not (tmp_path / "out").exists()


# ---- a sentence for every user error --------------------------------------------------------------

def test_an_output_path_that_is_a_file_is_one_sentence(tmp_path, capsys, tiny_overrides):
    (tmp_path / "taken").write_text("mine")
    err = one_line_error(capsys, ["train", "--task", "number", "--out", str(tmp_path / "taken"), *tiny_overrides])
    assert f"{tmp_path / 'taken'} is a file, not a directory" in err
    err = one_line_error(capsys, ["train", "--task", "number", "--out", str(tmp_path / "taken" / "run"),
                                  *tiny_overrides])
    assert f"{tmp_path / 'taken' / 'run'}: a part of it is a file, not a directory" in err
    assert (tmp_path / "taken").read_text() == "mine"


def test_no_permission_names_the_file_asked_for_not_the_temporary_one(tmp_path, monkeypatch, capsys, tiny_overrides):
    import tempfile

    def refuse(dir, prefix, suffix):
        raise PermissionError(errno.EACCES, "Permission denied", os.path.join(dir, prefix + "x1y2" + suffix))

    monkeypatch.setattr(tempfile, "mkstemp", refuse)  # as root, chmod cannot refuse; the OS's error, as it comes
    with pytest.raises(PermissionError) as raised:
        atomic_write_text(tmp_path / "best.json", "{}")
    assert raised.value.filename == str(tmp_path / "best.json")
    err = one_line_error(capsys, ["train", "--task", "number", "--out", str(tmp_path / "run"), *tiny_overrides])
    assert f"no permission for {tmp_path / 'run' / 'config.yaml'}; choose a place you may write" in err
    assert tree(tmp_path) == []


def test_a_full_disk_is_one_sentence_naming_the_file(tmp_path, monkeypatch, capsys, tiny_overrides):
    import possym.runs

    real = os.fdopen

    class Full:
        def __init__(self, fd, mode):
            self.file = real(fd, mode)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.file.close()

        def write(self, data):
            raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(possym.runs.os, "fdopen", Full)
    err = one_line_error(capsys, ["train", "--task", "number", "--out", str(tmp_path / "run"), *tiny_overrides])
    assert f"the disk holding {tmp_path / 'run' / 'config.yaml'} is full; free some space, then rerun" in err
    assert tree(tmp_path) == []


def test_a_corrupt_best_json_is_one_sentence_and_deleting_it_as_advised_recovers(reference, capsys, tmp_path):
    best = reference.best()
    (reference.path / BEST).write_text('{"step": ')
    err = one_line_error(capsys, ["export", str(reference.path), "--step", "best", "--out", str(tmp_path / "hf")])
    assert f"{reference.path / BEST} is corrupt" in err and "delete it" in err
    (reference.path / BEST).unlink()
    assert RunDir.open(reference.path).best() == best
    assert main(["export", str(reference.path), "--step", "best", "--out", str(tmp_path / "hf")]) == 0


def test_debug_shows_the_traceback(tmp_path):
    with pytest.raises(RunError, match="is not a directory"):
        main(["--debug", "train", "--resume", str(tmp_path / "nothing")])
    with pytest.raises(RunError):
        main(["train", "--resume", str(tmp_path / "nothing"), "--debug"])


def test_ctrl_c_is_exit_130_with_the_resume_hint_and_the_hint_works(tmp_path, make_run, tiny_overrides):
    longer = [*(o for o in tiny_overrides if not o.startswith("train.steps")), "train.steps=200"]
    reference = make_run("reference", "train.steps=200")
    train(reference, make_splits(reference.config.task, 0))
    run = tmp_path / "run"
    argv = [sys.executable, "-m", "possym", "train", "--task", "number", "--out", str(run), *longer]
    # A user at a terminal: SIGINT at its default. A shell without job control starts background commands with
    # SIGINT ignored, and Python keeps an inherited SIG_IGN, so a suite run that way would ignore the signal.
    proc = subprocess.Popen(argv, env=env(), stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.time() + 300
    while not (run / "checkpoints" / "step_000010.safetensors").exists():
        assert proc.poll() is None and time.time() < deadline, proc.stderr.read()[-2000:]
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=300)
    written = sorted(p.name for p in (run / "checkpoints").glob("*.safetensors"))
    assert proc.returncode == 130, (proc.returncode, written[-3:], err[-2000:])
    assert "Traceback" not in err
    hint = err.strip().splitlines()[-1]
    assert hint == f"possym train: interrupted; `possym train --resume {run}` continues it"
    assert not RunDir.open(run).finished and not (run / ".lock").exists()
    assert main(hint.split("`")[1].split()[1:]) == 0  # the hint, followed
    assert comparable(RunDir.open(run).metrics()) == comparable(reference.metrics())
    assert same_weights(RunDir.open(run), reference, 200)
