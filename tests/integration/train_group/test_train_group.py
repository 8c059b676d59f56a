"""Groups end to end: resume after an interruption (per group, per member), members that finish at
different steps, the compiled path, fp32/bf16 against single runs, the live monitor, and the run
directory a member writes."""

from __future__ import annotations

import functools

import pytest
import torch
from safetensors.torch import load_file

import possym
from possym.config import load_config
from possym.runs import RunDir
from possym.scores.monitor import monitor_scores
from possym.tasks import make_splits
from possym.train import trainee
from possym.train.fused import cxx_compiler
from possym.train.loop import train, train_group

needs_cxx = pytest.mark.skipif(cxx_compiler() is None, reason="Inductor needs a C++ compiler")


class Interrupt(Exception):
    pass


def _seed(s: int) -> list[str]:
    return [f"seeds.{k}={s}" for k in ("data", "init", "order", "dropout")]


def _make(tmp_path, name, overrides, seeds=(0, 1, 2), extra=None):
    extra = extra or {}
    return [RunDir.create(tmp_path / name / f"seed{s}",
                          load_config("number", None, [*overrides, *_seed(s), *extra.get(s, [])]), argv=["t"])
            for s in seeds]


def _splits(runs):
    return [make_splits(r.config.task, r.config.seeds.data) for r in runs]


def _weights(run: RunDir) -> dict[str, torch.Tensor]:
    return load_file(run.checkpoint_path(run.checkpoint_steps()[-1]))


def _same(a: RunDir, b: RunDir) -> bool:
    wa, wb = _weights(a), _weights(b)
    return all(torch.equal(wa[k], wb[k]) for k in wa)


def _evals(run: RunDir) -> list[tuple[int, float]]:
    return [(r["step"], r["accuracy"]) for r in run.metrics() if r["event"] == "eval"]


def _cut(at: int, member: int | None = None):
    def on_step(i, info):
        if info["step"] == at and (member is None or i == member):
            raise Interrupt
    return on_step


def test_a_killed_group_resumes_bitwise_as_a_group_and_each_member_alone(tmp_path, tiny_overrides):
    ref = _make(tmp_path, "ref", tiny_overrides)
    splits = _splits(ref)
    train_group(ref, splits)

    cut = _make(tmp_path, "cut", tiny_overrides)
    with pytest.raises(Interrupt):
        train_group(cut, splits, on_step=_cut(17))  # past the step-10 states, before step 20's
    assert all(r.checkpoint_steps() == [0, 10] for r in cut)
    train_group([RunDir.open(r.path) for r in cut], splits)
    assert all(_same(a, b) for a, b in zip(ref, cut, strict=True))
    assert all(_evals(a) == _evals(b) for a, b in zip(ref, cut, strict=True))

    alone = _make(tmp_path, "alone", tiny_overrides)
    with pytest.raises(Interrupt):
        train_group(alone, splits, on_step=_cut(17))
    for run, sp in zip(alone, splits, strict=True):  # each member resumed on its own, through the single loop
        train(RunDir.open(run.path), sp)
    assert all(_same(a, b) for a, b in zip(ref, alone, strict=True))
    assert [r["step"] for r in alone[1].metrics() if r["event"] == "eval"] == [0, 10, 20, 30]


def test_members_that_end_at_different_steps_and_a_group_resumed_with_some_finished(tmp_path, tiny_overrides):
    steps = {0: ["train.steps=20"], 1: [], 2: ["train.steps=25", "train.lr=3e-3"]}
    singles = _make(tmp_path, "single", tiny_overrides, extra=steps)
    splits = _splits(singles)
    group = _make(tmp_path, "group", tiny_overrides, extra=steps)
    finals = train_group(group, splits)
    assert [f["step"] for f in finals] == [20, 30, 25]
    assert [r.checkpoint_steps()[-1] for r in group] == [20, 30, 25]

    again = _make(tmp_path, "again", tiny_overrides, extra=steps)
    with pytest.raises(Interrupt):
        train_group(again, splits, on_step=_cut(23, member=2))  # member 0 is finished by then
    assert possym.open_run(again[0].path).step("final") == 20
    train_group([RunDir.open(r.path) for r in again[1:]], splits[1:])
    assert all(_same(a, b) for a, b in zip(group, again, strict=True))
    for s, g in zip(singles, group, strict=True):
        train(s, splits[s.config.seeds.data])
        wa, wb = _weights(s), _weights(g)
        for k in wa:
            torch.testing.assert_close(wa[k], wb[k], rtol=1e-4, atol=1e-5, msg=k)


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_float32_and_bf16_members_track_their_single_runs(tmp_path, tiny_overrides, precision):
    """Over 30 tiny steps (members differing in lr, dropout and frequency gates): the losses agree
    within the dtype's noise, and the validation accuracies and best step agree."""
    extra = {1: ["train.lr=3e-3", "model.dropout=0.2"], 2: ["model.freq_gate=0@2-5", "model.dropout=0.0"]}
    overrides = [*tiny_overrides, f"train.precision={precision}"]
    singles, members = _make(tmp_path, "single", overrides, extra=extra), _make(tmp_path, "group", overrides,
                                                                                 extra=extra)
    splits = _splits(singles)
    losses: dict[str, list[list[float]]] = {"single": [], "group": [[] for _ in members]}
    for run, sp in zip(singles, splits, strict=True):
        seen: list[float] = []
        train(run, sp, on_step=lambda info, seen=seen: seen.append(info["loss"]))
        losses["single"].append(seen)
    train_group(members, splits, on_step=lambda i, info: losses["group"][i].append(info["loss"]))
    rel = {"fp32": 1e-4, "bf16": 3e-2}[precision]
    for a, b, s, g in zip(losses["single"], losses["group"], singles, members, strict=True):
        assert b == pytest.approx(a, rel=rel)
        ea, eb = _evals(s), _evals(g)
        assert [x[0] for x in ea] == [x[0] for x in eb]
        assert [x[1] for x in eb] == pytest.approx([x[1] for x in ea], abs=0.02)  # 100 rows: one answer is 0.01
        assert s.best() == g.best()


