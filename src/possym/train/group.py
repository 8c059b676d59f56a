"""Train S runs as one group: one batched step (:mod:`possym.train.fused_group`) for S models at once.

Each member is the run it stands for. It keeps its own data order (``seeds.order``), dropout stream
(``seeds.dropout``, drawn exactly as its single run draws it), initial weights (``seeds.init``),
learning rate and schedule, weight decay, gradient clipping, fp16 loss scale (a member whose
gradients overflow skips its step alone), dropout rates and RoPE plane options. Only the forward and
backward run batched; each member's clipping, AdamW step and schedule are its own torch objects
acting on views of the stacked weights and gradients, so its optimiser state, checkpoints,
``metrics.jsonl``, ``best.json`` and resumable ``state.pt`` are a single run's, file for file.
AdamW's update is elementwise and memory-bound: batching it would save nothing on a CPU, and the
member's own optimiser keeps its state in a single run's form, so any member resumes on its own.

What members must share, :func:`group_key`: the model's shape (:data:`~possym.train.fused_group.SHAPE_FIELDS`,
the vocabulary included), the batch shape (``train.batch_size`` and the task's sequence length),
``train.precision`` (a batched matmul has one input dtype: fp32, bf16 and fp16 members cannot share
a step, so a group holds one precision), ``train.compile``, the device and the thread count. A run
with ``train.random_extra > 0`` trains alone (:func:`why_single`): its batch length changes from
step to step.

Equality and resume. In float64 a member equals its single run to ~1e-16 per step (the tests hold
it to 1e-10 over several steps, dropout masks included); in float32 and bf16 the batched kernels
round differently from the single ones, so a member tracks its single run within float rounding.
A member's numbers never depend on the others (each member's arithmetic is its own); eager, they
do not depend on S either, so a member resumed alone (a group of one) continues bitwise. Compiled,
Inductor splits reductions by S, so the group size S is written into each member's ``state.pt``
(``group_size``) and a compiled member resumed with fewer companions is padded to S with idle
slots; a compiled group whose members finish at different steps keeps the finished ones as idle
slots for the same reason. A run started as a member resumes on the group step even through
:func:`possym.train.loop.train`; a run started alone is never taken into a group.

Memory, :func:`member_memory_mb`: per member, float32 weights, gradients and AdamW's two moments
(16 bytes a parameter) plus the step's transient copies (the resumable state's serialisation, the
matmul-dtype weights: 16 more), the activations the backward keeps (per layer, per row of the
batch: 14 d_model + 2 d_mlp + 3 heads x pos floats, plus one layer of backward temporaries), and
its data (``task.n_*`` rows of int64 tokens, answers, hops and paths). For the paper preset that is
316 MiB; measured, each member of a bf16 group of 3 added 285 MiB to the process's peak memory
(110 of them its data).

Example (two tiny members trained as one; each run directory is a normal run's)::

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
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Callable, Sequence
from typing import Any, cast

import torch
from torch import Tensor

from possym.config import ModelConfig, RunConfig
from possym.devices import batch_size_on, resolve_device
from possym.errors import PossymError
from possym.model.gptj import GPTJ
from possym.runs import RunDir
from possym.tasks import TaskSamples, task_vocab
from possym.train.fused import Precision
from possym.train.fused_group import SHAPE_FIELDS, GroupBits, ModelGroup, idle_bits, shape_key
from possym.train.tracking import tracking
from possym.train.trainee import (
    GROUP_STATE,
    Monitor,
    Trainee,
    check_compiler,
    checkpoint_and_eval,
    eval_metrics,
    log_final,
    open_trainee,
)

__all__ = ["GROUP_KEY_FIELDS", "GroupError", "evaluate_members", "group_key", "member_memory_mb", "train_group",
           "why_single"]

# What a group's members share, beside the model shape (SHAPE_FIELDS, with the task's vocabulary).
GROUP_KEY_FIELDS = ("model shape", "train.batch_size", "task.seq_len", "train.precision", "train.compile",
                    "train.device", "train.threads")


class GroupError(PossymError):
    """Runs that cannot share a step were given one; the message names what differs."""


def group_key(cfg: RunConfig) -> tuple:
    """What members of one group share (:data:`GROUP_KEY_FIELDS`): runs with equal keys can train as one.

    >>> from possym.config import load_config
    >>> a = load_config("number", "quick", ["seeds.init=1", "train.lr=3e-4", "model.dropout=0.2"])
    >>> group_key(a) == group_key(load_config("number", "quick"))
    True
    >>> group_key(load_config("number", "quick", ["train.batch_size=32"])) == group_key(a)
    False
    """
    model = dataclasses.replace(cfg.model, d_vocab=len(task_vocab(cfg.task)))
    tc = cfg.train
    return (shape_key(model), tc.batch_size, cfg.task.seq_len, tc.precision, tc.compile,
            str(resolve_device(tc.device)), tc.threads)


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
    slot_of = {i: int(r["slot"]) for i, r in enumerate(recorded)}
    if len(set(slot_of.values())) != len(slot_of):
        raise GroupError(f"two of {', '.join(str(r.path) for r in runs)} claim one slot of their group")
    return slot_of, [ModelConfig(**m) for m in recorded[0]["models"]]


def why_single(cfg: RunConfig) -> str | None:
    """Why a run cannot train in a group at all, or None when it can."""
    if cfg.train.random_extra:
        return "train.random_extra gives its batches a new length every step"
    return None


def _key_differences(a: RunConfig, b: RunConfig) -> list[str]:
    names = [f"model.{f}" for f in SHAPE_FIELDS[:-3]] + ["model.activation", "model.mlp", "model.d_vocab"]
    ka, kb = group_key(a), group_key(b)
    fields = dict(zip(SHAPE_FIELDS, ka[0], strict=True)), dict(zip(SHAPE_FIELDS, kb[0], strict=True))
    out = [n for n, f in zip(names, SHAPE_FIELDS, strict=True) if fields[0][f] != fields[1][f]]
    return out + [n for n, x, y in zip(GROUP_KEY_FIELDS[1:], ka[1:], kb[1:], strict=True) if x != y]


def n_parameters(cfg: RunConfig) -> int:
    """The model's parameter count, from its config alone."""
    m, V = cfg.model, len(task_vocab(cfg.task))
    D, M = m.d_model, m.d_mlp
    block = 2 * D + 4 * D * D + ((2 * D * M + M + D) if m.mlp else 0)
    return V * D + m.n_layers * block + 2 * D + V * D + V


