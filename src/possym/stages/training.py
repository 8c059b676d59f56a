"""Train run directories (new or interrupted) to their last step, grouping those that can share a step.

:func:`train_runs` is the stage: it skips finished runs, partitions the rest into groups
(:func:`plan_training`) that train as one batched step (:func:`possym.train.loop.train_group`),
trains the others one by one (:func:`train_group_runs` of the run alone), prints what it did and returns a
:class:`TrainRunsRecord`. A run alone is a group of one: eager, a member's numbers are bitwise the
ones it would have alone, and it writes the same run directory.

How runs are grouped:

- the key (:func:`possym.train.group.group_key`): model shape and vocabulary, batch size, the task's
  sequence length, precision (``auto`` as it will run: :func:`possym.train.trainee.precision_of`),
  ``train.compile``, device and thread count. Seeds, learning rate,
  schedule, weight decay, clipping, dropout rates and RoPE plane options may differ;
- a resumed member keeps to the group it was trained in where that matters (compiled: its
  recorded layout); a run with ``train.random_extra > 0`` trains alone, and so does one whose
  resumable state another step version wrote (the loop refuses it, saying what to do);
- groups are filled in the order the runs are given, up to ``memory_budget_mb``
  (:data:`DEFAULT_MEMORY_BUDGET_MB`), counting :func:`possym.train.group.member_memory_mb` per member
  (the paper preset's model: 316 MiB, with its 480,000 rows of data; 285 measured);
- a key that holds one run trains it alone (a group of one gains nothing).

Example:
    >>> from possym.config import load_config
    >>> run = RunDir.create("runs/x", load_config("number", "quick", ["train.steps=500"]))   # doctest: +SKIP
    >>> train_group_runs([run])[0]["accuracy"]                                              # doctest: +SKIP
    >>> record = train_runs([RunDir.open(f"runs/seeds/seed{s}") for s in (0, 1, 2)])      # doctest: +SKIP
    >>> record.groups                                                                     # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from tqdm import tqdm

from possym.config import ConfigError
from possym.errors import DivergedError
from possym.runs import STATE, RunDir
from possym.stages.registry import Stage, StageContext
from possym.tasks import TaskSamples, make_splits

# A group's memory budget by default: 4 GiB holds 12 members of the paper preset's model and
# data (member_memory_mb), leaves a laptop room, and is far below one accelerator's memory.
DEFAULT_MEMORY_BUDGET_MB = 4096.0


def _monitor(on: bool):  # -> Monitor | None
    if not on:
        return None
    from possym.scores.monitor import monitor_scores

    return monitor_scores


def train_group_runs(runs: Sequence[RunDir], monitor: bool = False, position: int = 0, progress: bool = True,
                     splits: Sequence[dict[str, TaskSamples]] | None = None) -> list[dict[str, Any]]:
    """Train (or resume) ``runs`` as one group (:func:`possym.train.loop.train_group`; ``[run]`` for a run alone:
    a group of one is bitwise the run trained alone), with one progress bar over all of its members' steps;
    returns each one's final test metrics. ``monitor`` logs the positional/symbolic scores at every evaluation;
    ``position`` places the progress bar; ``splits``: the runs' data, when the caller holds it already. The
    loop holds each member's writer lock and the runs' ``train.threads``, the caller's count coming back after."""
    from possym.train.loop import train_group

    with contextlib.ExitStack() as stack:
        if splits is None:
            splits = [make_splits(r.config.task, r.config.seeds.data) for r in runs]
        total = sum(r.config.total_steps for r in runs)
        name = runs[0].config.task.name + (f" x{len(runs)}" if len(runs) > 1 else "")
        bars: list[tqdm] = []
        seen: dict[int, int] = {}
        accs: dict[int, float] = {}
        losses: dict[int, float] = {}

        def on_step(i: int, info: dict) -> None:
            # Drawn at the first step, so that a refusal before training (a damaged or foreign file) is one line;
            # closed however training ends, so that an error's message is the last line on the screen.
            if not bars:
                bars.append(stack.enter_context(tqdm(total=total, desc=name, position=position, dynamic_ncols=True,
                                                     disable=not progress)))
            bar = bars[0]
            bar.update(info["step"] - seen.get(i, 0))  # a resumed member's earlier steps too, at its first
            seen[i] = info["step"]
            losses[i] = info["loss"]
            if info.get("eval"):
                accs[i] = info["eval"]["accuracy"]
            low, high = min(accs.values(), default=math.nan), max(accs.values(), default=math.nan)
            # refresh=False: the bar redraws at tqdm's own pace, not once per step into a log file
            bar.set_postfix({"loss": f"{sum(losses.values()) / len(losses):.3f}",
                             "acc": f"{low:.3f}" if low == high or len(runs) == 1 else f"{low:.3f}-{high:.3f}",
                             "it_s": f"{info['steps_per_s']:.1f}"}, refresh=False)

        return train_group(runs, splits, on_step=on_step, monitor=_monitor(monitor))


