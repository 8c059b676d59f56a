"""The training loop: last-token cross-entropy, AdamW, warm-up + linear decay, exact resume, for one
run or for S runs trained as one group.

Each step is :meth:`possym.train.fused.ModelGroup.loss_and_grads` then each run's own fused AdamW; a
single run (:func:`train`) is a group of one (:func:`train_group`). Each member keeps its own seeds, data
order, dropout stream, schedule, clipping and loss scale, and writes the same files whatever its group, so
a run killed at any point resumes to bitwise the same weights (same device, same thread count). Which runs
may share a step: :mod:`possym.train.group`. No argparse and no prints: the CLI passes a callback for the
progress bar; everything written goes through each run's :class:`~possym.runs.RunDir`.
Determinism, resume of compiled groups (:data:`~possym.train.trainee.GROUP_STATE`), step versions and
divergence (``train.on_nonfinite``): docs/choices.md, "Training", "Many seeds at once: the group step" and
"A run trusts nothing it did not write".

Example (two tiny runs trained as one; each run directory is a normal run's)::

    >>> import tempfile
    >>> from possym.config import load_config
    >>> from possym.runs import RunDir
    >>> from possym.tasks import make_splits
    >>> tiny = ["model.n_layers=1", "model.d_model=16", "model.d_mlp=32", "task.n_train=400",
    ...         "task.n_val=50", "task.n_test=50", "train.steps=4", "train.eval_every=2",
    ...         "train.checkpoint_every=2", "train.warmup_steps=1", "train.eval_size=50"]
    >>> out = tempfile.mkdtemp()
    >>> runs = [RunDir.create(f"{out}/s{s}", load_config("number", None, [*tiny, f"seeds.init={s}"]))
    ...         for s in (0, 1)]
    >>> finals = train_group(runs, [make_splits(r.config.task, 0) for r in runs])
    >>> [f["step"] for f in finals], runs[1].checkpoint_steps()
    ([4, 4], [0, 2, 4])
    >>> train(RunDir.create(f"{out}/one", runs[0].config), make_splits(runs[0].config.task, 0))["step"]
    4"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import time
from collections.abc import Callable, Sequence
from typing import Any, cast

import torch

from possym.config import ModelConfig
from possym.devices import resolve_device, torch_threads
from possym.errors import DivergedError
from possym.model.gptj import GPTJ
from possym.runs import RunDir
from possym.tasks import TaskSamples
from possym.train.fused import GroupBits, ModelGroup, idle_bits
from possym.train.group import GroupError, check_shareable, evaluate_members
from possym.train.tracking import log_step, tracking
from possym.train.trainee import (
    GROUP_STATE,
    LossScaler,
    Monitor,
    Trainee,
    batch_indices,
    build_model,
    check_compiler,
    checkpoint_and_eval,
    eval_metrics,
    evaluate,
    log_final,
    nonfinite_cause,
    open_trainee,
)

# The loop's own names, and the pieces of one run's training it is built on (possym.train.trainee).
__all__ = ["GROUP_STATE", "LossScaler", "Monitor", "Trainee", "batch_indices", "build_model", "check_compiler",
           "checkpoint_and_eval", "eval_metrics", "evaluate", "log_final", "open_trainee", "train", "train_group"]


def train(
    run: RunDir,
    splits: dict[str, TaskSamples],
    *,
    on_step: Callable[[dict[str, Any]], None] | None = None,
    monitor: Monitor | None = None,
    monitor_size: int = 32,
    dtype: torch.dtype = torch.float32,
) -> dict[str, Any]:
    """Train (or resume) the run to its last step, as a group of one (:func:`train_group`), holding its
    writer lock (:meth:`RunDir.writing`: a second writer is refused); return the final test metrics.

    ``monitor(model, tokens) -> records`` (e.g. the live positional/symbolic scores) is called at
    every evaluation step on the first ``monitor_size`` evaluation inputs; its records are logged.
    ``dtype``: the weights' dtype (float32; the tests train in float64 to hold the step to the
    module's autograd).
    """
    member_step = None if on_step is None else (lambda _i, info: on_step(info))
    return train_group([run], [splits], on_step=member_step, monitor=monitor, monitor_size=monitor_size,
                       dtype=dtype)[0]


def _weights_finite(t: Trainee) -> bool:
    return bool(torch.stack([p.isfinite().all() for p in t.params]).all())


def _layout(runs: Sequence[RunDir], trainees: Sequence[Trainee], states: Sequence[dict[str, Any] | None],
            compiled: bool) -> tuple[dict[int, int], list[ModelConfig]]:
    """Each member's slot in the group, and every slot's model config. A fresh (or eager) group is its
    members in order; a resumed compiled group is the layout its members recorded, with idle slots
    where a member is absent, since the compiled kernels depend on it."""
    if not compiled or all(st is None for st in states):
        return {i: i for i in range(len(trainees))}, [t.model.cfg for t in trainees]
    if any(st is None for st in states):
        fresh = [str(r.path) for r, st in zip(runs, states, strict=True) if st is None]
        raise GroupError(f"{', '.join(fresh)} cannot join a resumed compiled group: it resumes as it was laid out")
    recorded = [st[GROUP_STATE] for st in states if st is not None]
    if any(r["models"] != recorded[0]["models"] for r in recorded):
        raise GroupError("these compiled members were trained in different groups; resume each group as it was "
                         f"({', '.join(str(r.path) for r in runs)})")
    slot_of = {i: r["slot"] for i, r in enumerate(recorded)}  # an int: the trainer saved it so
    if len(set(slot_of.values())) != len(slot_of):
        raise GroupError(f"two of {', '.join(str(r.path) for r in runs)} claim one slot of their group")
    return slot_of, [ModelConfig(**m) for m in recorded[0]["models"]]


MemberStep = Callable[[int, dict[str, Any]], None]


def train_group(
    runs: Sequence[RunDir],
    splits: Sequence[dict[str, TaskSamples]],
    *,
    on_step: MemberStep | None = None,
    monitor: Monitor | None = None,
    monitor_size: int = 32,
    dtype: torch.dtype = torch.float32,
) -> list[dict[str, Any]]:
    """Train (or resume) every run of the group to its last step, as one; returns each one's final test
    metrics, in order.

    ``splits[i]`` is run i's data (:func:`possym.tasks.make_splits` of its task and ``seeds.data``).
    ``on_step(i, info)`` gets run i's per-step record (:func:`train`'s ``on_step``); ``monitor`` is
    called per member, on its own model, as there. Members may start at different steps (a resumed
    group whose states differ) and end at different steps. Runs that cannot share a step are refused
    (:class:`~possym.train.group.GroupError`, naming what differs). Every member's writer lock is held
    throughout (:meth:`RunDir.writing`), and the members' ``train.threads`` (one count: the group shares it),
    the caller's count coming back after.
    """
    with contextlib.ExitStack() as locks:
        for run in runs:
            locks.enter_context(run.writing())
        with torch_threads(runs[0].config.train.threads if runs else None):
            return _train_group(runs, splits, on_step, monitor, monitor_size, dtype)


def _train_group(runs: Sequence[RunDir], splits: Sequence[dict[str, TaskSamples]], on_step: MemberStep | None,
                 monitor: Monitor | None, monitor_size: int, dtype: torch.dtype) -> list[dict[str, Any]]:
    if len(runs) != len(splits) or not runs:
        raise GroupError(f"train_group needs one splits dict per run and at least one run ({len(runs)} runs, "
                         f"{len(splits)} splits)")
    check_shareable(runs)
    for run in runs:
        check_compiler(run)
    tc = runs[0].config.train
    device, compiled = resolve_device(tc.device), tc.compile
    states = [run.load_state() for run in runs]
    trainees = [open_trainee(r, sp, device, dtype, st) for r, sp, st in zip(runs, splits, states, strict=True)]
    precisions = {str(t.run.path): t.precision for t in trainees}
    if len(set(precisions.values())) > 1:  # "auto" members that started on machines that answered differently
        raise GroupError(f"these members train in different precisions, so cannot share a step: {precisions}; "
                         "resume each alone (possym.train.loop.train)")
    precision = trainees[0].precision
    index = {id(t): i for i, t in enumerate(trainees)}
    slot_of, slot_cfgs = _layout(runs, trainees, states, compiled)
    models: list[GPTJ] = []
    for j, cfg in enumerate(slot_cfgs):
        if j in slot_of.values():
            models.append(trainees[next(i for i, s in slot_of.items() if s == j)].model)
        else:  # an idle slot: a resumed compiled member's absent companion (its weights do not matter)
            models.append(GPTJ(cfg, torch.Generator().manual_seed(0)).to(device, dtype).eval())
    slots: list[Trainee | None] = [None] * len(slot_cfgs)
    for i, j in slot_of.items():
        slots[j] = trainees[i]
    group = ModelGroup(models)

    def layout_state(j: int) -> dict[str, Any]:
        return {GROUP_STATE: {"size": len(group), "slot": j,
                              "models": [dataclasses.asdict(m.cfg) for m in group.members]}}

    finals: dict[int, dict[str, Any]] = {}
    test_sets = {id(t): sp["test"] for t, sp in zip(trainees, splits, strict=True)}

    def evaluate_due(live: list[int]) -> dict[int, tuple[dict[str, float], float]]:
        due = [i for i in live if cast(Trainee, slots[i]).evaluates()]
        if not due:
            return {}
        t0 = time.perf_counter()
        sets = [cast(Trainee, slots[i]).eval_set for i in due]
        # At the training precision, as HF Trainer evaluates a mixed-precision run (the final test too).
        # Evaluation draws no random numbers, so it cannot perturb the training stream.
        metrics = evaluate_members(group, due, sets, precision, compiled)
        share = (time.perf_counter() - t0) / len(due)  # each member's share of the stacked evaluation
        return {i: (m, share) for i, m in zip(due, metrics, strict=True)}

    def checkpoint(live: list[int]) -> dict[int, dict[str, Any] | None]:
        metrics = evaluate_due(live)
        out = {}
        for i in live:
            t = cast(Trainee, slots[i])
            out[i] = checkpoint_and_eval(t.run, t.model, t.opt, t.sched, t.dropout, t.step, t.eval_set, monitor,
                                          monitor_size, t.scaler, metrics=metrics.get(i),
                                          extra_state=layout_state(i))
        return out

    def finish(done: list[int]) -> None:
        nonlocal group, slots
        if not done:
            return
        tests = evaluate_members(group, done, [test_sets[id(slots[i])] for i in done], precision, compiled)
        for i, metrics in zip(done, tests, strict=True):
            t = cast(Trainee, slots[i])
            finals[index[id(t)]] = log_final(t.run, metrics, device, precision)
            slots[i] = None
        if not compiled:  # eager, a member's numbers do not depend on S: drop the finished ones
            kept = [t for t in slots if t is not None]
            if kept:
                slots = list(kept)
                group = ModelGroup([t.model for t in kept])

    diverged: dict[int, str] = {}  # trainee index -> the one line that says where and why

    def nonfinite(live: list[int], losses: list[float]) -> dict[int, float]:
        """The members whose step was not finite: a non-finite loss (in fp16 only where the weights are not
        finite either: the loss scale skips a step that overflowed), or, at a step that writes, non-finite
        weights (a step whose loss was finite can still blow the weights up)."""
        out = {}
        for i in live:
            t = cast(Trainee, slots[i])
            loss = losses[i]
            if not math.isfinite(loss) and (precision != "fp16" or not _weights_finite(t)):
                out[i] = loss
            elif t.due() and not _weights_finite(t):
                out[i] = loss if not math.isfinite(loss) else math.nan
        return out

    def stop_or_note(bad: dict[int, float]) -> list[int]:
        """Record each member's first non-finite step; return those that stop there (``train.on_nonfinite``)."""
        stopped = []
        for i, loss in bad.items():
            t = cast(Trainee, slots[i])
            if t.run.config.train.on_nonfinite == "continue":
                if t.run.nonfinite is None:
                    t.run.record_meta(nonfinite={"step": t.step, "loss": str(loss)})
                continue
            steps = t.run.checkpoint_steps()
            last = max((s for s in steps if s < t.step), default=None)
            cause = nonfinite_cause(t.run, loss)
            t.run.record_meta(diverged={"step": t.step, "loss": str(loss), "cause": cause, "last_checkpoint": last,
                                        "time": round(time.time(), 3)})
            diverged[index[id(t)]] = (f"{t.run.path}: the loss is {loss} at step {t.step}, so training stopped there "
                                      f"({cause}); its last finite checkpoint is step {last}, and the run is marked "
                                      "diverged (train.on_nonfinite=continue trains on instead)")
            stopped.append(i)
        return stopped

    def drop(stopped: list[int]) -> None:
        nonlocal group, slots
        for i in stopped:
            slots[i] = None
        if stopped and not compiled:  # as finish(): eager, the others' numbers do not depend on S
            kept = [t for t in slots if t is not None]
            if kept:
                slots = list(kept)
                group = ModelGroup([t.model for t in kept])

    # each member's train.log tracker (possym.train.tracking) mirrors its metrics.jsonl while the group trains
    with tracking(runs):
        fresh = [i for i, t in enumerate(slots) if t is not None and t.state is None]
        checkpoint(fresh)
        finish([i for i, t in enumerate(slots) if t is not None and t.step >= t.total])

        t0 = time.perf_counter()
        started = {id(t): t.step for t in trainees}
        while True:
            live = [i for i, t in enumerate(slots) if t is not None]
            if not live:
                break
            batches = {i: cast(Trainee, slots[i]).batch() for i in live}
            tokens_l, answers_l, bits_l, scales = [], [], [], []
            for i, member in enumerate(group.members):
                if i in batches:
                    tk, an, bt = batches[i]
                    trainee = cast(Trainee, slots[i])
                    scale = 1.0 if trainee.scaler is None else trainee.scaler.scale
                else:  # an idle slot computes on the lead's batch with no dropout; its results are dropped
                    tk, an, _ = batches[live[0]]
                    bt, scale = idle_bits(member.cfg, tk.shape[0], tk.shape[1]), 1.0
                tokens_l.append(tk)
                answers_l.append(an)
                bits_l.append(bt)
                scales.append(scale)
            active = [i in batches for i in range(len(group))]
            losses = group.loss_and_grads(torch.stack(tokens_l), torch.stack(answers_l), GroupBits.stack(bits_l),
                                          precision, compiled, scales, active).tolist()
            infos: dict[int, dict[str, Any]] = {}  # by trainee index: a slot's number moves when one is dropped
            for i in live:
                t = cast(Trainee, slots[i])
                used = float(t.sched.get_last_lr()[0])  # the rate this step's update takes
                t.apply()
                infos[index[id(t)]] = {"step": t.step, "total": t.total, "loss": losses[i],
                                       "lr": t.sched.get_last_lr()[0]}
                log_step(t.run, t.step, losses[i], used)  # the training curve, every train.log_every
            # Nothing of a diverged step is written: the member's last finite checkpoint and state stay.
            drop(stop_or_note(nonfinite(live, losses)))
            live = [i for i, t in enumerate(slots) if t is not None]
            records = checkpoint([i for i in live if cast(Trainee, slots[i]).due()])
            elapsed = time.perf_counter() - t0
            for i in live:
                t = cast(Trainee, slots[i])
                info = infos[index[id(t)]]
                if i in records:
                    info["eval"] = records[i]
                if on_step is not None:
                    info["steps_per_s"] = (t.step - started[id(t)]) / elapsed if elapsed > 0 else 0.0
                    on_step(index[id(t)], info)
            finish([i for i in live if cast(Trainee, slots[i]).step >= cast(Trainee, slots[i]).total])
        if diverged:  # the others trained to their end; a diverged run is never reported as trained
            raise DivergedError("; ".join(diverged.values()), tuple(str(trainees[i].run.path) for i in diverged))
        return [finals[i] for i in range(len(trainees))]

