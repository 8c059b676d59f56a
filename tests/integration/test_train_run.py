import json
import os
import signal
import subprocess
import sys
import time

import pytest
import torch
import yaml
from safetensors.torch import load_file

from possym.cli import main
from possym.config import load_config
from possym.errors import PossymError
from possym.runs import RunDir, RunError
from possym.tasks import make_splits
from possym.train.fused import STEP_VERSION, cxx_compiler
from possym.train.loop import batch_indices, train
from possym.train.trainee import GROUP_STATE, STEP_VERSION_KEY, StepVersionError


def make_run(tmp_path, name, overrides, task="number"):
    return RunDir.create(tmp_path / name, load_config(task, None, overrides), argv=["test"])


def final_weights(run: RunDir) -> dict[str, torch.Tensor]:
    return load_file(run.checkpoint_path(run.checkpoint_steps()[-1]))


def test_run_directory_records_itself_before_and_after_training(tmp_path, tiny_overrides):
    run = make_run(tmp_path, "r", tiny_overrides)
    meta = json.loads((run.path / "meta.json").read_text())
    assert {"seeds", "versions", "git_commit", "command", "torch_threads", "python"} <= set(meta)
    assert yaml.safe_load((run.path / "config.yaml").read_text())["model"]["d_model"] == 16
    final = train(run, make_splits(run.config.task, 0))
    assert run.checkpoint_steps() == [0, 10, 20, 30]
    evals = [r for r in run.metrics() if r["event"] == "eval"]
    assert [r["step"] for r in evals] == [0, 10, 20, 30]
    assert {"accuracy", "acc_hop1", "acc_hop4", "loss"} <= set(evals[-1])
    assert final["split"] == "test" and 0.0 <= final["accuracy"] <= 1.0
    assert evals[-1]["loss"] < evals[0]["loss"], "30 steps at lr 1e-3 must lower the loss"
    # Any analysis reloads from the directory alone.
    reopened = RunDir.open(run.path)
    assert reopened.config == run.config
    model = reopened.load_model()
    assert model.cfg.d_vocab == 137 and not model.training


def test_same_seeds_give_identical_weights(tmp_path, tiny_overrides):
    a, b = make_run(tmp_path, "a", tiny_overrides), make_run(tmp_path, "b", tiny_overrides)
    splits = make_splits(a.config.task, 0)
    train(a, splits)
    train(b, splits)
    wa, wb = final_weights(a), final_weights(b)
    assert all(torch.equal(wa[k], wb[k]) for k in wa)
    c = make_run(tmp_path, "c", tiny_overrides + ["seeds.init=1"])
    train(c, splits)
    assert not torch.equal(final_weights(c)["embed.weight"], wa["embed.weight"])


class Interrupt(Exception):
    pass


def test_resume_after_an_interruption_is_bitwise_identical(tmp_path, tiny_overrides):
    ref = make_run(tmp_path, "ref", tiny_overrides)
    splits = make_splits(ref.config.task, 0)
    train(ref, splits)

    run = make_run(tmp_path, "cut", tiny_overrides)

    def cut(info):
        if info["step"] == 17:  # past the step-10 state, before the step-20 one
            raise Interrupt

    with pytest.raises(Interrupt):
        train(run, splits, on_step=cut)
    assert run.checkpoint_steps() == [0, 10]
    train(RunDir.open(run.path), splits)
    wa, wb = final_weights(ref), final_weights(run)
    assert all(torch.equal(wa[k], wb[k]) for k in wa)
    # The metrics log holds each evaluation exactly once.
    assert [r["step"] for r in run.metrics() if r["event"] == "eval"] == [0, 10, 20, 30]


def _rewrite_state(run: RunDir, drop: tuple[str, ...]) -> None:
    """Rewrite ``run``'s resumable state without the keys ``drop``, as an older possym wrote it."""
    state = run.load_state()
    run.save_state({k: v for k, v in state.items() if k not in drop})


