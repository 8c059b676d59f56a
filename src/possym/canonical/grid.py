"""The canonical grid: every task × frequency condition × seed, trained as ordinary run directories, then analysed.

``run_grid(GridConfig(), out)`` trains each toy head with possym's own training loop into
``out/runs/{task}/{condition}/seed{seed}`` (a normal run directory: ``possym train --resume`` and
every analysis command read it), evaluates it at 1x, 2x and 4x the training length by answer
position, scores it with the exact engine, measures its frequency use and plane geometry, and caches
that analysis in the run directory (``canonical.json``), so a killed grid resumes where it stopped:
a finished run is not retrained, an unfinished one resumes from its last state.

Then it computes Theorem 7's curves and the verdicts (:mod:`possym.canonical.claims`) and writes
``results.csv`` (:class:`RunRow`), ``positions.csv`` (:class:`PositionRow`), ``theorem7.csv``
(:class:`WmaxRow`), ``claims.csv`` (:class:`~possym.records.ClaimRecord`, the reproduction report's
format) and the figures (:mod:`possym.canonical.plots`).

The toy model (every choice in docs/canonical.md): possym's GPTJ with one layer, one head,
``model.mlp=false`` (attention only), d_model 32 (16 RoPE planes), no dropout; AdamW at lr 3e-3 with
100 warm-up steps then linear decay, no weight decay, batch 64, 1,500 steps of fresh data (one
epoch of 96,000 inputs). Length 8, 32 symbols, 8 attributes.

Example:
    >>> cfg = GridConfig.quick()
    >>> len(cfg.tasks), cfg.condition_names, cfg.seeds
    (3, ('band1', 'band4', 'band8', 'nope', 'two_angle'), (0,))
    >>> run_config(cfg, "index", cfg.condition("band1"), 0).model.freq_gate
    '0@1-2'
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tqdm import tqdm

from possym.canonical.analysis import accuracy_by_position, analyse_heads
from possym.canonical.conditions import Condition, band_centre_theta, condition, frequency_conditions
from possym.canonical.records import PositionRow, RunRow, WmaxRow
from possym.canonical.theorem7 import theorem7_curves
from possym.config import ConfigError, RunConfig, load_config
from possym.runs import RunDir, atomic_write_text
from possym.tasks import get_task
from possym.tasks.canonical import CANONICAL_TASKS, CanonicalTaskConfig

ANALYSIS_FILE = "canonical.json"
QUICK_CONDITIONS = ("band1", "band4", "band8", "nope", "two_angle")


@dataclass(frozen=True)
class GridConfig:
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
    def quick(cls, **changes: Any) -> GridConfig:
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


def run_config(grid: GridConfig, task: str, cond: Condition, seed: int) -> RunConfig:
    """The resolved run config of one grid cell, through the ordinary override path."""
    n_train = grid.steps * grid.batch_size
    overrides = [
        *(f"task.{k}={v}" for k, v in grid.task_fields(task).items()),
        f"task.n_train={n_train}",
        f"task.n_val={grid.n_val}",
        f"task.n_test={grid.n_test}",
        "model.n_layers=1",
        f"model.d_model={grid.d_model}",
        f"model.n_heads={grid.n_heads}",
        "model.mlp=false",
        "model.dropout=0.0",
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
        *(f"seeds.{k}={seed}" for k in ("data", "init", "order", "dropout")),
        *grid.extra_overrides,
    ]
    if grid.threads is not None:
        overrides.append(f"train.threads={grid.threads}")
    return load_config(task, None, overrides)


def _finished(run: RunDir) -> bool:
    return any(r.get("event") == "final" for r in run.metrics())


def train_cell(
    run_path: Path, cfg: RunConfig, on_step: Callable[[dict[str, Any]], None] | None = None
) -> tuple[RunDir, float]:
    """Create (or reopen and resume) the run at ``run_path`` and train it to the end: (run, seconds spent)."""
    from possym.tasks import make_splits
    from possym.train.loop import train

    if (run_path / "config.yaml").is_file():
        run = RunDir.open(run_path)
        if run.config.to_dict() != cfg.to_dict():
            raise ConfigError(f"{run_path} holds a run of another config; delete it or choose another --out")
        if _finished(run):
            return run, 0.0
    else:
        run = RunDir.create(run_path, cfg)
    t0 = time.perf_counter()
    train(run, make_splits(cfg.task, cfg.seeds.data), on_step=on_step)
    return run, time.perf_counter() - t0


def analyse_cell(
    grid: GridConfig, run: RunDir, task: str, cond: Condition, seed: int, train_s: float
) -> dict[str, Any]:
    """The analysis of one trained cell as plain data: {"runs": [RunRow dicts], "positions": [PositionRow dicts]}."""
    spec = grid.spec(task)
    model = run.load_model().eval()
    rng = np.random.default_rng([seed, 18, CANONICAL_TASKS.index(task)])  # paired across conditions
    positions, acc = [], {}
    with torch.no_grad():
        for f in grid.length_factors:
            length = f * grid.length
            rows = accuracy_by_position(model, spec, length, grid.n_eval_per_position, rng)
            positions += [PositionRow(task, cond.name, seed, length, **r) for r in rows]
            acc[f] = sum(r["correct"] for r in rows) / sum(r["total"] for r in rows)
    heads = analyse_heads(model, spec, grid.n_score, grid.n_geometry, rng)
    planes = ",".join(str(p) for p in cond.planes)
    runs = [
        RunRow(
            task=task,
            condition=cond.name,
            seed=seed,
            head=h,
            planes=planes,
            theta_centre=band_centre_theta(cond),
            acc=acc[1],
            acc_2x=acc.get(2, float("nan")),
            acc_4x=acc.get(4, float("nan")),
            s_pos=heads.s_pos[h],
            s_sym=heads.s_sym[h],
            entropy=heads.entropy[h],
            dominant_id=heads.dominant_id[h],
            dominant_s_pos=heads.dominant_s_pos[h],
            dominant_s_sym=heads.dominant_s_sym[h],
            key_collapse=heads.key_collapse[h],
            query_alignment=heads.query_alignment[h],
            query_alignment_shuffled=heads.query_alignment_shuffled[h],
            train_s=round(train_s, 3),
        )
        for h in range(len(heads.s_pos))
    ]
    return {"runs": [r.to_csv() for r in runs], "positions": [p.to_csv() for p in positions]}


@dataclass(frozen=True)
class GridResults:
    """Everything the grid produced, as records (``frame`` turns any of them into a DataFrame)."""

    runs: list[RunRow]
    positions: list[PositionRow]
    wmax: list[WmaxRow]
    claims: list[Any]  # ClaimRecord
    seconds: float  # wall-clock of this call (training + analysis + report)

    def table(self, name: str):  # -> pandas.DataFrame
        """One of ``runs``, ``positions``, ``wmax``, ``claims`` as a DataFrame with its record's columns.

        >>> GridResults([], [], [], [], 0.0).table("runs").columns[:3].tolist()
        ['task', 'condition', 'seed']
        """
        from possym.records import ClaimRecord, frame

        kinds = {"runs": RunRow, "positions": PositionRow, "wmax": WmaxRow, "claims": ClaimRecord}
        if name not in kinds:
            raise ValueError(f"table {name!r}; allowed: {list(kinds)}")
        return frame(getattr(self, name), kinds[name])


def cells(grid: GridConfig) -> list[tuple[str, Condition, int]]:
    return [(t, c, s) for t in grid.tasks for c in grid.all_conditions for s in grid.seeds]


def collect(grid: GridConfig, out: Path, *, progress: bool = False) -> tuple[list[RunRow], list[PositionRow]]:
    """Train and analyse every cell not analysed yet (resumable); return all cells' rows."""
    runs: list[RunRow] = []
    positions: list[PositionRow] = []
    todo = cells(grid)
    bar = tqdm(todo, desc="canonical grid", disable=not progress, dynamic_ncols=True)
    for task, cond, seed in bar:
        bar.set_postfix_str(f"{task}/{cond.name}/seed{seed}", refresh=False)
        path = out / "runs" / task / cond.name / f"seed{seed}"
        cache = path / ANALYSIS_FILE
        cfg = run_config(grid, task, cond, seed)
        data = json.loads(cache.read_text()) if cache.is_file() else None
        if data is None or data.get("grid") != _analysis_key(grid):
            run, seconds = train_cell(path, cfg)
            data = {"grid": _analysis_key(grid), **analyse_cell(grid, run, task, cond, seed, seconds)}
            atomic_write_text(cache, json.dumps(data, indent=1) + "\n")
        runs += [RunRow.from_csv(r) for r in data["runs"]]
        positions += [PositionRow.from_csv(p) for p in data["positions"]]
    return runs, positions


