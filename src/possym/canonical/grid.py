"""The canonical grid: every task × frequency condition × seed, as an experiment's runs and two stages.

A grid cell is a run config plus its analysis. :class:`CanonicalGridConfig` says which tasks,
conditions and seeds, the toy model and its training; :func:`run_overrides` turns a (task,
condition) into the ordinary run-config overrides; :func:`analyse_cell` measures one trained cell
(accuracy at 1x, 2x and 4x the training length by answer position, scores with the exact engine,
frequency use and plane geometry), and :func:`cell_rows` turns a cell's measurements into the
grid's records; the stages ``canonical_cell`` and ``canonical_report`` (:mod:`possym.stages.canonical`)
run them, the report adding Theorem 7's curves and the verdicts (:mod:`possym.canonical.claims`);
:func:`possym.experiment.run_canonical_grid` runs the grid as an experiment, resumably.

The toy model (every choice in docs/canonical.md): possym's GPTJ with one layer, one head,
``model.mlp=false`` (attention only), d_model 32 (16 RoPE planes), no dropout; AdamW at lr 3e-3 with
100 warm-up steps then linear decay, no weight decay, batch 64, 1,500 steps of fresh data (one
epoch of 96,000 inputs). Length 8, 32 symbols, 8 attributes.

Example:
    >>> cfg = CanonicalGridConfig.quick()
    >>> len(cfg.tasks), cfg.condition_names, cfg.seeds
    (3, ('band1', 'band4', 'band8', 'nope', 'two_angle'), (0,))
    >>> [o for o in run_overrides(cfg, "index", cfg.condition("band1")) if "freq_gate" in o]
    ['model.freq_gate=0@1-2']
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from possym.canonical.analysis import accuracy_by_position, analyse_heads
from possym.canonical.conditions import Condition, band_centre_theta, condition, frequency_conditions
from possym.canonical.records import CellRecord, PositionRecord, WmaxRecord
from possym.canonical.theorem7 import theorem7_curves
from possym.config import ConfigError, RunConfig, load_config
from possym.errors import PossymError
from possym.runs import RunDir, atomic_write_text
from possym.settings import from_dict
from possym.tasks import get_task
from possym.tasks.canonical import CANONICAL_TASKS, CanonicalTaskConfig

if TYPE_CHECKING:
    import pandas as pd

QUICK_CONDITIONS = ("band1", "band4", "band8", "nope", "two_angle")


@dataclass(frozen=True)
class CanonicalGridConfig:
    """The grid: which tasks, conditions and seeds, the task and toy-model sizes, training and evaluation.

    ``conditions=None`` means every band from the fastest to the slowest plus nope, two_angle,
    fast_slow and all (:func:`~possym.canonical.conditions.frequency_conditions`).
    """

    tasks: tuple[str, ...] = CANONICAL_TASKS
    conditions: tuple[str, ...] | None = None
    seeds: tuple[int, ...] = (0, 1, 2)
    length: int = 8
    n_symbols: int = 32
    n_attributes: int = 8
    d_model: int = 32
    n_heads: int = 1
    band_width: int = 2
    steps: int = 1500
    batch_size: int = 64
    lr: float = 3e-3
    warmup_steps: int = 100
    n_val: int = 512
    n_test: int = 1024
    n_eval_per_position: int = 128
    length_factors: tuple[int, ...] = (1, 2, 4)
    n_score: int = 64
    n_geometry: int = 32
    threads: int | None = 1
    extra_overrides: tuple[str, ...] = field(default=())
    # The evaluation inputs of a cell are drawn from (seed, analysis_seed, task), the same for every
    # condition, so that conditions are compared on paired inputs; the verdicts' bootstraps from claims_seed.
    analysis_seed: int = 18
    claims_seed: int = 18

    def __post_init__(self) -> None:
        bad = [t for t in self.tasks if t not in CANONICAL_TASKS]
        if bad or not self.tasks:
            raise ConfigError(f"tasks={self.tasks}: each must be one of {CANONICAL_TASKS}, at least one")
        if not self.seeds or len(set(self.seeds)) != len(self.seeds):
            raise ConfigError(f"seeds={self.seeds} must be distinct and at least one")
        if self.d_model % self.n_heads:
            raise ConfigError(f"d_model={self.d_model} must be divisible by n_heads={self.n_heads}")
        if self.length_factors[:1] != (1,) or any(f < 1 for f in self.length_factors):
            raise ConfigError(f"length_factors={self.length_factors} must start with 1 (the training length)")
        for name in ("steps", "batch_size", "n_val", "n_test", "n_eval_per_position", "n_score", "n_geometry"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name}={getattr(self, name)} must be >= 1")
        for task in self.tasks:  # every evaluation length must be possible
            for f in self.length_factors:
                try:
                    self.spec(task).check_length(f * self.length)
                except ValueError as exc:
                    raise ConfigError(f"length_factors={self.length_factors}: {exc}") from None
        names = [c.name for c in self.all_conditions]
        if len(set(names)) != len(names):
            raise ConfigError(f"conditions={self.conditions} repeat a name")

    @classmethod
    def quick(cls, **changes: Any) -> CanonicalGridConfig:
        """Five conditions, one seed, 1,000 steps, smaller evaluations: the whole pipeline in about a minute."""
        base = {
            "conditions": QUICK_CONDITIONS,
            "seeds": (0,),
            "steps": 1000,
            "n_eval_per_position": 32,
            "n_score": 32,
            "n_geometry": 16,
            "n_val": 256,
            "n_test": 256,
        }
        return cls(**{**base, **changes})

    @property
    def d_head(self) -> int:
        return self.d_model // self.n_heads

    @property
    def all_conditions(self) -> list[Condition]:
        if self.conditions is None:
            return frequency_conditions(self.d_head, self.length, self.band_width)
        try:
            return [condition(n, self.d_head, self.length, self.band_width) for n in self.conditions]
        except ValueError as exc:
            raise ConfigError(str(exc)) from None

    @property
    def condition_names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.all_conditions)

    def condition(self, name: str) -> Condition:
        return condition(name, self.d_head, self.length, self.band_width)

    def task_fields(self, task: str) -> dict[str, Any]:
        """The grid's task sizes as ``task``'s own config fields (Index has no attributes)."""
        sizes = {"length": self.length, "n_symbols": self.n_symbols, "n_attributes": self.n_attributes}
        return {k: v for k, v in sizes.items() if k in get_task(task).config.__dataclass_fields__}

    def spec(self, task: str) -> CanonicalTaskConfig:
        """The task config of ``task`` at the grid's sizes (split sizes aside)."""
        return get_task(task).config(**self.task_fields(task))  # type: ignore[return-value]

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def run_overrides(grid: CanonicalGridConfig, task: str, cond: Condition) -> list[str]:
    """The run-config overrides of a (task, condition) cell, seeds aside: the toy model, its training and
    the condition's plane options, through the ordinary override path."""
    n_train = grid.steps * grid.batch_size
    return [
        *(f"task.{k}={v}" for k, v in grid.task_fields(task).items()),
        f"task.n_train={n_train}",
        f"task.n_val={grid.n_val}",
        f"task.n_test={grid.n_test}",
        "model.n_layers=1",
        f"model.d_model={grid.d_model}",
        f"model.n_heads={grid.n_heads}",
        "model.mlp=false",
        "model.dropout=0.0",
        # The values the grid's first cells were trained with (before the defaults became the paper
        # preset's): with no MLP and no dropout neither changes a toy head, and they keep those cells theirs.
        "model.embd_dropout=null",
        "model.activation=gelu_new",
        *cond.overrides,
        f"train.lr={grid.lr}",
        f"train.warmup_steps={grid.warmup_steps}",
        f"train.steps={grid.steps}",
        f"train.batch_size={grid.batch_size}",
        "train.weight_decay=0.0",
        "train.beta1=0.9",
        f"train.eval_every={max(1, grid.steps // 3)}",
        f"train.checkpoint_every={grid.steps}",
        f"train.state_every={max(1, grid.steps // 3)}",
        f"train.eval_size={grid.n_val}",
        *([f"train.threads={grid.threads}"] if grid.threads is not None else []),
        *grid.extra_overrides,
    ]


