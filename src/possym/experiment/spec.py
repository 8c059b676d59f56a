"""An experiment: one typed, frozen tree of runs and stage settings, with one override syntax.

An experiment holds

- its runs: ``tasks`` × ``seeds`` × ``variants`` of a ``preset`` with ``overrides`` (and, per task,
  ``task_overrides``: a task's own fields, which another task may lack; seed s sets
  ``seeds.data = seeds.init = seeds.order = seeds.dropout = s``); a variant adds overrides and may
  narrow the tasks and seeds. Run ``VARIANT-TASK-sSEED`` (``TASK-sSEED`` without variants) trains into
  ``OUT/runs/ID``;
- its stages, in order, each with its typed settings (:mod:`possym.stages.registry`): ``train``
  comes first unless listed; run-scope stages run on every run, experiment-scope ones once;
- its parts: named sub-experiments run into ``OUT/NAME`` (a reproduction's canonical grid), each a mapping
  of experiment keys or the name of a packaged experiment;
- ``retries`` for a failed run and ``threads``, the torch threads of each run's work.

The same ``section.key=value`` overrides everything, from the command line, YAML or Python:
``task.*``, ``model.*``, ``train.*``, ``seeds.*`` override the runs' configs; ``STAGE.key`` a stage's
settings (``score.n_inputs=50``, ``lengthgen.steps=[best,final]``); ``experiment.key`` the tree's own
fields (``experiment.seeds=[0,1,2]``; ``experiment.variants=[band1,nope]`` keeps those variants). A packaged
experiment is ``possym/configs/experiments/NAME.yaml`` (the reproductions) or ``possym/configs/sweeps/NAME.yaml``
(the sweeps, the canonical grid); a path names any file. A file may instead name another experiment and
override it (``{experiment: canonical, overrides: [train.steps=1000]}``): a smaller version states only
what it changes.

Example:
    >>> exp = load_experiment("quick", seeds=(0, 1), overrides=["score.n_inputs=50", "train.steps=500"])
    >>> [r.id for r in exp.runs()][:3], exp.stage("score").n_inputs, exp.runs()[0].config().train.steps
    (['number-s0', 'letter-s0', 'number-s1'], 50, 500)
    >>> experiment_from_dict(experiment_to_dict(exp)) == exp
    True
"""

from __future__ import annotations

import dataclasses
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from possym.config import PRESET_DIR, RunConfig, load_config
from possym.errors import ConfigError, did_you_mean, named_options, require
from possym.settings import PLAIN, check_overrides, from_dict, parse_override
from possym.stages.registry import get_stage
from possym.tasks import PAPER_TASKS, TASKS

EXPERIMENT_DIR = PRESET_DIR / "experiments"
SWEEP_DIR = PRESET_DIR / "sweeps"
SEED_FIELDS = ("data", "init", "order", "dropout")
RUN_SECTIONS = ("task", "model", "train", "seeds")
_NAME = re.compile(r"^[A-Za-z0-9_.]+$")
_FIELDS = ("name", "preset", "tasks", "seeds", "overrides", "task_overrides", "variants", "stages", "parts", "retries",
           "threads")


@dataclass(frozen=True)
class Variant:
    """Named run-config overrides, for some or all of the experiment's tasks and seeds."""

    name: str
    overrides: tuple[str, ...] = ()
    tasks: tuple[str, ...] | None = None  # None: every task of the experiment
    seeds: tuple[int, ...] | None = None  # None: every seed of the experiment

    def __post_init__(self) -> None:
        require(self.name == "" or bool(_NAME.match(self.name)),
                f"variant name {self.name!r} may hold only letters, digits, _ and .")
        require(self.seeds is None or (len(self.seeds) > 0 and len(set(self.seeds)) == len(self.seeds)
                                       and all(isinstance(s, int) and s >= 0 for s in self.seeds)),
                f"variant {self.name!r}: seeds={self.seeds} must be a non-empty list of distinct integers >= 0")


@dataclass(frozen=True)
class RunSpec:
    """One run of an experiment: what it trains (its preset and overrides) and its id."""

    id: str
    variant: str
    task: str
    seed: int
    preset: str | None
    overrides: tuple[str, ...]

    def config(self) -> RunConfig:
        """The run config this run trains: its identity."""
        return load_config(self.task, self.preset, list(self.overrides))


def run_id(variant: str, task: str, seed: int) -> str:
    """``VARIANT-TASK-sSEED``, or ``TASK-sSEED`` for the unnamed variant."""
    return f"{variant}-{task}-s{seed}" if variant else f"{task}-s{seed}"


