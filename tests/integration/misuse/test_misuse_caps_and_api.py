"""Misuse: no silent caps, no dead ends, and the API speaks as the CLI does. A setting
larger than what it can use is clamped with one line and the memo records what was used; numeric settings keep to
their bounds; K is checked against memory before anything is allocated; readers never take the write lock; a full
disk names the command that continues; the public functions check their arguments and name the allowed ones; a
near-miss key suggests the closest; an unfinished run says so wherever it is shown."""

from __future__ import annotations

import errno
import logging
import re

import pytest
import torch
from misuse_probes import comparable, copy_run, one_line_error, same_weights, tree

import possym
from possym.cli import main
from possym.config import load_config
from possym.errors import ConfigError, OptionError, PossymError, RunError
from possym.evaluate.curves import learning_summary
from possym.experiment import run_stage
from possym.runs import CKPT_DIR, RunDir
from possym.stages.memo import run_memo
from possym.stages.registry import get_stage
from possym.tasks import make_splits
from possym.train.loop import train

SCORE = ["score.figures=false", "score.frequency=false"]


@pytest.fixture(scope="module")
def finished(tmp_path_factory, tiny_session_overrides) -> RunDir:
    run = RunDir.create(tmp_path_factory.mktemp("finished") / "run",
                        load_config("number", None, tiny_session_overrides), argv=["test"])
    train(run, make_splits(run.config.task, run.config.seeds.data))
    return run


# ---- no silent caps ------------------------------------------------------------------------------

def test_more_score_inputs_than_the_test_split_are_clamped_in_one_line_and_the_memo_records_what_was_used(
        finished, tmp_path, capsys, caplog):
    run = copy_run(finished, tmp_path / "run")
    with caplog.at_level(logging.WARNING, logger="possym.stages.score"):
        assert main(["score", str(run.path), "score.n_inputs=100000", *SCORE]) == 0
    assert f"{run.path}: 200 inputs, 4 checkpoints" in capsys.readouterr().out  # before: "100000 inputs"
    said = [r.getMessage() for r in caplog.records]
    assert said == [f"possym: score.n_inputs=100000 is more than the 200 inputs of {run.path}'s test split; using all "
                    "200 (the memo records 200)"]
    assert run_memo(run.path).entry("score")["settings"]["n_inputs"] == 200  # before: 100000
    assert not run_stage(run, "score", get_stage("score").from_overrides(["score.n_inputs=200", *SCORE])).ran


@pytest.mark.parametrize("threshold", ["nan", "2", "-1", "inf"])
def test_a_summary_threshold_outside_0_1_is_refused_in_one_line(finished, capsys, threshold):
    err = one_line_error(capsys, ["summary", str(finished.path), "--threshold", threshold])
    assert f"threshold={float(threshold)!r} must be an accuracy, a number in [0, 1]" in err
    with pytest.raises(PossymError, match="must be an accuracy"):
        learning_summary(finished.metrics_log(), float(threshold))


def test_a_length_grid_beyond_memory_is_refused_before_anything_is_allocated(finished, tmp_path, capsys):
    run = copy_run(finished, tmp_path / "run")
    before = tree(run.path)
    err = one_line_error(capsys, ["lengthgen", str(run.path), "lengthgen.grid=[1000000000]"])  # before: 7.45 GiB, numpy
    assert re.search(r"lengthgen grid: K=1000000000 needs about [\d,.]+ TiB .* available; the largest K that fits is "
                     r"about \d+: lower lengthgen.grid", err), err
    with pytest.raises(ConfigError, match="the largest K that fits"):
        possym.open_run(run.path).length_curve(grid=(0, 10**9), progress=False)
    assert tree(run.path) == before


def _refuse_locks(monkeypatch):
    """A read-only directory, as a non-root user meets one: taking its write lock fails."""
    def refuse(directory, what):
        raise PermissionError(errno.EROFS, "Read-only file system", str(directory / ".lock"))
    monkeypatch.setattr("possym.locks._acquire", refuse)


