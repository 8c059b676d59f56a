"""The one executor: runs an experiment's stages over its runs into one directory, resumably.

``OUT`` holds ``experiment.yaml`` (the experiment as last run), ``runs/ID/`` (each run's directory, with its memo
``resume.json``, :mod:`possym.stages.memo`), ``log/experiment.json`` (the experiment-scope stages' entries),
``logs/ID.log`` (what each run's stages printed, and each failure reported for it) and ``NAME/`` (each part, run
first). Experiment-scope stages run here; each stretch of run-scope stages is cut into units of work
(:class:`Unit`) that one loop hands to an engine (:class:`Here`, a pool, Ray or Slurm: :mod:`possym.sweep.engines`),
each through :func:`run_unit` and every stage through :func:`run_stage`. What is done with today's settings is
skipped unless ``redo`` names it; a failing unit is retried ``retries`` times, then its run is left out of later
stages. Thread counts are set per unit and restored. See docs/architecture.md, "One experiment, one executor".

Example:
    >>> import tempfile
    >>> from possym.experiment.spec import load_experiment
    >>> exp = load_experiment("quick", overrides=["experiment.tasks=[number]", "train.steps=4"])  # doctest: +SKIP
    >>> run_experiment(exp, tempfile.mkdtemp()).failed   # doctest: +SKIP
    {}"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import pickle
import time
import traceback
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pandas as pd
import yaml
from tqdm import tqdm

from possym.devices import resolve_device, torch_threads
from possym.errors import EarlierLayoutError, PossymError, named_options
from possym.experiment.spec import Experiment, RunSpec, dump_experiment, experiment_differences, experiment_to_dict
from possym.locks import lock_holder, on_behalf_of, writer_lock
from possym.runs import RunDir, atomic_write_text, ensure_run, remove_orphans
from possym.stages.memo import EXPERIMENT, MEMO_FILE, RENAMED_STAGES, ExperimentMemo, MemoRecord, run_memo
from possym.stages.registry import Execution, ExperimentDir, Stage, StageContext, get_stage

log = logging.getLogger(__name__)

EXPERIMENT_FILE = "experiment.yaml"
PART_ENGINE_RUNS = 40  # parts with fewer runs run in this process even when the experiment has an engine


@dataclass
class ExperimentOutcome:
    """What a call did: stages run and skipped, runs that failed (with their last error) or were retried,
    the settings that differ from the previous call, and each experiment-scope stage's return value."""

    out: Path
    ran: list[tuple[str, str]] = field(default_factory=list)  # (owner, stage)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)  # run id (or "experiment") -> last error
    retried: list[str] = field(default_factory=list)  # run ids whose unit ran more than once in this call
    changed: list[str] = field(default_factory=list)  # experiment.yaml keys that differ from the last call
    results: dict[str, Any] = field(default_factory=dict)  # experiment-scope stage -> what it returned
    parts: dict[str, ExperimentOutcome] = field(default_factory=dict)
    seconds: float = 0.0

    def failure_lines(self) -> list[str]:
        """One line a failed run (its parts' too), the line every command prints: the error's last line and the
        log that holds the whole of it, which the executor wrote (``OUT/logs/ID.log``).

        >>> ExperimentOutcome(Path("runs/x"), failed={"number-s0": "Traceback ...\\nValueError: boom"}).failure_lines()
        ['FAILED number-s0: ValueError: boom (see runs/x/logs/number-s0.log)']
        """
        lines = [f"FAILED {rid}: {error.strip().splitlines()[-1] if error.strip() else '(no message)'} "
                 f"(see {self.out / 'logs' / rid}.log)" for rid, error in self.failed.items()]
        return lines + [line for part in self.parts.values() for line in part.failure_lines()]

    def log(self) -> pd.DataFrame:
        """The memo of the directory as a table: owner, stage, status, seconds, attempts, ..."""
        columns = [f.name for f in dataclasses.fields(MemoRecord)]
        return pd.DataFrame([dataclasses.asdict(r) for r in ExperimentMemo(self.out).records()], columns=columns)