@dataclass(frozen=True)
class TrainPlan:
    """How :func:`train_runs` trains its runs: ``groups`` (each trained as one step), ``singles`` (each
    alone, with the reason) and ``skipped`` (finished already)."""

    groups: tuple[tuple[RunDir, ...], ...] = ()
    singles: tuple[tuple[RunDir, str], ...] = ()
    skipped: tuple[RunDir, ...] = ()

    def lines(self) -> list[str]:
        """What the plan does, a line per group, single run and the finished runs."""
        out = [f"group of {len(g)} ({_name(g[0])}): {', '.join(str(r.path) for r in g)}" for g in self.groups]
        out += [f"alone ({why}): {r.path}" for r, why in self.singles]
        if self.skipped:
            out.append(f"finished already: {', '.join(str(r.path) for r in self.skipped)}")
        return out


def _name(run: RunDir) -> str:
    tc = run.config.train
    return f"{run.config.task.name}, {tc.precision}{', compiled' if tc.compile else ''}"


@dataclass(frozen=True)
class TrainRunsRecord:
    """What :func:`train_runs` did: its plan, the final test metrics of each run it trained (by run
    path, in the order given), and its wall-clock seconds."""

    plan: TrainPlan
    finals: dict[str, dict[str, Any]] = field(default_factory=dict)
    seconds: float = 0.0

    @property
    def groups(self) -> tuple[tuple[str, ...], ...]:
        """The paths of each group's members."""
        return tuple(tuple(str(r.path) for r in g) for g in self.plan.groups)

    @property
    def singles(self) -> tuple[str, ...]:
        return tuple(str(r.path) for r, _ in self.plan.singles)

    @property
    def skipped(self) -> tuple[str, ...]:
        return tuple(str(r.path) for r in self.plan.skipped)


def plan_training(runs: Sequence[RunDir], *, group: bool = True,
                  memory_budget_mb: float = DEFAULT_MEMORY_BUDGET_MB) -> TrainPlan:
    """Partition ``runs`` into groups, single runs and finished ones (module docstring), training nothing.

    >>> import tempfile
    >>> from possym.config import load_config
    >>> out = tempfile.mkdtemp()
    >>> runs = [RunDir.create(f"{out}/{i}", load_config("number", "quick", o))
    ...         for i, o in enumerate([["seeds.init=0"], ["seeds.init=1"], ["model.d_model=64"]])]
    >>> plan = plan_training(runs)
    >>> [len(g) for g in plan.groups], [why for _, why in plan.singles]
    ([2], ['no other run shares its step'])
    """
    from possym.train.fused import STEP_VERSION
    from possym.train.group import group_key, member_memory_mb, why_single
    from possym.train.trainee import GROUP_STATE, precision_of, state_step_version

    if not memory_budget_mb > 0:
        raise ConfigError(f"memory_budget_mb={memory_budget_mb} must be > 0")
    skipped: list[RunDir] = []
    singles: list[tuple[RunDir, str]] = []
    keyed: dict[tuple, list[tuple[RunDir, bool]]] = {}
    key_of: dict[int, tuple] = {}
    for run in runs:
        # Without its resumable state a run trains again from step 0, whatever its log says (or whether it reads).
        if (run.path / STATE).exists() and run.finished:
            skipped.append(run)
            continue
        reason = None if group else "grouping is off"
        reason = reason or why_single(run.config)
        state = run.load_state() if reason is None else None
        if state is not None and state_step_version(state) != STEP_VERSION:
            reason = "another version of the training step wrote its resumable state"
        if reason is not None:
            singles.append((run, reason))
            continue
        layout = None
        if state is not None and run.config.train.compile:  # a compiled member resumes in its own layout
            layout = json.dumps(state[GROUP_STATE]["models"])
        # "auto" members share a step only if they run in one precision (one started on another machine may not)
        ran = precision_of(run, None, resumed=state is not None)  # on the run's own train.device
        key_of[id(run)] = (group_key(run.config), ran, layout)
        keyed.setdefault(key_of[id(run)], []).append((run, state is not None))
    groups = []
    for members in keyed.values():
        chunk: list[tuple[RunDir, bool]] = []
        used = 0.0
        for run, resumed in members:
            need = member_memory_mb(run.config)
            if chunk and used + need > memory_budget_mb:
                groups.append(chunk)
                chunk, used = [], 0.0
            chunk.append((run, resumed))
            used += need
        groups.append(chunk)
    out_groups = []
    for chunk in groups:
        if len(chunk) == 1 and not chunk[0][1]:
            run = chunk[0][0]
            alone = len(keyed[key_of[id(run)]]) == 1
            singles.append((run, "no other run shares its step" if alone else
                            f"the memory budget ({memory_budget_mb:.0f} MiB) leaves it alone"))
        else:  # a resumed member continues on the group step, if need be in a group of one
            out_groups.append(tuple(r for r, _ in chunk))
    order = {id(r): i for i, r in enumerate(runs)}
    singles.sort(key=lambda rw: order[id(rw[0])])
    return TrainPlan(tuple(out_groups), tuple(singles), tuple(skipped))


