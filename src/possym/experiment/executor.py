"""The one executor: runs an experiment's stages over its runs into one directory, resumably.

Layout of ``OUT``::

    experiment.yaml      the experiment as last run (a rerun with other settings says what differs)
    runs/ID/             each run's directory (``possym.open_run`` reads it)
    log/ID.json          the resume log (:mod:`possym.stages.log`), one file per run and one for
                         the experiment-scope stages
    logs/ID.log          what each run's stages (and the experiment's) printed
    NAME/                each part (a sub-experiment, e.g. the canonical grid)

Order. Parts run first. Then the stages, in the experiment's order: experiment-scope stages run
here, once; each maximal stretch of run-scope stages (``train`` included) runs as one *unit of work
per run*, either here, stage by stage over the runs (training every run before scoring any), or on
an engine (:mod:`possym.sweep.engines`: a process pool, Ray, Slurm), where a unit is one run's
stretch of stages in one worker. What is done with today's settings is skipped; a unit that fails is
retried ``retries`` times; a run that still fails is reported, later stages leave it out, and the
experiment's own stages (the report) run on what exists.

Every call leaves the caller's process as it found it: thread counts are set per unit and restored.

Example:
    >>> import tempfile
    >>> from possym.experiment.config import load_experiment
    >>> exp = load_experiment("quick", overrides=["experiment.tasks=[number]", "train.steps=4"])  # doctest: +SKIP
    >>> run_experiment(exp, tempfile.mkdtemp()).failed   # doctest: +SKIP
    {}
"""

from __future__ import annotations

import contextlib
import dataclasses
import pickle
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd
import yaml
from tqdm import tqdm

from possym.canonical.grid import CanonicalGridConfig
from possym.devices import torch_threads
from possym.errors import PossymError, named_options
from possym.experiment.config import Experiment, RunSpec, dump_experiment, experiment_differences, experiment_to_dict
from possym.experiment.migrate import migrate
from possym.locks import lock_holder, on_behalf_of, writer_lock
from possym.runs import RunDir, atomic_write_text, ensure_run
from possym.stages.log import EXPERIMENT, ResumeLog, ResumeRecord
from possym.stages.registry import ExperimentDir, Stage, get_stage

if TYPE_CHECKING:
    from possym.canonical.grid import GridResults

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
    migrated: list[str] = field(default_factory=list)  # what migrating an older layout did (experiment.migrate)
    results: dict[str, Any] = field(default_factory=dict)  # experiment-scope stage -> what it returned
    parts: dict[str, ExperimentOutcome] = field(default_factory=dict)
    seconds: float = 0.0

    def log(self) -> pd.DataFrame:
        """The resume log of the directory as a table: owner, stage, status, seconds, attempts, ..."""
        columns = [f.name for f in dataclasses.fields(ResumeRecord)]
        return pd.DataFrame([dataclasses.asdict(r) for r in ResumeLog(self.out).records()], columns=columns)