def test_a_state_of_the_single_model_step_is_refused_in_one_line_and_its_advice_works(tmp_path, tiny_overrides):
    """A state written before the step versions were recorded, without a group layout, is the
    single-model step's (version 1), which rounds differently from a group of one: refused, in one
    line that says what to do; deleting state.pt, as it says, trains the run again from step 0."""
    ref = make_run(tmp_path, "ref", tiny_overrides)
    splits = make_splits(ref.config.task, 0)
    train(ref, splits)

    run = make_run(tmp_path, "old", tiny_overrides)
    with pytest.raises(Interrupt):
        train(run, splits, on_step=_cut_at(17))
    _rewrite_state(run, (STEP_VERSION_KEY, GROUP_STATE))
    with pytest.raises(StepVersionError) as refused:
        train(RunDir.open(run.path), splits)
    message = str(refused.value)
    assert isinstance(refused.value, PossymError) and "\n" not in message
    assert "step version 1" in message and f"version {STEP_VERSION}" in message
    assert "delete" in message and str(run.path / "state.pt") in message
    (run.path / "state.pt").unlink()  # the advice
    train(RunDir.open(run.path), splits)
    wa, wb = final_weights(ref), final_weights(run)
    assert all(torch.equal(wa[k], wb[k]) for k in wa)
    assert [r["step"] for r in run.metrics() if r["event"] == "eval"] == [0, 10, 20, 30]


def test_a_state_of_the_batched_step_written_before_versions_were_recorded_resumes_bitwise(tmp_path, tiny_overrides):
    """A state with a group layout and no version is the member-batched step's, this step: it resumes
    to the same bits; and every state now records the version."""
    ref = make_run(tmp_path, "ref", tiny_overrides)
    splits = make_splits(ref.config.task, 0)
    train(ref, splits)
    assert ref.load_state()[STEP_VERSION_KEY] == STEP_VERSION

    run = make_run(tmp_path, "cut", tiny_overrides)
    with pytest.raises(Interrupt):
        train(run, splits, on_step=_cut_at(17))
    _rewrite_state(run, (STEP_VERSION_KEY,))
    train(RunDir.open(run.path), splits)
    wa, wb = final_weights(ref), final_weights(run)
    assert all(torch.equal(wa[k], wb[k]) for k in wa)


def _cut_at(step: int):
    def cut(info):
        if info["step"] == step:
            raise Interrupt

    return cut


def test_resume_from_a_state_older_than_the_newest_checkpoint_replays_to_the_same_bits(tmp_path, tiny_overrides):
    ref = make_run(tmp_path, "ref", tiny_overrides)
    splits = make_splits(ref.config.task, 0)
    train(ref, splits)

    run = make_run(tmp_path, "cut", [*tiny_overrides, "train.state_every=20"])

    def cut(info):
        if info["step"] == 17:  # checkpoints 0 and 10 exist; the only state is step 0's
            raise Interrupt

    with pytest.raises(Interrupt):
        train(run, splits, on_step=cut)
    assert run.checkpoint_steps() == [0, 10] and run.load_state()["step"] == 0
    train(RunDir.open(run.path), splits)
    wa, wb = final_weights(ref), final_weights(run)
    assert all(torch.equal(wa[k], wb[k]) for k in wa)
    assert [r["step"] for r in run.metrics() if r["event"] == "eval"] == [0, 10, 20, 30]


@pytest.mark.skipif(cxx_compiler() is None, reason="Inductor needs a C++ compiler")
@pytest.mark.long
def test_compiled_training_resumes_bitwise_and_tracks_the_eager_run(tmp_path, tiny_overrides, cut_and_resume):
    """``train.compile=true`` end to end: an interrupted compiled run resumes to the same bits, and
    its weights stay within float32 rounding of the eager run's (the kernels fuse differently)."""
    compiled = [*tiny_overrides, "train.compile=true"]
    eager, ref = make_run(tmp_path, "eager", tiny_overrides), make_run(tmp_path, "ref", compiled)
    splits = make_splits(ref.config.task, 0)
    train(eager, splits)
    train(ref, splits)

    run = make_run(tmp_path, "cut", compiled)
    cut_and_resume(run, splits, at_step=17)
    wa, wb, we = final_weights(ref), final_weights(run), final_weights(eager)
    assert all(torch.equal(wa[k], wb[k]) for k in wa)
    for k in we:
        torch.testing.assert_close(wa[k], we[k], rtol=1e-4, atol=1e-5, msg=k)


