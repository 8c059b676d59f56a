"""Training loop: last-token cross-entropy, AdamW, warm-up + linear decay, exact resume.

No argparse and no prints: the CLI passes a callback for the progress bar. Everything the loop
writes goes through the :class:`~possym.runs.RunDir`.

Each step is :func:`possym.train.fused.loss_and_grads` (the hand-written forward and backward,
held equal to the module's autograd by the tests; ``train.compile`` runs it through Inductor) then
fused AdamW.

Determinism: the batch order of epoch e is a permutation drawn from ``(seeds.order, e)``; weights
come from a generator seeded by ``seeds.init``; dropout masks from a generator seeded by
``seeds.dropout``, whose state is saved with every resumable state. So a run killed at any point
and resumed ends with bitwise the same weights as an uninterrupted one (CPU, same thread count).

Example:
    >>> run = RunDir.create("runs/x", load_config("number", "quick"))   # doctest: +SKIP
    >>> summary = train(run, make_splits(run.config.task, run.config.seeds.data))   # doctest: +SKIP
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import torch

from possym.devices import resolve_device
from possym.runs import RunDir
from possym.tasks import TaskSamples
from possym.train.fused import loss_and_grads
from possym.train.group import train_group
from possym.train.tracking import tracking
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
    open_trainee,
)

# The loop's own names, and the pieces of one run's training it is built on (possym.train.trainee).
__all__ = ["GROUP_STATE", "LossScaler", "Monitor", "Trainee", "batch_indices", "build_model", "check_compiler",
           "checkpoint_and_eval", "eval_metrics", "evaluate", "log_final", "open_trainee", "train"]


def train(
    run: RunDir,
    splits: dict[str, TaskSamples],
    *,
    on_step: Callable[[dict[str, Any]], None] | None = None,
    monitor: Monitor | None = None,
    monitor_size: int = 32,
    dtype: torch.dtype = torch.float32,
) -> dict[str, Any]:
    """Train (or resume) the run to its last step, holding its writer lock (:meth:`RunDir.writing`: a
    second writer is refused); return the final test metrics.

    ``monitor(model, tokens) -> records`` (e.g. the live positional/symbolic scores) is called at
    every evaluation step on the first ``monitor_size`` evaluation inputs; its records are logged.
    ``dtype``: the weights' dtype (float32; the tests train in float64 to hold a group's members
    equal to their single runs). A run that was started as a member of a group
    (:func:`possym.train.group.train_group`) resumes on the group step, alone, so that it stays
    bitwise the run it would have been.
    """
    with run.writing():
        return _train(run, splits, on_step, monitor, monitor_size, dtype)


def _train(run: RunDir, splits: dict[str, TaskSamples], on_step: Callable[[dict[str, Any]], None] | None,
           monitor: Monitor | None, monitor_size: int, dtype: torch.dtype) -> dict[str, Any]:
    cfg, tc = run.config, run.config.train
    total = cfg.total_steps
    check_compiler(run)
    state = run.load_state()
    if state is not None and GROUP_STATE in state:
        member_step = None if on_step is None else (lambda _i, info: on_step(info))
        return train_group([run], [splits], on_step=member_step, monitor=monitor, monitor_size=monitor_size,
                           dtype=dtype)[0]
    # train.log's tracker (possym.train.tracking) mirrors metrics.jsonl while the run trains
    with tracking([run]):
        device = resolve_device(tc.device)
        t = open_trainee(run, splits, device, dtype, state, scaler_factory=LossScaler)
        precision = t.precision
        model, opt, sched, dropout, scaler, eval_set = t.model, t.opt, t.sched, t.dropout, t.scaler, t.eval_set
        start = t.step
        if t.state is None:
            checkpoint_and_eval(run, model, opt, sched, dropout, 0, eval_set, monitor, monitor_size, scaler,
                                precision=precision)

        t0, last = time.perf_counter(), start
        for step in range(start, total):
            tokens, answers, bits = t.batch()
            scale = 1.0 if scaler is None else scaler.scale
            loss = loss_and_grads(model, tokens, answers, bits, precision, tc.compile, loss_scale=scale)
            t.apply()
            done = step + 1
            info: dict[str, Any] = {"step": done, "total": total, "loss": loss.item(), "lr": sched.get_last_lr()[0]}
            if t.due():
                info["eval"] = checkpoint_and_eval(
                    run, model, opt, sched, dropout, done, eval_set, monitor, monitor_size, scaler,
                    precision=precision)
            if on_step is not None:
                elapsed = time.perf_counter() - t0
                info["steps_per_s"] = (done - last) / elapsed if elapsed > 0 else 0.0
                on_step(info)

        test = evaluate(model, splits["test"], precision=precision, compiled=tc.compile)
        return log_final(run, test, device, precision)
