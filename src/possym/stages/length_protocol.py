"""The length protocol measured rather than chosen (Sec. 3.6 leaves it open; docs/choices.md): a run's length
curves under every reading, and the table of how each reading moves the paper's length claims.

- ``length_protocol`` (run scope): :func:`protocol_curves` loads each checkpoint of its settings and calls
  :func:`possym.evaluate.lengthgen.protocol_readings` (the length curve for each extra-token reading, each
  hop-mix reading derived from the per-hop rows), on a grid that holds both the paper's K values and
  K = L − 17 for each paper length L (so the x-axis can be read as K or as total length). RUN/length_protocol/
  curves.csv (length-curve rows plus ``extra_tokens``, ``hop_mix``, ``checkpoint``, ``step``) and
  settings.json (the settings and the checkpoints, written by the executor; whether the stage is done is the
  run's memo's to say, :func:`possym.experiment.run_stage`).
- ``length_protocol_table`` (experiment scope): :func:`protocol_table` reads every run's curves and writes
  EXP/length_protocol/claims.csv (:func:`possym.report.length_protocol.length_claim_table`: per claim and
  reading, the seeds' mean, range and verdict) and claims_by_reading.csv (one row per claim, a column per
  reading).

Defaults are modest (100 windows per point, 4 prefixes); the paper-scale reading is ``n: 500,
n_prefixes: 8``. On a CPU the grid (56 K values up to 5,000) costs minutes per reading and run.

Example:
    >>> from possym.experiment import run_stage                                             # doctest: +SKIP
    >>> runs = [RunDir.open(f"runs/paper3/runs/{t}-s{s}")                                  # doctest: +SKIP
    ...         for t in ("number", "letter") for s in (0, 1, 2)]
    >>> cfg = STAGES[0].from_overrides(["length_protocol.n=500", "length_protocol.n_prefixes=8"])  # doctest: +SKIP
    >>> for run in runs:                                                                    # doctest: +SKIP
    ...     _ = run_stage(run, "length_protocol", cfg)
    >>> claims_by_reading(protocol_table(runs))                                             # doctest: +SKIP
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from possym.config import ConfigError
from possym.evaluate.lengthgen import EXTRA_TOKENS, HOP_MIXES, PAPER_GRID, LengthGenConfig, protocol_readings
from possym.records import ProtocolValueRecord, table_csv, table_record
from possym.report.length_protocol import claims_by_reading, length_claim_table, length_claim_values
from possym.runs import RunDir, StepSpec, atomic_write_text
from possym.stages.registry import Execution, Stage, StageContext
from possym.tasks import get_task

SUBDIR = "length_protocol"
CURVES = "length_protocol_curves"  # the run artifact RUN/length_protocol/curves.csv
# EXP/length_protocol/claims.csv, one length claim graded over the seeds under one reading (length_claim_table;
# paper blank for the ordering claim): a table code writes, never reads back by field, so a spec line.
CLAIMS = table_record("length_protocol/claims.csv", "claim:str extra_tokens:str hop_mix:str checkpoint:str x_axis:str "
                      "paper:float seeds:int mean:float min:float max:float verdict:str cell:str")
WINDOW = 17  # tokens of the paper's window: the total-length axis reads K = L - 17
PROTOCOL_GRID: tuple[int, ...] = tuple(sorted(set(PAPER_GRID) | {k - WINDOW for k in PAPER_GRID if k >= WINDOW}))


@dataclass(frozen=True)
class LengthProtocolConfig(Execution):
    """Settings of the length-protocol stages: the readings (``extra_tokens`` x ``hop_mixes`` x ``steps``),
    and the protocol's windows, ``curve`` (:class:`~possym.evaluate.lengthgen.LengthGenConfig`: grid, n,
    n_prefixes, seed, token_budget, mode; flat in the words, ``length_protocol.n=500``). The readings are the
    curve's ``extra_tokens`` and ``hop_mix`` each in turn, so those two of the curve's are not settings here."""

    curve: LengthGenConfig = field(default_factory=lambda: LengthGenConfig(grid=PROTOCOL_GRID, n=100, n_prefixes=4))
    extra_tokens: tuple[str, ...] = ("targets", "mixed", "windows")
    hop_mixes: tuple[str, ...] = HOP_MIXES
    steps: tuple[StepSpec, ...] = ("best", "final")

    def __post_init__(self) -> None:
        if self.curve.hop_mix != LengthGenConfig.hop_mix:
            raise ConfigError(f"length_protocol hop_mix={self.curve.hop_mix!r}: the protocol reads every hop mix "
                              f"of hop_mixes; give length_protocol.hop_mixes=[{self.curve.hop_mix}]")
        for name, given, allowed in (("extra_tokens", self.extra_tokens, EXTRA_TOKENS),
                                     ("hop_mixes", self.hop_mixes, HOP_MIXES)):
            bad = [x for x in given if x not in allowed]
            if not given or bad:
                raise ConfigError(f"length_protocol {name}={list(given)}: each one of {allowed}, at least one")
        for step in self.steps:
            if not (isinstance(step, int) or step in ("best", "final")):
                raise ConfigError(f"length_protocol steps: {step!r}; allowed: step numbers, 'best', 'final'")

    def reading(self, extra_tokens: str) -> LengthGenConfig:
        """The windows of the reading whose extra tokens are ``extra_tokens``."""
        return dataclasses.replace(self.curve, extra_tokens=extra_tokens)  # type: ignore[arg-type]


def protocol_curves(ctx: StageContext, cfg: LengthProtocolConfig) -> pd.DataFrame:
    """The run's length curves under every reading of ``cfg`` (module docstring), measured into
    RUN/length_protocol/curves.csv."""
    run = ctx.run
    steps = {str(s): run.resolve_step(s) for s in cfg.steps}
    frames = []
    measured: dict[int, pd.DataFrame] = {}  # best and final may be one checkpoint: measured once
    for name, at in steps.items():
        if at not in measured:
            readings = {x: cfg.reading(x) for x in cfg.extra_tokens}
            measured[at] = protocol_readings(ctx.model(at), run.config.task, readings, cfg.hop_mixes)
        frames.append(measured[at].assign(checkpoint=name, step=at))
    curves = pd.concat(frames, ignore_index=True)
    ctx.write_table(CURVES, curves)  # through its record: a changed column is refused
    ctx.record(steps=steps)
    return curves


def read_protocol_curves(runs: Iterable[RunDir]) -> pd.DataFrame:
    """Every run's protocol curves, with its ``task``, ``seed`` (the init seed) and ``run`` columns."""
    frames = []
    for run in runs:
        if not run.artifact(CURVES).is_file():
            raise ConfigError(f"{run.path}: no {SUBDIR}/curves.csv; run the length_protocol stage on it first")
        frames.append(run.read_table(CURVES).assign(task=run.config.task.name, seed=run.config.seeds.init,
                                                    run=run.path.name))
    if not frames:
        raise ConfigError("no runs to read length-protocol curves from")
    return pd.concat(frames, ignore_index=True)