def test_compile_without_a_cxx_compiler_says_so_before_training(tmp_path, tiny_overrides, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # no compiler on it
    monkeypatch.delenv("CXX", raising=False)
    assert cxx_compiler() is None
    run = make_run(tmp_path, "r", [*tiny_overrides, "train.compile=true"])
    with pytest.raises(RuntimeError, match="train.compile=true needs a C\\+\\+ compiler"):
        train(run, make_splits(run.config.task, 0))
    assert run.checkpoint_steps() == []


def test_batches_are_epoch_permutations():
    rows = [batch_indices(s, 100, 10, order_seed=3) for s in range(10)]
    assert sorted(int(i) for r in rows for i in r) == list(range(100))
    assert not (batch_indices(10, 100, 10, 3) == rows[0]).all(), "epoch 2 reshuffles"


@pytest.mark.long
def test_killed_process_resumes_to_the_same_weights(tmp_path, tiny_overrides):
    """A real SIGKILL mid-run, then `possym train --resume`: bitwise the same final weights."""
    overrides = [o for o in tiny_overrides if not o.startswith("train.steps")] + [
        "train.steps=300",
        "model.d_model=32",
        "model.d_mlp=64",
    ]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "possym", "train", "--task", "letter"]
    ref = subprocess.run([*cmd, "--out", str(tmp_path / "ref"), *overrides], env=env, capture_output=True)
    assert ref.returncode == 0, ref.stderr.decode()[-2000:]

    proc = subprocess.Popen(
        [*cmd, "--out", str(tmp_path / "cut"), *overrides],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    marker = tmp_path / "cut" / "checkpoints" / "step_000100.safetensors"
    deadline = time.time() + 300
    while not marker.exists() and proc.poll() is None and time.time() < deadline:
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL
    assert not (tmp_path / "cut" / "checkpoints" / "step_000300.safetensors").exists(), "killed too late"

    resumed = subprocess.run([*cmd[:4], "--resume", str(tmp_path / "cut")], env=env, capture_output=True)
    assert resumed.returncode == 0, resumed.stderr.decode()[-2000:]
    wa, wb = final_weights(RunDir.open(tmp_path / "ref")), final_weights(RunDir.open(tmp_path / "cut"))
    assert all(torch.equal(wa[k], wb[k]) for k in wa)


@pytest.mark.parametrize(
    "argv,message",
    [
        (["train", "--task", "number", "--out", "{d}/x", "train.learning_rate=1"], "unknown key 'train.learning_rate'"),
        (["train", "--task", "number", "--out", "{d}/x", "model.n_layer=2"], "known model keys"),
        (["train", "--task", "number", "--out", "{d}/x", "task.max_hops=12"], "task.max_hops=12 is impossible"),
        (["train", "--task", "letter", "--out", "{d}/x", "task.n_letters=4"], "too few for unique chains"),
        (["train", "--task", "number", "--preset", "huge", "--out", "{d}/x"], "unknown preset 'huge'"),
        (["train", "--resume", "{d}"], "is not a run directory"),
        (["train", "--task", "number", "--out", "{d}/x", "train.lr=-1"], "train.lr=-1.0 must be a positive"),
        (["train", "--task", "number", "--out", "{d}/x", "bogus"], "must look like section.key=value"),
        (["train", "--task", "number", "--out", "{d}/x", "train.state_every=0"], "train.state_every=0 must be >= 1"),
        (
            ["train", "--task", "number", "--out", "{d}/x", "train.compile=2"],
            "train.compile=2 has the wrong type; expected bool",
        ),
        (
            ["train", "--task", "number", "--out", "{d}/x", "train.compile=true", "train.random_extra=8"],
            "train.compile=true needs batches of one length",
        ),
        (["export", "{d}/nothing", "--out", "{d}/e"], "is not a directory"),
    ],
)
def test_bad_input_fails_before_any_work_with_a_message_naming_the_field(tmp_path, capsys, argv, message):
    argv = [a.format(d=tmp_path) for a in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err, err
    assert not (tmp_path / "x" / "checkpoints").exists()


def test_truncated_checkpoint_is_reported_not_loaded(tmp_path, tiny_overrides):
    run = make_run(tmp_path, "r", tiny_overrides + ["train.steps=10"])
    train(run, make_splits(run.config.task, 0))
    path = run.checkpoint_path(10)
    path.write_bytes(path.read_bytes()[:1000])
    with pytest.raises(RunError, match="truncated or corrupt"):
        run.load_model(10)
    (run.path / "state.pt").write_bytes(b"PK\x03\x04garbage")
    with pytest.raises(RunError, match="state.pt is truncated or corrupt"):
        run.load_state()