@dataclass(frozen=True)
class Experiment:
    """The tree (see the module docstring). ``stages`` is ``((name, typed settings), ...)`` in order;
    ``parts`` is ``((name, Experiment), ...)``."""

    preset: str | None = None
    tasks: tuple[str, ...] = field(default=PAPER_TASKS, metadata={PLAIN: lambda v, w: _strings(v, w)})
    seeds: tuple[int, ...] = field(default=(0,), metadata={PLAIN: lambda v, w: _ints(v, w)})
    overrides: tuple[str, ...] = field(default=(), metadata={PLAIN: lambda v, w: _strings(v, w)})
    task_overrides: tuple[tuple[str, tuple[str, ...]], ...] = field(
        default=(), metadata={PLAIN: lambda v, w: _task_overrides(v)})
    variants: tuple[Variant, ...] = field(default=(Variant(""),), metadata={PLAIN: lambda v, w: _variants(v)})
    stages: tuple[tuple[str, Any], ...] = field(default=(), metadata={PLAIN: lambda v, w: _stages(v)})
    parts: tuple[tuple[str, Any], ...] = field(default=(), metadata={PLAIN: lambda v, w: _parts(v)})
    retries: int = 1
    threads: int | None = 1
    name: str = ""

    def __post_init__(self) -> None:
        require(len(self.tasks) > 0, f"experiment tasks is empty; allowed: a list from {tuple(TASKS)}")
        for task in self.tasks:
            require(task in TASKS, f"experiment tasks: {task!r} is not a task; allowed: {tuple(TASKS)}")
        require(len(self.seeds) > 0 and len(set(self.seeds)) == len(self.seeds)
                and all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in self.seeds),
                f"experiment seeds={list(self.seeds)} must be a non-empty list of distinct integers >= 0")
        names = [v.name for v in self.variants]
        require(len(names) > 0 and len(set(names)) == len(names), f"experiment variants {names} must be distinct")
        for v in self.variants:
            for task in v.tasks or ():
                require(task in self.tasks, f"variant {v.name!r}: task {task!r} is not among the experiment's tasks")
        stage_names = [n for n, _ in self.stages]
        require(len(set(stage_names)) == len(stage_names), f"experiment stages {stage_names} repeat a stage")
        for name, settings in self.stages:
            stage = get_stage(name)
            require(isinstance(settings, stage.config),
                    f"stage {name!r} takes {stage.config.__name__} settings, not {type(settings).__name__}")
        require(self.retries >= 0, f"experiment retries={self.retries} must be >= 0")
        require(self.threads is None or self.threads >= 1, f"experiment threads={self.threads} must be >= 1")
        # Resolve every run's config now: a wrong override fails before any training.
        for task, _ in self.task_overrides:
            require(task in self.tasks, f"experiment task_overrides: {task!r} is not among the experiment's tasks")
        for v in self.variants:
            for task in v.tasks or self.tasks:
                try:
                    load_config(task, self.preset, [*self.overrides, *self.overrides_of(task), *v.overrides])
                except ConfigError as exc:
                    where = f"variant {v.name!r}, " if v.name else ""
                    raise ConfigError(f"experiment {where}task {task!r}: {exc}") from None

    def __repr__(self) -> str:
        """One line a notebook can read: what runs and what each run goes through; ``dataclasses.asdict`` and
        :meth:`stage` give every setting.

        >>> load_experiment("quick")  # doctest: +NORMALIZE_WHITESPACE
        Experiment('quick': preset quick, tasks number, letter, seeds 0; 2 runs; stages data, training, score,
                   discrepancy, lengthgen, theory, report; parts canonical (15 runs))
        """
        name = f"{self.name!r}: " if self.name else ""
        variants = f", {len(self.variants)} variants" if len(self.variants) > 1 else ""
        overrides = f", {len(self.overrides)} overrides" if self.overrides else ""
        parts = "; parts " + ", ".join(f"{n} ({len(p.runs())} runs)" for n, p in self.parts) if self.parts else ""
        return (f"Experiment({name}preset {self.preset}, tasks {', '.join(self.tasks)}, seeds "
                f"{', '.join(map(str, self.seeds))}{variants}{overrides}; {len(self.runs())} runs; stages "
                f"{', '.join(self.stage_names) or 'none'}{parts})")

    def overrides_of(self, task: str) -> tuple[str, ...]:
        """The overrides for ``task``'s runs alone."""
        return dict(self.task_overrides).get(task, ())

    def runs(self) -> list[RunSpec]:
        """Every run, seed by seed (then variant, task): an experiment stopped early has every variant at its
        first seeds rather than some variants at every seed."""
        specs = []
        for v in self.variants:
            for task in v.tasks or self.tasks:
                for seed in v.seeds or self.seeds:
                    seeds = tuple(f"seeds.{f}={seed}" for f in SEED_FIELDS)
                    specs.append(RunSpec(run_id(v.name, task, seed), v.name, task, seed, self.preset,
                                         (*self.overrides, *self.overrides_of(task), *v.overrides, *seeds)))
        order = {s: i for i, s in enumerate(dict.fromkeys(s for v in self.variants for s in v.seeds or self.seeds))}
        return sorted(specs, key=lambda r: order[r.seed])

    def stage(self, name: str) -> Any:
        """The typed settings of stage ``name``."""
        for n, settings in self.stages:
            if n == name:
                return settings
        raise ConfigError(f"stage {name!r} is not part of this experiment; its stages: {[n for n, _ in self.stages]}")

    @property
    def stage_names(self) -> tuple[str, ...]:
        return tuple(n for n, _ in self.stages)

    def with_stages(self) -> Experiment:
        """The same experiment with ``train`` where it must run: before the first stage that reads a run
        (scope ``run`` or ``runs``), wherever it was listed, and at its defaults where it was left
        implicit. Experiment-scope stages (the data audit, the reports) keep their places. A mapping
        written with sorted keys (``yaml.safe_dump``) lists ``score`` before ``train``; no stage can
        read a run before it is trained, so the order given cannot mean anything else."""
        train = dict(self.stages).get("training", get_stage("training").settings_from({}))
        rest = [(n, c) for n, c in self.stages if n != "training"]
        at = next((i for i, (n, _) in enumerate(rest) if get_stage(n).scope != "experiment"), 0)
        return dataclasses.replace(self, stages=(*rest[:at], ("training", train), *rest[at:]))


