"""One run's training, what the loop (:mod:`possym.train.loop`) holds per member: its state in memory
(:class:`Trainee`: model, AdamW, schedule, dropout stream, fp16 loss scale, data), its batches, its
optimiser step, its evaluation, checkpoints and resumable state (with the step version that wrote it),
and its final record.

Example:
    >>> LossScaler(scale=8.0).update(False), LossScaler(scale=8.0, growth_interval=1).update(True)
    (False, True)
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import time
from collections.abc import Callable, Sequence
from typing import Any, cast

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from possym.config import ModelConfig
from possym.devices import batch_size_on, resolve_device
from possym.errors import DivergedError, RunError
from possym.hardware import auto_precision
from possym.model.gptj import GPTJ
from possym.runs import STATE, RunDir
from possym.tasks import TaskSamples
from possym.train import tracking
from possym.train.augment import with_random_extra
from possym.train.fused import (
    STEP_VERSION,
    DropoutBits,
    Precision,
    cxx_compiler,
    draw_bits,
    member_params,
    stacked_last_token_logits,
)
from possym.train.schedule import lr_factor

Monitor = Callable[[GPTJ, Tensor], list[dict[str, Any]]]

log = logging.getLogger(__name__)


@torch.no_grad()
def evaluate(
    model: GPTJ,
    samples: TaskSamples,
    batch_size: int | None = None,
    precision: Precision = "fp32",
    compiled: bool = False,
) -> dict[str, float]:
    """Global and per-hop accuracy, and mean loss, of the last-token prediction, on the model's device.

    ``batch_size`` defaults to 256 rows on the CPU, which stay in cache (2048 was 1.6x slower on this
    CPU), and more on an accelerator (:func:`possym.devices.batch_size_on`). The forward is the training
    step's own, which computes only the query row in the last block, at the run's ``precision``.
    ``compiled`` (:func:`~possym.train.fused.last_token_logits`) pads the last batch to the full
    size, so every batch has the one shape the compiled blocks were built for.
    """
    return evaluate_stacked(member_params(model), [model.cfg], [samples], batch_size, precision, compiled)[0]


@torch.no_grad()
def evaluate_stacked(params: dict[str, Tensor], cfgs: Sequence[ModelConfig], samples: Sequence[TaskSamples],
                     batch_size: int | None = None, precision: Precision = "fp32",
                     compiled: bool = False) -> list[dict[str, float]]:
    """:func:`evaluate` for the S members whose stacked ``params`` [S, ...] and configs ``cfgs`` are given,
    member s on ``samples[s]`` (all of one size), in stacked passes: the metrics of each, in order.

    On the CPU each member runs in passes of its own. A stacked pass of S x 256 rows leaves the cache
    (paper model, bf16: 2.06 s a member against 1.86 s alone, on 2,400 rows), and a member's logits do
    not depend on the members beside it (tested bitwise), so the metrics are the same. An accelerator,
    where one member's pass is launch-bound, runs them stacked.
    """
    device = params["embed.weight"].device
    if device.type == "cpu" and len(cfgs) > 1:
        return [evaluate_stacked({k: v[s : s + 1] for k, v in params.items()}, [cfg], [own], batch_size, precision,
                                 compiled)[0] for s, (cfg, own) in enumerate(zip(cfgs, samples, strict=True))]
    batch_size = batch_size_on(device, 256) if batch_size is None else batch_size
    tokens = torch.stack([torch.as_tensor(s.tokens) for s in samples]).to(device)
    logits: list[list[Tensor]] = [[] for _ in samples]
    for t in tokens.split(batch_size, dim=1):
        rows = t.shape[1]
        if compiled and rows < batch_size:  # rows are independent: the padding changes no real row
            t = torch.cat((t, t[:, :1].expand(-1, batch_size - rows, -1)), dim=1)
        stacked = stacked_last_token_logits(params, cfgs, t, precision, compiled)[:, :rows]
        for own, lg in zip(logits, stacked, strict=True):
            own.append(lg)
    return [eval_metrics(s, lg) for s, lg in zip(samples, logits, strict=True)]


def eval_metrics(samples: TaskSamples, logits: list[Tensor]) -> dict[str, float]:
    """:func:`evaluate`'s metrics from the last-token logits of ``samples``, given batch by batch in order:
    ``accuracy`` (argmax = answer), ``loss`` (mean cross-entropy) and ``acc_hop{h}`` per hop count."""
    answers = torch.as_tensor(samples.answer).to(logits[0].device)
    losses, preds, start = [], [], 0
    for batch in logits:
        a = answers[start : start + len(batch)]
        start += len(batch)
        losses.append(F.cross_entropy(batch.float(), a, reduction="sum"))
        preds.append(batch.argmax(-1))
    correct = (torch.cat(preds) == answers).cpu().numpy()
    out = {"accuracy": float(correct.mean()), "loss": float(torch.stack(losses).sum()) / len(samples)}
    for h in np.unique(samples.n_hops):
        out[f"acc_hop{int(h)}"] = float(correct[samples.n_hops == h].mean())
    return out


@dataclasses.dataclass
class LossScaler:
    """fp16's dynamic loss scale, kept as ``torch.amp.GradScaler`` keeps it (the paper trained under
    HF Trainer's fp16, which uses one): it starts at 2^16; a step whose unscaled gradients are not all
    finite is skipped and the scale halves; after ``growth_interval`` finite steps in a row it doubles.
    The scale stays a power of two, so scaling and unscaling a gradient are exact.

    >>> s = LossScaler(growth_interval=2)
    >>> [s.update(ok) for ok in (True, False, True, True)], s.scale
    ([True, False, True, True], 65536.0)
    """

    scale: float = 2.0**16
    growth_interval: int = 2000
    finite_steps: int = 0

    def update(self, grads_finite: bool) -> bool:
        """Record one step's outcome; returns whether the optimiser may step."""
        if not grads_finite:
            self.scale /= 2
            self.finite_steps = 0
            return False
        self.finite_steps += 1
        if self.finite_steps == self.growth_interval:
            self.scale *= 2
            self.finite_steps = 0
        return True