def test_readers_never_take_the_write_lock_a_fully_scored_run_reads_back_from_a_read_only_directory(
        finished, tmp_path, capsys, monkeypatch):
    run = copy_run(finished, tmp_path / "run")
    assert main(["score", str(run.path), "score.n_inputs=4", *SCORE]) == 0
    assert main(["lengthgen", str(run.path), "lengthgen.grid=[0,10]", "lengthgen.n=8", "lengthgen.n_prefixes=2"]) == 0
    capsys.readouterr()
    before = tree(run.path)
    _refuse_locks(monkeypatch)
    assert main(["score", str(run.path), "score.n_inputs=4", *SCORE]) == 0  # before: refused, taking the lock
    assert "score: done with these settings" in capsys.readouterr().out
    assert main(["lengthgen", str(run.path), "lengthgen.grid=[0,10]", "lengthgen.n=8", "lengthgen.n_prefixes=2"]) == 0
    assert len(possym.open_run(run.path).scores(n_inputs=4, figures=False, frequency=False, progress=False)) > 0
    assert main(["summary", str(run.path)]) == 0 and main(["export", str(run.path), "--out", str(tmp_path / "hf")]) == 0
    assert tree(run.path) == before
    capsys.readouterr()
    err = one_line_error(capsys, ["score", str(run.path), "score.n_inputs=5", *SCORE])  # a writer: refused, one line
    assert f"{run.path / '.lock'} is on a read-only filesystem" in err


def test_a_full_disk_while_training_names_the_command_that_continues_and_it_does(tmp_path, capsys, tiny_overrides,
                                                                                  monkeypatch, reference):
    real = RunDir.save_checkpoint

    def full(self, step, state_dict):
        if step == 20:
            raise OSError(errno.ENOSPC, "No space left on device", str(self.checkpoint_path(step)))
        return real(self, step, state_dict)

    monkeypatch.setattr(RunDir, "save_checkpoint", full)
    run = tmp_path / "run"
    err = one_line_error(capsys, ["train", "--task", "number", "--out", str(run), *tiny_overrides,
                                  "training.progress=false"])
    assert err.endswith(f"is full; free some space, then `possym train --resume {run}` continues it (--debug shows "
                        "the traceback)")  # before: "rerun the command", which is refused: RUN holds a run
    monkeypatch.setattr(RunDir, "save_checkpoint", real)
    assert main(err.split("`")[1].split()[1:]) == 0  # the advice, followed
    assert same_weights(RunDir.open(run), reference, 30)
    assert comparable(RunDir.open(run).metrics()) == comparable(reference.metrics())


# ---- the API speaks as the CLI does ---------------------------------------------------------------

@pytest.mark.parametrize("call,says", [
    (lambda: possym.open_run(123), "a run directory is a path (str or pathlib.Path), not int 123"),
    (lambda: possym.open_run(None), "a run directory is a path (str or pathlib.Path), not NoneType None"),
    (lambda: possym.load_model(None), "load_model takes a checkpoint file's path (str or pathlib.Path), not NoneType"),
    (lambda: possym.load_experiment(123), "load_experiment takes a packaged experiment's name (paper, "),
], ids=["open_run-int", "open_run-None", "load_model-None", "load_experiment-int"])
def test_public_functions_check_the_types_of_their_arguments(call, says):
    with pytest.raises(PossymError, match=re.escape(says)):  # before: pathlib's TypeError
        call()


def test_models_and_head_scores_name_what_they_take(finished):
    path = finished.checkpoint_path(30)
    assert possym.load_model(path, dtype="float16").embed.weight.dtype == torch.float16  # a dtype's name is read
    with pytest.raises(PossymError, match=r"dtype='half precision' is not a dtype a model takes; allowed: "
                                          r"torch.float32, torch.float64, torch.bfloat16, torch.float16"):
        possym.load_model(path, dtype="half precision")
    with pytest.raises(PossymError, match="dtype=1 is not a dtype"):
        possym.open_run(finished.path).model(dtype=1)
    model = possym.load_model(path)
    with pytest.raises(PossymError, match=r"give a list of strings, not one string"):
        possym.head_scores(model, "some text")  # before: torch's TypeError
    tokens = torch.as_tensor(make_splits(finished.config.task, 0)["test"].tokens[:2])
    with pytest.raises(OptionError, match=r"unexpected keyword argument 'foo'; its options for a possym GPTJ: .*tau"):
        possym.head_scores(model, tokens, foo=1)
    with pytest.raises(OptionError, match="did you mean 'tau'"):
        possym.head_scores(model, tokens, tua=1e-3)
    assert possym.head_scores(model, tokens).s_pos.shape[0] == 2


def test_load_model_of_a_checkpoint_folder_names_a_file_in_it_and_its_run(finished):
    with pytest.raises(RunError) as raised:
        possym.load_model(finished.path / CKPT_DIR)  # before: two wrong paths
    assert str(raised.value) == (f"{finished.path / CKPT_DIR} is a directory; give one of its checkpoint files (e.g. "
                                 f"{finished.checkpoint_path(30)}), or open its run with "
                                 f"possym.open_run({str(finished.path)!r}).model(step)")