# ---- plain data <-> the tree ---------------------------------------------------------------------

def _strings(value: Any, where: str) -> tuple[str, ...]:
    require(value is None or isinstance(value, list), f"{where} must be a list, got {value!r}")
    return tuple(str(v) for v in value or ())


def _ints(value: Any, where: str) -> tuple[int, ...]:
    require(isinstance(value, list | tuple) and all(isinstance(s, int) and not isinstance(s, bool) for s in value),
            f"{where}={value!r} must be a list of integers")
    return tuple(value)


def _variants(data: Any) -> tuple[Variant, ...]:
    if data is None:
        return (Variant(""),)
    require(isinstance(data, dict), f"experiment variants must map a name to overrides, got {data!r}")
    out = []
    for name, value in data.items():
        where = f"variants.{name}"
        if isinstance(value, dict):
            extra = sorted(set(value) - {"overrides", "tasks", "seeds"})
            require(not extra, f"{where}: unknown key(s) {extra}; known: overrides, tasks, seeds")
            tasks, seeds = value.get("tasks"), value.get("seeds")
            out.append(Variant(str(name), _strings(value.get("overrides"), f"{where}.overrides"),
                               None if tasks is None else _strings(tasks, f"{where}.tasks"),
                               None if seeds is None else _ints(seeds, f"{where}.seeds")))
        else:
            out.append(Variant(str(name), _strings(value, where)))
    return tuple(out)


def _task_overrides(data: Any) -> tuple[tuple[str, tuple[str, ...]], ...]:
    if data is None:
        return ()
    require(isinstance(data, dict), f"experiment task_overrides must map a task to overrides, got {data!r}")
    return tuple((str(t), _strings(v, f"task_overrides.{t}")) for t, v in data.items())


def _stages(data: Any) -> tuple[tuple[str, Any], ...]:
    if data is None:
        return ()
    require(isinstance(data, dict), "experiment stages must map a stage name to its settings, e.g. "
                                    "{score: {n_inputs: 50}}")
    out = []
    for name, settings in data.items():
        require(settings is None or isinstance(settings, dict),
                f"stages.{name}: give settings as config keys, e.g. {{n_inputs: 30}}, not {settings!r}")
        out.append((str(name), get_stage(str(name)).settings_from(settings)))
    return tuple(out)


def _parts(data: Any) -> tuple[tuple[str, Any], ...]:
    if data is None:
        return ()
    require(isinstance(data, dict), "experiment parts must map a name to an experiment")
    out: list[tuple[str, Any]] = []
    for name, value in data.items():
        require(bool(_NAME.match(str(name))), f"part name {name!r} may hold only letters, digits, _ and .")
        require(isinstance(value, dict | str),
                f"parts.{name} must be a mapping of experiment keys or a packaged experiment's name, not {value!r}")
        out.append((str(name), load_experiment(value) if isinstance(value, str) else experiment_from_dict(value)))
    return tuple(out)