def _gradients_finite(params: Sequence[torch.nn.Parameter]) -> bool:
    return bool(torch.stack([p.grad.isfinite().all() for p in params if p.grad is not None]).all())


def _param_groups(model: GPTJ, weight_decay: float) -> list[dict[str, Any]]:
    # HF Trainer (the paper's code) exempts biases and LayerNorm parameters from weight decay.
    decay: list[torch.nn.Parameter] = []
    no_decay: list[torch.nn.Parameter] = []
    for p in model.parameters():
        (no_decay if p.ndim < 2 else decay).append(p)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]


def batch_slice(step: int, n_train: int, batch_size: int) -> tuple[int, slice]:
    """The epoch of optimiser step ``step`` and the slice of that epoch's order it takes: with
    e = floor(n_train / batch_size) steps an epoch (the tail dropped), step t is epoch t // e, rows
    (t mod e) * batch_size up to the next batch.

    >>> batch_slice(12, n_train=100, batch_size=30)
    (4, slice(0, 30, None))
    """
    per_epoch = max(1, n_train // batch_size)
    epoch, within = divmod(step, per_epoch)
    return epoch, slice(within * batch_size, (within + 1) * batch_size)


def epoch_order(n_train: int, order_seed: int, epoch: int) -> np.ndarray:
    """Epoch ``epoch``'s permutation of the training rows, from (order seed, epoch) alone."""
    return np.random.default_rng([order_seed, epoch]).permutation(n_train)


def batch_indices(step: int, n_train: int, batch_size: int, order_seed: int) -> np.ndarray:
    """Training-set rows of optimiser step ``step``: epoch-wise permutations, the tail dropped.
    (:meth:`Trainee.batch` takes the same rows, keeping its epoch's order between steps.)"""
    epoch, rows = batch_slice(step, n_train, batch_size)
    return epoch_order(n_train, order_seed, epoch)[rows]


def build_model(run: RunDir, device: torch.device | None = None, dtype: torch.dtype = torch.float32) -> GPTJ:
    """The run's freshly initialised model, on ``device``: drawn on the CPU, so every device starts
    from the same weights."""
    model = GPTJ(run.model_config, torch.Generator().manual_seed(run.config.seeds.init))
    return model.to(device) if dtype == torch.float32 else model.to(device, dtype)


@dataclasses.dataclass
class Trainee:
    """One run's training in memory: its model, optimiser, schedule, dropout stream, loss scaler and
    data, at optimiser step ``step``. :func:`possym.train.loop.train_group` steps one or several at once."""

    run: RunDir
    model: GPTJ
    opt: torch.optim.Optimizer
    sched: torch.optim.lr_scheduler.LRScheduler
    dropout: torch.Generator
    scaler: LossScaler | None
    step: int
    train_tokens: Tensor
    train_answers: Tensor
    eval_set: TaskSamples
    state: dict[str, Any] | None  # the resumable state it was loaded from (None: a fresh run)
    precision: Precision  # train.precision as it runs here ("auto" resolved: run_precision)
    # The current epoch's order, drawn once per epoch and member: a 432,000-row permutation costs 11 ms, a
    # tenth of a CPU step. (A cache shared by a group's members, keyed by seed, missed on every step once
    # the group outgrew it: 21% of a group of 8's wall time on an H200, 2026-12-04.)
    _order: tuple[int, np.ndarray] | None = dataclasses.field(default=None, repr=False)

    @property
    def total(self) -> int:
        return self.run.config.total_steps

    @functools.cached_property
    def params(self) -> list[torch.nn.Parameter]:
        """The model's parameters, listed once (a group re-stacks their data, never replaces them)."""
        return list(self.model.parameters())

    def batch(self) -> tuple[Tensor, Tensor, DropoutBits]:
        """Step ``step``'s tokens, answers (on the model's device) and dropout bits, drawn from this run's
        own data order and dropout generator."""
        cfg, tc, step = self.run.config, self.run.config.train, self.step
        device = self.model.embed.weight.device
        epoch, rows = batch_slice(step, len(self.train_tokens), tc.batch_size)
        if self._order is None or self._order[0] != epoch:
            self._order = (epoch, epoch_order(len(self.train_tokens), cfg.seeds.order, epoch))
        idx = torch.as_tensor(self._order[1][rows].copy())
        batch = self.train_tokens[idx]
        if tc.random_extra:  # drawn from (order seed, step), so a resumed run sees the same tokens
            rng = np.random.default_rng([cfg.seeds.order, step, 1])
            batch = torch.as_tensor(with_random_extra(batch.numpy(), cfg.task, tc.random_extra, rng))
        bits = draw_bits(self.model.cfg, batch.shape[0], batch.shape[1], self.dropout)
        if device.type != "cpu" and bits.uniforms is not None:
            bits = dataclasses.replace(bits, uniforms=bits.uniforms.to(device, non_blocking=True))
        answers = self.train_answers[idx].to(device, non_blocking=True)
        return batch.to(device, non_blocking=True), answers, bits

    def apply(self) -> None:
        """The optimiser step on the gradients in ``.grad``: fp16's overflow check, clipping, AdamW, schedule."""
        tc = self.run.config.train
        # fp16: a step whose gradients overflowed is skipped, optimiser and schedule alike (GradScaler, HF Trainer)
        if self.scaler is None or self.scaler.update(_gradients_finite(self.params)):
            if tc.grad_clip is not None:
                torch.nn.utils.clip_grad_norm_(self.params, tc.grad_clip)
            self.opt.step()
            self.sched.step()
        self.step += 1

    def due(self) -> bool:
        """Whether step ``step`` evaluates, checkpoints or saves the resumable state."""
        tc, done = self.run.config.train, self.step
        every = (tc.eval_every, tc.checkpoint_every, tc.state_interval)
        return any(done % e == 0 for e in every) or done == self.total

    def evaluates(self) -> bool:
        return self.step % self.run.config.train.eval_every == 0 or self.step == self.total


def precision_of(run: RunDir, device: torch.device | None, resumed: bool) -> Precision:
    """The precision ``run`` trains in: its ``train.precision``, where ``"auto"`` is the training
    machine's answer (:func:`possym.hardware.auto_precision` on ``device``; None: the run's own ``train.device``)
    when training starts and, when it resumes (``resumed``), the answer recorded then (:func:`run_precision`),
    so a run keeps its precision on any machine."""
    asked = run.config.train.precision
    if asked != "auto":
        return cast(Precision, asked)
    recorded = run.meta.get("precision") if resumed else None
    if recorded:
        return cast(Precision, recorded)
    return cast(Precision, auto_precision(str(resolve_device(run.config.train.device) if device is None else device)))


def run_precision(run: RunDir, device: torch.device, resumed: bool) -> Precision:
    """:func:`precision_of`, recorded in ``meta.json`` as ``precision``: what ran."""
    precision = precision_of(run, device, resumed)
    if run.meta.get("precision") != precision:
        run.record_meta(precision=precision)
    return precision


class StepVersionError(RunError):
    """A resumable state written by another version of the training step (:data:`~possym.train.fused.STEP_VERSION`):
    resumed on this one, the run would not continue bitwise."""


# The key of a resumable state that holds the run's group layout (size, its slot, every slot's model
# config; a single run's is a group of one), with which a compiled run resumes bitwise (possym.train.loop:
# Inductor's kernels depend on the group's layout, never on the other members' numbers).
GROUP_STATE = "group"
# The key of a resumable state that names the version of the step that wrote it. A state without it
# was written before the versions were recorded: by the member-batched step (version 2) when it holds
# a group layout (GROUP_STATE), else by the single-model step (version 1).
STEP_VERSION_KEY = "step_version"


def state_step_version(state: dict[str, Any]) -> int:
    """The version of the training step that wrote the resumable ``state``."""
    return int(state.get(STEP_VERSION_KEY, 2 if GROUP_STATE in state else 1))


def check_step_version(run: RunDir, state: dict[str, Any]) -> None:
    """Refuse (:class:`StepVersionError`) a resumable ``state`` with steps left to train that another step
    version wrote; a finished run's state trains no step, so it is taken as it is."""
    version = state_step_version(state)
    if version == STEP_VERSION or state["step"] >= run.config.total_steps:
        return
    commit = run.meta.get("git_commit") or "the one that started it"
    raise StepVersionError(
        f"{run.path}: its resumable state (step {state['step']}) was written by training step version {version}, "
        f"and this possym runs version {STEP_VERSION}, whose arithmetic rounds differently, so the run would not "
        f"continue bitwise; finish it with the possym that started it (commit {commit}), or delete "
        f"{run.path / STATE} to train it again from step 0"
    )


def open_trainee(run: RunDir, splits: dict[str, TaskSamples], device: torch.device,
                 dtype: torch.dtype = torch.float32, state: dict[str, Any] | None = None) -> Trainee:
    """``run``'s model, optimiser, schedule and dropout stream, fresh or loaded from its resumable state
    ``state`` (:meth:`RunDir.load_state`, already read), its metrics log cut back to that state's step;
    nothing is evaluated or written but the log. A state another step version wrote is refused
    (:func:`check_step_version`)."""
    if state is not None:
        check_step_version(run, state)
    check_trainable(run)
    cfg, tc = run.config, run.config.train
    total = cfg.total_steps
    train_set = splits["train"]
    eval_set = splits["val"].take(np.arange(min(tc.eval_size, len(splits["val"]))))
    train_tokens, train_answers = torch.as_tensor(train_set.tokens), torch.as_tensor(train_set.answer)
    # The step brings its own dropout masks, so the module itself only ever runs in eval mode
    # (the live monitor's forward passes).
    model = build_model(run, device, dtype).eval()
    groups = _param_groups(model, tc.weight_decay)
    opt = torch.optim.AdamW(groups, lr=tc.lr, betas=(tc.beta1, tc.beta2), fused=True)  # 4x foreach's speed on CPU
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: lr_factor(s, tc.warmup_steps, total))
    # Dropout is drawn on the CPU on every device: the same masks everywhere, and a state that resumes anywhere.
    dropout = torch.Generator().manual_seed(cfg.seeds.dropout)
    precision = run_precision(run, device, resumed=state is not None)
    scaler = LossScaler() if precision == "fp16" else None

    start = 0
    if state is not None:
        if "dropout_rng" not in state:
            raise ValueError(
                f"{run.path}: this run was trained by an older possym whose dropout stream differs; "
                "resuming it would not reproduce it. Finish it with that version, or start a new run"
            )
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        sched.load_state_dict(state["scheduler"])
        dropout.set_state(state["dropout_rng"])
        if scaler is not None and "loss_scaler" in state:
            scaler = LossScaler(**state["loss_scaler"])
        start = state["step"]
        lost = run.resume_damage(start)
        run.truncate_metrics(start)
        _restore_checkpoint(run, start, state["model"])
        if lost:
            log.warning("possym: %s lacks the checkpoints of steps %s, and its resumable state (step %d) holds no "
                        "weights of theirs, so resuming cannot re-create them; to get them back, %s", run.path, lost,
                        start, run._retrain)
    else:
        run.truncate_metrics(-1)  # a restart from scratch logs every step again, from step 0
        warn_warmup(run)
    return Trainee(run, model, opt, sched, dropout, scaler, start, train_tokens, train_answers, eval_set, state,
                   precision)