@dataclass(frozen=True)
class Unit:
    """A stretch of run-scope stages for one run, or for a group of runs that a stage's plan keeps together
    (training runs that share one batched step): plain, picklable data, so that every engine ships it as is."""

    out: str
    runs: tuple[RunSpec, ...]
    stages: tuple[tuple[Stage, Any], ...]
    threads: int | None

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
                   on_unit: Callable[[Unit, str], None] | None = None) -> ExperimentOutcome:
    """Run every stage of ``exp`` not yet done with today's settings into ``out``; see the module docstring.

    ``engine``: None runs everything in this process; else an object with ``map(fn, items)`` yielding
    ``(item, result, error)`` (:func:`possym.sweep.engines.make_engine`). ``on_unit(unit, "done" |
    "retry" | "failed")`` reports each run's outcome (a progress bar's hook).

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
    with writer_lock(out, "experiment"):
        return _run_experiment(exp, out, engine, progress, on_unit)


def _run_experiment(exp: Experiment, out: Path, engine: Any, progress: bool,
                    on_unit: Callable[[Unit, str], None] | None) -> ExperimentOutcome:
    t0 = time.perf_counter()
    exp = exp.with_stages()
    outcome = ExperimentOutcome(out)
    outcome.migrated = migrate(out, exp)
    specs = exp.runs()
    # Every run is opened or created before anything runs: a run that holds another config is refused here.
    runs = {spec.id: ensure_run(out / "runs" / spec.id, spec.config(), argv=["possym.run_experiment", str(out)])
            for spec in specs}
    outcome.changed = _record_experiment(out, exp)
    for name, part in exp.parts:
        sub = _part_experiment(part)
        # A small part's units cost more to ship to workers (a fresh process each) than to run here.
        big = len(sub.runs()) >= PART_ENGINE_RUNS
        outcome.parts[name] = run_experiment(sub, out / name, engine=engine if big else None, progress=progress)
    log = ResumeLog(out)
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
            _experiment_stage(stage, cfg, context, log, outcome, exp.threads)
            continue
        alive = [s for s in specs if s.id not in failed]
        todo = [s for s in alive if not _runs_done(s, segment, log, outcome)]
        if not todo:
            continue
        if engine is None:
            _run_here([Unit(str(out), (s,), segment, exp.threads) for s in todo], log, outcome, exp.retries, progress,
                      on_unit)
        else:
            workers = int(getattr(engine, "workers", 1) or 1)  # how many units run at once (a Slurm array: 1)
            _run_on(engine, _units(out, todo, segment, exp.threads, runs, workers), outcome, exp.retries, on_unit)
        failed |= set(outcome.failed)
    outcome.seconds = time.perf_counter() - t0
    return outcome


def run_unit(unit: Unit) -> dict[str, Any]:
    """Run a unit's stages that are not done (a worker's function: top level, plain data in and out); a
    ``runs``-scope stage sees the unit's runs together, a ``run``-scope stage each in turn. A run whose
    stage fails is left out of its later stages while the unit's other runs go on; the unit then raises,
    naming every run that failed and why."""
    # As a worker of the call that holds OUT's lock: a run lock an earlier, lost worker of it left on
    # another node is taken over (possym.locks.on_behalf_of).
    holder = lock_holder(unit.out)
    with on_behalf_of(None if holder is None else holder.token):
        return _run_unit(unit)


def _run_unit(unit: Unit) -> dict[str, Any]:
    log = ResumeLog(Path(unit.out))
    dirs = {spec.id: RunDir.open(Path(unit.out) / "runs" / spec.id) for spec in unit.runs}
    ran: list[tuple[str, str]] = []
    errors: dict[str, str] = {}
    with torch_threads(unit.threads), _output_to(Path(unit.out) / "logs" / f"{unit.id}.log", stderr=True):
        for stage, cfg in unit.stages:
            key = stage.key_of(cfg)
            todo = [rid for rid in dirs if rid not in errors and not log.done(rid, stage.name, key, _defaults(stage))]
            batches = [todo] if stage.scope == "runs" else [[rid] for rid in todo]
            for batch in (b for b in batches if b):
                for rid in batch:
                    log.start(rid, stage.name, key)
                t0 = time.perf_counter()
                try:
                    _call(stage, [dirs[rid] for rid in batch], cfg)
                except Exception as exc:
                    for rid in batch:
                        errors[rid] = _error(exc)
                        log.fail(rid, stage.name, time.perf_counter() - t0, errors[rid])
                    continue
                for rid in batch:
                    log.finish(rid, stage.name, (time.perf_counter() - t0) / len(batch))
                    ran.append((rid, stage.name))
    if errors:
        raise RuntimeError("; ".join(f"{rid}: {e.splitlines()[-1] if e else ''}" for rid, e in errors.items()))
    return {"unit": unit.id, "ran": ran}


def _call(stage: Stage, runs: list[RunDir], cfg: Any) -> None:
    """``stage`` on ``runs``: a ``runs``-scope stage on them all (training, which locks each run it writes);
    a run-scope stage on its one run, holding that run's writer lock, so that every stage, a notebook's
    too, writes a run only while no other process does (:mod:`possym.locks`; the stage's own functions
    may take the lock again, as this process holds it)."""
    if stage.scope == "runs":
        stage.run(runs, cfg)
        return
    (run,) = runs
    with run.writing():
        stage.run(run, cfg)


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


def _all_done(spec: RunSpec, segment: tuple[tuple[Stage, Any], ...], log: ResumeLog) -> bool:
    return all(log.done(spec.id, s.name, s.key_of(c), _defaults(s)) for s, c in segment)


def _runs_done(spec: RunSpec, segment: tuple[tuple[Stage, Any], ...], log: ResumeLog,
               outcome: ExperimentOutcome) -> bool:
    done = [log.done(spec.id, s.name, s.key_of(c), _defaults(s)) for s, c in segment]
    outcome.skipped += [(spec.id, s.name) for (s, _), d in zip(segment, done, strict=True) if d]
    return all(done)


def _units(out: Path, todo: list[RunSpec], segment: tuple[tuple[Stage, Any], ...], threads: int | None,
           runs: dict[str, RunDir], workers: int) -> list[Unit]:
    """The segment's work for an engine: the groups the segment's ``runs``-scope stage plans (runs that
    train in one batched step stay together), else one unit per run."""
    planner = next(((stage, cfg) for stage, cfg in segment if stage.scope == "runs" and stage.plan is not None), None)
    if planner is None:
        return [Unit(str(out), (spec,), segment, threads) for spec in todo]
    stage, cfg = planner
    # Only runs the planning stage has still to do need keeping together (once trained, a group's runs
    # are analysed as any runs are, one unit each, so that the workers share the load evenly).
    log = ResumeLog(out)
    key, defaults = stage.key_of(cfg), _defaults(stage)
    pending = [spec for spec in todo if not log.done(spec.id, stage.name, key, defaults)]
    groups = stage.plan([runs[spec.id] for spec in pending], cfg, workers) if pending else []  # type: ignore[misc]
    grouped = [Unit(str(out), tuple(pending[i] for i in group), segment, threads) for group in groups]
    return grouped + [Unit(str(out), (spec,), segment, threads) for spec in todo if spec not in pending]


def _run_here(units: list[Unit], log: ResumeLog, outcome: ExperimentOutcome, retries: int, progress: bool,
              on_unit: Callable[[Unit, str], None] | None) -> None:
    """In this process, stage by stage over every run (a ``runs``-scope stage sees them all at once)."""
    alive = list(units)
    for index in range(len(units[0].stages)):
        stage, cfg = units[0].stages[index]
        key = stage.key_of(cfg)
        todo = [u for u in alive if not log.done(u.run.id, stage.name, key, _defaults(stage))]
        if not todo:
            continue
        bar = tqdm(total=len(todo), desc=stage.name, unit="run", disable=not progress or len(todo) < 2,
                   dynamic_ncols=True, leave=False)
        for attempt in range(retries + 1):
            if not todo:
                break
            if stage.scope == "runs":
                todo = _attempt(todo, stage, cfg, log, outcome)
            else:
                todo = [u for u in todo if _attempt([u], stage, cfg, log, outcome)]
            bar.update(bar.total - len(todo) - bar.n)
            if todo and attempt < retries:
                outcome.retried += [u.run.id for u in todo if u.run.id not in outcome.retried]
                for u in todo:
                    if on_unit:
                        on_unit(u, "retry")
        bar.close()
        for u in todo:
            alive.remove(u)
            if on_unit:
                on_unit(u, "failed")
    for u in alive:
        if on_unit:
            on_unit(u, "done")


def _attempt(units: list[Unit], stage: Stage, cfg: Any, log: ResumeLog, outcome: ExperimentOutcome) -> list[Unit]:
    """Run ``stage`` on ``units`` (all at once for a ``runs``-scope stage); returns the units that failed."""
    key = stage.key_of(cfg)
    for u in units:
        log.start(u.run.id, stage.name, key)
    runs = [RunDir.open(Path(u.out) / "runs" / u.run.id) for u in units]
    t0 = time.perf_counter()
    owner = units[0].run.id if len(units) == 1 else EXPERIMENT
    try:
        with torch_threads(units[0].threads), _output_to(Path(units[0].out) / "logs" / f"{owner}.log"):
            _call(stage, runs, cfg)
    except Exception as exc:
        error = _error(exc)
        for u in units:
            log.fail(u.run.id, stage.name, time.perf_counter() - t0, error)
            outcome.failed[u.run.id] = error
        return units
    seconds = time.perf_counter() - t0
    for u in units:
        log.finish(u.run.id, stage.name, seconds / len(units))
        outcome.ran.append((u.run.id, stage.name))
        outcome.failed.pop(u.run.id, None)
    return []


def _run_on(engine: Any, units: list[Unit], outcome: ExperimentOutcome, retries: int,
            on_unit: Callable[[Unit, str], None] | None) -> None:
    _check_picklable(units)
    log = ResumeLog(outcome.out)
    todo = list(units)
    for attempt in range(retries + 1):
        if not todo:
            break
        again = []
        for unit, result, error in engine.map(run_unit, todo):
            # A unit that failed may have finished some of its runs: only the others count as failed.
            ids = [r.id for r in unit.runs if error is None or not _all_done(r, unit.stages, log)]
            if error is None:
                outcome.ran += [tuple(x) for x in (result or {}).get("ran", [])]
                for rid in ids:
                    outcome.failed.pop(rid, None)
                state = "done"
            else:
                for rid in ids:
                    outcome.failed[rid] = error
                _record_lost(unit, error)
                state = "failed" if attempt == retries else "retry"
                if state == "retry":
                    again.append(dataclasses.replace(unit, runs=tuple(r for r in unit.runs if r.id in ids)))
                    outcome.retried += [rid for rid in ids if rid not in outcome.retried]
            if on_unit:
                on_unit(unit, state)
        todo = again


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
    log = ResumeLog(Path(unit.out))
    for spec in unit.runs:
        for stage, _ in unit.stages:
            entry = log.entry(spec.id, stage.name)
            if entry is not None and entry["status"] == "running":
                started = datetime.fromisoformat(entry["started"]) if entry.get("started") else datetime.now(UTC)
                log.fail(spec.id, stage.name, (datetime.now(UTC) - started).total_seconds(), error)


def _experiment_stage(stage: Stage, cfg: Any, context: ExperimentDir, log: ResumeLog, outcome: ExperimentOutcome,
                      threads: int | None) -> None:
    key = stage.key_of(cfg)
    if log.done(EXPERIMENT, stage.name, key, _defaults(stage)) and not stage.always:
        outcome.skipped.append((EXPERIMENT, stage.name))
        return
    log.start(EXPERIMENT, stage.name, key)
    t0 = time.perf_counter()
    alive = ExperimentDir(context.path, {k: v for k, v in context.runs.items() if k not in outcome.failed},
                          context.tasks, context.seeds, context.variants, context.preset)
    try:
        with torch_threads(threads), _output_to(context.path / "logs" / f"{EXPERIMENT}.log"):
            outcome.results[stage.name] = stage.run(alive, cfg)
    except Exception as exc:
        log.fail(EXPERIMENT, stage.name, time.perf_counter() - t0, _error(exc))
        raise
    log.finish(EXPERIMENT, stage.name, time.perf_counter() - t0)
    outcome.ran.append((EXPERIMENT, stage.name))


def _defaults(stage: Stage) -> dict[str, Any]:
    """The stage's settings at their defaults (what a setting added since an entry was written held then)."""
    try:
        return stage.key_of(stage.settings_from({}))
    except (TypeError, ValueError):  # a stage whose settings have no defaults
        return {}