def experiment_from_dict(data: dict[str, Any]) -> Experiment:
    """Build and validate an Experiment from plain data (a parsed YAML file), by :func:`possym.settings.from_dict`
    as every config is built; unknown keys are errors naming the known ones."""
    require(isinstance(data, dict), f"an experiment must be a mapping, got {type(data).__name__}")
    return from_dict(Experiment, data, "experiment")


def experiment_to_dict(exp: Experiment) -> dict[str, Any]:
    """The tree as plain data, in the form :func:`experiment_from_dict` reads (written into OUT/experiment.yaml)."""
    variants: dict[str, Any] | None = None
    if exp.variants != (Variant(""),):
        variants = {v.name: {"overrides": list(v.overrides),
                             **({"tasks": list(v.tasks)} if v.tasks is not None else {}),
                             **({"seeds": list(v.seeds)} if v.seeds is not None else {})} for v in exp.variants}
    parts = {name: experiment_to_dict(p) for name, p in exp.parts}
    out: dict[str, Any] = {
        "name": exp.name,
        "preset": exp.preset,
        "tasks": list(exp.tasks),
        "seeds": list(exp.seeds),
        "overrides": list(exp.overrides),
        "task_overrides": {t: list(o) for t, o in exp.task_overrides} or None,
        "variants": variants,
        "stages": {name: get_stage(name).settings_of(cfg) for name, cfg in exp.stages},
        "parts": parts or None,
        "retries": exp.retries,
        "threads": exp.threads,
    }
    return {k: v for k, v in out.items() if k in ("preset", "threads") or (v is not None and v != "")}


def train_overrides(overrides: list[str] | tuple[str, ...]) -> tuple[list[str], Any]:
    """The overrides of one training (``possym train``) split as an experiment splits them: the runs' own
    (``task.*``, ``model.*``, ``train.lr``, ``seeds.*``) and the training stage's typed settings
    (``training.monitor``, ``training.memory_budget_mb``, ...).

    >>> run, stage = train_overrides(["train.lr=3e-4", "training.monitor=false"])
    >>> run, stage.monitor
    (['train.lr=3e-4'], False)
    """
    from possym.stages.training import STAGE  # not the registry: that imports every stage

    check_overrides(overrides)
    stage = {name: value for section, name, value in map(parse_override, overrides) if section == "training"}
    run = [o for o in overrides if parse_override(o)[0] != "training"]
    return run, STAGE.settings_from(stage)


def apply_overrides(exp: Experiment, overrides: list[str] | tuple[str, ...]) -> Experiment:
    """``section.key=value`` overrides on an experiment (see the module docstring), validated at once."""
    check_overrides(overrides)
    run_overrides = list(exp.overrides)
    stages = {n: get_stage(n).settings_of(c) for n, c in exp.stages}
    fields: dict[str, Any] = {}
    for item in overrides:
        section, name, value = parse_override(item)
        if section in RUN_SECTIONS:
            run_overrides.append(item)
        elif section == "experiment":
            allowed = ("preset", "tasks", "seeds", "variants", "retries", "threads")
            require(name in allowed, f"unknown key 'experiment.{name}'; known experiment keys: {list(allowed)}"
                                     f"{did_you_mean(name, allowed)}")
            fields[name] = _kept_variants(exp, value) if name == "variants" else value
        elif section in stages or section == "training":
            stages[section] = {**stages.get(section, {}), name: value}
        else:
            raise ConfigError(f"override {item!r}: {section!r} is neither a run section {RUN_SECTIONS}, nor a stage "
                              f"of this experiment {list(stages)}, nor 'experiment'"
                              f"{did_you_mean(section, [*RUN_SECTIONS, *stages, 'experiment'])}")
    plain = experiment_to_dict(exp)
    plain.update(overrides=run_overrides, stages=stages)
    plain.update(fields)
    return experiment_from_dict(plain)


def _kept_variants(exp: Experiment, names: Any) -> dict[str, Any]:
    """``experiment.variants=[a,b]``: the variants named, as plain data, in the experiment's order (the order
    a report lists them in is the experiment's, whichever order the command line gave)."""
    known = [v.name for v in exp.variants]
    require(isinstance(names, list) and len(names) > 0 and all(isinstance(n, str) for n in names),
            f"experiment.variants={names!r} must be a non-empty list of variant names from {known}")
    unknown = [n for n in names if n not in known]
    require(not unknown, f"experiment.variants: {unknown} are not variants of this experiment; known: {known}")
    return {k: v for k, v in (experiment_to_dict(exp).get("variants") or {}).items() if k in names}


