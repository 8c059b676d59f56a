"""A sweep spec and its expansion into trials: variants × tasks × seeds.

A spec is a small YAML file::

    preset: quick                       # optional, as `possym train --preset`
    tasks: [number, letter]
    seeds: [0, 1, 2]                    # seed s sets seeds.data = seeds.init = seeds.order = seeds.dropout = s
    overrides: [train.threads=1]        # for every trial
    variants:                           # name -> overrides, or {overrides: [...], tasks: [...]}
      baseline: []
      p_rope_25: {overrides: [model.p_rope=0.25], tasks: [number], seeds: [0, 1]}
    stages:                             # which analyses follow training, with their settings as config keys
      score: {n_inputs: 50, figures: false}            # possym.stages.score.ScoreConfig
      lengthgen: {grid: [0, 10, 100], n: 200, steps: [best, final]}   # LengthGenConfig, steps, threads
      discrepancy: {samples: 16, step: best}           # possym.stages.theory.DiscrepancyConfig
    retries: 1                          # extra attempts for a failed trial
    threads: 1                          # torch threads per trial

A trial is one (variant, task, seed): training with the live score monitor into ``OUT/runs/ID``,
then each stage's library function on that run with its typed config. Its id is
``VARIANT-TASK-sSEED``, and what it trains is its resolved run config: a trial started under other
overrides that resolve to the same config is the same trial. Every override and stage key is checked
now, so a typo fails before the first trial starts.

Example:
    >>> spec = spec_from_dict({"tasks": ["number"], "seeds": [0, 1], "variants": {"nope": ["model.nope_from_layer=2"]},
    ...                        "stages": {"score": {"n_inputs": 5}}})
    >>> [t.id for t in expand(spec, "out")]
    ['nope-number-s0', 'nope-number-s1']
    >>> trial = expand(spec, "out")[1]
    >>> trial.config().seeds.init, trial.config().model.nope_from_layer, trial.stages["score"].n_inputs
    (1, 2, 5)
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from possym.config import SWEEP_DIR, ConfigError, RunConfig, load_config
from possym.tasks.registry import PAPER_TASKS, TASKS

STAGES = ("score", "lengthgen", "discrepancy")  # the analyses that follow training, in this order
SEED_FIELDS = ("data", "init", "order", "dropout")
_NAME = re.compile(r"^[A-Za-z0-9_.]+$")


def _require(ok: bool, message: str) -> None:
    if not ok:
        raise ConfigError(message)


@dataclass(frozen=True)
class Variant:
    """Named config overrides, for some or all of the sweep's tasks."""

    name: str
    overrides: tuple[str, ...] = ()
    tasks: tuple[str, ...] | None = None  # None: every task of the sweep
    seeds: tuple[int, ...] | None = None  # None: every seed of the sweep


@dataclass(frozen=True)
class SweepSpec:
    tasks: tuple[str, ...]
    seeds: tuple[int, ...]
    variants: tuple[Variant, ...] = (Variant("baseline"),)
    preset: str | None = None
    overrides: tuple[str, ...] = ()
    stages: dict[str, Any] = field(default_factory=lambda: {s: stage_config(s, {}) for s in STAGES})
    retries: int = 1
    threads: int = 1

    def __post_init__(self) -> None:
        _require(len(self.tasks) > 0, "sweep.tasks is empty; allowed: a list from " + str(tuple(TASKS)))
        for task in self.tasks:
            _require(task in TASKS, f"sweep.tasks: {task!r} is not a task; allowed: {tuple(TASKS)}")
        _require(len(self.seeds) > 0 and len(set(self.seeds)) == len(self.seeds),
                 f"sweep.seeds={list(self.seeds)} must be a non-empty list of distinct integers")
        names = [v.name for v in self.variants]
        _require(len(names) > 0 and len(set(names)) == len(names), f"sweep.variants {names} must be distinct names")
        for v in self.variants:
            _require(bool(_NAME.match(v.name)),
                     f"sweep.variants: name {v.name!r} may hold only letters, digits, _ and .")
            for task in v.tasks or ():
                _require(task in self.tasks, f"sweep.variants.{v.name}.tasks: {task!r} is not among sweep.tasks")
            _require(v.seeds is None or (len(v.seeds) > 0 and len(set(v.seeds)) == len(v.seeds)),
                     f"sweep.variants.{v.name}.seeds={v.seeds} must be a non-empty list of distinct integers")
        unknown = sorted(set(self.stages) - set(STAGES))
        _require(not unknown, f"sweep.stages: unknown stage(s) {unknown}; allowed: {list(STAGES)}")
        _require(self.retries >= 0, f"sweep.retries={self.retries} must be >= 0")
        _require(self.threads >= 1, f"sweep.threads={self.threads} must be >= 1")
        # Resolve every trial's config now: a wrong override fails before any training.
        for v in self.variants:
            for task in v.tasks or self.tasks:
                try:
                    load_config(task, self.preset, [*self.overrides, *v.overrides])
                except ConfigError as exc:
                    raise ConfigError(f"sweep variant {v.name!r}, task {task!r}: {exc}") from None


def _strings(value: Any, where: str) -> tuple[str, ...]:
    _require(value is None or isinstance(value, list), f"{where} must be a list, got {value!r}")
    return tuple(str(v) for v in value or ())


def _seeds(value: Any, where: str) -> tuple[int, ...]:
    _require(isinstance(value, list) and all(isinstance(s, int) and not isinstance(s, bool) for s in value),
             f"{where}={value!r} must be a list of integers")
    return tuple(value)