@dataclass(frozen=True)
class Unit:
    """A stretch of run-scope stages for one run, or for a group of runs that a stage's plan keeps together
    (training runs that share one batched step): plain, picklable data, so that every engine ships it as is."""

    out: str
    runs: tuple[RunSpec, ...]
    stages: tuple[tuple[Stage, Any], ...]
    threads: int | None
    redo: tuple[str, ...] = ()  # stages to run again although done
    screen: bool = False  # run where someone watches (this process): progress bars drawn, stderr left on screen

    @property
    def id(self) -> str:
        """The unit's name: its run's id, or its first run's id and how many more (``a-number-s0+2``)."""
        return self.runs[0].id + (f"+{len(self.runs) - 1}" if len(self.runs) > 1 else "")

    @property
    def run(self) -> RunSpec:
        """The run of a one-run unit."""
        if len(self.runs) != 1:
            raise PossymError(f"unit {self.id} holds {len(self.runs)} runs; read unit.runs")
        return self.runs[0]


@named_options
def run_experiment(exp: Experiment, out: str | Path, *, engine: Any = None, progress: bool = True,
                   on_unit: Callable[[Unit, str], None] | None = None,
                   redo: Collection[str] = ()) -> ExperimentOutcome:
    """Run every stage of ``exp`` not yet done with today's settings into ``out``; see the module docstring.

    ``engine``: None runs everything in this process (:class:`Here`); else an object with ``map(fn, items)``
    yielding ``(item, result, error)`` (:func:`possym.sweep.engines.make_engine`). ``on_unit(unit, "done" |
    "retry" | "failed")`` reports each run's outcome (a progress bar's hook). ``redo``: names of stages to
    run again although the memo has them done with today's settings (a per-step stage at every step).

    ``out`` is locked for the call (:func:`possym.locks.writer_lock`): a second executor on it is refused,
    naming this one. Its workers write each run under that run's own lock.
    """
    if not isinstance(exp, Experiment):
        raise PossymError(f"run_experiment takes an Experiment (possym.load_experiment(...)), not "
                          f"{type(exp).__name__} {exp!r:.60}")
    if not isinstance(out, str | Path):
        raise PossymError(f"run_experiment's out is a directory path (str or Path), not {type(out).__name__}")
    if engine is not None and not callable(getattr(engine, "map", None)):
        raise PossymError(f"engine {engine!r:.60} has no map(fn, items); make one with "
                          "possym.sweep.engines.make_engine")
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise PossymError(f"{out} is a file, not a directory; give run_experiment a directory")
    redo = (redo,) if isinstance(redo, str) else tuple(redo)
    for name in redo:
        get_stage(name)  # an unknown name is an error naming the known ones
    # The writer's open removes the temporary files an interrupted write left in OUT (each run's own: its writer's).
    with writer_lock(out, "experiment", on_acquire=lambda: _tidy(out)):
        return _run_experiment(exp, out, engine, progress, on_unit, redo)


def _tidy(out: Path) -> None:
    removed = remove_orphans(out, skip=("runs",))
    if removed:
        log.info("possym: removed %d temporary file(s) that an interrupted write left in %s", len(removed), out)


def _run_experiment(exp: Experiment, out: Path, engine: Any, progress: bool,
                    on_unit: Callable[[Unit, str], None] | None, redo: tuple[str, ...] = ()) -> ExperimentOutcome:
    t0 = time.perf_counter()
    exp = exp.with_stages()
    outcome = ExperimentOutcome(out)
    earlier = older_layout(out)
    if earlier is not None:
        raise EarlierLayoutError(f"{out} holds {earlier}; upgrade it once with `possym migrate {out}`, then run again")
    specs = exp.runs()
    # Every run is opened or created before anything runs: a run that holds another config is refused here.
    runs = {spec.id: ensure_run(out / "runs" / spec.id, spec.config(), argv=["possym.run_experiment", str(out)])
            for spec in specs}
    outcome.changed = _record_experiment(out, exp)
    for name, sub in exp.parts:
        # A small part's units cost more to ship to workers (a fresh process each) than to run here.
        big = len(sub.runs()) >= PART_ENGINE_RUNS
        outcome.parts[name] = run_experiment(sub, out / name, engine=engine if big else None, progress=progress)
    failed: set[str] = set()
    context = ExperimentDir(out, runs, {s.id: s.task for s in specs}, {s.id: s.seed for s in specs},
                            {s.id: s.variant for s in specs}, exp.preset)
    for segment in _segments(exp):
        if segment[0][0].scope == "experiment":
            stage, cfg = segment[0]
            if specs and failed >= {s.id for s in specs}:
                # Every run failed: a report on no runs would replace the last good one with an empty one.
                outcome.skipped.append((EXPERIMENT, stage.name))
                continue
            _experiment_stage(stage, cfg, context, outcome, exp.threads, stage.name in redo)
            continue
        alive = [s for s in specs if s.id not in failed]
        todo = [s for s in alive if not _runs_done(out, s, segment, outcome, redo)]
        if not todo:
            continue
        units = _units(out, todo, segment, exp.threads, runs, engine or HERE, redo, progress)
        _run_units(engine or HERE, units, outcome, exp.retries, on_unit)
        failed |= set(outcome.failed)
    outcome.seconds = time.perf_counter() - t0
    return outcome


