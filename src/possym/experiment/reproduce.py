"""``possym reproduce``: the paper's whole pipeline as an experiment, one seed or several, resumably.

The packaged reproductions are experiments (``possym/configs/experiments/{quick,paper,paper_v1}.yaml``):
the data audit, training with the live score monitor, the scores of every checkpoint, the theory,
the discrepancy of the trained heads, the length curves at the best and the final checkpoint, the
metric paper's canonical grid (a part, into ``OUT/canonical``) and the report. ``seeds`` adds run
directories (``OUT/runs/TASK-sSEED``); the claims grade the seed distribution.

Example:
    >>> exp = reproduction("quick", seeds=(0, 1), skip=("canonical", "theory"))
    >>> [r.id for r in exp.runs()], "theory" in exp.stage_names, dict(exp.parts)
    (['number-s0', 'letter-s0', 'number-s1', 'letter-s1'], False, {})
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from possym.errors import ConfigError
from possym.experiment.executor import ExperimentOutcome, run_experiment
from possym.experiment.spec import EXPERIMENT_DIR, Experiment, load_experiment

SKIPPABLE = ("data", "score", "theory", "discrepancy", "lengthgen", "cliff", "dilution", "l0", "length_protocol",
             "canonical")


def reproduction_presets() -> list[str]:
    """The presets ``possym reproduce`` knows: the packaged reproduction experiments."""
    return sorted(p.stem for p in EXPERIMENT_DIR.glob("*.yaml"))


def reproduction(preset: str, seeds: Sequence[int] | None = None, overrides: Sequence[str] = (),
                 skip: Sequence[str] = ()) -> Experiment:
    """The reproduction experiment of ``preset`` at ``seeds`` (None: the preset's), with ``overrides``
    (``train.precision=bf16``, ``lengthgen.n=200``) and without the stages in ``skip`` (of :data:`SKIPPABLE`)."""
    if preset not in reproduction_presets():
        raise ConfigError(f"reproduce preset {preset!r}; allowed: {reproduction_presets()}")
    bad = sorted(set(skip) - set(SKIPPABLE))
    if bad:
        raise ConfigError(f"unknown stage(s) to skip {bad}; allowed: {', '.join(SKIPPABLE)}")
    exp = load_experiment(preset, seeds=None if seeds is None else tuple(seeds), overrides=list(overrides))
    return dataclasses.replace(exp, stages=tuple((n, c) for n, c in exp.stages if n not in skip),
                               parts=tuple((n, p) for n, p in exp.parts if n not in skip))


def reproduce(preset: str, out: str | Path, seeds: Sequence[int] | None = None, overrides: Sequence[str] = (),
              skip: Sequence[str] = (), progress: bool = True, engine: Any = None) -> ExperimentOutcome:
    """Run (or resume) the reproduction of ``preset`` into ``out``; see :func:`reproduction`. ``engine``:
    where the runs' work goes (None: this process; e.g. ``possym.sweep.engines.LocalEngine(2)`` trains and
    analyses two runs, or two groups of runs, at once, one thread each)."""
    return run_experiment(reproduction(preset, seeds, overrides, skip), out, progress=progress, engine=engine)
