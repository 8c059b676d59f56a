"""Misuse: a run directory trusts nothing it did not write. Another seed's ``state.pt``,
checkpoint or metrics line is refused, naming the file and both identities; an edited ``config.yaml`` is refused,
naming each changed key with its old and new values; training on to more steps is a command, recorded in the
run's history, whose result equals a run trained on from the same checkpoint. Every piece of advice is followed."""

from __future__ import annotations

import json
import re
import shutil

import pytest
import yaml
from misuse_probes import comparable, copy_run, one_line_error, same_weights, weights
from safetensors.torch import load, save

import possym
from possym.cli import main
from possym.config import load_config
from possym.errors import ConfigError, IdentityError, RunError
from possym.runs import CONFIG, META, METRICS, STATE, STATE_RUN, RunDir, identity_of
from possym.tasks import make_splits
from possym.train.loop import train
from possym.train.schedule import lr_factor

SCORE = ["score.n_inputs=2", "score.figures=false", "score.frequency=false"]


@pytest.fixture(scope="module")
def seeds(tmp_path_factory, tiny_session_overrides) -> list[RunDir]:
    """Two finished tiny runs, seeds 0 and 1 (each test copies them before it damages one)."""
    root = tmp_path_factory.mktemp("seeds")
    runs = []
    for seed in (0, 1):
        cfg = load_config("number", None, [*tiny_session_overrides, f"seeds.init={seed}", f"seeds.order={seed}"])
        run = RunDir.create(root / f"s{seed}", cfg, argv=["test"])
        train(run, make_splits(run.config.task, run.config.seeds.data))
        runs.append(run)
    return runs


def test_a_run_records_its_identity_and_every_file_it_writes_carries_it(seeds):
    run = seeds[0]
    assert run.meta["identity"] == run.identity == identity_of(run.config) != seeds[1].identity
    assert f"# possym run {run.identity}" in (run.path / CONFIG).read_text()
    assert {r["identity"] for r in run.metrics()} == {run.identity}
    header = json.loads(run.checkpoint_path(30).read_bytes()[8:8 + int.from_bytes(
        run.checkpoint_path(30).read_bytes()[:8], "little")])["__metadata__"]
    assert header["identity"] == run.identity
    assert run.load_state()[STATE_RUN]["identity"] == run.identity


def test_another_seeds_state_pt_is_refused_naming_the_file_and_both_identities(seeds, tmp_path, capsys):
    run = copy_run(seeds[0], tmp_path / "run")
    shutil.copy(seeds[1].path / STATE, run.path / STATE)
    before = weights(run, 30)
    err = one_line_error(capsys, ["train", "--resume", str(run.path)])
    assert (f"{run.path / STATE} belongs to another run: its identity is {seeds[1].identity} (seeds.init=1, "
            f"seeds.order=1), this run's is {run.identity}") in err
    assert all(bool((weights(run, 30)[k] == v).all()) for k, v in before.items()), "the refusal changed nothing"
    # The advice, followed: move it away; resuming trains the run again from step 0, to the same weights.
    assert "move it away: `possym train --resume" in err
    (run.path / STATE).unlink()
    assert main(["train", "--resume", str(run.path)]) == 0
    assert same_weights(run, seeds[0], 30) and comparable(run.metrics()) == comparable(seeds[0].metrics())