# What each earlier possym left in an experiment directory, by a file only it wrote: nothing on the run path reads
# such a directory; `possym migrate OUT` upgrades it once (possym.experiment.migrate).
_EARLIER = (
    ("stages.json", "a single-seed reproduction of an earlier possym (its stages.json)"),
    ("trials/*/trial.json", "a sweep of an earlier possym (its trials/)"),
    ("seed*/config.yaml", "the seeds of an earlier `possym train --seeds` (its seed*/)"),
    ("runs/*/*/seed*/canonical.json", "a canonical grid of an earlier possym (its runs/TASK/CONDITION/seedS/)"),
    ("log/*.json", "the memo of an earlier executor (its log/ID.json)"),
    ("runs/*/purity.csv", "a purity table of an earlier possym (its column max_accuracy_step)"),
    (f"runs/*/{MEMO_FILE}", "a run memo of an earlier possym (a stage under its old name: "
                            + ", ".join(f"{a} -> {b}" for a, b in RENAMED_STAGES.items()) + ")"),
    (EXPERIMENT_FILE, "an experiment.yaml of an earlier possym (a stage under its old name: "
                      + ", ".join(f"{a} -> {b}" for a, b in RENAMED_STAGES.items()) + ")"),
)


def renamed_stages(path: Path) -> list[str]:
    """The stages a memo file or an experiment.yaml names by an old name (:data:`possym.stages.memo.RENAMED_STAGES`)."""
    try:
        data = yaml.safe_load(path.read_text()) if path.suffix == ".yaml" else json.loads(path.read_text())
    except (OSError, ValueError, yaml.YAMLError):
        return []  # damaged, not old: the reader's own refusal names it
    stages = data.get("stages") if isinstance(data, dict) else None
    return [name for name in (stages or {}) if name in RENAMED_STAGES]


def older_layout(out: str | Path) -> str | None:
    """What an earlier possym left in the directory ``out`` (module docstring of :mod:`possym.experiment.migrate`),
    in words; None for a directory in today's layout (or none at all).

    >>> import tempfile
    >>> older_layout(tempfile.mkdtemp()) is None
    True
    """
    out = Path(out)
    for pattern, what in _EARLIER:
        for path in out.glob(pattern):
            if pattern == "log/*.json" and path.stem == EXPERIMENT:
                continue
            if pattern == "seed*/config.yaml" and not path.parent.name[4:].isdigit():
                continue
            if pattern == "runs/*/purity.csv":
                with path.open() as f:
                    if "max_accuracy_step" not in f.readline().split(","):
                        continue
            if pattern in (f"runs/*/{MEMO_FILE}", EXPERIMENT_FILE) and not renamed_stages(path):
                continue
            return what
    return None


def run_unit(unit: Unit) -> dict[str, Any]:
    """Run a unit's stages that are not done (every engine's function, this process's too: top level, plain data
    in and out); a ``runs``-scope stage sees the unit's runs together, a ``run``-scope stage each in turn. A run
    whose stage fails is left out of its later stages while the unit's other runs go on. Returns what ran
    (``ran``: (run id, stage)) and what failed (``errors``: (run id, stage, error)); an engine's own error (a
    worker lost) reaches the executor through the engine instead."""
    # As a worker of the call that holds OUT's lock: a run lock an earlier, lost worker of it left on
    # another node is taken over (possym.locks.on_behalf_of).
    holder = lock_holder(unit.out)
    with on_behalf_of(None if holder is None else holder.token), torch_threads(unit.threads):
        return _run_unit(unit)


