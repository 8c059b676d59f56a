"""The reproduction's report as a stage: ``report.html``, ``claims.csv``, ``figures/``, ``tables/`` from
whatever the other stages wrote (it reruns on every call).

Its runs are the experiment's, per task in seed order; the theory's tables are ``OUT/theory``, the
canonical grid ``OUT/canonical`` (when the reproduction has that part), and a sweep directory may be
added as a section (``report.sweep=DIR``).

Example:
    >>> from possym.stages.registry import get_stage
    >>> get_stage("report").always, get_stage("report").scope
    (True, 'experiment')
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from possym.stages.registry import Stage, StageContext


@dataclass(frozen=True)
class ReportConfig:
    """``title``: the page's title (default: the directory's name); ``sweep``: a ``possym sweep``
    directory to include as a section."""

    title: str = ""
    sweep: str | None = None


def report(ctx: StageContext, cfg: ReportConfig) -> Path:
    """Build the report of the experiment's directory; returns the page's path."""
    from possym.report.page import STAGE_ROW, build_report, require_sweep_dir
    from possym.stages.memo import ExperimentMemo

    exp = ctx.exp
    sweep = None if cfg.sweep is None else Path(cfg.sweep)
    if sweep is not None:
        require_sweep_dir(sweep)
    tasks = list(dict.fromkeys(exp.tasks.values()))
    runs = {task: exp.runs_of(task) for task in tasks}
    rows = [STAGE_ROW.from_dict({"stage": f"{r.stage}:{r.owner}" if r.owner != "experiment" else r.stage,
                                 "status": r.status, "seconds": r.seconds, "runs": r.attempts})
            for r in ExperimentMemo(exp.path).records() if r.stage != "report"]
    theory = exp.path / "theory"
    return build_report(exp.path, runs, theory_dir=theory if theory.is_dir() else None, stages=rows,
                        title=cfg.title, sweep=sweep)


STAGE = Stage("report", ReportConfig, report, scope="experiment", always=True,
              summary="report.html, claims.csv, figures/ and tables/ from what the other stages wrote")
