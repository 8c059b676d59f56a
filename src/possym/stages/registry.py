"""The one registry of stages: each a function of (a run, its runs, or an experiment directory) and its
typed config, returning records.

A stage is declared where it lives, ``STAGE = Stage(...)`` (or ``STAGES = (...)``) at the end of its module in
:mod:`possym.stages`; :func:`stages` imports every such module once, and :func:`register_stage` adds one from a
notebook or a test. Its function is ``fn(ctx, cfg)``: ``ctx`` (:class:`StageContext`) holds the target, by
scope ``"run"`` (``ctx.run``), ``"runs"`` (``ctx.runs``) or ``"experiment"`` (``ctx.exp``, an
:class:`ExperimentDir`), with the lock, threads, device and memo already handled; ``cfg`` is its frozen
settings dataclass, built by :meth:`Stage.settings_from` or :meth:`Stage.from_overrides` and written back by
:meth:`Stage.settings_of`; a stage that runs a model subclasses :class:`Execution` (``threads``, ``device``,
left out of the memo's key). See docs/architecture.md, "One experiment, one executor".

Example:
    >>> from dataclasses import dataclass
    >>> @dataclass(frozen=True)
    ... class CountConfig:
    ...     n: int = 3
    >>> stage = Stage("count", CountConfig, lambda ctx, cfg: [cfg.n], scope="run")
    >>> stage.settings_from({"n": 5}), stage.settings_of(CountConfig(5))
    (CountConfig(n=5), {'n': 5})
    >>> stage.settings_from({"m": 1})
    Traceback (most recent call last):
    ...
    possym.errors.ConfigError: unknown key 'count.m'; known count keys: ['n']; did you mean 'count.n'?
    >>> stage.from_overrides(["count.n=7"])
    CountConfig(n=7)"""

from __future__ import annotations

import dataclasses
import importlib
import logging
import pkgutil
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import pandas as pd
import torch

from possym.config import EXECUTION_KEYS
from possym.devices import resolve_device
from possym.errors import ConfigError, PossymError, RunError, did_you_mean
from possym.records import Record
from possym.runs import RunDir, StepSpec
from possym.settings import from_dict, section_values

if TYPE_CHECKING:
    from possym.model.gptj import GPTJ

log = logging.getLogger(__name__)

Scope = Literal["run", "runs", "experiment"]
SCOPES = ("run", "runs", "experiment")


@dataclass(frozen=True)
class ExperimentDir:
    """What an experiment-scope stage sees: the output directory and the experiment's runs by id
    (run directories that exist; a stage reads what it needs from them)."""

    path: Path
    runs: Mapping[str, RunDir] = field(default_factory=dict)
    tasks: Mapping[str, str] = field(default_factory=dict)  # run id -> task name
    seeds: Mapping[str, int] = field(default_factory=dict)  # run id -> seed
    variants: Mapping[str, str] = field(default_factory=dict)  # run id -> variant ("" for none)
    preset: str | None = None

    def runs_of(self, task: str, variant: str = "") -> list[RunDir]:
        """The runs of ``task`` (and ``variant``), in seed order."""
        ids = sorted((i for i in self.runs if self.tasks.get(i) == task and self.variants.get(i, "") == variant),
                     key=lambda i: self.seeds.get(i, 0))
        return [self.runs[i] for i in ids]


@dataclass(frozen=True)
class Execution:
    """Where a stage that runs a model runs, the two keys every such stage takes (its config subclasses this):
    ``threads``, torch's threads while it runs, and ``device`` (:func:`possym.devices.resolve_device`); None: the
    stage's default (:attr:`Stage.threads`, :attr:`Stage.device`). They say how the stage runs, not what it
    computes: the memo records them beside its key, never in it."""

    threads: int | None = field(default=None, kw_only=True)
    device: str | None = field(default=None, kw_only=True)