def test_another_seeds_checkpoint_is_refused_by_every_reader_naming_the_file(seeds, tmp_path, capsys):
    run = copy_run(seeds[0], tmp_path / "run")
    foreign = run.checkpoint_path(20)
    shutil.copy(seeds[1].checkpoint_path(20), foreign)
    says = f"{foreign} belongs to another run: its identity is {seeds[1].identity} (seeds.init=1, seeds.order=1), " \
           f"this run's is {run.identity}"
    for argv in (["export", str(run.path), "--step", "20", "--out", str(tmp_path / "hf")],
                 ["score", str(run.path), *SCORE], ["discrepancy", str(run.path), "discrepancy.step=20"]):
        assert says in one_line_error(capsys, argv)
    with pytest.raises(IdentityError, match=re.escape(says)):
        possym.open_run(run.path).model(20)
    assert not (tmp_path / "hf").exists()
    # The advice: delete it to analyse the others, or retrain the run to re-create it (followed: retrain).
    err = one_line_error(capsys, ["export", str(run.path), "--step", "20", "--out", str(tmp_path / "hf")])
    retrain = re.search(r"delete (\S+?) and run `possym train --resume (\S+?)`", err)
    assert retrain and retrain.group(1) == str(run.path / STATE)
    (run.path / STATE).unlink()
    assert main(["train", "--resume", retrain.group(2)]) == 0
    assert same_weights(run, seeds[0], 20) and same_weights(run, seeds[0], 30)


def test_another_seeds_final_checkpoint_stops_a_resume_which_re_creates_it_once_moved_away(seeds, tmp_path, capsys):
    run = copy_run(seeds[0], tmp_path / "run")
    shutil.copy(seeds[1].checkpoint_path(30), run.checkpoint_path(30))
    err = one_line_error(capsys, ["train", "--resume", str(run.path)])  # before: exit 0, the other seed's weights
    assert f"{run.checkpoint_path(30)} belongs to another run" in err and "move it away" in err
    run.checkpoint_path(30).unlink()
    assert main(["train", "--resume", str(run.path)]) == 0
    assert same_weights(run, seeds[0], 30)


def test_another_runs_metrics_line_is_refused_and_the_log_is_rebuilt_from_the_checkpoints(seeds, tmp_path, capsys):
    run = copy_run(seeds[0], tmp_path / "run")
    theirs = (seeds[1].path / METRICS).read_text().splitlines()[1]
    lines = (run.path / METRICS).read_text().splitlines()
    (run.path / METRICS).write_text("\n".join([lines[0], theirs, *lines[2:]]) + "\n")
    err = one_line_error(capsys, ["summary", str(run.path)])
    assert (f"{run.path / METRICS}, line 2 belongs to another run: its identity is {seeds[1].identity}, this run's "
            f"is {run.identity}") in err
    command = re.search(r"`(possym train --rebuild-metrics \S+)`", err).group(1)  # the advice, followed
    assert main(command.split()[1:]) == 0
    assert "rebuilt 4 evaluations and the final test" in capsys.readouterr().out
    assert comparable(run.metrics()) == comparable(seeds[0].metrics())
    assert (run.path / f"{METRICS}.damaged").read_text().splitlines()[1] == theirs  # nothing vanishes
    assert run.best() == seeds[0].best() and RunDir.open(run.path).finished


@pytest.mark.parametrize("key,value,shown", [
    ("train.lr", 0.01, "train.lr 0.001 -> 0.01"),
    ("task.n_train", 3000, "task.n_train 4000 -> 3000"),
    ("model.d_model", 32, "model.d_model 16 -> 32"),  # before: a raw "size mismatch" traceback
    ("seeds.data", 5, "seeds.data 0 -> 5"),
])
def test_an_edited_config_yaml_is_refused_naming_each_changed_key_old_and_new(seeds, tmp_path, capsys, key, value,
                                                                                shown):
    run = copy_run(seeds[0], tmp_path / "run")
    original = (run.path / CONFIG).read_text()
    data = yaml.safe_load(original)
    section, name = key.split(".")
    data[section][name] = value
    (run.path / CONFIG).write_text(yaml.safe_dump(data))
    for argv in (["train", "--resume", str(run.path)], ["score", str(run.path), *SCORE],
                 ["summary", str(run.path)], ["export", str(run.path), "--out", str(tmp_path / "hf")]):
        err = one_line_error(capsys, argv)
        assert f"{run.path / CONFIG} was edited after the run was made: {shown}; the run computed with the values " \
               f"recorded in {run.path / META}" in err
    with pytest.raises(IdentityError, match=re.escape(shown)):
        possym.open_run(run.path)
    # The advice, followed: put the values back.
    (run.path / CONFIG).write_text(original)
    assert main(["train", "--resume", str(run.path)]) == 0 and same_weights(run, seeds[0], 30)


