"""Read what a reproduction directory holds into the typed records the report and claims take.

Layout (``possym reproduce --out DIR``): ``DIR/{number,letter}`` are run directories (``possym train``,
``score``, ``lengthgen``; ``discrepancy`` writes into ``RUN/theory``), and ``DIR/theory`` holds
``possym theory``'s tables. A table that is not there yet reads as empty.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from possym.report.claims import Evidence, TaskEvidence
from possym.runs import RunDir, read_csv, typed_row

TASK_DIRS = ("number", "letter")


def table(path: Path) -> list[dict[str, Any]]:
    return [typed_row(r) for r in read_csv(path)] if path.exists() else []


def task_evidence(run: RunDir) -> TaskEvidence:
    p = run.path
    return TaskEvidence(
        n_layers=run.config.model.n_layers,
        metrics=run.metrics(),
        purity=table(p / "purity.csv"),
        scores=table(p / "scores.csv"),
        table1=table(p / "table1.csv"),
        lengthgen=table(p / "lengthgen.csv"),
    )


def load_evidence(out: Path) -> Evidence:
    tasks = {
        name: task_evidence(RunDir.open(out / name)) for name in TASK_DIRS if (out / name / "config.yaml").exists()
    }
    theory = out / "theory"
    return Evidence(
        tasks=tasks,
        bounds=table(theory / "bounds.csv"),
        verification=table(theory / "verification.csv"),
        fig5a=table(theory / "fig5a.csv"),
    )
