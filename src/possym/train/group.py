"""Which runs can share a step: the group's key, its memory, and its evaluation.

The loop (:func:`possym.train.loop.train_group`) trains S runs as one group, one batched step
(:mod:`possym.train.fused`) for S models at once; this module says which runs it may put together.
What members must share, :func:`group_key`: the model's shape (:data:`~possym.train.fused.SHAPE_FIELDS`,
the vocabulary included), the batch shape (``train.batch_size`` and the task's sequence length),
``train.precision`` (a batched matmul has one input dtype: fp32, bf16 and fp16 members cannot share
a step, so a group holds one precision), ``train.compile``, the device and the thread count. A run
with ``train.random_extra > 0`` trains in a group of its own (:func:`why_single`): its batch length
changes from step to step.

Memory, :func:`member_memory_mb`: per member, float32 weights, gradients and AdamW's two moments
(16 bytes a parameter) plus the step's transient copies (the resumable state's serialisation, the
matmul-dtype weights: 16 more), the activations the backward keeps (per layer, per row of the
batch: 14 d_model + 2 d_mlp + 3 heads x pos floats, plus one layer of backward temporaries), and
its data (``task.n_*`` rows of int64 tokens, answers, hops and paths). For the paper preset that is
316 MiB; measured, each member of a bf16 group of 3 added 285 MiB to the process's peak memory
(110 of them its data).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from possym.config import RunConfig
from possym.devices import resolve_device
from possym.errors import PossymError
from possym.runs import RunDir
from possym.tasks import TaskSamples, task_vocab
from possym.train.fused import SHAPE_FIELDS, ModelGroup, Precision, shape_key
from possym.train.trainee import evaluate_stacked

__all__ = ["GROUP_KEY_FIELDS", "GroupError", "check_shareable", "evaluate_members", "group_key", "member_memory_mb",
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


def why_single(cfg: RunConfig) -> str | None:
    """Why a run cannot share a step with other runs (it trains in a group of its own), or None when it can."""
    if cfg.train.random_extra:
        return "train.random_extra gives its batches a new length every step"
    return None


def _key_differences(a: RunConfig, b: RunConfig) -> list[str]:
    names = [f"model.{f}" for f in SHAPE_FIELDS[:-3]] + ["model.activation", "model.mlp", "model.d_vocab"]
    ka, kb = group_key(a), group_key(b)
    fields = dict(zip(SHAPE_FIELDS, ka[0], strict=True)), dict(zip(SHAPE_FIELDS, kb[0], strict=True))
    out = [n for n, f in zip(names, SHAPE_FIELDS, strict=True) if fields[0][f] != fields[1][f]]
    return out + [n for n, x, y in zip(GROUP_KEY_FIELDS[1:], ka[1:], kb[1:], strict=True) if x != y]


def check_shareable(runs: Sequence[RunDir]) -> None:
    """Raise :class:`GroupError`, naming what differs, unless ``runs`` can share one step."""
    first = runs[0]
    for run in runs:
        reason = why_single(run.config) if len(runs) > 1 else None
        if reason is not None:
            raise GroupError(f"{run.path} cannot train in a group: {reason}")
        differ = _key_differences(first.config, run.config)
        if differ:
            raise GroupError(f"{run.path} cannot share a step with {first.path}: {', '.join(differ)} differ "
                             f"(a group shares {', '.join(GROUP_KEY_FIELDS)})")


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
    """:func:`possym.train.trainee.evaluate` for ``members`` of ``group`` (indices), each on its own samples,
    in stacked passes: the metrics of each, in order.

    Members whose sample sets have one size share each pass (the others run in passes of their own);
    ``compiled`` pads the last batch to the full size, as :func:`~possym.train.trainee.evaluate` does.
    """
    out: dict[int, dict[str, float]] = {}
    by_size: dict[int, list[int]] = {}
    for j, s in enumerate(samples):
        by_size.setdefault(len(s), []).append(j)
    for js in by_size.values():
        idx = [members[j] for j in js]
        cfgs = [group.members[i].cfg for i in idx]
        metrics = evaluate_stacked(group.params_of(idx), cfgs, [samples[j] for j in js], batch_size, precision,
                                   compiled)
        out.update(zip(js, metrics, strict=True))
    return [out[j] for j in range(len(samples))]