def test_execution_keys_may_change_in_config_yaml_and_on_resume(seeds, tmp_path):
    run = copy_run(seeds[0], tmp_path / "run")
    data = yaml.safe_load((run.path / CONFIG).read_text())
    data["train"]["threads"] = 2
    (run.path / CONFIG).write_text(yaml.safe_dump(data))
    assert RunDir.open(run.path).config.train.threads == 2  # how the run runs, not what it computes
    assert main(["train", "--resume", str(run.path), "train.threads=1", "train.device=cpu"]) == 0


def test_a_resume_refuses_a_key_that_would_change_the_steps_taken_naming_those_it_takes(seeds, tmp_path, capsys):
    run = copy_run(seeds[0], tmp_path / "run")
    err = one_line_error(capsys, ["train", "--resume", str(run.path), "train.lr=0.01"])
    assert "train.lr would change what the run's steps computed" in err and "train.steps=N (to train on)" in err
    err = one_line_error(capsys, ["train", "--resume", str(run.path), "train.step=40"])
    assert "did you mean 'train.steps'?" in err
    err = one_line_error(capsys, ["train", "--resume", str(run.path), "train.steps=20"])
    assert "train.steps=20 is fewer than the 30 steps" in err
    assert yaml.safe_load((run.path / CONFIG).read_text())["train"]["steps"] == 30 and run.history == []


def test_train_steps_edited_is_refused_and_training_on_is_a_command_recorded_in_the_history(seeds, tmp_path,
                                                                                            capsys, tiny_overrides):
    run = copy_run(seeds[0], tmp_path / "run")
    original = (run.path / CONFIG).read_text()
    (run.path / CONFIG).write_text(original.replace("steps: 30", "steps: 40"))
    err = one_line_error(capsys, ["train", "--resume", str(run.path)])
    assert "train.steps 30 -> 40" in err
    hint = re.search(r"put train.steps back and run `(possym train --resume \S+ train.steps=40)`", err)
    assert hint, err
    (run.path / CONFIG).write_text(original)  # the advice, followed
    assert main(hint.group(1).split()[1:]) == 0
    assert "training" in capsys.readouterr().out
    run = RunDir.open(run.path)
    assert run.config.total_steps == 40 and run.finished and run.checkpoint_steps() == [0, 10, 20, 30, 40]
    assert [(h["step"], h["changed"]) for h in run.history] == [(30, {"train.steps": [30, 40]})]
    assert all(same_weights(run, seeds[0], s) for s in (0, 10, 20, 30)), "the steps taken keep what they computed"
    # Its config.yaml is not a fresh 40-step run's (whose weights differ at every checkpoint): it names its identity.
    fresh = RunDir.create(tmp_path / "fresh", load_config("number", None, [*tiny_overrides, "train.steps=40"]))
    assert (fresh.path / CONFIG).read_text() != (run.path / CONFIG).read_text()
    assert run.identity == seeds[0].identity != fresh.identity

    # It equals a run trained on from the same checkpoint: another copy of the 30-step run, trained on to 40 through
    # the library and cut (as a kill would) at step 35, then resumed; its learning rate from step 30 on is the
    # linear schedule of the new total, lr * (40 - s) / (40 - warm-up).
    other = copy_run(seeds[0], tmp_path / "other").train_on(40, argv=["test"])
    lrs = {}

    class Cut(Exception):
        pass

    def cut(info):
        lrs[info["step"]] = info["lr"]
        if info["step"] == 35:
            raise Cut

    with pytest.raises(Cut):
        train(other, make_splits(other.config.task, 0), on_step=cut)
    train(RunDir.open(other.path), make_splits(other.config.task, 0), on_step=lambda info: lrs.update(
        {info["step"]: info["lr"]}))
    assert same_weights(run, RunDir.open(other.path), 40)
    assert comparable(run.metrics()) == comparable(RunDir.open(other.path).metrics())
    assert {s: pytest.approx(lr) for s, lr in lrs.items()} == {s: 1e-3 * lr_factor(s, 5, 40) for s in range(31, 41)}
    assert lr_factor(30, 5, 30) == 0.0  # where the 30-step run's schedule had ended