def _restore_checkpoint(run: RunDir, step: int, weights: dict[str, Tensor]) -> None:
    """Re-create the checkpoint of the resumable state's step, if it is due there and missing or corrupt:
    the state holds its weights (the final checkpoint's always, as the last state is saved at the end)."""
    tc = run.config.train
    if step % tc.checkpoint_every and step != run.config.total_steps:
        return
    path = run.checkpoint_path(step)
    if path.is_file():
        try:
            header, tensors = run.read_checkpoint(step)
        except RunError:
            what = "corrupt"
        else:  # readable: another run's is refused by name, never written over
            run.check_header(step, header, finite=False)
            return
    else:
        what = "missing"
    run.save_checkpoint(step, weights)
    log.warning("possym: re-created the %s checkpoint %s from the resumable state", what, path)


def check_trainable(run: RunDir) -> None:
    """Refuse to train a run that diverged (:class:`~possym.errors.DivergedError`): from its last state it would
    diverge again, at the same step."""
    if run.diverged:
        raise DivergedError(f"{run.path} {run.status()}, and from its last state it would diverge again at the "
                            "same step; train a new run with other settings (a lower train.lr, a longer "
                            "train.warmup_steps)", (str(run.path),))


def warn_warmup(run: RunDir) -> None:
    """One line when the run's warm-up is longer than the run: its learning rate never reaches ``train.lr``."""
    tc, total = run.config.train, run.config.total_steps
    if tc.warmup_steps > total:
        log.warning("possym: %s: train.warmup_steps=%d is longer than the run (%d steps), so its learning rate only "
                    "reaches %.3g%% of train.lr=%g; set train.warmup_steps below train.steps", run.path,
                    tc.warmup_steps, total, 100 * lr_factor(total - 1, tc.warmup_steps, total), tc.lr)