def _run_unit(unit: Unit) -> dict[str, Any]:
    out = Path(unit.out)
    dirs = {spec.id: RunDir.open(out / "runs" / spec.id) for spec in unit.runs}
    ran: list[tuple[str, str]] = []
    errors: dict[str, tuple[str, str]] = {}  # run id -> (stage, error)
    for stage, cfg in unit.stages:
        redo = stage.name in unit.redo
        todo = [rid for rid in dirs if rid not in errors and not _done(out, rid, stage, cfg, redo)]
        with tqdm(total=len(todo), desc=stage.name, unit="run", disable=not unit.screen or len(todo) < 2,
                  dynamic_ncols=True, leave=False) as bar:
            if stage.scope == "runs" and todo:
                log = todo[0] if len(todo) == 1 else unit.id
                with _output_to(out / "logs" / f"{log}.log", stderr=not unit.screen):
                    failed = _run_together(stage, [dirs[rid] for rid in todo], cfg)
                errors |= {rid: (stage.name, failed[str(dirs[rid].path)]) for rid in todo
                           if str(dirs[rid].path) in failed}
                ran += [(rid, stage.name) for rid in todo if str(dirs[rid].path) not in failed]
                bar.update(len(todo))
                continue
            for rid in todo:
                try:
                    with _output_to(out / "logs" / f"{rid}.log", stderr=not unit.screen):
                        if run_stage(dirs[rid], stage, cfg, redo=redo).ran:
                            ran.append((rid, stage.name))
                except Exception as exc:
                    errors[rid] = (stage.name, _error(exc))
                bar.update(1)
    return {"unit": unit.id, "ran": ran, "errors": [(rid, st, e) for rid, (st, e) in errors.items()]}


class Here:
    """The engine that runs units in this process, one after another, as Hydra's ``BasicLauncher`` sits beside its
    other launchers: :func:`run_experiment` uses it when given no engine. Its one unit per stretch of stages holds
    every run (:func:`_units`), so that the runs that can share a batched step train together and every run is
    trained before any is analysed."""

    workers = 1
    in_process = True

    def map(self, fn: Callable[[Any], Any], items: list[Any]) -> Iterator[tuple[Any, Any, str | None]]:
        for item in items:
            try:
                yield item, fn(item), None
            except Exception as exc:  # what a worker process's death is to the others: the unit's error
                yield item, None, _error(exc)


HERE = Here()


def _run_together(stage: Stage, runs: list[RunDir], cfg: Any) -> dict[str, str]:
    """:func:`_together` for the executor: the error of each run that failed, by run path (none: all done)."""
    try:
        _together(stage, runs, cfg)
    except Exception as exc:
        return dict.fromkeys(_failed_runs(exc, runs), _error(exc))
    return {}


def _failed_runs(exc: BaseException, runs: list[RunDir]) -> list[str]:
    """The paths of ``runs`` that an error of a ``runs``-scope stage concerns: those it names (a training whose
    runs diverged, :class:`~possym.errors.DivergedError`: the others trained to their end), else all."""
    named = set(getattr(exc, "runs", ()) or ())
    return [str(r.path) for r in runs if not named or str(r.path) in named]


def _together(stage: Stage, runs: list[RunDir], cfg: Any) -> float:
    """A ``runs``-scope stage (training) on ``runs`` at once, each run's writer lock held and its entry in its own
    memo; returns the seconds. A run whose lock another writer holds (on another host, say) fails the call before
    anything runs, and its memo is left as that writer keeps it. An error that names its runs (``exc.runs``: those
    that diverged) fails those alone; the others' entries are done."""
    key = stage.key_of(cfg)
    threads, device = stage.where(cfg)
    t0 = time.perf_counter()
    started: list[RunDir] = []
    try:
        with contextlib.ExitStack() as locks:
            for run in runs:
                locks.enter_context(run.writing())
                run_memo(run.path).start(stage.name, key)
                started.append(run)
            with torch_threads(threads):
                stage.run(StageContext(list(runs), resolve_device(device), threads, stage.settings_of(cfg)), cfg)
    except Exception as exc:
        failed = set(_failed_runs(exc, started))
        for run in started:
            if str(run.path) in failed:
                run_memo(run.path).fail(stage.name, time.perf_counter() - t0, _error(exc))
            else:
                run_memo(run.path).finish(stage.name, (time.perf_counter() - t0) / len(started))
        raise
    seconds = time.perf_counter() - t0
    for run in runs:
        run_memo(run.path).finish(stage.name, seconds / len(runs))
    return seconds


