"""Read what a reproduction directory holds into the typed records the report and claims take.

Layout (``possym reproduce --out DIR``): ``DIR/{number,letter}`` are run directories (``possym train``,
``score``, ``lengthgen``; ``discrepancy`` writes into ``RUN/theory``), and ``DIR/theory`` holds
``possym theory``'s tables. A table that is not there yet reads as empty.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from possym.records import (
    BoundCheckRecord,
    Fig5aRecord,
    LengthPoint,
    PurityRecord,
    ScoreRecord,
    Table1Record,
    VerificationRecord,
    read_records,
)
from possym.report.claims import Evidence, TaskEvidence
from possym.runs import RunDir, read_csv, typed_row
from possym.stages.lengthgen import points_at

TASK_DIRS = ("number", "letter")


def table(path: Path) -> list[dict[str, Any]]:
    return [typed_row(r) for r in read_csv(path)] if path.exists() else []


def _label(run: RunDir, step: int | None) -> str:
    """How a claim names a checkpoint: "best 4800", "final 6750", or "best = final 6750"."""
    if step is None:
        return ""
    steps = run.checkpoint_steps()
    names = [n for n, s in (("best", run.best()), ("final", steps[-1] if steps else None)) if s == step]
    return f"{' = '.join(names) or 'step'} {step}"


def task_evidence(run: RunDir) -> TaskEvidence:
    """A run's tables; the length curve at the best checkpoint (as the authors evaluated), the final one beside."""
    steps = run.checkpoint_steps()
    final = steps[-1] if steps else None
    points = run.read("lengthgen", LengthPoint)
    best = run.best() if steps else None
    at_best = points_at(points, best) if best is not None and any(p.step == best for p in points) else []
    at_final = points_at(points, final) if final is not None else []
    curve = at_best or at_final
    curve_step = best if at_best else (final if at_final else None)
    scores = run.read("scores", ScoreRecord)
    table1 = run.read("table1", Table1Record)
    return TaskEvidence(
        n_layers=run.config.model.n_layers,
        metrics=run.metrics(),
        purity=run.read("purity", PurityRecord),
        scores=scores,
        table1=table1,
        lengthgen=curve,
        lengthgen_final=at_final if at_best and best != final else [],
        lengthgen_step=_label(run, curve_step),
        scores_step=_label(run, max((r.step for r in scores), default=None)),
        table1_step=_label(run, table1[0].step if table1 else None),
    )


def load_evidence(out: Path) -> Evidence:
    tasks = {
        name: task_evidence(RunDir.open(out / name)) for name in TASK_DIRS if (out / name / "config.yaml").exists()
    }
    theory = out / "theory"
    return Evidence(
        tasks=tasks,
        bounds=read_records(theory / "bounds.csv", BoundCheckRecord),
        verification=read_records(theory / "verification.csv", VerificationRecord),
        fig5a=read_records(theory / "fig5a.csv", Fig5aRecord),
    )