def member_memory_mb(cfg: RunConfig) -> float:
    """The memory one member of a group holds while it trains, in MiB (module docstring).

    >>> from possym.config import load_config
    >>> round(member_memory_mb(load_config("number", "paper")))
    316
    """
    m, tc, task = cfg.model, cfg.train, cfg.task
    B, T, D = tc.batch_size, task.seq_len, m.d_model
    state = 32 * n_parameters(cfg)
    per_layer = 4 * B * T * (14 * D + 2 * m.d_mlp + 3 * m.n_heads * T)
    activations = (m.n_layers + 1) * per_layer
    rows = task.n_train + task.n_val + task.n_test
    data = 8 * rows * (T + 2 + task.max_hops + 1)
    return (state + activations + data) / 2**20


def evaluate_members(group: ModelGroup, members: Sequence[int], samples: Sequence[TaskSamples],
                     precision: Precision = "fp32", compiled: bool = False,
                     batch_size: int | None = None) -> list[dict[str, float]]:
    """:func:`possym.train.loop.evaluate` for ``members`` of ``group`` (indices), each on its own samples,
    in stacked passes: the metrics of each, in order.

    Members whose sample sets have one size share each pass (the others run in passes of their own);
    ``compiled`` pads the last batch to the full size, as :func:`~possym.train.loop.evaluate` does.
    """
    device = group.device
    batch_size = batch_size_on(device, 256) if batch_size is None else batch_size
    out: dict[int, dict[str, float]] = {}
    by_size: dict[int, list[int]] = {}
    for j, s in enumerate(samples):
        by_size.setdefault(len(s), []).append(j)
    for js in by_size.values():
        idx = [members[j] for j in js]
        params = group.params_of(idx)
        tokens = torch.stack([torch.as_tensor(samples[j].tokens) for j in js]).to(device)
        logits: list[list[Tensor]] = [[] for _ in js]
        for t in tokens.split(batch_size, dim=1):
            rows = t.shape[1]
            if compiled and rows < batch_size:  # rows are independent: the padding changes no real row
                t = torch.cat((t, t[:, :1].expand(-1, batch_size - rows, -1)), dim=1)
            lg = group.last_token_logits(t, precision, compiled, members=idx, params=params)[:, :rows]
            for k in range(len(js)):
                logits[k].append(lg[k])
        for k, j in enumerate(js):
            out[j] = eval_metrics(samples[j], logits[k])
    return [out[j] for j in range(len(samples))]


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
    ``on_step(i, info)`` gets run i's per-step record, as :func:`possym.train.loop.train`'s ``on_step``
    gets its run's; ``monitor`` is called per member, on its own model, as there. Members may start
    at different steps (a resumed group whose states differ) and end at different steps; a run that
    was started alone is refused (:class:`GroupError`): it resumes alone, bitwise. Every member's writer
    lock is held throughout (:meth:`RunDir.writing`).
    """
    with contextlib.ExitStack() as locks:
        for run in runs:
            locks.enter_context(run.writing())
        return _train_group(runs, splits, on_step, monitor, monitor_size, dtype)


def _train_group(runs: Sequence[RunDir], splits: Sequence[dict[str, TaskSamples]], on_step: MemberStep | None,
                 monitor: Monitor | None, monitor_size: int, dtype: torch.dtype) -> list[dict[str, Any]]:
    if len(runs) != len(splits) or not runs:
        raise GroupError(f"train_group needs one splits dict per run and at least one run ({len(runs)} runs, "
                         f"{len(splits)} splits)")
    first = runs[0].config
    for run in runs:
        reason = why_single(run.config)
        if reason is not None:
            raise GroupError(f"{run.path} cannot train in a group: {reason}")
        differ = _key_differences(first, run.config)
        if differ:
            raise GroupError(f"{run.path} cannot share a step with {runs[0].path}: {', '.join(differ)} differ "
                             f"(a group shares {', '.join(GROUP_KEY_FIELDS)})")
        check_compiler(run)
    tc = first.train
    device, compiled = resolve_device(tc.device), tc.compile
    states = [run.load_state() for run in runs]
    alone = [str(r.path) for r, st in zip(runs, states, strict=True) if st is not None and GROUP_STATE not in st]
    if alone:
        raise GroupError(f"{', '.join(alone)} started as single runs; resume each alone (possym.train.loop.train) "
                         "so that it stays bitwise the run it was")
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
                                          extra_state=layout_state(i), precision=precision)
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
            infos: dict[int, dict[str, Any]] = {}
            for i in live:
                t = cast(Trainee, slots[i])
                t.apply()
                infos[i] = {"step": t.step, "total": t.total, "loss": losses[i], "lr": t.sched.get_last_lr()[0]}
            records = checkpoint([i for i in live if cast(Trainee, slots[i]).due()])
            elapsed = time.perf_counter() - t0
            for i in live:
                t = cast(Trainee, slots[i])
                if i in records:
                    infos[i]["eval"] = records[i]
                if on_step is not None:
                    infos[i]["steps_per_s"] = (t.step - started[id(t)]) / elapsed if elapsed > 0 else 0.0
                    on_step(index[id(t)], infos[i])
            finish([i for i in live if cast(Trainee, slots[i]).step >= cast(Trainee, slots[i]).total])
        return [finals[i] for i in range(len(trainees))]