def test_a_member_writes_the_run_directory_of_a_single_run(tmp_path, tiny_overrides):
    """possym.open_run cannot tell them apart: the same files, config, metrics keys and API answers."""
    single = _make(tmp_path, "single", tiny_overrides, seeds=(1,))[0]
    members = _make(tmp_path, "group", tiny_overrides, seeds=(1, 2))
    splits = _splits(members)
    train(single, splits[0], monitor=monitor_scores)
    train_group(members, splits, monitor=monitor_scores)
    a, b = possym.open_run(single.path), possym.open_run(members[0].path)

    def files(run):
        return sorted(str(p.relative_to(run.path)) for p in run.path.rglob("*") if p.is_file())

    assert files(a) == files(b)
    assert a.config == b.config and a.checkpoint_steps() == b.checkpoint_steps()
    assert a.step("best") == b.step("best")
    ra, rb = a.dir.metrics(), b.dir.metrics()
    assert [sorted(r) for r in ra] == [sorted(r) for r in rb]
    assert [r["event"] for r in ra] == [r["event"] for r in rb]
    for x, y in zip(ra, rb, strict=True):  # the live monitor's scores, per member, as alone
        for sx, sy in zip(x.get("scores", []), y.get("scores", []), strict=True):
            assert sy["s_pos"] == pytest.approx(sx["s_pos"], abs=1e-3)
    state_a, state_b = torch.load(a.path / "state.pt", weights_only=False), torch.load(b.path / "state.pt",
                                                                                      weights_only=False)
    assert set(state_b) == set(state_a)  # a single run is a group of one: its layout is recorded too
    assert state_a["group"]["size"] == 1 and state_b["group"]["size"] == 2
    assert state_a["optimizer"]["param_groups"] == state_b["optimizer"]["param_groups"]


def test_fp16_members_skip_their_own_overflowing_steps(tmp_path, tiny_overrides, monkeypatch):
    """The first member starts at a loss scale that overflows: it skips steps and halves its scale
    alone; the second never overflows and tracks its single run."""
    made, real = [], trainee.LossScaler

    def scaler():
        made.append(None)
        return real(scale=2.0**40 if len(made) == 1 else 2.0**16)

    overrides = [*[o for o in tiny_overrides if not o.startswith("train.steps")], "train.steps=12",
                 "train.precision=fp16"]
    monkeypatch.setattr(trainee, "LossScaler", scaler)
    members = _make(tmp_path, "group", overrides, seeds=(0, 1))
    splits = _splits(members)
    train_group(members, splits)
    first, second = (r.load_state()["loss_scaler"]["scale"] for r in members)
    assert first < 2.0**40 and second == 2.0**16
    monkeypatch.setattr(trainee, "LossScaler", functools.partial(real, scale=2.0**16))
    single = _make(tmp_path, "single", overrides, seeds=(1,))[0]
    train(single, splits[1])
    wa, wb = _weights(single), _weights(members[1])
    for k in wa:
        torch.testing.assert_close(wa[k], wb[k], rtol=1e-2, atol=1e-3, msg=k)


@needs_cxx
@pytest.mark.long
def test_a_compiled_group_resumes_bitwise_per_member_and_tracks_the_compiled_single_runs(tmp_path, tiny_overrides):
    overrides = [*tiny_overrides, "train.compile=true", "train.precision=bf16"]
    extra = {1: ["model.dropout=0.0"]}
    ref = _make(tmp_path, "ref", overrides, seeds=(0, 1), extra=extra)
    splits = _splits(ref)
    train_group(ref, splits)

    cut = _make(tmp_path, "cut", overrides, seeds=(0, 1), extra=extra)
    with pytest.raises(Interrupt):
        train_group(cut, splits, on_step=_cut(17))
    train(RunDir.open(cut[1].path), splits[1])  # alone: beside an idle slot laid out as member 0
    train_group([RunDir.open(cut[0].path)], splits[:1])
    assert all(_same(a, b) for a, b in zip(ref, cut, strict=True))

    single = _make(tmp_path, "single", overrides, seeds=(1,), extra={1: extra[1]})[0]
    train(single, splits[1])
    assert [x[0] for x in _evals(single)] == [x[0] for x in _evals(ref[1])]
    assert [x[1] for x in _evals(ref[1])] == pytest.approx([x[1] for x in _evals(single)], abs=0.02)