@dataclass
class StageContext:
    """What the executor hands a stage's function (:func:`possym.experiment.run_stage`), the work around it done:

    ``target``: the run (scope ``run``), the runs (``runs``) or the experiment's directory (``experiment``), its
    writer lock held; ``device``: resolved; ``threads``: already set (None: the caller's); ``settings``: as the
    memo recorded them; ``keep``: a per-step stage's checkpoints whose outputs it keeps; ``progress``: a hook to
    call as work is done, or None. :meth:`model`, :meth:`write_table` and :meth:`record` are the stage's load and
    write; the facts recorded go, with the settings, into ``settings.json`` beside the tables
    (:attr:`Stage.record`)."""

    target: Any
    device: torch.device = field(default_factory=lambda: torch.device("cpu"))
    threads: int | None = None
    settings: dict[str, Any] = field(default_factory=dict)
    keep: tuple[int, ...] = ()
    progress: Callable[..., None] | None = None
    facts: dict[str, Any] = field(default_factory=dict)

    @property
    def run(self) -> RunDir:
        """The run of a ``run``-scope stage."""
        if not isinstance(self.target, RunDir):
            raise PossymError(f"this stage runs on {type(self.target).__name__}, not on one run")
        return self.target

    @property
    def runs(self) -> list[RunDir]:
        """The runs of a ``runs``-scope stage."""
        if not isinstance(self.target, list):
            raise PossymError(f"this stage runs on {type(self.target).__name__}, not on a list of runs")
        return self.target

    @property
    def exp(self) -> ExperimentDir:
        """The experiment directory of an ``experiment``-scope stage."""
        if not isinstance(self.target, ExperimentDir):
            raise PossymError(f"this stage runs on {type(self.target).__name__}, not on an experiment directory")
        return self.target

    def model(self, step: StepSpec, dtype: torch.dtype | str = torch.float32) -> GPTJ:
        """The run's model at ``step`` (a number, ``"best"``, ``"final"``), checked, on the stage's device."""
        return self.run.load_model(step, dtype=dtype, device=self.device)

    def write_table(self, key: str, rows: Sequence[Record] | pd.DataFrame) -> Path:
        """Write the run's table artifact ``key`` (:data:`possym.runs.ARTIFACTS`): records of its type, or a frame
        a library computed, through its columns (a column it lacks or needs is refused, naming both)."""
        if isinstance(rows, pd.DataFrame):
            return self.run.write_table(key, rows)
        return self.run.write(key, rows)

    def record(self, **facts: Any) -> None:
        """Facts of this call (the checkpoint a name resolved to, the layers used) for ``settings.json``."""
        self.facts.update(facts)


def nested_fields(config: type) -> dict[str, type]:
    """The fields of a stage's config that are configs themselves (the length curve's settings, shared by the
    stages that measure windows at length), by name: nested in the typed tree, flat in the words
    (``dilution.n=500`` sets ``DilutionConfig.curve.n``); a key the config has itself shadows the nested one's.

    >>> from possym.stages.dilution import DilutionConfig
    >>> nested_fields(DilutionConfig)
    {'curve': <class 'possym.evaluate.lengthgen.LengthGenConfig'>}
    """
    hints = typing.get_type_hints(config)
    return {f.name: hints[f.name] for f in dataclasses.fields(config)
            if isinstance(hints.get(f.name), type) and dataclasses.is_dataclass(hints[f.name])}


def _keys(config: type) -> tuple[set[str], dict[str, list[str]], list[str]]:
    """A stage config's own keys, each nested config's keys by field (those the config does not shadow), and every
    key in the order the words list them: the stage's own first, :class:`Execution`'s last."""
    nested = nested_fields(config)
    own = {f.name for f in dataclasses.fields(config)} - set(nested)
    inner = {name: [f.name for f in dataclasses.fields(kind) if f.name not in own] for name, kind in nested.items()}
    where = [f.name for f in dataclasses.fields(Execution)] if issubclass(config, Execution) else []
    order = [k for f in dataclasses.fields(config) if f.name not in where for k in inner.get(f.name, [f.name])]
    return own, inner, [*order, *where]


