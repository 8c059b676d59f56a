"""Read trained runs, one per seed and task, into the typed records the report and claims take.

:func:`load_evidence` takes per task a list of run directories (one per seed; ``possym score``,
``lengthgen`` and ``discrepancy`` write into each) and the directory of ``possym theory``'s tables.
A table that is not there yet reads as empty. :func:`legacy_runs` reads the single-seed layout of
``possym reproduce`` (``DIR/{number,letter}``, ``DIR/theory``).

Example:
    >>> runs = {"number": [RunDir.open(f"runs/p/runs/number-s{s}") for s in (0, 1)]}  # doctest: +SKIP
    >>> ev = load_evidence(runs, Path("runs/p/theory"))                            # doctest: +SKIP
    >>> [te.seed for te in ev.tasks["number"]]                                      # doctest: +SKIP
    [0, 1]
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from possym.config import RunConfig
from possym.records import (
    BoundCheckRecord,
    Fig5aRecord,
    FinalScoreRecord,
    HopFlowRecord,
    LengthRecord,
    LengthSeedRecord,
    PlaneGeometryRecord,
    ProtocolValueRecord,
    PurityRecord,
    ScoreRecord,
    Table1Record,
    VerificationRecord,
    WitnessRecord,
    points_at,
    read_records,
)
from possym.report.claims import Evidence, TaskEvidence
from possym.runs import RunDir, read_csv, typed_row
from possym.tasks import get_task

TASK_DIRS = ("number", "letter")
HOP_FLOW, PLANE_GEOMETRY = "hop_flow.csv", "plane_geometry.csv"  # possym.scores.flow's tables (Fig. 3, Fig. 4B)


def table(path: Path) -> list[dict[str, Any]]:
    return [typed_row(r) for r in read_csv(path)] if path.exists() else []


def _label(run: RunDir, step: int | None) -> str:
    """How a claim names a checkpoint: "best 4800", "final 6750", or "best = final 6750"; on a run that did not
    finish, "final 140 (unfinished, of 400)"."""
    if step is None:
        return ""
    steps = run.checkpoint_steps()
    names = [n for n, s in (("best", run.best()), ("final", steps[-1] if steps else None)) if s == step]
    label = f"{' = '.join(names) or 'step'} {step}"
    # A run killed before its end has a last checkpoint, not a final one: every claim built on it says so.
    return label if run.finished else f"{label} (unfinished, of {run.config.total_steps})"


def run_seed(cfg: RunConfig) -> int:
    """A run's seed, as the report names it: its init seed (a reproduction sets every seed to the same number)."""
    return cfg.seeds.init


def chance(cfg: RunConfig) -> float:
    """A uniform guess's accuracy over the task's possible answers, as the task declares it
    (:attr:`possym.tasks.Task.chance`: 1/120 on the number task, 1/64 on the letter task)."""
    return get_task(cfg.task.name).chance(cfg.task)


def _curves(points: list[LengthRecord], best: int | None,
            final: int | None) -> tuple[list[LengthRecord], list[LengthRecord], int | None]:
    """(the length curve at the best checkpoint, else at the final one; the final one beside it where the two
    differ; the step of the first)."""
    at_best = points_at(points, best) if best is not None else []
    at_final = points_at(points, final) if final is not None else []
    step = best if at_best else final if at_final else None
    return at_best or at_final, at_final if at_best and best != final else [], step


def task_evidence(run: RunDir) -> TaskEvidence:
    """A run's tables; the length curve at the best checkpoint (as the authors evaluated), the final one beside."""
    steps = run.checkpoint_steps()
    final = steps[-1] if steps else None
    best = run.best() if steps else None
    curve, beside, curve_step = _curves(run.read("lengthgen", LengthRecord), best, final)
    scores = run.read("scores", ScoreRecord)
    table1 = run.read("table1", Table1Record)
    cfg = run.config
    return TaskEvidence(
        n_layers=cfg.model.n_layers,
        seed=run_seed(cfg),
        chance=chance(cfg),
        n_planes=cfg.model.n_planes,
        metrics=run.metrics_log(),
        purity=run.read("purity", PurityRecord),
        scores=scores,
        table1=table1,
        lengthgen=curve,
        lengthgen_final=beside,
        best_step=best,
        eval_every=cfg.train.eval_every,
        lengthgen_step=_label(run, curve_step),
        scores_step=_label(run, max((r.step for r in scores), default=None)),
        table1_step=_label(run, table1[0].step if table1 else None),
    )


def load_evidence(runs: Mapping[str, Sequence[RunDir]], theory_dir: Path | None) -> Evidence:
    """Per task, every run's evidence in seed order, and the theory's tables from ``theory_dir`` (None: none)."""
    tasks = {task: sorted((task_evidence(r) for r in dirs), key=lambda te: te.seed)
             for task, dirs in runs.items() if dirs}
    if theory_dir is None:
        return Evidence(tasks=tasks)
    return Evidence(
        tasks=tasks,
        bounds=read_records(theory_dir / "bounds.csv", BoundCheckRecord),
        verification=read_records(theory_dir / "verification.csv", VerificationRecord),
        fig5a=read_records(theory_dir / "fig5a.csv", Fig5aRecord),
    )


