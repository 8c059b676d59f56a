"""``possym train --seeds`` as an experiment: one task, its seeds, the training stage alone, in the executor's layout.

Run by :func:`~possym.experiment.run_experiment`, seed s of :func:`training` trains into ``OUT/runs/TASK-sS``,
the run a reproduction or a sweep with the same settings holds, so that a later experiment over ``OUT``
finds it trained (the runs that can share a step train as one group, as in any experiment).
:func:`stored_seed_runs` is the training a directory holds, to resume it: that of ``OUT/experiment.yaml``.

Example:
    >>> exp = seed_runs("number", (0, 2), "quick", ["train.lr=3e-4", "training.monitor=false"])
    >>> [r.id for r in exp.runs()], exp.stage("training").monitor, exp.runs()[1].config().seeds.init
    (['number-s0', 'number-s2'], False, 2)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path

import yaml

from possym.config import EXECUTION_KEYS, TrainConfig, config_from_dict
from possym.config import apply_overrides as apply_run_overrides
from possym.devices import resolve_device
from possym.errors import ConfigError, EarlierLayoutError, RunError, did_you_mean
from possym.experiment.executor import EXPERIMENT_FILE, older_layout
from possym.experiment.spec import Experiment, apply_overrides, experiment_from_dict, train_overrides
from possym.runs import CONFIG, RunDir
from possym.settings import parse_override
from possym.stages.registry import get_stage

# The run keys a resume may change: train.steps (to train on; RunDir.train_on) and the execution keys, which say
# how a run runs, not what it computes (threads, device, ...). Any other would change what the steps taken computed.
RESUME_KEYS = ("train.steps", *(f"train.{f.name}" for f in dataclasses.fields(TrainConfig) if f.name in EXECUTION_KEYS))


def resume_run(path: str | Path, overrides: Sequence[str] = (), argv: list[str] | None = None) -> RunDir:
    """The run at ``path``, ready to train on with ``overrides`` (its run keys; :func:`train_overrides` splits
    off the training stage's): ``train.steps=N`` trains it on to N steps (:meth:`~possym.runs.RunDir.train_on`,
    recorded in its history), and the execution keys (:data:`RESUME_KEYS`) set how it runs this session. Any
    other key would change what the steps already taken computed, and is refused, naming those allowed."""
    run = RunDir.open(path)
    values: dict[str, object] = {}
    for item in overrides:
        section, name, value = parse_override(item)
        key = f"{section}.{name}"
        if key not in RESUME_KEYS:
            raise ConfigError(f"--resume {path} {key}=...: {key} would change what the run's steps computed, so it "
                              f"stays as {Path(path) / CONFIG} has it; a resume takes train.steps=N (to train on) and "
                              f"the execution keys ({', '.join(RESUME_KEYS[1:])}){did_you_mean(key, RESUME_KEYS)}; "
                              "train a new run with --out for other settings")
        values[name] = value
    steps = values.pop("steps", None)
    if values:  # checked as any run config is: a wrong type or value is refused, naming the key
        run = run.session(config_from_dict(apply_run_overrides(run.config.to_dict(),
                                                               [f"train.{k}={v}" for k, v in values.items()])))
    if steps is not None:
        asked = config_from_dict(apply_run_overrides(run.config.to_dict(), [f"train.steps={steps}"])).train.steps
        run = run.train_on(int(asked or 0), argv=argv)
    return run


def seed_runs(task: str, seeds: Sequence[int], preset: str | None = None, overrides: Sequence[str] = ()) -> Experiment:
    """The experiment that trains ``task`` at ``seeds`` (seed s sets ``seeds.data = seeds.init = seeds.order =
    seeds.dropout = s``) with ``overrides``: the runs' (``train.lr=3e-4``) and the training stage's
    (``training.monitor=false``, :class:`~possym.stages.training.TrainStageConfig`). A device this machine lacks is
    refused here, before any run directory is made."""
    run, stage = train_overrides(list(overrides))
    if any(o.startswith("seeds.") for o in run):
        raise ConfigError("--seeds sets every seed (seeds.data, init, order, dropout); drop the seeds.* overrides")
    # threads=None: each run trains with its own train.threads, as a run trained alone does.
    exp = Experiment(preset=preset, tasks=(task,), seeds=tuple(seeds), overrides=tuple(run),
                     stages=(("training", stage),), retries=0, threads=None, name="training")
    resolve_device(exp.runs()[0].config().train.device)
    from possym.train.tracking import require_tracker

    require_tracker(exp.runs()[0].config().train.log)  # a tracker whose package is missing, too
    return exp


def stored_seed_runs(out: str | Path, overrides: Sequence[str] = ()) -> Experiment:
    """The training of the experiment in ``out`` (its runs and its training stage; its other stages left out),
    with the training stage's ``overrides`` (``training.monitor=false``); a run's own keys would make other runs
    and are refused."""
    out = Path(out)
    run, _ = train_overrides(list(overrides))
    if run:
        raise ConfigError(f"{run}: the runs of {out} are fixed by their config.yaml; give only the training stage's "
                          "keys (training.monitor, training.group, training.memory_budget_mb, training.progress)")
    earlier = older_layout(out)
    if earlier is not None:
        raise EarlierLayoutError(f"{out} holds {earlier}; upgrade it once with `possym migrate {out}`, then resume")
    if (out / EXPERIMENT_FILE).is_file():
        exp = experiment_from_dict(yaml.safe_load((out / EXPERIMENT_FILE).read_text()))
    else:
        raise RunError(f"{out} is not a run directory (it has no {CONFIG}) nor an experiment directory (no "
                       f"{EXPERIMENT_FILE}); give the directory `possym train --out` made")
    train = dict(exp.stages).get("training", get_stage("training").settings_from({}))
    return apply_overrides(dataclasses.replace(exp, stages=(("training", train),), parts=()), list(overrides))


__all__ = ["RESUME_KEYS", "resume_run", "seed_runs", "stored_seed_runs"]