def protocol_table(runs: Iterable[RunDir], out: str | Path | None = None) -> pd.DataFrame:
    """The claims table over ``runs`` (:func:`possym.report.length_protocol.length_claim_table`, the chance
    levels from each task), written into ``out``/length_protocol/ when ``out`` (a directory) is given."""
    runs = list(runs)
    curves = read_protocol_curves(runs)
    chance = {r.config.task.name: get_task(r.config.task.name).chance(r.config.task) for r in runs}
    table = length_claim_table(curves, chance)
    if out is not None:
        where = Path(out) / SUBDIR
        atomic_write_text(where / "claims.csv", table_csv(table, CLAIMS, "claims.csv"))
        # The one-table view: a column per reading, so no record of its own.
        atomic_write_text(where / "claims_by_reading.csv", claims_by_reading(table).to_csv())
        # Per seed, so that the claims table grades each reading by the rule of the day (possym regrade).
        atomic_write_text(where / "values.csv", table_csv(length_claim_values(curves), ProtocolValueRecord,
                                                          "values.csv"))
    return table


def _table_stage(ctx: StageContext, cfg: LengthProtocolConfig) -> list[dict[str, Any]]:
    runs = [r for r in ctx.exp.runs.values() if r.artifact(CURVES).is_file()]
    if not runs:
        return []
    return protocol_table(runs, ctx.exp.path).to_dict("records")


STAGES = (
    Stage("length_protocol", LengthProtocolConfig, protocol_curves, scope="run", record=SUBDIR,
          summary="length curves under every reading of the protocol (extra tokens, hop mix, checkpoint, x-axis)"),
    Stage("length_protocol_table", LengthProtocolConfig, _table_stage, scope="experiment", always=True,
          summary="how each reading of the length protocol moves the paper's length claims, over the seeds"),
)