def _unflatten(stage: str, config: type, data: dict[str, Any]) -> dict[str, Any]:
    """Flat settings as ``config`` takes them: the keys of each nested config gathered under its field, over the
    stage's default for it; an unknown key is refused naming every key the stage takes."""
    own, inner, known = _keys(config)
    unknown = [k for k in data if k not in known]
    if unknown:
        hint = did_you_mean(f"{stage}.{unknown[0]}", [f"{stage}.{k}" for k in known])
        raise ConfigError(f"unknown key{'s' if len(unknown) > 1 else ''} "
                          f"{', '.join(repr(f'{stage}.{k}') for k in unknown)}; known {stage} keys: {known}{hint}")
    out = {k: v for k, v in data.items() if k in own}
    fields = {f.name: f for f in dataclasses.fields(config)}
    for name, kind in nested_fields(config).items():
        given = {k: data[k] for k in inner[name] if k in data}
        field_ = fields[name]
        default = field_.default_factory() if field_.default_factory is not dataclasses.MISSING else kind()
        out[name] = from_dict(kind, {**_plain(dataclasses.asdict(default)), **given}, stage) if given else default
    return out


def _flatten(config: type, plain: dict[str, Any]) -> dict[str, Any]:
    """A config's plain settings in the order of its words (:func:`_keys`), each nested config's keys in its
    field's place."""
    nested = nested_fields(config)
    flat: dict[str, Any] = {}
    for key, value in plain.items():
        flat |= {k: v for k, v in value.items() if k not in plain} if key in nested else {key: value}
    return {k: flat[k] for k in _keys(config)[2]}


def _plain(value: Any) -> Any:
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