@dataclass(frozen=True)
class StageRun:
    """What :func:`run_stage` did: whether the stage ran, the checkpoints it did and those it kept (a per-step
    stage), the seconds, and what the stage returned (None when it did not run)."""

    stage: str
    ran: bool
    steps: tuple[int, ...] = ()
    kept: tuple[int, ...] = ()
    seconds: float = 0.0
    result: Any = None


def run_stage(target: RunDir | ExperimentDir | str | Path | list[RunDir], stage: Stage | str, cfg: Any = None, *,
              redo: bool = False, progress: Callable[..., None] | None = None) -> StageRun:
    """Run ``stage`` (a name or a :class:`~possym.stages.registry.Stage`) with ``cfg`` (None: its defaults) on
    ``target``, unless its memo has it done with these settings; ``redo`` runs it anyway. The one way a stage
    runs: the executor, ``possym score|lengthgen|discrepancy|theory|train`` and :class:`possym.Run` call it,
    so that work done by one is never redone by another. ``progress`` goes to the stage's function, if given.

    - a run-scope stage (and ``train``, a ``runs``-scope stage, given the run alone): ``target`` is a run
      directory, its memo ``RUN/resume.json`` (:mod:`possym.stages.memo`), written under the run's writer lock.
      A per-step stage (``score``, ``lengthgen``) does only the checkpoints the memo lacks (with ``redo``,
      every one it asks for) and keeps the others' outputs;
    - a ``runs``-scope stage given a list of run directories (:func:`possym.train_models`): those whose memo
      lacks it run at once (training groups those that share a step), each run's memo recording it;
    - an experiment-scope stage: ``target`` is an experiment directory (a path, or the
      :class:`~possym.stages.registry.ExperimentDir` the executor gives, with its runs), its memo
      ``OUT/log/experiment.json``, written under the directory's writer lock; a stage that is ``always``
      run (a report) runs on every call.

    A second writer is refused, naming this one; a stage the memo has done is read back without the lock.

    >>> import tempfile
    >>> @dataclass(frozen=True)
    ... class Count:
    ...     n: int = 3
    >>> count = Stage("count", Count, lambda exp, cfg: cfg.n, scope="experiment")  # theory is one such stage
    >>> out = tempfile.mkdtemp()
    >>> [(s.ran, s.result) for s in (run_stage(out, count, Count(5)), run_stage(out, count, Count(5)),
    ...                              run_stage(out, count, Count(6)))]
    [(True, 5), (False, None), (True, 6)]
    """
    stage = get_stage(stage) if isinstance(stage, str) else stage
    cfg = stage.settings_from({}) if cfg is None else cfg
    if isinstance(target, list | tuple):
        return _run_stage_together(list(target), stage, cfg, redo)
    call: Any
    lock: contextlib.AbstractContextManager[Any]
    if stage.scope == "experiment":
        if isinstance(target, RunDir):
            raise PossymError(f"stage {stage.name!r} is experiment-scope: give run_stage an experiment directory")
        call = target if isinstance(target, ExperimentDir) else ExperimentDir(Path(target))
        memo, lock = ExperimentMemo(call.path).memo(EXPERIMENT), writer_lock(call.path, "experiment")
        wanted, at = None, None
    else:
        if isinstance(target, ExperimentDir):
            raise PossymError(f"stage {stage.name!r} is {stage.scope}-scope: give run_stage a run directory")
        run = target if isinstance(target, RunDir) else RunDir.open(target)
        call = [run] if stage.scope == "runs" else run
        memo, lock = run_memo(run.path), run.writing()
        # Every setting checked against the run (a checkpoint it names is not there: refused) before the memo or
        # a folder is touched: a refused call changes nothing, and keeps the work done.
        if stage.scope == "run":
            cfg = stage.prepare(run, cfg)
        wanted, at = stage.memo_steps(run, cfg)
    key, defaults = stage.key_of(cfg), _defaults(stage)
    threads, where = stage.where(cfg)
    device = resolve_device(where)  # a device this machine lacks: refused before the memo is touched
    again = redo or stage.always
    if not again and memo.done(stage.name, key, defaults, wanted, at):  # read back: a reader takes no lock
        return StageRun(stage.name, False, (), tuple(wanted or ()))
    with lock:
        if not again and memo.done(stage.name, key, defaults, wanted, at):  # another writer did it meanwhile
            return StageRun(stage.name, False, (), tuple(wanted or ()))
        keep: list[int] | None = None
        todo: list[int] = []
        if wanted is not None:
            keep = [s for s in memo.kept(stage.name, key, defaults, stage.step_settings) if not (redo and s in wanted)]
            todo = [s for s in wanted if s not in keep]
            cfg = stage.narrowed(cfg, todo)
        execution = {"threads": threads, "device": str(device)} if isinstance(cfg, Execution) else {}
        memo.start(stage.name, key, keep, execution, at)
        ctx = StageContext(call, device, threads, stage.settings_of(cfg), tuple(keep or ()), progress)
        t0 = time.perf_counter()
        try:
            with torch_threads(threads):
                result = stage.run(ctx, cfg)
            _record_settings(stage, ctx)
        except Exception as exc:
            memo.fail(stage.name, time.perf_counter() - t0, _error(exc))
            raise
        seconds = time.perf_counter() - t0
        memo.finish(stage.name, seconds, todo if stage.per_step else None, ctx.facts)
    return StageRun(stage.name, True, tuple(todo), tuple(keep or ()), seconds, result)