def run_config(grid: CanonicalGridConfig, task: str, cond: Condition, seed: int) -> RunConfig:
    """The resolved run config of one grid cell."""
    seeds = [f"seeds.{k}={seed}" for k in ("data", "init", "order", "dropout")]
    return load_config(task, None, [*run_overrides(grid, task, cond), *seeds])


@dataclass(frozen=True)
class CellConfig:
    """The analysis of one cell (the ``canonical_cell`` stage): inputs per answer position at each length
    factor, scoring and geometry inputs, and the seed of those inputs (paired across conditions)."""

    n_eval_per_position: int = 128
    length_factors: tuple[int, ...] = (1, 2, 4)
    n_score: int = 64
    n_geometry: int = 32
    analysis_seed: int = 18

    def __post_init__(self) -> None:
        object.__setattr__(self, "length_factors", tuple(self.length_factors))
        if self.length_factors[:1] != (1,) or any(f < 1 for f in self.length_factors):
            raise ConfigError(f"length_factors={self.length_factors} must start with 1 (the training length)")
        for name in ("n_eval_per_position", "n_score", "n_geometry"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name}={getattr(self, name)} must be >= 1")

    @classmethod
    def of(cls, grid: CanonicalGridConfig) -> CellConfig:
        return cls(grid.n_eval_per_position, grid.length_factors, grid.n_score, grid.n_geometry, grid.analysis_seed)