def test_training_on_through_the_api_refuses_a_smaller_total(seeds, tmp_path):
    run = possym.open_run(copy_run(seeds[0], tmp_path / "run").path)
    with pytest.raises(ConfigError, match="fewer than the 30 steps"):
        run.train_on(10)
    with pytest.raises(ConfigError, match="must be a whole number of steps"):
        run.train_on("40")
    assert run.train_on(30).history == []  # its own total: nothing changes


def _legacy(run: RunDir) -> RunDir:
    """``run`` as a possym before identities wrote it: no identity in meta.json, the metrics, the checkpoints'
    headers and state.pt, and a config.yaml without the comment."""
    meta = run.meta
    for key in ("identity", "config", "history"):
        meta.pop(key)
    (run.path / META).write_text(json.dumps(meta))
    (run.path / CONFIG).write_text(yaml.safe_dump(run.config.to_dict(), sort_keys=False))
    lines = [{k: v for k, v in r.items() if k != "identity"} for r in run.metrics()]
    (run.path / METRICS).write_text("".join(json.dumps(r) + "\n" for r in lines))
    for step in run.checkpoint_steps():
        header, tensors = run.read_checkpoint(step)
        header.pop("identity")
        run.checkpoint_path(step).write_bytes(save(tensors, metadata=header))
    state = run.load_state()
    state.pop(STATE_RUN)
    import torch

    torch.save(state, run.path / STATE)
    return RunDir.open(run.path)


def test_a_run_from_before_identities_is_read_and_gets_its_identity_on_its_next_writers_open(seeds, tmp_path):
    run = _legacy(copy_run(seeds[0], tmp_path / "run"))
    assert "identity" not in run.meta and run.identity == seeds[0].identity  # computed from its config
    assert load(run.checkpoint_path(30).read_bytes()) and run.load_model(30) is not None
    possym.open_run(run.path).scores(n_inputs=2, figures=False, frequency=False, progress=False)  # a writer
    assert run.meta["identity"] == seeds[0].identity and "identity_recorded" in run.meta
    assert run.meta["config"] == yaml.safe_load((run.path / CONFIG).read_text())
    # Its older files (no identity) are checked by their config: another seed's checkpoint is refused still.
    other = _legacy(copy_run(seeds[1], tmp_path / "other"))
    shutil.copy(other.checkpoint_path(20), run.checkpoint_path(20))
    with pytest.raises(IdentityError, match=r"its header's config differs from this run's \(seeds.init 1 -> 0"):
        run.load_model(20)


def test_an_edited_config_of_a_run_from_before_identities_is_refused_against_its_checkpoints(seeds, tmp_path):
    run = _legacy(copy_run(seeds[0], tmp_path / "run"))
    (run.path / CONFIG).write_text((run.path / CONFIG).read_text().replace("lr: 0.001", "lr: 0.01"))
    with pytest.raises(IdentityError, match=re.escape(f"train.lr 0.001 -> 0.01; the run computed with the values "
                                                      f"recorded in {run.checkpoint_path(30)}")):
        RunDir.open(run.path)


def test_train_model_with_more_steps_on_a_run_names_the_command_that_trains_it_on(seeds, tmp_path, tiny_overrides):
    run = copy_run(seeds[0], tmp_path / "run")
    more = load_config("number", None, [*tiny_overrides, "train.steps=40"])
    with pytest.raises(RunError, match=re.escape(f"to train it on to 40 steps: `possym train --resume {run.path} "
                                                 f"train.steps=40` (possym.open_run(...).train_on(40))")):
        possym.train_model(more, run.path, progress=False)
