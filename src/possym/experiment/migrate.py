"""Output directories written before the executor, read once into its layout: nothing finished is redone.

Older layouts, each recognised by a file only it had, and moved (renames within ``OUT``, never
copies) and recorded in the resume log (:mod:`possym.stages.log`) with the settings it was made
with. An entry is recorded only where those settings are today's: a finished stage whose settings
have since changed runs again, as it would have then.

- a reproduction (``OUT/stages.json``, runs in ``OUT/{number,letter}``): each run moves to
  ``OUT/runs/TASK-sSEED``; its stages' old flat settings (``score_inputs``, ``lengthgen_grid``, ...)
  become the stages' typed settings; ``stages.json`` is kept as ``stages.v1.json``;
- a sweep (``OUT/trials/ID/STAGE.done`` with ``trial.json``): the runs stay in ``OUT/runs/ID``; each
  marked stage is recorded with the settings ``trial.json`` holds; ``trials/`` becomes ``trials.v1/``;
- a group of seeds trained by an older ``possym train --seeds`` (``OUT/seed{s}``, run directories beside no
  ``runs/``): each run moves to ``OUT/runs/TASK-sS`` where the experiment has that run with its config (one
  with another config stays, and the executor makes the experiment's own);
- a canonical grid (``OUT/runs/TASK/CONDITION/seedS`` with ``canonical.json``): each cell moves to
  ``OUT/runs/CONDITION-TASK-sS`` and its analysis is rewritten as the ``canonical_cell`` stage's;
- a run's table whose column has been renamed since (:data:`RENAMED_COLUMNS`) gets today's header;
- the resume log of the first executor (``OUT/log/ID.json``, a run's entries beside the run): each run's
  entries move into the run's own memo, ``OUT/runs/ID/resume.json``, which the CLI consults too; a per-step
  stage's (``score``, ``lengthgen``) records the checkpoints its settings asked for as done; the old file
  is kept as ``OUT/log.v1/ID.json``.

:func:`migrate` is called by :func:`~possym.experiment.executor.run_experiment` on every call and does
nothing on a directory already in today's layout.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from possym.errors import PossymError
from possym.experiment.config import Experiment
from possym.runs import CONFIG, RunDir, atomic_write_text, config_differences
from possym.stages.log import EXPERIMENT, ResumeLog, run_memo
from possym.stages.registry import Stage, get_stage

# Columns of a run's tables renamed since they were written: (artifact, old name, new name).
RENAMED_COLUMNS = (("purity", "max_accuracy_step", "best_step"),)


def migrate(out: Path, exp: Experiment) -> list[str]:
    """Bring ``out`` into today's layout for ``exp``; returns what it did, one line per change."""
    out = Path(out)
    done: list[str] = []
    if (out / "stages.json").is_file():
        done += _reproduction(out, exp)
    if (out / "trials").is_dir():
        done += _sweep(out, exp)
    if older_seed_runs(out):
        done += _seeds(out, exp)
    if any(p.is_file() for p in (out / "runs").glob("*/*/seed*/canonical.json")):
        done += _canonical(out, exp)
    done += _run_logs(out)
    return done + _columns(out)  # after the moves: the runs are all in OUT/runs now


def older_seed_runs(out: str | Path) -> list[Path]:
    """The run directories ``OUT/seed{s}`` of an older ``possym train --seeds``, in seed order."""
    found = [p for p in Path(out).glob("seed*") if p.name[4:].isdigit() and (p / CONFIG).is_file()]
    return sorted(found, key=lambda p: int(p.name[4:]))


def _seeds(out: Path, exp: Experiment) -> list[str]:
    """Move each ``OUT/seed{s}`` to the experiment's run of its task and seed, where that run has its config."""
    log, notes = ResumeLog(out), []
    specs = {(spec.task, spec.seed): spec for spec in exp.runs() if spec.variant == ""}
    for old in older_seed_runs(out):
        run = RunDir.open(old)
        spec = specs.get((run.config.task.name, int(old.name[4:])))
        if spec is None or (out / "runs" / spec.id).exists() or config_differences(run.config, spec.config()):
            notes.append(f"left {old}: the experiment has no run of its task, seed and config")
            continue
        notes.append(_move_run(old, out, spec.id, log, exp))
    return notes