def analyse_cell(run: RunDir, cfg: CellConfig) -> dict[str, Any]:
    """The analysis of one trained cell as plain data, written to ``RUN/canonical.json`` with ``cfg``'s
    settings: ``{"accuracy": {factor: acc}, "positions": [{length, position, correct, total}], "heads":
    {...}}``. Holds the run's writer lock (:meth:`RunDir.writing`). Whether a cell is analysed is the
    run's memo's to say (the ``canonical_cell`` stage, :func:`possym.experiment.run_stage`)."""
    with run.writing():
        return _analyse_cell(run, cfg, run.artifact("canonical"), _cell_key(cfg))


def read_cell(run: RunDir, cfg: CellConfig) -> dict[str, Any]:
    """What :func:`analyse_cell` wrote into ``run`` with ``cfg``'s settings (an error if it has not)."""
    file = run.artifact("canonical")
    data = json.loads(file.read_text()) if file.is_file() else {}
    if data.get("settings") != _cell_key(cfg):
        raise PossymError(f"{run.path} holds no canonical analysis with these settings; run the canonical_cell "
                          "stage on it first")
    return data


def _cell_key(cfg: CellConfig) -> dict[str, Any]:
    return dataclasses.asdict(cfg) | {"length_factors": list(cfg.length_factors)}


def _analyse_cell(run: RunDir, cfg: CellConfig, cache: Path, key: dict[str, Any]) -> dict[str, Any]:
    spec: CanonicalTaskConfig = run.config.task  # type: ignore[assignment]
    model = run.load_model().eval()
    rng = np.random.default_rng([run.config.seeds.init, cfg.analysis_seed, CANONICAL_TASKS.index(spec.name)])
    positions, acc = [], {}
    with torch.no_grad():
        for f in cfg.length_factors:
            length = f * spec.length
            rows = accuracy_by_position(model, spec, length, cfg.n_eval_per_position, rng)
            positions += [{"length": length, **r} for r in rows]
            acc[str(f)] = sum(r["correct"] for r in rows) / sum(r["total"] for r in rows)
    heads = analyse_heads(model, spec, cfg.n_score, cfg.n_geometry, rng)
    data = {"settings": key, "accuracy": acc, "positions": positions, "heads": dataclasses.asdict(heads),
            "train_s": _train_seconds(run)}
    atomic_write_text(cache, json.dumps(data, indent=1) + "\n")
    return data


def _train_seconds(run: RunDir) -> float:
    """Wall-clock seconds from the first logged record to the final one (a resumed run's pause included)."""
    times = [m.time for m in run.metrics_log() if m.time is not None]
    return times[-1] - times[0] if len(times) > 1 else 0.0