@dataclass(frozen=True)
class Stage:
    """A named capability of the pipeline: its settings class, its function and its scope.

    ``always``: rerun on every call (a report reads whatever the others produced). ``from_dict`` /
    ``to_dict``: how plain settings map onto ``config`` where a field is not a key (training's progress bar);
    by default every field is a key, and a nested config's fields are keys in its place (:func:`nested_fields`).
    ``plan(runs, cfg, workers)``: for a ``runs`` stage, the groups (lists of indices into ``runs``) that must stay
    together in one unit of work on an engine that runs ``workers`` units at once (training groups that share a
    batched step); None: any split will do. ``per_step``: a run-scope stage whose work is per checkpoint: its
    config has ``steps`` (None: every checkpoint; else step numbers, ``"best"``, ``"final"``) and it reads
    ``ctx.keep``, the checkpoints whose outputs already in the run it keeps; the memo records the
    steps done, so that asking for more runs only the new ones (:func:`possym.experiment.run_stage`).
    ``step_settings``: the settings a per-step stage's per-checkpoint outputs depend on (None: all); a
    change in another (score's figures) reruns the stage's per-call part alone, keeping every step done.
    ``check(run, cfg, device) -> cfg``: a run-scope stage's settings checked against the run before anything is
    written (:meth:`prepare`): a setting larger than the run can use clamped with one line (score's
    ``n_inputs``), one beyond what fits refused (lengthgen's K). ``threads``, ``device``: where the stage runs
    unless its settings say (:class:`Execution`). ``record``: the run artifact (a folder) beside whose tables the
    executor writes ``settings.json``, the settings and the facts the stage recorded, once they are written.
    """

    name: str
    config: type
    run: Callable[..., Any]
    scope: Scope = "run"
    always: bool = False
    from_dict: Callable[[dict[str, Any]], Any] | None = None
    to_dict: Callable[[Any], dict[str, Any]] | None = None
    plan: Callable[[list[RunDir], Any, int], list[list[int]]] | None = None
    summary: str = ""
    per_step: bool = False
    step_settings: tuple[str, ...] | None = None
    check: Callable[[RunDir, Any, torch.device], Any] | None = None
    threads: int | None = None
    device: str = "auto"
    record: str | None = None

    def __post_init__(self) -> None:
        if self.scope not in SCOPES:
            raise ConfigError(f"stage {self.name!r}: scope={self.scope!r}; allowed: {SCOPES}")
        if not dataclasses.is_dataclass(self.config):
            raise ConfigError(f"stage {self.name!r}: its config must be a dataclass, not {self.config!r}")
        if self.per_step and (self.scope != "run" or "steps" not in {f.name for f in dataclasses.fields(self.config)}):
            raise ConfigError(f"stage {self.name!r}: a per-step stage is run-scope and its config has a steps field")

    def where(self, cfg: Any) -> tuple[int | None, str]:
        """Where ``cfg`` runs: (threads, device), its :class:`Execution` keys or the stage's defaults."""
        threads, device = getattr(cfg, "threads", None), getattr(cfg, "device", None)
        return (self.threads if threads is None else threads), (device or self.device)

    def settings_from(self, data: Mapping[str, Any] | None) -> Any:
        """The typed config from plain settings (None: the defaults); unknown keys name the known ones."""
        data = _unflatten(self.name, self.config, dict(data or {}))
        cfg = self.from_dict(data) if self.from_dict is not None else from_dict(self.config, data, self.name)
        threads = getattr(cfg, "threads", None)
        if threads is not None and (isinstance(threads, bool) or threads < 1):
            raise ConfigError(f"{self.name}.threads={threads!r} must be a whole number >= 1, or null for the "
                              f"stage's default ({self.threads})")
        return cfg

    def from_overrides(self, overrides: list[str]) -> Any:
        """The typed config from ``STAGE.key=value`` overrides (a command that runs this stage alone)."""
        return self.settings_from(section_values(overrides, self.name, self.defaults()))

    def defaults(self) -> dict[str, Any]:
        """The plain settings at their defaults: every key this stage takes."""
        return self.settings_of(self.settings_from({}))

    def settings_of(self, cfg: Any) -> dict[str, Any]:
        """The plain settings of a typed config, as written into an experiment's config."""
        if self.to_dict is not None:
            return _plain(self.to_dict(cfg))
        return _flatten(self.config, _plain(dataclasses.asdict(cfg)))

    def key_of(self, cfg: Any) -> dict[str, Any]:
        """What the memo compares: the settings less :data:`possym.config.EXECUTION_KEYS`, so a rerun
        with more threads or on another device does not redo finished work; a per-step stage's ``steps`` too,
        as the memo records the steps done beside the settings (:meth:`steps_of`)."""
        skip = (*EXECUTION_KEYS, "steps") if self.per_step else EXECUTION_KEYS
        return {k: v for k, v in self.settings_of(cfg).items() if k not in skip}

    def steps_of(self, run: RunDir, cfg: Any) -> list[int]:
        """The checkpoints a per-step stage's ``cfg`` asks of ``run``, resolved (``"best"`` to a number), in
        order and once each."""
        asked = cfg.steps
        steps = run.checkpoint_steps() if asked is None else [run.resolve_step(s) for s in asked]
        if not steps:
            raise RunError(f"{run.path} has no checkpoints yet")
        if asked is None and run.missing_checkpoints():
            log.warning("possym: %s lacks the checkpoints of steps %s; %s does the %d there are", run.path,
                        run.missing_checkpoints(), self.name, len(steps))
        return list(dict.fromkeys(steps))

    def checkpoints_of(self, run: RunDir, cfg: Any) -> list[int] | None:
        """The checkpoints a run-scope stage that measures named ones (a ``step`` or ``steps`` setting, not
        per-step: the cliff, dilution, l0, ...) measures now, resolved (``"best"`` to a number), in order and
        once each; None for any other stage. The memo records them beside the settings (which keep the names
        asked: the stages label their rows with them), so that such a stage is redone when ``"best"`` has moved
        (a run trained on) instead of read back from the checkpoint it named before."""
        names = {f.name for f in dataclasses.fields(self.config)}
        if self.scope != "run" or self.per_step or not names & {"step", "steps"}:
            return None
        asked = (cfg.step,) if "step" in names else tuple(cfg.steps)
        return list(dict.fromkeys(run.resolve_step(s) for s in asked))

    def memo_steps(self, run: RunDir, cfg: Any) -> tuple[list[int] | None, list[int] | None]:
        """What a run's memo compares beside the settings, the one reading of it for :func:`possym.experiment.run_stage`
        and the executor: (the steps a per-step stage asks, :meth:`steps_of`; the checkpoints a stage of named
        ones measures, :meth:`checkpoints_of`), each None where the stage has none. A step named that the run
        lacks raises its :class:`~possym.errors.PossymError`."""
        return (self.steps_of(run, cfg) if self.per_step else None), self.checkpoints_of(run, cfg)

    def prepare(self, run: RunDir, cfg: Any) -> Any:
        """``cfg`` checked against ``run`` before anything is written (the memo, a folder): every checkpoint it
        names (``step``, ``steps``, ``table_step``) must exist (:meth:`~possym.runs.RunDir.resolve_step`) and be
        this run's (:meth:`~possym.runs.RunDir.check_header`), then the stage's own ``check``. Returns the settings
        as they will run (a clamped value in place: what the memo records); raises the
        :class:`~possym.errors.PossymError` the stage would have raised later."""
        names = {f.name for f in dataclasses.fields(self.config)}
        steps = [run.resolve_step(getattr(cfg, name)) for name in ("step", "table_step") if name in names]
        if "steps" in names:
            if self.per_step:
                steps += self.steps_of(run, cfg)
            else:
                steps += [run.resolve_step(step) for step in cfg.steps or ()]
        for step in dict.fromkeys(steps):  # another run's checkpoint among them: refused before any work
            run.check_header(step)
        return self.check(run, cfg, resolve_device(self.where(cfg)[1])) if self.check is not None else cfg

    def narrowed(self, cfg: Any, steps: list[int]) -> Any:
        """``cfg`` asking for ``steps`` alone (what a per-step stage still has to do)."""
        return dataclasses.replace(cfg, steps=tuple(steps))