def stage_config(name: str, settings: dict[str, Any] | None) -> Any:
    """The typed config of stage ``name`` from its settings in a spec (config keys; None: the defaults)."""
    from possym.stages import build_config
    from possym.stages.lengthgen import LengthStageConfig
    from possym.stages.score import ScoreConfig
    from possym.stages.theory import DiscrepancyConfig

    _require(name in STAGES, f"sweep.stages: unknown stage {name!r}; allowed: {list(STAGES)}")
    settings = {} if settings is None else settings
    _require(isinstance(settings, dict), f"sweep.stages.{name}: give settings as config keys, e.g. "
             f"{{n_inputs: 30}}, not command-line flags {settings!r}")
    if name == "lengthgen":
        return LengthStageConfig.from_dict(settings)
    kind = {"score": ScoreConfig, "discrepancy": DiscrepancyConfig}[name]
    return build_config(kind, settings, f"sweep.stages.{name}")


def spec_from_dict(data: dict[str, Any]) -> SweepSpec:
    """Build and validate a SweepSpec from plain data (a parsed YAML file)."""
    _require(isinstance(data, dict), f"a sweep spec must be a mapping, got {type(data).__name__}")
    known = {"preset", "tasks", "seeds", "overrides", "variants", "stages", "retries", "threads"}
    unknown = sorted(set(data) - known)
    _require(not unknown, f"unknown sweep key(s) {unknown}; known: {sorted(known)}")
    variants = []
    for name, value in (data.get("variants") or {"baseline": []}).items():
        if isinstance(value, dict):
            extra = sorted(set(value) - {"overrides", "tasks", "seeds"})
            _require(not extra, f"sweep.variants.{name}: unknown key(s) {extra}; known: overrides, tasks, seeds")
            tasks, seeds = value.get("tasks"), value.get("seeds")
            variants.append(Variant(str(name), _strings(value.get("overrides"), f"sweep.variants.{name}.overrides"),
                                    None if tasks is None else _strings(tasks, f"sweep.variants.{name}.tasks"),
                                    None if seeds is None else _seeds(seeds, f"sweep.variants.{name}.seeds")))
        else:
            variants.append(Variant(str(name), _strings(value, f"sweep.variants.{name}")))
    stages = data.get("stages")
    _require(stages is None or isinstance(stages, dict), "sweep.stages must map a stage name to its settings")
    return SweepSpec(
        tasks=_strings(data.get("tasks", list(PAPER_TASKS)), "sweep.tasks"),
        seeds=_seeds(data.get("seeds", [0]), "sweep.seeds"),
        variants=tuple(variants),
        preset=data.get("preset"),
        overrides=_strings(data.get("overrides"), "sweep.overrides"),
        stages={s: stage_config(s, {}) for s in STAGES} if stages is None else {
            str(k): stage_config(str(k), v) for k, v in stages.items()},
        retries=int(data.get("retries", 1)),
        threads=int(data.get("threads", 1)),
    )


def spec_names() -> list[str]:
    """The sweep specs that ship with possym (``possym/configs/sweeps/NAME.yaml``)."""
    return sorted(p.stem for p in SWEEP_DIR.glob("*.yaml"))


def spec_path(spec: str | Path) -> Path:
    """``spec`` as a file: a path to a YAML file, or the name of a packaged spec (``robustness_quick``)."""
    path = Path(spec)
    if path.is_file():
        return path
    packaged = SWEEP_DIR / f"{spec}.yaml"
    _require(packaged.is_file(), f"sweep spec {spec} is neither a file nor a packaged spec; packaged: {spec_names()}")
    return packaged


def load_spec(spec: str | Path) -> SweepSpec:
    return spec_from_dict(yaml.safe_load(spec_path(spec).read_text()) or {})


@dataclass(frozen=True)
class Trial:
    """One (variant, task, seed): what it trains (preset and overrides), each stage's typed config, and
    where they write. Picklable plain data, so that every engine can ship it to a worker.
    """

    id: str
    variant: str
    task: str
    seed: int
    run_dir: str  # OUT/runs/ID, the run directory
    state_dir: str  # OUT/trials/ID: stage markers, the trial record, the log
    preset: str | None
    overrides: tuple[str, ...]
    stages: dict[str, Any]  # stage name -> its typed config, in STAGES order
    threads: int = 1

    def config(self) -> RunConfig:
        """The run config this trial trains: its identity."""
        return load_config(self.task, self.preset, list(self.overrides))


def expand(spec: SweepSpec, out: str | Path) -> list[Trial]:
    """Every trial of ``spec`` under ``out``, seed by seed (then variant, task): a sweep stopped early
    has every variant at its first seeds rather than some variants at every seed."""
    out = Path(out)
    trials = []
    for v in spec.variants:
        for task in v.tasks or spec.tasks:
            for seed in v.seeds or spec.seeds:
                tid = f"{v.name}-{task}-s{seed}"
                run = str(out / "runs" / tid)
                seeds = [f"seeds.{f}={seed}" for f in SEED_FIELDS]
                stages = {s: spec.stages[s] for s in STAGES if s in spec.stages}
                trials.append(Trial(tid, v.name, task, seed, run, str(out / "trials" / tid), spec.preset,
                                    (*spec.overrides, *v.overrides, *seeds), stages, spec.threads))
    order = {seed: i for i, seed in enumerate(dict.fromkeys(s for v in spec.variants for s in v.seeds or spec.seeds))}
    return sorted(trials, key=lambda t: order[t.seed])