def _analysis_key(grid: GridConfig) -> dict[str, Any]:
    """The grid fields an analysis depends on beyond the run's own config (a change re-analyses, never retrains)."""
    keys = ("n_eval_per_position", "length_factors", "n_score", "n_geometry")
    return {k: list(v) if isinstance(v, tuple) else v for k, v in grid.to_dict().items() if k in keys}


def wmax_rows(n_content: int = 16, beta: float = 8.0) -> list[WmaxRow]:
    """Theorem 7's curves (:func:`~possym.canonical.theorem7.theorem7_curves`) as rows."""
    return [
        WmaxRow(shape=c.shape, **{k: v for k, v in r.items()})  # type: ignore[arg-type]
        for c in theorem7_curves(n_content=n_content, beta=beta)
        for r in c.records()
    ]


def run_grid(grid: GridConfig, out: str | Path, *, progress: bool = False) -> GridResults:
    """Train, analyse and report the whole grid into ``out`` (resumable); see the module docstring.

    Writes ``results.csv``, ``positions.csv``, ``theorem7.csv``, ``claims.csv``, ``grid.json`` and
    the figures ``fig_*.png``/``.svg``; returns the same as records.
    """
    from possym.canonical.claims import canonical_claims
    from possym.canonical.plots import save_figures
    from possym.records import records_csv

    t0 = time.perf_counter()
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out / "grid.json", json.dumps(grid.to_dict(), indent=1) + "\n")
    threads = torch.get_num_threads()
    if grid.threads is not None:  # the loop does not set it; 2 threads on a shared core ran 30x slower
        torch.set_num_threads(grid.threads)
    try:
        runs, positions = collect(grid, out, progress=progress)
    finally:
        torch.set_num_threads(threads)
    wmax = wmax_rows()
    claims = canonical_claims(grid, runs, positions, wmax, rng=np.random.default_rng(18))
    atomic_write_text(out / "results.csv", records_csv(runs))
    atomic_write_text(out / "positions.csv", records_csv(positions))
    atomic_write_text(out / "theorem7.csv", records_csv(wmax))
    atomic_write_text(out / "claims.csv", records_csv(claims))
    save_figures(grid, runs, positions, wmax, out)
    return GridResults(runs, positions, wmax, claims, time.perf_counter() - t0)