def _record_settings(stage: Stage, ctx: StageContext) -> None:
    """``settings.json`` beside the tables a stage wrote (:attr:`Stage.record`): the settings the memo recorded and
    the facts the stage did (the checkpoint a name resolved to, ...). Written last, it says the tables beside it are
    complete; a stage that wrote nothing (a run it does not measure) gets none."""
    if stage.record is None or not isinstance(ctx.target, RunDir):
        return
    folder = ctx.target.artifact(stage.record)
    if folder.is_dir():
        atomic_write_text(folder / "settings.json", json.dumps({**ctx.settings, **ctx.facts}, indent=2) + "\n")


def stage_done(run: RunDir, stage: Stage | str, cfg: Any = None) -> bool:
    """Whether ``run``'s memo has the run-scope ``stage`` done with ``cfg`` (checked against the run first,
    :meth:`~possym.stages.registry.Stage.prepare`) at every checkpoint it asks: what :func:`run_stage` reads back
    without running it, and without taking the run's lock (a reader in a read-only directory)."""
    stage = get_stage(stage) if isinstance(stage, str) else stage
    cfg = stage.prepare(run, stage.settings_from({}) if cfg is None else cfg)
    wanted, at = stage.memo_steps(run, cfg)
    return run_memo(run.path).done(stage.name, stage.key_of(cfg), _defaults(stage), wanted, at)


def _run_stage_together(runs: list[RunDir], stage: Stage, cfg: Any, redo: bool) -> StageRun:
    """:func:`run_stage` on several runs: a ``runs``-scope stage (training, grouping those that share a step)
    on those whose memo lacks it, at once."""
    if stage.scope != "runs":
        raise PossymError(f"stage {stage.name!r} is {stage.scope}-scope: give run_stage one directory, not a list")
    key, defaults = stage.key_of(cfg), _defaults(stage)
    todo = [r for r in runs if redo or not run_memo(r.path).done(stage.name, key, defaults)]
    if not todo:
        return StageRun(stage.name, False)
    return StageRun(stage.name, True, seconds=_together(stage, todo, cfg))


# ---- the parts of one call -------------------------------------------------------------------------

def _segments(exp: Experiment) -> list[tuple[tuple[Stage, Any], ...]]:
    """The stages in order, each experiment-scope stage alone, consecutive run-scope stages together."""
    out: list[list[tuple[Stage, Any]]] = []
    for name, cfg in exp.stages:
        stage = get_stage(name)
        if stage.scope == "experiment" or not out or out[-1][0][0].scope == "experiment":
            out.append([(stage, cfg)])
        else:
            out[-1].append((stage, cfg))
    return [tuple(s) for s in out]


