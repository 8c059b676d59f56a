"""train.log=tensorboard and train.log=wandb mirror metrics.jsonl: each tracker's files, read back with its own
reader (TensorBoard's event accumulator; the offline wandb run's record log, parsed here), hold exactly the
scalars of every metrics.jsonl record (loss, accuracy per hop, the monitor's scores), for a run trained alone
and for the members of a training group."""

from __future__ import annotations

import json
import struct
import time
from pathlib import Path

import pytest

import possym
from possym.train.tracking import TENSORBOARD_DIR, WANDB_DIR, scalars


def expected(run) -> dict[tuple[str, int], float]:
    """(tag, step) -> value, from metrics.jsonl alone."""
    out = {}
    for record in run.dir.metrics_log():
        out |= {(tag, record.step): value for tag, value in scalars(record).items()}
    return out


def check_has_everything(run, read: dict[tuple[str, int], float]) -> None:
    want = expected(run)
    assert any(tag.startswith("scores/layer1.head0/s_sym") for tag, _ in want)  # the monitor's scores are there
    assert any(tag == "val/acc_hop2" for tag, _ in want) and any(tag == "test/loss" for tag, _ in want)
    assert read.keys() == want.keys()
    for key, value in want.items():
        assert read[key] == pytest.approx(value, rel=1e-6), key  # TensorBoard stores float32


def train(tmp_path: Path, overrides: list[str], log: str, n: int = 1) -> list[possym.Run]:
    cfgs = [possym.load_config("number", None, [*overrides, f"train.log={log}", f"seeds.init={s}"]) for s in range(n)]
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


def wandb_scalars(run) -> dict[tuple[str, int], float]:
    (file,) = (run.path / WANDB_DIR).glob("wandb/offline-run-*/run-*.wandb")
    # wandb's service process writes the file (buffered) and closes it moments after run.finish() returns
    deadline = time.monotonic() + 60
    while not any(r.WhichOneof("record_type") == "exit" for r in wandb_records(file)):
        assert time.monotonic() < deadline, f"{file} has no exit record 60 s after the run finished"
        time.sleep(0.2)
    out = {}
    for record in wandb_records(file):
        if record.WhichOneof("record_type") != "history":
            continue
        row = {item.key or "/".join(item.nested_key): json.loads(item.value_json) for item in record.history.item}
        step = row.pop("_step")
        out |= {(tag, step): value for tag, value in row.items() if not tag.startswith("_")}
    return out


def test_tensorboard_event_files_hold_what_metrics_jsonl_holds(tmp_path, tiny_overrides):
    pytest.importorskip("tensorboard", reason='train.log=tensorboard needs: pip install "possym[tensorboard]"')
    (run,) = train(tmp_path, tiny_overrides, "tensorboard")
    check_has_everything(run, tensorboard_scalars(run))


def test_an_offline_wandb_run_holds_what_metrics_jsonl_holds_for_every_member_of_a_group(
    tmp_path, tiny_overrides, monkeypatch
):
    pytest.importorskip("wandb", reason='train.log=wandb needs: pip install "possym[wandb]"')
    monkeypatch.delenv("WANDB_MODE", raising=False)  # offline is the default
    runs = train(tmp_path, tiny_overrides, "wandb", n=2)
    assert all(r.dir.metrics()[-1]["event"] == "final" for r in runs)
    for run in runs:
        check_has_everything(run, wandb_scalars(run))
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