class _SharedSplits:
    """The data of the runs of one :func:`train_runs` call: made once per (task, data seed), shared by the
    runs that use it (the fp16 and bf16 groups of one seed, a sweep's arms), dropped after its last."""

    def __init__(self, runs: Sequence[RunDir]) -> None:
        self.left = Counter(self.key(r) for r in runs)
        self.held: dict[tuple, dict[str, TaskSamples]] = {}

    @staticmethod
    def key(run: RunDir) -> tuple:
        task = run.config.task
        return type(task).__name__, json.dumps(dataclasses.asdict(task), sort_keys=True), run.config.seeds.data

    def take(self, run: RunDir) -> dict[str, TaskSamples]:
        key = self.key(run)
        splits = self.held.pop(key, None)
        if splits is None:
            splits = make_splits(run.config.task, run.config.seeds.data)
        self.left[key] -= 1
        if self.left[key] > 0:
            self.held[key] = splits
        return splits


def train_runs(
    runs: Sequence[RunDir],
    *,
    monitor: bool = True,
    progress: bool = True,
    memory_budget_mb: float = DEFAULT_MEMORY_BUDGET_MB,
    group: bool = True,
) -> TrainRunsRecord:
    """Train every run of ``runs`` not yet trained: in groups where they can share a step, alone where
    not (:func:`plan_training`); prints the plan and returns what was done.

    ``monitor``: log the live positional/symbolic scores at every evaluation; ``progress``: a bar
    per group or single run; ``group=False`` trains every run alone. Each group and run holds its
    ``train.threads`` while it trains, and the caller's count comes back after.
    """
    t0 = time.perf_counter()
    plan = plan_training(runs, group=group, memory_budget_mb=memory_budget_mb)
    for line in plan.lines():
        tqdm.write(f"training: {line}")
    finals: dict[str, dict[str, Any]] = {}
    data = _SharedSplits([*(r for g in plan.groups for r in g), *(r for r, _ in plan.singles)])
    diverged: list[DivergedError] = []  # a run that diverged stops alone: the others train on, then it is reported
    for members in plan.groups:
        splits = [data.take(r) for r in members]
        try:
            trained = train_group_runs(members, monitor=monitor, progress=progress, splits=splits)
        except DivergedError as exc:
            diverged.append(exc)
            logged = [RunDir.open(r.path).metrics_log().final for r in members]  # the others' final records
            trained = [{} if f is None or str(r.path) in exc.runs else f.to_json()
                       for r, f in zip(members, logged, strict=True)]
        for run, final in zip(members, trained, strict=True):
            if final:
                finals[str(run.path)] = final
    for run, _ in plan.singles:
        try:
            finals[str(run.path)] = train_group_runs([run], monitor=monitor, progress=progress,
                                                     splits=[data.take(run)])[0]
        except DivergedError as exc:
            diverged.append(exc)
    if diverged:
        raise DivergedError("; ".join(str(e) for e in diverged), tuple(p for e in diverged for p in e.runs))
    order = [str(r.path) for r in runs]
    ordered = {p: finals[p] for p in order if p in finals}
    return TrainRunsRecord(plan, ordered, time.perf_counter() - t0)