_REGISTRY: dict[str, Stage] = {}
_DISCOVERED = False


def register_stage(stage: Stage, *, replace: bool = False) -> Stage:
    """Add ``stage`` under its name; a taken name is an error unless ``replace``."""
    if not isinstance(stage, Stage):
        raise ConfigError(f"register_stage takes a possym.stages.registry.Stage, not {type(stage).__name__}")
    if stage.name in _REGISTRY and not replace and _REGISTRY[stage.name] is not stage:
        raise ConfigError(f"stage {stage.name!r} is already registered")
    _REGISTRY[stage.name] = stage
    return stage


def unregister_stage(name: str) -> None:
    """Remove a stage added with :func:`register_stage` (tests and notebooks clean up after themselves)."""
    _REGISTRY.pop(name, None)


def stages() -> dict[str, Stage]:
    """Every registered stage by name: those declared in :mod:`possym.stages` (imported on first call) and
    any registered since."""
    global _DISCOVERED
    if not _DISCOVERED:
        import possym.stages as package

        for info in pkgutil.iter_modules(package.__path__):
            module = importlib.import_module(f"{package.__name__}.{info.name}")
            declared = getattr(module, "STAGES", ()) or ((module.STAGE,) if hasattr(module, "STAGE") else ())
            for stage in declared:
                register_stage(stage)
        _DISCOVERED = True
    return dict(_REGISTRY)


def get_stage(name: str) -> Stage:
    """The registered stage ``name``; an unknown name is a ConfigError listing the known ones."""
    known = stages()
    if name not in known:
        raise ConfigError(f"unknown stage {name!r}; known: {sorted(known)}{did_you_mean(name, known)}")
    return known[name]
