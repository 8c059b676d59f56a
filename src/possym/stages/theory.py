"""The theory stage (Theorems 3.1–3.2, Remark 3.1 as code) and the trained heads' discrepancy.

:func:`theory_tables` writes, in ``out`` (the theory stage's: ``OUT/theory``; :func:`read_theory` reads them back):
  verification.csv     T_Index / T_Retrieval run through the model code, against the oracles (hard, softmax)
  violations.csv       the theorem's conditions violated: where the failures start
  beta.csv             the exact smallest softmax beta per n0, Lemma F.1's sufficient beta, the witness checks
  witnesses.csv        Remark 3.1's swap pairs and the heads run on them
  discrepancy.csv      exact discrepancy per (function, definition, domain, n) with Theorem 3.2's bound
  bounds.csv           where each bound holds and fails; counterexamples.csv: a concrete input per failure
  fig5a.csv            Theorem 3.2's bounds for n = 1..100 (the curves of the paper's Fig. 5A)
  theory_fig5a.{png,svg}, theory_discrepancy.{png,svg}, theory_beta.{png,svg}

:func:`trained_discrepancy_run` writes, in RUN/theory: discrepancy_heads.csv, discrepancy_accuracy.csv,
discrepancy_summary.csv and discrepancy_heads.{png,svg}, each row naming the checkpoint step it was measured at;
:func:`replot_discrepancy` redraws the summary and the figure from the first two.

Both stages return their tables and print a line of progress per part (into the run's log in an experiment).

Example:
    >>> from possym.experiment import run_stage                                # doctest: +SKIP
    >>> result = run_stage("out", "theory", TheoryConfig(quick=True)).result   # doctest: +SKIP
    >>> result.ok, len(result.tables["bounds"])                               # doctest: +SKIP
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from possym.config import ConfigError
from possym.errors import PossymError
from possym.records import (
    BoundCheckRecord,
    DiscrepancyAccuracyRecord,
    DiscrepancyHeadRecord,
    DiscrepancySummaryRecord,
    Fig5aRecord,
    Record,
    VerificationRecord,
    WitnessRecord,
    read_records,
    records_csv,
    table_record,
)
from possym.runs import ARTIFACTS, RunDir, StepSpec, atomic_write_text, save_figure
from possym.stages.registry import Execution, Stage, StageContext

Log = Callable[[str], None]

# Every theory table's row type, by file stem: a record class where the claims read it by field, else a spec line
# (its columns and their types; ? : a blank is None).
THEORY_RECORDS: dict[str, type[Record]] = {
    "verification": VerificationRecord,
    "violations": VerificationRecord,
    "bounds": BoundCheckRecord,
    "fig5a": Fig5aRecord,
    "witnesses": WitnessRecord,
    "beta": table_record("theory/beta.csv", "function:str setting:str theta:float n0:int beta_star:float "
                         "binding_case:str beta_lemma_f1:float checked:str failures_above:int? "
                         "witness_fails_above:bool? witness_fails_below:bool? witness:str"),
    "discrepancy": table_record("theory/discrepancy.csv", "function:str definition:str domain:str theta:float n:int "
                                "discrepancy:float bound:float holds:bool premise:bool"),
    "counterexamples": table_record("theory/counterexamples.csv", "function:str definition:str domain:str n:int "
                                    "discrepancy:float measured_on_input:float bound:float input:str"),
}


def _quiet(_line: str) -> None:
    return None


@dataclass(frozen=True)
class TheoryConfig(Execution):
    """n_max: largest input length for the discrepancy; samples: random / task inputs per setting;
    quick: small settings only (a smoke run of about a minute)."""

    n_max: int = 5000
    samples: int = 10_000
    seed: int = 0
    quick: bool = False

    def __post_init__(self) -> None:
        if self.n_max < 2:
            raise ConfigError(f"theory n_max={self.n_max} must be >= 2")
        if self.samples < 1:
            raise ConfigError(f"theory samples={self.samples} must be >= 1")


@dataclass(frozen=True)
class TheoryResult:
    tables: dict[str, list[dict[str, Any]]]  # file stem -> rows
    seconds: float

    @property
    def off_expectation(self) -> list[dict[str, Any]]:
        """Verification rows off expectation: a finding for the claims table, not a crash."""
        return [r for r in self.tables["verification"] + self.tables["violations"] if not r["ok"]]

    @property
    def ok(self) -> bool:
        return not self.off_expectation


THEORY_TABLES = ("verification", "violations", "beta", "witnesses", "discrepancy", "bounds", "counterexamples", "fig5a")


def read_theory(out: Path) -> TheoryResult:
    """The tables :func:`theory_tables` wrote into ``out``, read back (a missing one as no rows), with 0 seconds:
    what the theory stage gives when its memo has it done."""
    tables: dict[str, list[dict[str, Any]]] = {}
    for name in THEORY_TABLES:
        path = Path(out) / f"{name}.csv"
        tables[name] = [r.to_dict() for r in read_records(path, THEORY_RECORDS[name])]
    return TheoryResult(tables, 0.0)


def _dense_grid(n_max: int) -> np.ndarray:
    """Every n up to 300, every 10th to 1000, every 50th beyond: where the costly reductions are evaluated."""
    grid = np.concatenate([np.arange(2, 301), np.arange(310, 1001, 10), np.arange(1050, n_max + 1, 50)])
    return np.unique(grid[grid <= n_max])


def theory_tables(cfg: TheoryConfig, out: Path, log: Log = _quiet) -> TheoryResult:
    """Run every check of the theory section and write its tables and figures into ``out``."""
    from possym.theory import discrepancy as disc
    from possym.theory import plots, tables

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(cfg.seed)
    samples = min(cfg.samples, 300) if cfg.quick else cfg.samples
    n_max = min(cfg.n_max, 400) if cfg.quick else cfg.n_max
    t0 = time.perf_counter()
    written: dict[str, list[dict[str, Any]]] = {}

    def write(name: str, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        atomic_write_text(out / f"{name}.csv", records_csv([THEORY_RECORDS[name].from_dict(r) for r in rows]))
        log(f"  wrote {out / name}.csv ({len(rows)} rows)")
        written[name] = rows
        return rows

    log("Theorem 3.1: the constructions against the oracles")
    write("verification", tables.verification_records(tables.input_sets(samples, rng, quick=cfg.quick)))
    write("violations", tables.violation_records(quick=cfg.quick))
    log("Smallest softmax beta per n0")
    beta = write("beta", tables.beta_records(tables.beta_settings(cfg.quick), samples, rng))
    log("Remark 3.1: swap pairs")
    write("witnesses", tables.witness_records(rng))
    log(f"Theorem 3.2: exact discrepancy for n <= {n_max}")
    rows = write("discrepancy", disc.discrepancy_records(n_max=n_max, retrieval_ns=_dense_grid(n_max),
                                                          index_ns=np.arange(2, n_max + 1)))
    write("bounds", disc.bound_checks(rows))
    write("counterexamples", tables.counterexample_records(rows))
    fig5a = write("fig5a", disc.fig5a_records())
    for stem, fig in (
        ("theory_fig5a", plots.fig5a_figure(fig5a, rows)),
        ("theory_discrepancy", plots.discrepancy_figure(rows)),
        ("theory_beta", plots.beta_figure(beta)),
    ):
        for path in save_figure(fig, out / stem):
            log(f"  wrote {path}")
    return TheoryResult(written, time.perf_counter() - t0)


def _name(key: str) -> str:
    """The file name of a discrepancy artifact (inside RUN/theory, or the ``out`` given)."""
    return Path(ARTIFACTS[key].name).name


@dataclass(frozen=True)
class DiscrepancyConfig(Execution):
    """extras: extra-token counts (None: :data:`possym.theory.trained.DEFAULT_EXTRAS`); samples: task
    instances per extra length; step: the checkpoint (a number, ``"best"`` or ``"final"``). Runs on the CPU
    unless ``device`` says (MPS has no float64)."""

    extras: tuple[int, ...] | None = None
    samples: int = 32
    seed: int = 0
    dtype: str = "float32"
    step: StepSpec = "final"

    def __post_init__(self) -> None:
        if self.dtype not in ("float32", "float64"):
            raise ConfigError(f"discrepancy dtype={self.dtype!r}; allowed: 'float32', 'float64'")
        if self.samples < 1:
            raise ConfigError(f"discrepancy samples={self.samples} must be >= 1")
        if self.extras is not None:
            if not all(isinstance(x, int) and x >= 0 for x in self.extras):
                raise ConfigError(f"discrepancy extras={list(self.extras)} must be integers >= 0")
            object.__setattr__(self, "extras", tuple(self.extras))


@dataclass(frozen=True)
class DiscrepancyResult:
    heads: list[DiscrepancyHeadRecord]
    accuracy: list[DiscrepancyAccuracyRecord]
    summary: list[DiscrepancySummaryRecord]
    step: int
    out: Path


def trained_discrepancy_run(ctx: StageContext, cfg: DiscrepancyConfig) -> DiscrepancyResult:
    """Top-minus-second attention score of the run's heads against extra length, at ``cfg.step``, into
    RUN/theory; a line of progress per part goes to stdout (the run's log in an experiment)."""
    return _measured(ctx, cfg, print)


def _measured(ctx: StageContext, cfg: DiscrepancyConfig, log: Log) -> DiscrepancyResult:
    from possym.theory.trained import DEFAULT_EXTRAS, trained_discrepancy

    run = ctx.run
    step = run.resolve_step(cfg.step)
    model = ctx.model(step, dtype=torch.float64 if cfg.dtype == "float64" else torch.float32)
    extras = DEFAULT_EXTRAS if cfg.extras is None else cfg.extras
    log(f"{run.path}: {run.config.task.name} task, step {step}, {model.cfg.n_layers} layers; extras {list(extras)}, "
        f"{cfg.samples} samples each")
    heads, accuracy = trained_discrepancy(model, run.config.task, extras, cfg.samples, np.random.default_rng(cfg.seed))
    return _discrepancy_tables(run, heads, accuracy, step, log)


def replot_discrepancy(run: RunDir, log: Log = _quiet) -> DiscrepancyResult:
    """The summary and the figure of the run's discrepancy drawn again from the tables in RUN/theory (the caller
    holds the run's writer lock: :meth:`possym.Run.discrepancy` with ``replot=True``)."""
    where = run.artifact("discrepancy_heads").parent
    heads = [r.to_dict() for r in read_records(where / _name("discrepancy_heads"), DiscrepancyHeadRecord)]
    accuracy = [r.to_dict() for r in read_records(where / _name("discrepancy_accuracy"), DiscrepancyAccuracyRecord)]
    if not heads:
        raise PossymError(f"{where / _name('discrepancy_heads')} is missing or empty; measure it first")
    return _discrepancy_tables(run, heads, accuracy, heads[0]["step"], log)


def read_discrepancy(run: RunDir) -> DiscrepancyResult:
    """The tables of the run's discrepancy, as the stage wrote them into RUN/theory (what it gives when its memo
    has it done)."""
    where = run.artifact("discrepancy_heads").parent
    heads = read_records(where / _name("discrepancy_heads"), DiscrepancyHeadRecord)
    if not heads:
        raise PossymError(f"{where / _name('discrepancy_heads')} is missing or empty; measure it first")
    return DiscrepancyResult(heads, read_records(where / _name("discrepancy_accuracy"), DiscrepancyAccuracyRecord),
                             read_records(where / _name("discrepancy_summary"), DiscrepancySummaryRecord),
                             heads[0].step, where)


def _discrepancy_tables(run: RunDir, heads: list[dict[str, Any]], accuracy: list[dict[str, Any]], step: int,
                        log: Log) -> DiscrepancyResult:
    from possym.theory import plots
    from possym.theory.trained import collapse_summary

    out = run.artifact("discrepancy_heads").parent
    out.mkdir(parents=True, exist_ok=True)
    task = run.config.task
    summary = collapse_summary(heads, accuracy)
    at = {"task": task.name, "step": step}
    result = DiscrepancyResult([DiscrepancyHeadRecord.from_dict({**r, **at}) for r in heads],
                               [DiscrepancyAccuracyRecord.from_dict({**r, **at}) for r in accuracy],
                               [DiscrepancySummaryRecord.from_dict({**r, **at}) for r in summary], step, out)
    for name, records in (("discrepancy_heads", result.heads), ("discrepancy_accuracy", result.accuracy),
                          ("discrepancy_summary", result.summary)):
        atomic_write_text(out / _name(name), records_csv(records))
        log(f"  wrote {out / _name(name)} ({len(records)} rows)")
    fig = plots.trained_figure(heads, accuracy, task.name, title=f"{run.path.name}: step {step}")
    for path in save_figure(fig, out / Path(_name("discrepancy_heads")).stem):
        log(f"  wrote {path}")
    return result


def _theory_stage(ctx: StageContext, cfg: TheoryConfig) -> TheoryResult:
    return theory_tables(cfg, ctx.exp.path / "theory", log=print)


STAGES = (
    Stage("theory", TheoryConfig, _theory_stage, scope="experiment",
          summary="Theorem 3.1's constructions, Remark 3.1, Theorem 3.2's bounds (into OUT/theory)"),
    Stage("discrepancy", DiscrepancyConfig, trained_discrepancy_run, scope="run", device="cpu",
          summary="discrepancy of the trained heads against extra length"),
)
