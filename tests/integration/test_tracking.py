"""train.log=tensorboard and train.log=wandb mirror metrics.jsonl: each tracker's files, read back with its own
reader (TensorBoard's event accumulator; the offline wandb run's record log, parsed here), hold exactly the
scalars of every metrics.jsonl record (loss, accuracy per hop, the monitor's scores), for a run trained alone
and for the members of a training group; and, live, the training loss and learning rate every
train.log_every steps, and the run's resolved config. A tracker whose package is missing is refused before the
run directory is made, so the retry after the install trains."""

from __future__ import annotations

import json
import struct
import sys
import time
from pathlib import Path

import pytest
import yaml

import possym
from possym.cli import main
from possym.runs import RunDir
from possym.tasks import make_splits
from possym.train import tracking
from possym.train.loop import train as train_loop
from possym.train.schedule import lr_factor
from possym.train.tracking import CONFIG_TAG, TENSORBOARD_DIR, WANDB_DIR, WANDB_RUNS, scalars

LOG_EVERY = 4


def expected(run) -> dict[tuple[str, int], float]:
    """(tag, step) -> value, from metrics.jsonl alone."""
    out = {}
    for record in run.dir.metrics_log():
        out |= {(tag, record.step): value for tag, value in scalars(record).items()}
    return out


def check_has_everything(run, read: dict[tuple[str, int], float], losses: dict[int, float] | None = None) -> None:
    want = expected(run)
    assert any(tag.startswith("scores/layer1.head0/s_sym") for tag, _ in want)  # the monitor's scores are there
    assert any(tag == "val/acc_hop2" for tag, _ in want) and any(tag == "test/loss" for tag, _ in want)
    curve = {key: value for key, value in read.items() if key[0].startswith("train/")}
    assert read.keys() - curve.keys() == want.keys()
    for key, value in want.items():
        assert read[key] == pytest.approx(value, rel=1e-6), key  # TensorBoard stores float32
    tc = run.config.train
    steps = list(range(LOG_EVERY, tc.steps + 1, LOG_EVERY))
    assert sorted(curve) == sorted((tag, s) for tag in ("train/loss", "train/lr") for s in steps)
    for s in steps:  # the rate the s-th update took: the schedule at optimiser step s - 1 (0-based)
        assert curve["train/lr", s] == pytest.approx(tc.lr * lr_factor(s - 1, tc.warmup_steps, tc.steps), rel=1e-6)
        if losses is not None:  # the loss the loop reported for that step
            assert curve["train/loss", s] == pytest.approx(losses[s], rel=1e-6)
    assert 0 < min(curve["train/loss", s] for s in steps) < max(curve["train/loss", s] for s in steps) < 10


def train(tmp_path: Path, overrides: list[str], log: str, n: int = 1) -> list[possym.Run]:
    cfgs = [possym.load_config("number", None, [*overrides, f"train.log={log}", f"train.log_every={LOG_EVERY}",
                                                f"seeds.init={s}"]) for s in range(n)]
    return possym.train_models(cfgs, [tmp_path / f"run{s}" for s in range(n)], monitor=True, progress=False)


def tensorboard_scalars(run) -> dict[tuple[str, int], float]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(run.path / TENSORBOARD_DIR), size_guidance={"scalars": 0}).Reload()
    return {(tag, e.step): e.value for tag in events.Tags()["scalars"] for e in events.Scalars(tag)}


def wandb_records(path: Path):
    """The protobuf records of a .wandb file: W&B's 7-byte header, then LevelDB's log format (32 KiB
    blocks of chunks, each a 7-byte header: crc32, length, type FULL=1 / FIRST=2 / MIDDLE=3 / LAST=4)."""
    from wandb.proto import wandb_internal_pb2

    data = path.read_bytes()
    assert data[:4] == b":W&B"
    pos, block, chunks = 7, 32768, b""
    while pos + 7 <= len(data):
        left = block - pos % block
        if left < 7:  # a block's tail too short for a header is padding
            pos += left
            continue
        _, length, kind = struct.unpack("<IHB", data[pos : pos + 7])
        if kind == 0:  # zeros: the rest of the block is padding (wandb pads a block when it flushes)
            pos += left
            continue
        if pos + 7 + length > len(data):  # a chunk still being written
            break
        payload, pos = data[pos + 7 : pos + 7 + length], pos + 7 + length
        chunks = payload if kind in (1, 2) else chunks + payload
        if kind in (1, 4):
            record = wandb_internal_pb2.Record()
            record.ParseFromString(chunks)
            yield record


def wandb_file(run) -> Path:
    """The offline run's record log, where the module's docstring says it is (``wandb sync`` takes its folder)."""
    assert f"wandb sync RUN/{WANDB_RUNS}" in tracking.__doc__
    (folder,) = run.path.glob(WANDB_RUNS)
    (file,) = folder.glob("run-*.wandb")
    # wandb's service process writes the file (buffered) and closes it moments after run.finish() returns
    deadline = time.monotonic() + 60
    while not any(r.WhichOneof("record_type") == "exit" for r in wandb_records(file)):
        assert time.monotonic() < deadline, f"{file} has no exit record 60 s after the run finished"
        time.sleep(0.2)
    return file