def legacy_runs(out: Path) -> dict[str, list[RunDir]]:
    """The runs of a single-seed reproduction directory: ``DIR/{task}``, each read as its one seed."""
    return {name: [RunDir.open(out / name)] for name in TASK_DIRS if (out / name / "config.yaml").exists()}


def _seed_table(tables: Path, task: str, seed: int, name: str) -> Path:
    return tables / f"{task}_s{seed}_{name}.csv"


def scored_at_hops(tables: Path) -> bool:
    """Whether a committed tables directory's experiment scored every checkpoint at the hop queries
    (``score: {hops: true}`` in its ``experiment.yaml``)."""
    path = tables / "experiment.yaml"
    spec = yaml.safe_load(path.read_text("utf-8")) if path.exists() else None
    score = ((spec or {}).get("stages") or {}).get("score") or {}
    return bool(score.get("hops", False))


def table_evidence(tables: Path, task: str, seed: int) -> TaskEvidence:
    """One seed's evidence from a reproduction's committed tables (``docs/reproduce_paper``: ``learning.csv``,
    ``final_scores.csv``, ``{task}_s{seed}_{purity,table1,lengthgen}.csv``), for regrading it by today's rules
    after its runs are gone. What the tables lack is left out: the per-checkpoint scores, unless exported
    (``{task}_s{seed}_scores.csv``; else purity onsets and sets come from the purity table, where every onset
    at the last token was recorded), and the training log (the first step at 0.9 of each accuracy comes from
    ``learning.csv``)."""
    from possym.config import load_config
    from possym.errors import PossymError

    purity = read_records(_seed_table(tables, task, seed, "purity"), PurityRecord)
    table1 = read_records(_seed_table(tables, task, seed, "table1"), Table1Record)
    if not purity:
        raise PossymError(f"{_seed_table(tables, task, seed, 'purity')}: no purity table for {task} seed {seed}")
    learning = [r for r in table(tables / "learning.csv") if (r["task"], r["seed"]) == (task, seed)]
    finals = [ScoreRecord(r.step, "last", r.layer, r.head, r.s_pos, r.s_sym, entropy=float("nan"), n_inputs=0)
              for r in read_records(tables / "final_scores.csv", FinalScoreRecord) if (r.task, r.seed) == (task, seed)]
    every = read_records(_seed_table(tables, task, seed, "scores"), ScoreRecord)  # exported with every checkpoint
    points = read_records(_seed_table(tables, task, seed, "lengthgen"), LengthRecord)
    best = purity[0].best_step
    final = max((p.step for p in points if p.step is not None), default=None)
    preset = yaml.safe_load((tables / "experiment.yaml").read_text("utf-8")).get("preset", "paper")
    cfg = load_config(task, preset)
    curve, beside, step = _curves(points, best, final)
    return TaskEvidence(
        n_layers=cfg.model.n_layers, seed=seed, chance=chance(cfg), n_planes=cfg.model.n_planes,
        purity=purity, scores=every or finals, table1=table1,
        lengthgen=curve, lengthgen_final=beside,
        best_step=best, eval_every=cfg.train.eval_every,
        solved={r["accuracy"]: None if r["first_step_0.9"] == "" else r["first_step_0.9"] for r in learning},
        trained_steps=cfg.total_steps,
        lengthgen_step="" if step is None else f"{'best' if step == best else 'final'} {step}",
        scores_step=f"final {max(r.step for r in every or finals)}" if every or finals else "",
        table1_step=f"step {table1[0].step}" if table1 else "",
    )


def tables_evidence(tables: Path) -> Evidence:
    """Every seed of a reproduction's committed tables (the seeds ``learning.csv`` lists), with the theory's tables
    (``theory_{bounds,verification,fig5a,witnesses}.csv``) and pooled length accuracies of seeds kept without
    their curves (``length_seeds.csv``), and the length claims' per-seed values under the protocol's other readings
    (``length_protocol_values.csv``)."""
    if not (tables / "learning.csv").exists() and (tables / HOP_FLOW).exists():
        # Fig. 3's and Fig. 4B's tables over many inputs (possym.scores.flow), read from trained checkpoints.
        return Evidence(hop_flow=read_records(tables / HOP_FLOW, HopFlowRecord),
                        geometry=read_records(tables / PLANE_GEOMETRY, PlaneGeometryRecord))
    seeds = sorted({(r["task"], r["seed"]) for r in table(tables / "learning.csv")})
    tasks: dict[str, list[TaskEvidence]] = {}
    for task, seed in seeds:
        tasks.setdefault(task, []).append(table_evidence(tables, task, seed))
    if scored_at_hops(tables):
        # Runs trained again to be scored at the hop queries read those claims only: their seed labels may repeat
        # the reproduction's, whose runs they are not.
        return Evidence(hop_queries=tasks)
    return Evidence(tasks=tasks,
                    bounds=read_records(tables / "theory_bounds.csv", BoundCheckRecord),
                    verification=read_records(tables / "theory_verification.csv", VerificationRecord),
                    fig5a=read_records(tables / "theory_fig5a.csv", Fig5aRecord),
                    length_seeds=read_records(tables / "length_seeds.csv", LengthSeedRecord),
                    protocol=read_records(tables / "length_protocol_values.csv", ProtocolValueRecord),
                    witnesses=read_records(tables / "theory_witnesses.csv", WitnessRecord))