@dataclass(frozen=True)
class TrainStageConfig:
    """Training as a stage: with the live score monitor (``monitor``), a progress bar per group or run,
    runs grouped where they can share a step (``group``) up to ``memory_budget_mb`` per group."""

    monitor: bool = True
    progress: bool = True
    group: bool = True
    memory_budget_mb: float = DEFAULT_MEMORY_BUDGET_MB

    def __post_init__(self) -> None:
        if not all(isinstance(v, bool) for v in (self.monitor, self.progress, self.group)):
            raise ConfigError("train monitor, progress and group must be true or false")
        if isinstance(self.memory_budget_mb, bool) or not isinstance(self.memory_budget_mb, int | float) \
                or not self.memory_budget_mb > 0:
            raise ConfigError(f"train memory_budget_mb={self.memory_budget_mb!r} must be a number of MiB > 0")


def train_all(ctx: StageContext, cfg: TrainStageConfig) -> list[dict[str, Any]]:
    """Train (or finish) every run not yet trained (:func:`train_runs`); returns the final test metrics
    of those it trained."""
    record = train_runs(ctx.runs, monitor=cfg.monitor, progress=cfg.progress, memory_budget_mb=cfg.memory_budget_mb,
                        group=cfg.group)
    return list(record.finals.values())


def _settings(cfg: TrainStageConfig) -> dict[str, Any]:
    # The bar is a display, not a setting of what is trained; grouping changes float rounding, so it is one.
    return {"monitor": cfg.monitor, "group": cfg.group, "memory_budget_mb": cfg.memory_budget_mb}


def _units(runs: list[RunDir], cfg: TrainStageConfig, workers: int = 1) -> list[list[int]]:
    """The runs an engine must keep together in one unit of work: each group of the plan, and every other
    run alone (a finished one too: its unit goes on to its later stages).

    With ``workers`` > 1, a group none of whose members has started is cut into chunks of at most
    ⌈len(runs) / workers⌉ runs, each trained as its own group: one unit of 72 canonical cells beside one
    of 36 would keep a worker idle for half the time, and on a CPU a bigger group gains nothing
    (docs/results.md, the group step). A group with a resumed member stays whole, as it was trained.
    """
    plan = plan_training(runs, group=cfg.group, memory_budget_mb=cfg.memory_budget_mb)
    index = {str(r.path): i for i, r in enumerate(runs)}
    cap = max(1, math.ceil(len(runs) / workers))
    grouped = []
    for members in plan.groups:
        ids = [index[str(r.path)] for r in members]
        fresh = all(r.load_state() is None for r in members)
        step = cap if fresh and workers > 1 else len(ids)
        grouped += [ids[i:i + step] for i in range(0, len(ids), step)]
    taken = {i for g in grouped for i in g}
    return grouped + [[i] for i in range(len(runs)) if i not in taken]


def continue_each(ctx: StageContext, cfg: TrainStageConfig) -> list[dict[str, Any]]:
    """Continue each run's loop whatever its metrics say (:func:`train_group_runs` of the run alone): it trains
    what is left, re-creates a missing or corrupt final checkpoint from the resumable state, or, that state
    deleted, trains the run again from scratch, as the errors about a damaged run advise; :func:`train_runs`
    leaves a finished run alone."""
    return [train_group_runs([run], monitor=cfg.monitor, progress=cfg.progress)[0] for run in ctx.runs]


STAGE = Stage("training", TrainStageConfig, train_all, scope="runs", to_dict=_settings, plan=_units,
              summary="train every run to its last step (resuming a killed one), grouping those that share a "
                      "step, with the live score monitor")

# The training stage as ``possym train --out RUN`` and ``--resume RUN`` run it on one run (through its memo,
# possym.experiment.run_stage): not registered, it shares the stage's name and settings, so its entry is the
# train stage's.
CONTINUE = dataclasses.replace(STAGE, run=continue_each)