def cell_rows(grid: CanonicalGridConfig, data: dict[str, Any], task: str, cond: Condition, seed: int
              ) -> tuple[list[CellRecord], list[PositionRecord]]:
    """A cell's measurements as the grid's records (one CellRecord per head, one PositionRecord per position)."""
    acc, heads = data["accuracy"], data["heads"]
    planes = ",".join(str(p) for p in cond.planes)
    runs = [
        CellRecord(task=task, condition=cond.name, seed=seed, head=h, planes=planes,
               theta_centre=band_centre_theta(cond), acc=acc["1"], acc_2x=acc.get("2", float("nan")),
               acc_4x=acc.get("4", float("nan")), s_pos=heads["s_pos"][h], s_sym=heads["s_sym"][h],
               entropy=heads["entropy"][h], dominant_id=heads["dominant_id"][h],
               dominant_s_pos=heads["dominant_s_pos"][h], dominant_s_sym=heads["dominant_s_sym"][h],
               key_collapse=heads["key_collapse"][h], query_alignment=heads["query_alignment"][h],
               query_alignment_shuffled=heads["query_alignment_shuffled"][h], train_s=round(data["train_s"], 3))
        for h in range(len(heads["s_pos"]))
    ]
    positions = [PositionRecord(task, cond.name, seed, p["length"], p["position"], p["correct"], p["total"])
                 for p in data["positions"]]
    return runs, positions


@dataclass(frozen=True)
class GridResults:
    """Everything the grid produced, as records (``frame`` turns any of them into a DataFrame)."""

    runs: list[CellRecord]
    positions: list[PositionRecord]
    wmax: list[WmaxRecord]
    claims: list[Any]  # ClaimRecord

    def table(self, name: str) -> pd.DataFrame:
        """One of ``runs``, ``positions``, ``wmax``, ``claims`` as a DataFrame with its record's columns.

        >>> GridResults([], [], [], []).table("runs").columns[:3].tolist()
        ['task', 'condition', 'seed']
        """
        from possym.records import ClaimRecord, frame

        kinds = {"runs": CellRecord, "positions": PositionRecord, "wmax": WmaxRecord, "claims": ClaimRecord}
        if name not in kinds:
            raise ValueError(f"table {name!r}; allowed: {list(kinds)}")
        return frame(getattr(self, name), kinds[name])


def wmax_rows(n_content: int = 16, beta: float = 8.0) -> list[WmaxRecord]:
    """Theorem 7's curves (:func:`~possym.canonical.theorem7.theorem7_curves`) as rows."""
    return [
        WmaxRecord(shape=c.shape, **{k: v for k, v in r.items()})  # type: ignore[arg-type]
        for c in theorem7_curves(n_content=n_content, beta=beta)
        for r in c.records()
    ]


def grid_to_dict(grid: CanonicalGridConfig) -> dict[str, Any]:
    """The grid's settings as plain data, ``{"grid": {field: value}}`` (an experiment part's form)."""
    plain = {k: list(v) if isinstance(v, tuple) else v for k, v in dataclasses.asdict(grid).items()}
    return {"grid": plain}


def grid_from_dict(data: dict[str, Any]) -> CanonicalGridConfig:
    """A grid from an experiment part: ``{"grid": "quick" | "default" | {field: value}, field: value, ...}``
    (without ``grid``: the default grid).

    >>> grid_from_dict({"grid": "quick", "seeds": [0, 1]}).seeds
    (0, 1)
    """
    base, rest = data.get("grid", "default"), {k: v for k, v in data.items() if k != "grid"}
    if isinstance(base, dict):
        rest = {**base, **rest}
        base = "default"
    if base not in ("quick", "default"):
        raise ConfigError(f"canonical grid={base!r}; allowed: 'quick', 'default', or a mapping of its settings")
    # Checked and typed as the fields say; the quick grid then changes its own defaults, not the keys given.
    explicit = from_dict(CanonicalGridConfig, rest, "canonical", also=("grid",))
    given = {k: getattr(explicit, k) for k in rest}
    return CanonicalGridConfig.quick(**given) if base == "quick" else explicit
