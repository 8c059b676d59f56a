"""The ``cliff`` stage: a number run's length cliff measured at one checkpoint (Sec. 3.6, Fig. 5B) by
:func:`possym.evaluate.cliff.cliff_tables`, whose docstring states the hypothesis (RoPE plane 1 aliasing a
key 44 tokens back) and what would refute it. The stage loads the model, picks the positional layers from
the run's purity table, calls the library and writes RUN/cliff/ (artifact ``cliff``; each table ``cliff_{name}``):
``accuracy.csv``, ``accuracy_hops.csv`` and ``accuracy_first_key.csv`` (:mod:`possym.evaluate.breakdown`: by
answer position, pooled, by the first hop target's position), ``landing.csv``, ``landing_summary.csv`` and
``plane_margins.csv`` (:mod:`possym.evaluate.landing`; p_alias is plane 1's), ``gated.csv`` (accuracy with plane p
gated in each positional layer; layer −1, plane 0: the model as it is), ``evidence.csv``
(:mod:`possym.evaluate.alias_evidence`) and ``settings.json``. A task whose hops do not read by position
(``Task.mechanism``) is skipped, and nothing is written. See docs/reproduce.md, "Stages".

Example:
    >>> from possym.experiment import run_stage                                          # doctest: +SKIP
    >>> result = run_stage(RunDir.open("runs/paper3/runs/number-s0"), "cliff").result    # doctest: +SKIP
    >>> result.landing_summary.query("correct == False and query == 0")                  # doctest: +SKIP"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from possym.config import ConfigError
from possym.errors import PossymError
from possym.evaluate.breakdown import fine_grid
from possym.evaluate.cliff import cliff_tables
from possym.evaluate.lengthgen import LengthGenConfig
from possym.records import GAMMA, PurityRecord
from possym.runs import RunDir, StepSpec
from possym.stages.registry import Execution, Stage, StageContext
from possym.tasks import get_task

__all__ = ["CliffConfig", "CliffResult", "cliff_run", "positional_layers"]


@dataclass(frozen=True)
class CliffConfig(Execution):
    """Settings of the cliff stage. Small by default (a few minutes on a CPU); the paper-scale measurement
    is ``n=480, n_prefixes=8, gate_every=1`` (each (K, hop count) point then has 60 windows per answer
    position).

    start, stop, every: the K grid start..stop step ``every`` (25..70 step 1).
    n, n_prefixes, seed: windows per (K, hop count) point, the prefixes they share, the seed
        (:class:`~possym.evaluate.lengthgen.LengthGenConfig`).
    step: the checkpoint (``"best"``: the paper's model).
    layers: the positional layers to look at; None: those whose purity at the last scored step is
        positional (γ = 0.1, last-token query; RUN/purity.csv, so score the run first), else those ever
        pure positional.
    planes: the planes gated, one at a time, in each of those layers.
    gate_every: the gated curves use every ``gate_every``-th K of the grid (1: all of it).
    queries: the landing's queries: ``"hops"`` (every hop position) or ``"last"``.
    max_alias: aliases are sought in 1..max_alias tokens for planes 1 and 2 (θ = 1: 44; θ = 0.866: 29).
    mode: ``"cached"`` (lengthgen's shared-prefix cache: only each window's 17 tokens are run, about 4
        times less work at K ≈ 50) or ``"plain"`` (each K's windows in one batched full forward pass;
        fewer calls, better when there are few windows per point); both measure the same windows.
    """

    start: int = 25
    stop: int = 70
    every: int = 1
    n: int = 48
    n_prefixes: int = 4
    seed: int = 0
    step: StepSpec = "best"
    layers: tuple[int, ...] | None = None
    planes: tuple[int, ...] = (1, 2)
    gate_every: int = 5
    queries: str = "hops"
    max_alias: int = 100
    mode: str = "cached"
    token_budget: int = 2**18

    def __post_init__(self) -> None:
        fine_grid(self.start, self.stop, self.every)  # validates the grid
        if self.gate_every < 1:
            raise ConfigError(f"cliff gate_every={self.gate_every} must be >= 1")
        if self.mode not in ("plain", "cached"):
            raise ConfigError(f"cliff mode={self.mode!r}; allowed: 'plain', 'cached'")
        if self.queries not in ("hops", "last"):
            raise ConfigError(f"cliff queries={self.queries!r}; allowed: 'hops', 'last'")
        if not self.planes or any(p < 1 for p in self.planes):
            raise ConfigError(f"cliff planes={self.planes}: 1-based plane IDs, at least one")
        if not (isinstance(self.step, int) or self.step in ("best", "final")):
            raise ConfigError(f"cliff step={self.step!r}; allowed: a checkpoint step, 'best', 'final'")

    def curve(self, grid: tuple[int, ...] | None = None) -> LengthGenConfig:
        """The windows' settings on ``grid`` (default: the fine grid)."""
        return LengthGenConfig(grid=grid or fine_grid(self.start, self.stop, self.every), n=self.n,
                               n_prefixes=self.n_prefixes, seed=self.seed, token_budget=self.token_budget,
                               mode=self.mode)  # type: ignore[arg-type]


@dataclass(frozen=True)
class CliffResult:
    """What :func:`cliff_run` measured (empty frames and ``skipped`` set on a run it does not apply to)."""

    step: int | None
    layers: tuple[int, ...]
    aliases: dict[int, int]  # plane ID -> alias distance
    accuracy: pd.DataFrame = field(default_factory=pd.DataFrame)
    accuracy_hops: pd.DataFrame = field(default_factory=pd.DataFrame)
    landing: pd.DataFrame = field(default_factory=pd.DataFrame)
    landing_summary: pd.DataFrame = field(default_factory=pd.DataFrame)
    gated: pd.DataFrame = field(default_factory=pd.DataFrame)
    evidence: pd.DataFrame = field(default_factory=pd.DataFrame)
    plane_margins: pd.DataFrame = field(default_factory=pd.DataFrame)
    skipped: str = ""


def positional_layers(run: RunDir, gamma: float = GAMMA) -> tuple[int, ...]:
    """The layers whose head 0 ends pure positional at ``gamma`` (last-token query; RUN/purity.csv), else those
    ever pure positional; a PossymError if the run is not scored or no layer qualifies."""
    rows = [r for r in run.read("purity", PurityRecord) if r.gamma == gamma and r.query == "last" and r.head == 0]
    if not rows:
        raise PossymError(f"{run.path} has no purity table at gamma={gamma}: score it first (possym score RUN), "
                          "or give the cliff stage layers=[...]")
    final = tuple(sorted(r.layer for r in rows if r.final_kind == "positional"))
    ever = tuple(sorted(r.layer for r in rows if r.kind == "positional"))
    if not (final or ever):
        raise PossymError(f"{run.path}: no layer is ever pure positional at gamma={gamma}; give layers=[...]")
    return final or ever


def cliff_run(ctx: StageContext, cfg: CliffConfig) -> CliffResult:
    """Measure the cliff of a number run at ``cfg.step`` and write RUN/cliff/ (module docstring)."""
    run = ctx.run
    task = get_task(run.config.task.name)
    if task.mechanism != "positional":  # the aliasing below is of a key read by its offset
        return CliffResult(None, (), {}, skipped=f"the cliff stage measures a task whose hops read by position (the "
                                                 f"number task); task {task.name!r} declares mechanism "
                                                 f"{task.mechanism!r}")
    at = run.resolve_step(cfg.step)
    model = ctx.model(at)
    layers = tuple(sorted(set(cfg.layers))) if cfg.layers is not None else positional_layers(run)
    t = cliff_tables(model, run.config.task, cfg.curve(), layers, planes=cfg.planes, queries=cfg.queries,
                     max_alias=cfg.max_alias, gate_every=cfg.gate_every)
    for name in ("accuracy", "accuracy_hops", "accuracy_first_key", "landing", "landing_summary", "plane_margins",
                 "gated", "evidence"):
        ctx.write_table(f"cliff_{name}", getattr(t, name))  # through its record: a changed column is refused
    ctx.record(step_measured=at, layers_used=list(layers), aliases={str(p): a for p, a in t.aliases.items()})
    return CliffResult(at, layers, t.aliases, t.accuracy, t.accuracy_hops, t.landing, t.landing_summary, t.gated,
                       t.evidence, t.plane_margins)


STAGE = Stage("cliff", CliffConfig, cliff_run, scope="run", record="cliff",
              summary="the number model's length cliff: fine-K accuracy by hop and answer position, attention "
                      "landing of the positional layers, the curve with RoPE plane 1 or 2 gated")