def _move_run(old: Path, out: Path, run_id: str, log: ResumeLog, exp: Experiment) -> str:
    """Move an older layout's run directory to ``OUT/runs/ID``, its training marked done if it finished."""
    new = out / "runs" / run_id
    new.parent.mkdir(parents=True, exist_ok=True)
    os.replace(old, new)
    if RunDir.open(new).finished:
        _mark(log, run_id, "train", get_stage("train").settings_from({}), exp)
    return f"moved {old} to {new}"


def _run_logs(out: Path) -> list[str]:
    """Move each run's entries from ``OUT/log/ID.json`` into the run's memo (module docstring); an entry the
    run's memo holds already is newer and stays."""
    notes = []
    for file in sorted((out / "log").glob("*.json")):
        if file.stem == EXPERIMENT:
            continue
        run = out / "runs" / file.stem
        if (run / "config.yaml").is_file():
            memo = run_memo(run)
            entries = json.loads(file.read_text()).get("stages", {})
            with memo.update() as stages:
                for name, entry in entries.items():
                    moved = None if name in stages else _per_step_entry(run, name, entry)
                    if moved is not None:
                        stages[name] = moved
            notes.append(f"moved the resume log {file} into {memo.file}")
        (out / "log.v1").mkdir(exist_ok=True)
        os.replace(file, out / "log.v1" / file.name)
    return notes


def _per_step_entry(run: Path, name: str, entry: dict[str, Any]) -> dict[str, Any] | None:
    """An old entry as today's: a per-step stage's ``steps`` setting becomes the checkpoints done (None: the
    entry is dropped and the stage reruns, when its settings no longer read)."""
    try:
        stage = get_stage(name)
    except PossymError:
        return entry  # a stage of a notebook's, not registered now: kept as it was
    if not stage.per_step:
        return entry
    settings = dict(entry["settings"])
    try:
        steps = _steps(stage, run, stage.settings_from(settings)) if entry["status"] == "done" else []
    except (PossymError, ValueError, TypeError):
        return None
    settings.pop("steps", None)
    return {**entry, "settings": settings, "steps": steps}


def _steps(stage: Stage, run: Path, cfg: Any) -> list[int] | None:
    """The checkpoints of ``run`` a per-step stage's ``cfg`` asks for (None for another stage)."""
    return sorted(stage.steps_of(RunDir.open(run), cfg)) if stage.per_step else None


def _columns(out: Path) -> list[str]:
    """Rename the columns of the runs' tables that were written under an older name (the header only)."""
    from possym.runs import ARTIFACTS

    notes = []
    for artifact, old, new in RENAMED_COLUMNS:
        for table in sorted((out / "runs").glob(f"*/{ARTIFACTS[artifact].name}")):
            lines = table.read_text().split("\n", 1)
            header = lines[0].split(",")
            if old in header:
                header[header.index(old)] = new
                atomic_write_text(table, ",".join(header) + "\n" + (lines[1] if len(lines) > 1 else ""))
                notes.append(f"{table}: column {old} is now {new}")
    return notes


def _mark(log: ResumeLog, owner: str, name: str, old: Any, exp: Experiment) -> bool:
    """Record stage ``name`` done for ``owner`` if ``old`` (its settings then, typed) are today's."""
    if name not in exp.stage_names:
        return False
    stage = get_stage(name)
    key = stage.key_of(old)
    if key != stage.key_of(exp.stage(name)):
        return False
    try:
        steps = None if owner == EXPERIMENT else _steps(stage, log.out / "runs" / owner, old)
    except PossymError:
        return False
    log.mark_done(owner, name, key, steps=steps)
    return True


def _ints(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in str(text).split(","))


def _reproduction(out: Path, exp: Experiment) -> list[str]:
    from possym.evaluate.lengthgen import LengthGenConfig
    from possym.stages.data import AuditConfig
    from possym.stages.lengthgen import LengthStageConfig
    from possym.stages.score import ScoreConfig
    from possym.stages.theory import DiscrepancyConfig, TheoryConfig

    record = json.loads((out / "stages.json").read_text())
    settings, stages = record["settings"], record["stages"]
    status = {name: info.get("status") for name, info in stages.items()}
    log, notes = ResumeLog(out), []
    typed = {
        "score": ScoreConfig(n_inputs=settings["score_inputs"]),
        "discrepancy": DiscrepancyConfig(extras=_ints(settings["discrepancy_extras"]),
                                         samples=settings["discrepancy_samples"], step="best"),
        "lengthgen": LengthStageConfig(curve=LengthGenConfig(grid=_ints(settings["lengthgen_grid"]),
                                                             n=settings["lengthgen_n"],
                                                             n_prefixes=settings["lengthgen_prefixes"]),
                                       steps=("best", "final")),
    }
    by_task = {spec.task: spec for spec in exp.runs() if spec.seed == 0}
    for task, spec in by_task.items():
        old = out / task
        if not (old / "config.yaml").is_file():
            continue
        notes.append(_move_run(old, out, spec.id, log, exp))
        for name, cfg in typed.items():
            if status.get(f"{name}:{task}") == "done" and _mark(log, spec.id, name, cfg, exp):
                notes.append(f"{spec.id}: {name} recognised as done")
    if status.get("data") == "done":
        _mark(log, EXPERIMENT, "data", AuditConfig(), exp)
    if status.get("theory") == "done":
        _mark(log, EXPERIMENT, "theory", TheoryConfig(quick=settings["theory"] == "quick"), exp)
    os.replace(out / "stages.json", out / "stages.v1.json")
    return notes