def test_export_without_permission_names_the_folder_asked_for_not_its_temporary_one(finished, tmp_path, capsys,
                                                                                    monkeypatch):
    import tempfile

    def refuse(dir=None, prefix=None):
        raise PermissionError(errno.EACCES, "Permission denied", f"{dir}/{prefix}x1y2z3")

    monkeypatch.setattr(tempfile, "mkdtemp", refuse)
    err = one_line_error(capsys, ["export", str(finished.path), "--out", str(tmp_path / "hf")])
    assert f"no permission for {tmp_path / 'hf'}; choose a place you may write" in err and ".hf." not in err


@pytest.mark.parametrize("argv,says", [
    (["train", "--task", "number", "--out", "OUT", "train.lrr=1e-3"], "did you mean 'train.lr'?"),
    (["train", "--task", "number", "--out", "OUT", "trian.lr=1e-3"], "did you mean 'train'?"),
    (["score", "RUN", "score.n_input=3"], "did you mean 'score.n_inputs'?"),
    (["lengthgen", "RUN", "lengthgen.gird=[0]"], "did you mean 'lengthgen.grid'?"),
    (["reproduce", "quick", "--out", "OUT", "experiment.seed=[0]"], "did you mean 'seeds'?"),
])
def test_a_near_miss_key_suggests_the_closest(tmp_path, capsys, finished, argv, says):
    argv = [str(finished.path) if a == "RUN" else str(tmp_path / "out") if a == "OUT" else a for a in argv]
    assert says in one_line_error(capsys, argv)
    assert not (tmp_path / "out").exists()


def test_a_near_miss_option_and_key_of_the_api_suggest_the_closest(finished):
    with pytest.raises(OptionError, match="did you mean 'step'"):
        possym.open_run(finished.path).model(stp=3)
    with pytest.raises(ConfigError, match="did you mean 'train.steps'"):
        possym.load_config("number", None, ["train.step=3"])
    with pytest.raises(OptionError, match="did you mean 'score.n_inputs'"):
        possym.open_run(finished.path).scores(n_input=3)


@pytest.mark.parametrize("value,says", [
    ("\udcff", "is not a value YAML reads"),  # an invalid UTF-8 byte on the command line
    ("!!python/object/apply:os.system [echo]", "has a YAML tag (!!python/object/apply...); give a plain value"),
    ("[1", "is not a value YAML reads (expected ',' or ']'"),
])
def test_an_override_yaml_cannot_read_is_one_line_and_makes_nothing(tmp_path, capsys, value, says):
    err = one_line_error(capsys, ["train", "--task", "number", "--out", str(tmp_path / "run"), f"train.lr={value}"])
    assert f"override train.lr: value {value!r} {says}" in err  # before: a raw YAML traceback
    assert not (tmp_path / "run").exists()


def test_summary_and_the_run_say_unfinished_at_step_n_of_m(make_run, capsys):
    run = make_run("cut")

    class Stop(Exception):
        pass

    def stop(info):
        if info["step"] == 17:
            raise Stop
    with pytest.raises(Stop):
        train(run, make_splits(run.config.task, 0), on_step=stop)
    assert main(["summary", str(run.path)]) == 0
    said = capsys.readouterr().out  # before: nothing said it
    assert f"{run.path} (number, preset None): unfinished at step 10 of 30" in said
    assert possym.open_run(run.path).status() == "unfinished at step 10 of 30"


def test_a_reader_sees_that_a_run_is_being_written_without_taking_its_lock(finished, tmp_path, capsys):
    from misuse_probes import hold_lock

    from possym.locks import LOCK_FILE, being_written, writer_lock

    run = copy_run(finished, tmp_path / "run")
    assert not being_written(run.path) and not (run.path / LOCK_FILE).exists()  # looking makes no lock file
    with writer_lock(run.path, "run"):
        assert not being_written(run.path)  # this process's own hold is not another writer
    holder = hold_lock(run.path)
    try:
        assert being_written(run.path)
        # The writer at work is named first, before what else the command would refuse (final of an unfinished run).
        err = one_line_error(capsys, ["score", str(run.path), "score.n_inputs=4", "score.table_step=bogus"])
        assert f"run {run.path} is being written by process {holder.pid}" in err
    finally:
        holder.stdin.close()
        holder.wait()
    assert not being_written(run.path)