def _done(out: Path, rid: str, stage: Stage, cfg: Any, redo: bool = False) -> bool:
    """Whether run ``rid``'s memo has ``stage`` done with ``cfg`` (a per-step stage: at every step it asks). A
    run-scope stage's settings that differ as asked are read as the run resolves them (:func:`stage_done`: a
    clamped ``score.n_inputs``, ``lengthgen.precision=train``), as :func:`run_stage` would before running it."""
    if redo:
        return False
    key, defaults = stage.key_of(cfg), _defaults(stage)
    memo = ExperimentMemo(out).memo(rid)
    if memo.entry(stage.name) is None:  # cheap, and a run not yet made is not done
        return False
    as_asked = memo.done(stage.name, key, defaults)
    if stage.scope == "runs":
        return as_asked
    try:
        run = RunDir.open(out / "runs" / rid)
        if not as_asked:
            return stage_done(run, stage, cfg)
        steps, at = stage.memo_steps(run, cfg)
    except PossymError:  # no checkpoints yet, or "final" of a run not finished: not done
        return False
    return memo.done(stage.name, key, defaults, steps, at)


def _runs_done(out: Path, spec: RunSpec, segment: tuple[tuple[Stage, Any], ...], outcome: ExperimentOutcome,
               redo: tuple[str, ...]) -> bool:
    done = [_done(out, spec.id, s, c, s.name in redo) for s, c in segment]
    outcome.skipped += [(spec.id, s.name) for (s, _), d in zip(segment, done, strict=True) if d]
    return all(done)


def _units(out: Path, todo: list[RunSpec], segment: tuple[tuple[Stage, Any], ...], threads: int | None,
           runs: dict[str, RunDir], engine: Any, redo: tuple[str, ...], progress: bool = False) -> list[Unit]:
    """The segment's work for ``engine``. In this process (:class:`Here`), one unit of every run: one worker runs
    them in turn anyway, and so the runs that share a batched step train as one group and every run trains
    before any is analysed. Elsewhere, the groups the segment's ``runs``-scope stage plans for the engine's
    workers (runs that train in one batched step stay together), else one unit per run."""
    if getattr(engine, "in_process", False):
        return [Unit(str(out), tuple(todo), segment, threads, redo, screen=progress)]
    workers = int(getattr(engine, "workers", 1) or 1)  # how many units run at once (a Slurm array: 1)
    planner = next(((stage, cfg) for stage, cfg in segment if stage.scope == "runs" and stage.plan is not None), None)
    if planner is None:
        return [Unit(str(out), (spec,), segment, threads, redo) for spec in todo]
    stage, cfg = planner
    # Only runs the planning stage has still to do need keeping together (once trained, a group's runs
    # are analysed as any runs are, one unit each, so that the workers share the load evenly).
    pending = [spec for spec in todo if not _done(out, spec.id, stage, cfg, stage.name in redo)]
    groups = stage.plan([runs[spec.id] for spec in pending], cfg, workers) if pending else []  # type: ignore[misc]
    grouped = [Unit(str(out), tuple(pending[i] for i in group), segment, threads, redo) for group in groups]
    return grouped + [Unit(str(out), (spec,), segment, threads, redo) for spec in todo if spec not in pending]


def _run_units(engine: Any, units: list[Unit], outcome: ExperimentOutcome, retries: int,
               on_unit: Callable[[Unit, str], None] | None) -> None:
    """The one loop: ``units`` through ``engine`` (:class:`Here` or a pool, Ray, Slurm), each unit that failed sent
    again with the runs that failed, up to ``retries`` times; ``on_unit(unit, "done" | "retry" | "failed")``."""
    if not getattr(engine, "in_process", False):
        _check_picklable(units)
    todo = list(units)
    for attempt in range(retries + 1):
        if not todo:
            break
        again = []
        for unit, result, error in engine.map(run_unit, todo):
            outcome.ran += [tuple(x) for x in (result or {}).get("ran", [])]
            if error is None:
                failed = {rid: (stage, e) for rid, stage, e in (result or {}).get("errors", [])}
            else:  # the engine's: a worker lost or killed. The runs it finished are not failed.
                stages = ", ".join(stage.name for stage, _ in unit.stages)
                failed = {r.id: (stages, error) for r in unit.runs
                          if not all(_done(outcome.out, r.id, s, c) for s, c in unit.stages)}
                _record_lost(unit, error)
            for r in unit.runs:
                if r.id in failed:
                    outcome.failed[r.id] = failed[r.id][1]
                    _log_failure(outcome.out, [r.id], *failed[r.id])
                else:
                    outcome.failed.pop(r.id, None)
            state = "done" if not failed else "failed" if attempt == retries else "retry"
            if state == "retry":
                again.append(dataclasses.replace(unit, runs=tuple(r for r in unit.runs if r.id in failed)))
                outcome.retried += [rid for rid in failed if rid not in outcome.retried]
            if on_unit:
                on_unit(unit, state)
        todo = again