def nonfinite_cause(run: RunDir, loss: float) -> str:
    """The likely cause of a non-finite loss, for the one line that reports it."""
    tc = run.config.train
    if tc.lr > 1e-2:
        return f"train.lr={tc.lr:g} is likely far too high: these models train at 1e-4 to 1e-3"
    if tc.precision == "fp16":
        return "fp16 overflowed beyond what the loss scale absorbs: train in bf16 or fp32 (train.precision)"
    return (f"the learning rate, train.lr={tc.lr:g}, is likely too high for this model, or the warm-up, "
            f"train.warmup_steps={tc.warmup_steps}, too short")


def check_compiler(run: RunDir) -> None:
    if run.config.train.compile and cxx_compiler() is None:
        raise RuntimeError(
            "train.compile=true needs a C++ compiler for Inductor (g++, c++ or clang++ on PATH, or $CXX)"
        )


def log_final(run: RunDir, test_metrics: dict[str, float], device: torch.device, precision: Precision
              ) -> dict[str, Any]:
    """Log the final test evaluation (made on ``device`` at ``precision``) and fix the best step; returns
    the final record."""
    final = {
        "event": "final",
        "step": run.config.total_steps,
        "split": "test",
        **test_metrics,
        "precision": precision,  # what train.precision (e.g. "auto") resolved to
        "device": str(device),  # what train.device (e.g. "auto") resolved to
        "time": round(time.time(), 3),
    }
    tracking.log(run, final)  # metrics.jsonl, and train.log's tracker
    run.write_best()  # the checkpoint `--step best` names, fixed once training is done
    return final