def experiment_names() -> list[str]:
    """The experiments that ship with possym: reproductions, then sweeps."""
    return sorted(p.stem for p in EXPERIMENT_DIR.glob("*.yaml")) + sorted(p.stem for p in SWEEP_DIR.glob("*.yaml"))


def experiment_path(name: str | Path) -> Path:
    """``name`` as a file: a YAML path, or a packaged experiment's name (``paper``, ``robustness_quick``)."""
    path = Path(name)
    if path.is_file():
        return path
    for folder in (EXPERIMENT_DIR, SWEEP_DIR):
        if (folder / f"{name}.yaml").is_file():
            return folder / f"{name}.yaml"
    raise ConfigError(f"experiment {name} is neither a file nor a packaged experiment; packaged: {experiment_names()}")


@named_options
def load_experiment(name: str | Path, seeds: tuple[int, ...] | list[int] | None = None,
                    overrides: list[str] | tuple[str, ...] = ()) -> Experiment:
    """A packaged or YAML experiment, with ``seeds`` (None: its own) and ``overrides`` applied."""
    if not isinstance(name, str | os.PathLike):
        raise ConfigError(f"load_experiment takes a packaged experiment's name ({', '.join(experiment_names())}) or a "
                          f"YAML file's path, not {type(name).__name__} {name!r:.60}")
    check_overrides(overrides)
    if seeds is not None and (isinstance(seeds, str | bytes) or not isinstance(seeds, tuple | list)):
        raise ConfigError(f"seeds={seeds!r} must be a list of whole numbers >= 0, e.g. (0, 1, 2), or None")
    path = experiment_path(name)
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        where = getattr(exc, "problem_mark", None)
        line = f", line {where.line + 1}" if where is not None else ""
        raise ConfigError(f"experiment file {path}{line} is not valid YAML ({getattr(exc, 'problem', exc)}); "
                          "fix it, or name a packaged experiment") from exc
    require(isinstance(data, dict) or data is None,
            f"experiment file {path} must be a mapping of experiment keys ({sorted(_FIELDS)}), "
            f"not a {type(data).__name__}")
    if data and "experiment" in data:  # another experiment, overridden
        extra = sorted(set(data) - {"experiment", "overrides"})
        require(not extra, f"experiment file {path} names another experiment ({data['experiment']!r}), so its only "
                           f"other key is overrides; got {extra}")
        require(Path(str(data["experiment"])).stem != path.stem, f"experiment file {path} names itself")
        base = _strings(data.get("overrides"), f"{path}: overrides")
        asked = [f"experiment.seeds={list(seeds)}"] if seeds is not None else []  # after the file's own
        return load_experiment(str(data["experiment"]), None, [*base, *asked, *overrides])
    # An empty spec would silently run the defaults, a paper-scale experiment.
    require(bool(set(data or {}) - {"name"}), f"experiment file {path} sets nothing, and its defaults are a "
            f"paper-scale experiment; give at least a preset (e.g. preset: quick) and tasks, keys from "
            f"{sorted(_FIELDS)}")
    data.setdefault("name", path.stem)
    exp = experiment_from_dict(data)
    extra = [f"experiment.seeds={list(seeds)}"] if seeds is not None else []
    return apply_overrides(exp, [*extra, *overrides]) if extra or overrides else exp


def dump_experiment(exp: Experiment) -> str:
    """The tree as YAML text (``OUT/experiment.yaml``)."""
    return yaml.safe_dump(experiment_to_dict(exp), sort_keys=False)


def experiment_differences(before: dict[str, Any], now: dict[str, Any]) -> list[str]:
    """Dotted keys whose values differ between two dumped experiments (``stages.score.n_inputs``).

    >>> experiment_differences({"seeds": [0], "stages": {"score": {"n_inputs": 100}}},
    ...                        {"seeds": [0, 1], "stages": {"score": {"n_inputs": 50}}})
    ['seeds', 'stages.score.n_inputs']
    """
    out = []
    for key in sorted(set(before) | set(now)):
        a, b = before.get(key), now.get(key)
        if isinstance(a, dict) and isinstance(b, dict):
            out += [f"{key}.{k}" for k in experiment_differences(a, b)]
        elif a != b:
            out.append(key)
    return out


__all__ = ["Experiment", "RunSpec", "Variant", "apply_overrides", "dump_experiment", "experiment_differences",
           "experiment_from_dict", "experiment_names", "experiment_to_dict", "load_experiment",
           "run_id", "train_overrides"]