def _part_experiment(part: Any) -> Experiment:
    if isinstance(part, CanonicalGridConfig):
        from possym.experiment.canonical import canonical_experiment

        return canonical_experiment(part)
    return part


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


def run_canonical_grid(grid: CanonicalGridConfig, out: str | Path, *, progress: bool = False) -> GridResults:
    """Train, analyse and report the canonical grid into ``out``, resumably (a finished cell is neither
    retrained nor re-analysed); returns the grid's records (:class:`~possym.canonical.grid.GridResults`)."""
    from possym.experiment.canonical import canonical_experiment

    outcome = run_experiment(canonical_experiment(grid), out, progress=progress)
    if outcome.failed:
        raise PossymError(f"{len(outcome.failed)} canonical cell(s) failed: {next(iter(outcome.failed.items()))}")
    return outcome.results["canonical_report"]


def stage_rows(out: str | Path) -> list[dict[str, Any]]:
    """The resume log as plain rows (the report's timing table)."""
    return [{"owner": r.owner, "stage": r.stage, "status": r.status, "seconds": r.seconds, "runs": r.attempts}
            for r in ResumeLog(Path(out)).records()]


__all__ = ["ExperimentOutcome", "Unit", "run_canonical_grid", "run_experiment", "run_unit", "stage_rows"]