def checkpoint_and_eval(
    run: RunDir,
    model: GPTJ,
    opt: torch.optim.Optimizer,
    sched: torch.optim.lr_scheduler.LRScheduler,
    dropout: torch.Generator,
    step: int,
    eval_set: TaskSamples,
    monitor: Monitor | None,
    monitor_size: int,
    scaler: LossScaler | None = None,
    metrics: tuple[dict[str, float], float] | None = None,
    extra_state: dict[str, Any] | None = None,
) -> dict[str, Any] | None:
    """Log this step's evaluation, checkpoint and save the resumable state where ``step`` calls for each.
    ``metrics``: the evaluation made at this step (:meth:`Trainee.evaluates`; the loop evaluates its
    members at once) and its seconds, else None; ``extra_state``: more keys for the resumable state."""
    tc, total = run.config.train, run.config.total_steps
    record = None
    if metrics is not None:
        values, seconds = metrics
        record = {"event": "eval", "step": step, "split": "val", **values}
        record["eval_s"] = seconds
        record["time"] = round(time.time(), 3)  # wall-clock, so a run's own records give its duration
        if monitor is not None:
            t = time.perf_counter()
            with torch.no_grad():
                tokens = torch.as_tensor(eval_set.tokens[:monitor_size]).to(model.embed.weight.device)
                record["scores"] = monitor(model, tokens)
            record["monitor_s"] = time.perf_counter() - t
        tracking.log(run, record)  # metrics.jsonl, and train.log's tracker
    if step % tc.checkpoint_every == 0 or step == total:
        run.save_checkpoint(step, model.state_dict())
    if step % tc.state_interval == 0 or step == total:
        run.save_state(
            {
                "step": step,
                "model": model.state_dict(),
                "optimizer": opt.state_dict(),
                "scheduler": sched.state_dict(),
                "dropout_rng": dropout.get_state(),
                STEP_VERSION_KEY: STEP_VERSION,
                **({} if scaler is None else {"loss_scaler": dataclasses.asdict(scaler)}),
                **(extra_state or {}),
            }
        )
    return record