def wandb_scalars(run) -> dict[tuple[str, int], float]:
    out = {}
    for record in wandb_records(wandb_file(run)):
        if record.WhichOneof("record_type") != "history":
            continue
        row = {item.key or "/".join(item.nested_key): json.loads(item.value_json) for item in record.history.item}
        step = row.pop("_step")
        out |= {(tag, step): value for tag, value in row.items() if not tag.startswith("_")}
    return out


def wandb_config(run) -> dict:
    out = {}
    for record in wandb_records(wandb_file(run)):
        kind = record.WhichOneof("record_type")
        if kind in ("run", "config"):  # the config wandb.init was given comes with the run record
            items = record.run.config.update if kind == "run" else record.config.update
            out |= {item.key: json.loads(item.value_json) for item in items}
    return {k: v for k, v in out.items() if not k.startswith("_")}  # wandb's own keys (_wandb)


def tensorboard_config(run) -> dict:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(run.path / TENSORBOARD_DIR), size_guidance={"tensors": 0}).Reload()
    (text,) = [e.tensor_proto.string_val[0].decode() for e in events.Tensors(f"{CONFIG_TAG}/text_summary")]
    assert text.startswith("```yaml\n") and text.endswith("```")
    return yaml.safe_load(text.removeprefix("```yaml\n").removesuffix("```"))


def test_tensorboard_holds_what_metrics_jsonl_holds_the_training_curve_and_the_config(tmp_path, tiny_overrides):
    pytest.importorskip("tensorboard", reason='train.log=tensorboard needs: pip install "possym[tensorboard]"')
    from possym.scores.monitor import monitor_scores

    cfg = possym.load_config("number", None, [*tiny_overrides, "train.log=tensorboard", f"train.log_every={LOG_EVERY}"])
    run = RunDir.create(tmp_path / "run", cfg)
    losses: dict[int, float] = {}
    train_loop(run, make_splits(cfg.task, cfg.seeds.data), monitor=monitor_scores,
               on_step=lambda info: losses.setdefault(info["step"], info["loss"]))
    check_has_everything(possym.open_run(run.path), tensorboard_scalars(possym.open_run(run.path)), losses)
    assert tensorboard_config(run) == cfg.to_dict() == yaml.safe_load((run.path / "config.yaml").read_text())


def test_an_offline_wandb_run_holds_what_metrics_jsonl_holds_for_every_member_of_a_group(
    tmp_path, tiny_overrides, monkeypatch
):
    pytest.importorskip("wandb", reason='train.log=wandb needs: pip install "possym[wandb]"')
    monkeypatch.delenv("WANDB_MODE", raising=False)  # offline is the default
    runs = train(tmp_path, tiny_overrides, "wandb", n=2)
    assert all(r.dir.metrics()[-1]["event"] == "final" for r in runs)
    for run in runs:
        check_has_everything(run, wandb_scalars(run))
        assert wandb_config(run) == run.config.to_dict() == yaml.safe_load((run.path / "config.yaml").read_text())
    assert {(r.path / WANDB_DIR).is_dir() for r in runs} == {True}


def test_wandb_mode_from_the_environment_is_respected(tmp_path, tiny_overrides, monkeypatch):
    pytest.importorskip("wandb", reason='train.log=wandb needs: pip install "possym[wandb]"')
    monkeypatch.setenv("WANDB_MODE", "disabled")
    (run,) = train(tmp_path, [*tiny_overrides, "train.steps=10"], "wandb")
    assert not list((run.path / WANDB_DIR).glob("wandb/*run-*"))  # disabled: nothing written, nothing sent
    assert run.dir.metrics()[-1]["event"] == "final"


def test_an_unknown_tracker_is_refused_with_the_known_ones(tiny_overrides):
    with pytest.raises(possym.PossymError, match="train.log='mlflow'; allowed: none, tensorboard, wandb"):
        possym.load_config("number", None, [*tiny_overrides, "train.log=mlflow"])


@pytest.mark.parametrize("log", ["tensorboard", "wandb"])
def test_a_tracker_whose_package_is_missing_is_refused_before_the_run_directory_is_made(log, tmp_path, tiny_overrides,
                                                                                          monkeypatch, capsys):
    pytest.importorskip(log)
    cfg = possym.load_config("number", None, [*tiny_overrides, f"train.log={log}", "train.steps=4"])
    with monkeypatch.context() as hidden:
        hidden.setitem(sys.modules, log, None)  # as if not installed: find_spec answers None, import raises
        with pytest.raises(possym.PossymError, match=rf'train.log={log} needs the {log} package: pip install'):
            possym.train_model(cfg, out=tmp_path / "run", progress=False)
        assert main(["train", "--task", "number", "--out", str(tmp_path / "cli"), *tiny_overrides,
                     f"train.log={log}"]) == 2
        assert f'pip install "possym[{log}]"' in capsys.readouterr().err
    assert not (tmp_path / "run").exists() and not (tmp_path / "cli").exists()
    monkeypatch.setenv("WANDB_MODE", "disabled")
    assert possym.train_model(cfg, out=tmp_path / "run", monitor=False, progress=False).finished  # the retry trains