def _sweep(out: Path, exp: Experiment) -> list[str]:
    log, notes = ResumeLog(out), []
    for state in sorted((out / "trials").iterdir()):
        trial = state / "trial.json"
        if not trial.is_file():
            continue
        recorded = json.loads(trial.read_text()).get("stages", {})
        for marker in state.glob("*.done"):
            name = marker.stem
            if name == "train":
                _mark(log, state.name, "train", get_stage("train").settings_from({}), exp)
                continue
            # "force" was a setting of some stages; redo is the executor's now, and force never changed a result
            plain = {k: v for k, v in (recorded.get(name) or {}).items() if k != "force"}
            if name == "lengthgen" and "curve" in plain:  # the stage's nested form, flattened
                plain = {**plain.pop("curve"), **plain}
            try:
                old = get_stage(name).settings_from(plain)
            except ValueError:
                continue  # a stage whose settings no longer exist reruns
            if _mark(log, state.name, name, old, exp):
                notes.append(f"{state.name}: {name} recognised as done")
    os.replace(out / "trials", out / "trials.v1")
    return notes


def _canonical(out: Path, exp: Experiment) -> list[str]:
    from possym.canonical.grid import CanonicalCellConfig

    log, notes = ResumeLog(out), []
    for cache in sorted((out / "runs").glob("*/*/seed*/canonical.json")):
        cell = cache.parent
        task, cond, seed = cell.parent.parent.name, cell.parent.name, int(cell.name.removeprefix("seed"))
        new = out / "runs" / f"{cond}-{task}-s{seed}"
        os.replace(cell, new)
        notes.append(f"moved {cell} to {new}")
        data = json.loads((new / "canonical.json").read_text())
        key, runs, positions = data["grid"], data["runs"], data["positions"]
        cfg = CanonicalCellConfig(key["n_eval_per_position"], tuple(key["length_factors"]), key["n_score"],
                                  key["n_geometry"])
        first = runs[0]
        heads = {k: [float(r[k]) if k not in ("dominant_id",) else int(r[k]) for r in runs]
                 for k in ("s_pos", "s_sym", "entropy", "dominant_id", "dominant_s_pos", "dominant_s_sym",
                           "key_collapse", "query_alignment", "query_alignment_shuffled")}
        accuracy = {"1": float(first["acc"]), "2": float(first["acc_2x"]), "4": float(first["acc_4x"])}
        rewritten = {"settings": {**_asdict(cfg), "length_factors": list(cfg.length_factors)},
                     "accuracy": {f: a for f, a in accuracy.items() if int(f) in cfg.length_factors},
                     "positions": [{k: int(p[k]) for k in ("length", "position", "correct", "total")}
                                   for p in positions],
                     "heads": heads, "train_s": float(first["train_s"])}
        atomic_write_text(new / "canonical.json", json.dumps(rewritten, indent=1) + "\n")
        run = RunDir.open(new)
        if run.finished:
            _mark(log, new.name, "train", get_stage("train").settings_from({"monitor": False, "progress": False}),
                  exp)
        _mark(log, new.name, "canonical_cell", cfg, exp)
    for task_dir in (out / "runs").iterdir():  # the emptied TASK/CONDITION folders
        if task_dir.is_dir() and not (task_dir / "config.yaml").exists():
            for cond_dir in task_dir.iterdir():
                if cond_dir.is_dir() and not any(cond_dir.iterdir()):
                    cond_dir.rmdir()
            if not any(task_dir.iterdir()):
                task_dir.rmdir()
    return notes


def _asdict(cfg: Any) -> dict[str, Any]:
    import dataclasses

    return dataclasses.asdict(cfg)
