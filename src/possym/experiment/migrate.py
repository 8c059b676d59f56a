"""``possym migrate DIR``: directories written by an earlier possym brought into today's layout, once.

Nothing on the run path reads an earlier layout: :func:`~possym.experiment.executor.run_experiment`, ``possym
train --resume`` and :meth:`possym.runs.RunDir.open` refuse one in a line that names it and this command. It
moves (renames within ``DIR``, never copies), rewrites what each earlier version saved, and records the finished
stages in the memo (:mod:`possym.stages.memo`) with the settings they were made with: a stage whose settings
have changed since runs again on the next call, as it would have then. What each layout was:

- a reproduction (``DIR/stages.json``, runs in ``DIR/{number,letter}``): each run moves to ``DIR/runs/TASK-s0``;
  its stages' old flat settings (``score_inputs``, ``lengthgen_grid``, ...) become the stages' typed settings;
  ``stages.json`` is kept as ``stages.v1.json``;
- a sweep (``DIR/trials/ID/STAGE.done`` with ``trial.json``): the runs stay in ``DIR/runs/ID``; each marked stage
  is recorded with the settings ``trial.json`` holds; ``trials/`` becomes ``trials.v1/``;
- the seeds of an older ``possym train --seeds`` (``DIR/seed{s}``): each moves to ``DIR/runs/TASK-sS``, and
  ``DIR/experiment.yaml`` records their training (``possym train --resume DIR`` reads it);
- a canonical grid (``DIR/runs/TASK/CONDITION/seedS`` with ``canonical.json``): each cell moves to
  ``DIR/runs/CONDITION-TASK-sS`` and its analysis is rewritten as the ``canonical_cell`` stage's;
- the memo of the first executor (``DIR/log/ID.json``): each run's entries move into the run's own memo,
  ``DIR/runs/ID/resume.json``; a per-step stage's records the checkpoints its settings asked for as done; the
  old file is kept as ``DIR/log.v1/ID.json``;
- a run's table whose column has been renamed since (:data:`RENAMED_COLUMNS`) gets today's header;
- a stage renamed since (:data:`possym.stages.memo.RENAMED_STAGES`: ``train`` is ``training``): its entries in the
  memos and its section of ``experiment.yaml`` take today's name;
- a run config saved before a key existed (:data:`SAVED_BEFORE_KEY`) or before its task had fields of its own
  (:data:`TASK_UPGRADES`): ``config.yaml``, ``meta.json``, each checkpoint's header and ``state.pt`` are rewritten with
  the values the run had then (its identity, a hash of those values, does not change).

Example:
    >>> import tempfile
    >>> migrate(tempfile.mkdtemp())  # a directory in today's layout: nothing to do
    []
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import Any

import torch
import yaml
from safetensors.torch import load as st_load
from safetensors.torch import save as st_save

from possym.config import RunConfig, config_from_dict, config_from_saved
from possym.errors import ConfigError, EarlierLayoutError, PossymError
from possym.experiment.executor import EXPERIMENT_FILE, older_layout, renamed_stages
from possym.experiment.spec import Experiment, dump_experiment
from possym.locks import writer_lock
from possym.runs import (
    CKPT_DIR,
    CONFIG,
    META,
    STATE,
    STATE_RUN,
    RunDir,
    atomic_write_bytes,
    atomic_write_text,
    config_text,
    identity_of,
    safetensors_metadata,
)
from possym.stages.memo import EXPERIMENT, MEMO_FILE, RENAMED_STAGES, ExperimentMemo, run_memo
from possym.stages.registry import Stage, get_stage
from possym.tasks import TASKS

# Columns of a run's tables renamed since they were written: (artifact, old name, new name).
RENAMED_COLUMNS = (("purity", "max_accuracy_step", "best_step"),)

# The values that keys absent from a saved config had when it was written: each key was added later, with the value
# that every earlier run had implicitly. Defaults changed since (to the paper preset's) must not re-read an old run
# as the new recipe.
SAVED_BEFORE_KEY: dict[str, Any] = {
    "model.embd_dropout": None,  # before the knob: embedding dropout was model.dropout
    "model.activation": "gelu_new",  # before the knob: the tanh GELU
    "train.eval_size": 1_200,
    "train.state_every": None,
}


def _window_task(section: dict[str, Any]) -> dict[str, Any]:
    """A number or letter task section saved before each task had its own fields: ``n_letters: null`` meant the
    task's own default, and ``n_ints`` (the letter task's) was carried along unused by the number task."""
    out = dict(section)
    if out.get("name") == "number":
        out.pop("n_ints", None)
    if out.get("n_letters", 0) is None:
        out.pop("n_letters")
    return out


def _canonical_task(section: dict[str, Any]) -> dict[str, Any]:
    """A canonical task section saved when the canonical tasks borrowed the window tasks' fields: ``n_target`` was
    the length, ``n_letters`` the symbols (null: the default), ``n_ints`` the attributes (Index has none)."""
    out = dict(section)
    if "n_target" in out:
        out["length"] = out.pop("n_target")
    if "n_letters" in out:
        letters = out.pop("n_letters")
        if letters is not None:
            out["n_symbols"] = letters
    if "n_ints" in out:
        out["n_attributes"] = out.pop("n_ints")
    for gone in ("n_pretarget", "min_hops", "max_hops", *(("n_attributes",) if out.get("name") == "index" else ())):
        out.pop(gone, None)
    return out


# How each task's section, as an earlier possym saved it, reads today (data keyed by the task's name).
TASK_UPGRADES = {"number": _window_task, "letter": _window_task, "index": _canonical_task,
                 "retrieval": _canonical_task, "induction": _canonical_task}


def migrate(path: str | Path) -> list[str]:
    """Bring the directory at ``path`` (an experiment directory, a part of one, or a run) into today's layout; returns
    what it did, a line per change (none: it was in today's layout). Holds the directory's writer lock."""
    path = Path(path)
    if not path.is_dir():
        raise PossymError(f"{path} is not a directory; give possym migrate an experiment or run directory")
    if (path / CONFIG).is_file():  # a run directory
        with writer_lock(path, "run"):
            return _upgrade_run(path)
    notes: list[str] = []
    with writer_lock(path, "experiment"):
        # Every run's own files first, wherever the earlier layout keeps it: the moves below open the runs.
        for config in sorted(path.rglob(CONFIG)):
            with writer_lock(config.parent, "run"):
                notes += _upgrade_run(config.parent)
        # The experiment's own layout, then each part's (a reproduction's canonical grid in DIR/canonical).
        for out in [path, *(p for p in sorted(path.iterdir()) if p.is_dir() and older_layout(p) is not None)]:
            notes += _layout(out)
    return notes


def _layout(out: Path) -> list[str]:
    done: list[str] = []
    if (out / "stages.json").is_file():
        done += _reproduction(out)
    if (out / "trials").is_dir():
        done += _sweep(out)
    if _seed_runs(out):
        done += _seeds(out)
    if any(p.is_file() for p in (out / "runs").glob("*/*/seed*/canonical.json")):
        done += _canonical(out)
    renamed = _renamed_entries(out / EXPERIMENT_FILE) + _renamed_entries(out / "log" / f"{EXPERIMENT}.json")
    return done + _run_logs(out) + renamed


# ---- a run's own files ----------------------------------------------------------------------------------------

def upgraded_config(data: dict[str, Any]) -> dict[str, Any]:
    """A run config saved by any possym, as today's reads it: a key it lacks holds the value it had then
    (:data:`SAVED_BEFORE_KEY`), each task section read through its upgrade (:data:`TASK_UPGRADES`).

    >>> old = {"task": {"name": "number", "n_letters": None, "n_ints": 4}, "model": {}, "train": {}}
    >>> new = upgraded_config(old)
    >>> new["model"]["activation"], "n_ints" in new["task"], "n_letters" in new["task"]
    ('gelu_new', False, False)
    """
    data = {k: dict(v) if isinstance(v, dict) else v for k, v in data.items()}
    for key, value in SAVED_BEFORE_KEY.items():
        section, name = key.split(".")
        if isinstance(data.get(section), dict):
            data[section].setdefault(name, value)
    task = data.get("task")
    if isinstance(task, dict) and task.get("name") in TASK_UPGRADES:
        data["task"] = TASK_UPGRADES[task["name"]](task)
    return data


def _today(data: dict[str, Any]) -> RunConfig:
    """An earlier possym's saved config as today's: the values it had then, and today's defaults for the keys
    added since with the value every earlier run had (``train.log``, ...)."""
    return config_from_dict(upgraded_config(data))


def _stale(data: Any) -> bool:
    """Whether a saved config is an earlier possym's: it lacks a key, or an upgrade changes it."""
    if not isinstance(data, dict):
        return False
    if upgraded_config(data) != data:
        return True
    try:
        config_from_saved(data)
    except EarlierLayoutError:
        return True
    except ConfigError:
        return False  # damaged, not old: left for the run's own refusal to name
    return False


def _upgrade_run(run: Path) -> list[str]:
    """Rewrite each saved config of ``run`` that an earlier possym wrote (module docstring), and rename the old
    columns of its tables."""
    notes: list[str] = []
    saved = yaml.safe_load((run / CONFIG).read_text())
    if _stale(saved):
        config = _today(saved)
        meta = json.loads((run / META).read_text()) if (run / META).is_file() else {}
        identity = str(meta.get("identity") or identity_of(config))
        atomic_write_text(run / CONFIG, config_text(config, identity))
        notes.append(f"{run / CONFIG}: rewritten with the values the run had when it was made")
    meta_file = run / META
    if meta_file.is_file():
        meta = json.loads(meta_file.read_text())
        if _stale(meta.get("config")):
            meta["config"] = _today(meta["config"]).to_dict()
            atomic_write_text(meta_file, json.dumps(meta, indent=2) + "\n")
            notes.append(f"{meta_file}: its recorded config rewritten likewise")
    for ckpt in sorted((run / CKPT_DIR).glob("*.safetensors")):
        notes += _upgrade_checkpoint(ckpt)
    if (run / STATE).is_file():
        state = torch.load(run / STATE, weights_only=False, map_location="cpu")
        entry = state.get(STATE_RUN) if isinstance(state, dict) else None
        if isinstance(entry, dict) and _stale(entry.get("config")):
            entry["config"] = _today(entry["config"]).to_dict()
            tmp = run / f".{STATE}.migrate.tmp"
            torch.save(state, tmp)
            os.replace(tmp, run / STATE)
            notes.append(f"{run / STATE}: its recorded config rewritten likewise")
    return notes + _columns(run) + _renamed_entries(run / MEMO_FILE)


def _renamed_entries(file: Path) -> list[str]:
    """The stages a memo file (a run's, or an experiment's ``log/experiment.json``) or an ``experiment.yaml``
    names by an old name (:data:`~possym.stages.memo.RENAMED_STAGES`), renamed in place, their order kept."""
    old = renamed_stages(file) if file.is_file() else []
    if not old:
        return []
    if file.suffix == ".yaml":
        data = yaml.safe_load(file.read_text())
        data["stages"] = {RENAMED_STAGES.get(k, k): v for k, v in data["stages"].items()}
        atomic_write_text(file, yaml.safe_dump(data, sort_keys=False))
    else:
        data = json.loads(file.read_text())
        data["stages"] = {RENAMED_STAGES.get(k, k): v for k, v in data["stages"].items()}
        atomic_write_text(file, json.dumps(data, indent=1) + "\n")
    return [f"{file}: stage {name} renamed {RENAMED_STAGES[name]}" for name in old]


def _upgrade_checkpoint(path: Path) -> list[str]:
    """A checkpoint whose header's config an earlier possym wrote, written again with today's (its tensors as they
    were, bit for bit)."""
    data = path.read_bytes()
    header = safetensors_metadata(data)
    if "config" not in header:
        return []
    config = json.loads(header["config"])
    if not _stale(config):
        return []
    header = {**header, "config": json.dumps(_today(config).to_dict())}
    atomic_write_bytes(path, st_save(st_load(data), metadata=header))
    return [f"{path}: its header's config rewritten likewise"]


def _columns(run: Path) -> list[str]:
    """Rename the columns of the run's tables that were written under an older name (the header only)."""
    from possym.runs import ARTIFACTS

    notes = []
    for artifact, old, new in RENAMED_COLUMNS:
        table = run / ARTIFACTS[artifact].name
        if not table.is_file():
            continue
        lines = table.read_text().split("\n", 1)
        header = lines[0].split(",")
        if old in header:
            header[header.index(old)] = new
            atomic_write_text(table, ",".join(header) + "\n" + (lines[1] if len(lines) > 1 else ""))
            notes.append(f"{table}: column {old} is now {new}")
    return notes


# ---- the layouts of directories ---------------------------------------------------------------------------------

def _seed_runs(out: Path) -> list[Path]:
    """The run directories ``OUT/seed{s}`` of an older ``possym train --seeds``, in seed order."""
    found = [p for p in out.glob("seed*") if p.name[4:].isdigit() and (p / CONFIG).is_file()]
    return sorted(found, key=lambda p: int(p.name[4:]))


def _seeds(out: Path) -> list[str]:
    """Move each ``OUT/seed{s}`` to ``OUT/runs/TASK-sS`` and record their training as ``OUT/experiment.yaml``."""
    log, notes, moved = ExperimentMemo(out), [], []
    for old in _seed_runs(out):
        task = yaml.safe_load((old / CONFIG).read_text())["task"]["name"]
        rid = f"{task}-s{int(old.name[4:])}"
        if (out / "runs" / rid).exists():
            notes.append(f"left {old}: {out / 'runs' / rid} exists")
            continue
        notes.append(_move_run(old, out, rid, log))
        moved.append(out / "runs" / rid)
    if moved and not (out / EXPERIMENT_FILE).is_file():
        atomic_write_text(out / EXPERIMENT_FILE, dump_experiment(_training_of([RunDir.open(p) for p in moved])))
        notes.append(f"wrote {out / EXPERIMENT_FILE}: the training of {len(moved)} seed(s)")
    return notes


def _training_of(runs: list[RunDir]) -> Experiment:
    """The training whose runs are ``runs`` (one task, seed s in ``TASK-sS``), each key of their configs an
    override, so that every run is recognised as the experiment's (:func:`possym.runs.ensure_run`)."""
    first = runs[0].config
    seeds = tuple(int(r.path.name.rpartition("-s")[2]) for r in runs)
    overrides = tuple(f"{section}.{key}={json.dumps(value)}" for section in ("task", "model", "train")
                      for key, value in dataclasses.asdict(getattr(first, section)).items()
                      if (section, key) != ("task", "name"))
    return Experiment(preset=None, tasks=(first.task.name,), seeds=seeds, overrides=overrides,
                      stages=(("training", get_stage("training").settings_from({})),), retries=0, threads=None,
                      name="train")


def _move_run(old: Path, out: Path, run_id: str, log: ExperimentMemo) -> str:
    """Move an older layout's run directory to ``OUT/runs/ID``, its training marked done if it finished."""
    new = out / "runs" / run_id
    new.parent.mkdir(parents=True, exist_ok=True)
    os.replace(old, new)
    if RunDir.open(new).finished:
        _mark(log, run_id, "training", get_stage("training").settings_from({}))
    return f"moved {old} to {new}"


def _run_logs(out: Path) -> list[str]:
    """Move each run's entries from ``OUT/log/ID.json`` into the run's memo (module docstring); an entry the
    run's memo holds already is newer and stays."""
    notes = []
    for file in sorted((out / "log").glob("*.json")):
        if file.stem == EXPERIMENT:
            continue
        run = out / "runs" / file.stem
        if (run / CONFIG).is_file():
            memo = run_memo(run)
            entries = json.loads(file.read_text()).get("stages", {})
            with memo.update() as stages:
                for old, entry in entries.items():
                    name = RENAMED_STAGES.get(old, old)
                    moved = None if name in stages else _per_step_entry(run, name, entry)
                    if moved is not None:
                        stages[name] = moved
            notes.append(f"moved the memo {file} into {memo.file}")
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


def _mark(log: ExperimentMemo, owner: str, name: str, old: Any) -> bool:
    """Record stage ``name`` done for ``owner`` with ``old``, the settings it ran with (typed): the memo reruns it
    where today's differ."""
    stage = get_stage(name)
    try:
        steps = None if owner == EXPERIMENT else _steps(stage, log.out / "runs" / owner, old)
    except PossymError:
        return False
    log.memo(owner).mark_done(name, stage.key_of(old), steps=steps)
    return True


def _ints(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in str(text).split(","))


def _reproduction(out: Path) -> list[str]:
    from possym.evaluate.lengthgen import LengthGenConfig
    from possym.stages.data import AuditConfig
    from possym.stages.lengthgen import LengthStageConfig
    from possym.stages.score import ScoreConfig
    from possym.stages.theory import DiscrepancyConfig, TheoryConfig

    record = json.loads((out / "stages.json").read_text())
    settings, stages = record["settings"], record["stages"]
    status = {name: info.get("status") for name, info in stages.items()}
    log, notes = ExperimentMemo(out), []
    typed = {
        "score": ScoreConfig(n_inputs=settings["score_inputs"]),
        "discrepancy": DiscrepancyConfig(extras=_ints(settings["discrepancy_extras"]),
                                         samples=settings["discrepancy_samples"], step="best"),
        "lengthgen": LengthStageConfig(curve=LengthGenConfig(grid=_ints(settings["lengthgen_grid"]),
                                                             n=settings["lengthgen_n"],
                                                             n_prefixes=settings["lengthgen_prefixes"]),
                                       steps=("best", "final")),
    }
    for task in TASKS:
        old = out / task
        if not (old / CONFIG).is_file():
            continue
        rid = f"{task}-s0"  # a single-seed reproduction's runs were seed 0's
        notes.append(_move_run(old, out, rid, log))
        for name, cfg in typed.items():
            if status.get(f"{name}:{task}") == "done" and _mark(log, rid, name, cfg):
                notes.append(f"{rid}: {name} recognised as done")
    if status.get("data") == "done":
        _mark(log, EXPERIMENT, "data", AuditConfig())
    if status.get("theory") == "done":
        _mark(log, EXPERIMENT, "theory", TheoryConfig(quick=settings["theory"] == "quick"))
    os.replace(out / "stages.json", out / "stages.v1.json")
    return notes


def _sweep(out: Path) -> list[str]:
    log, notes = ExperimentMemo(out), []
    for state in sorted((out / "trials").iterdir()):
        trial = state / "trial.json"
        if not trial.is_file():
            continue
        recorded = json.loads(trial.read_text()).get("stages", {})
        for marker in state.glob("*.done"):
            name = marker.stem
            if name == "train":
                _mark(log, state.name, "training", get_stage("training").settings_from({}))
                continue
            # "force" was a setting of some stages; redo is the executor's now, and force never changed a result
            plain = {k: v for k, v in (recorded.get(name) or {}).items() if k != "force"}
            if name == "lengthgen" and "curve" in plain:  # the stage's nested form, flattened
                plain = {**plain.pop("curve"), **plain}
            try:
                old = get_stage(name).settings_from(plain)
            except ValueError:
                continue  # a stage whose settings no longer exist reruns
            if _mark(log, state.name, name, old):
                notes.append(f"{state.name}: {name} recognised as done")
    os.replace(out / "trials", out / "trials.v1")
    return notes


def _canonical(out: Path) -> list[str]:
    from possym.canonical.grid import CanonicalCellConfig

    log, notes = ExperimentMemo(out), []
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
        rewritten = {"settings": {**dataclasses.asdict(cfg), "length_factors": list(cfg.length_factors)},
                     "accuracy": {f: a for f, a in accuracy.items() if int(f) in cfg.length_factors},
                     "positions": [{k: int(p[k]) for k in ("length", "position", "correct", "total")}
                                   for p in positions],
                     "heads": heads, "train_s": float(first["train_s"])}
        atomic_write_text(new / "canonical.json", json.dumps(rewritten, indent=1) + "\n")
        if RunDir.open(new).finished:
            _mark(log, new.name, "training", get_stage("training").settings_from({"monitor": False, "progress": False}))
        _mark(log, new.name, "canonical_cell", cfg)
    for task_dir in (out / "runs").iterdir():  # the emptied TASK/CONDITION folders
        if task_dir.is_dir() and not (task_dir / CONFIG).exists():
            for cond_dir in task_dir.iterdir():
                if cond_dir.is_dir() and not any(cond_dir.iterdir()):
                    cond_dir.rmdir()
            if not any(task_dir.iterdir()):
                task_dir.rmdir()
    return notes


__all__ = ["RENAMED_COLUMNS", "SAVED_BEFORE_KEY", "TASK_UPGRADES", "migrate", "upgraded_config"]