def _log_failure(out: Path, rids: list[str], stages: str, error: str) -> None:
    """Append the executor's account of a failure to each run's log, ``OUT/logs/ID.log``: the error stays on
    disk beside what the run printed, also where the run's memo could not take it (a run whose lock a
    process on another host holds is refused before anything is written into it)."""
    stamp = datetime.now(UTC).isoformat(timespec="seconds")
    for rid in rids:
        path = out / "logs" / f"{rid}.log"
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a") as f:
            f.write(f"[possym {stamp}] {stages} failed:\n{error}\n")


def _check_picklable(units: list[Unit]) -> None:
    """An engine ships each unit pickled; a stage that cannot be (its function a lambda or a closure) would
    fail every unit in its worker before any stage ran, so it is refused here, by name, before anything runs."""
    for stage, cfg in units[0].stages if units else ():
        try:
            pickle.dumps((stage, cfg))
        except (pickle.PicklingError, AttributeError, TypeError) as exc:
            raise PossymError(f"stage {stage.name!r} cannot be sent to an engine's workers ({exc}); declare its "
                              "function (and its config) at the top level of a module, not as a lambda or a "
                              "closure, or run the experiment without an engine") from None


def _record_lost(unit: Unit, error: str) -> None:
    """A worker that died (its job cancelled or killed, its node lost) left its stage ``running`` in the log,
    with no error: record the engine's account of it there. A stage that raised has recorded its own."""
    log = ExperimentMemo(Path(unit.out))
    holder = lock_holder(unit.out)  # this call's: a run lock the lost worker left on another node is taken over
    with on_behalf_of(None if holder is None else holder.token):
        for spec in unit.runs:
            for stage, _ in unit.stages:
                entry = log.entry(spec.id, stage.name)
                if entry is not None and entry["status"] == "running":
                    started = datetime.fromisoformat(entry["started"]) if entry.get("started") else datetime.now(UTC)
                    log.memo(spec.id).fail(stage.name, (datetime.now(UTC) - started).total_seconds(), error)


def _experiment_stage(stage: Stage, cfg: Any, context: ExperimentDir, outcome: ExperimentOutcome,
                      threads: int | None, redo: bool = False) -> None:
    alive = ExperimentDir(context.path, {k: v for k, v in context.runs.items() if k not in outcome.failed},
                          context.tasks, context.seeds, context.variants, context.preset)
    with torch_threads(threads), _output_to(context.path / "logs" / f"{EXPERIMENT}.log"):
        done = run_stage(alive, stage, cfg, redo=redo)
    if done.ran:
        outcome.results[stage.name] = done.result
        outcome.ran.append((EXPERIMENT, stage.name))
    else:
        outcome.skipped.append((EXPERIMENT, stage.name))


def _defaults(stage: Stage) -> dict[str, Any]:
    """The stage's settings at their defaults (what a setting added since an entry was written held then)."""
    try:
        return stage.key_of(stage.settings_from({}))
    except (TypeError, ValueError):  # a stage whose settings have no defaults
        return {}


def _record_experiment(out: Path, exp: Experiment) -> list[str]:
    """Write ``OUT/experiment.yaml``; return the keys on which it differs from the one there before."""
    file = out / EXPERIMENT_FILE
    now = experiment_to_dict(exp)
    before = yaml.safe_load(file.read_text()) if file.is_file() else None
    atomic_write_text(file, dump_experiment(exp))
    return [] if before is None else experiment_differences(before, now)


def _error(exc: BaseException) -> str:
    """The exception's last lines, short enough for a log entry and a report."""
    return "".join(traceback.format_exception(exc)[-3:]).strip()[-1500:]


@contextlib.contextmanager
def _output_to(path: Path, stderr: bool = False) -> Iterator[None]:
    """What a stage prints goes to its log file; progress bars (stderr) stay on screen, unless ``stderr``
    (a worker of an engine, whose screen nobody watches)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as f, contextlib.redirect_stdout(f):
        if stderr:
            with contextlib.redirect_stderr(f):
                yield
        else:
            yield


__all__ = ["ExperimentOutcome", "Here", "StageRun", "Unit", "older_layout", "run_experiment", "run_stage", "run_unit",
           "stage_done"]
