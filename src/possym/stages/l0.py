"""L0 (and any layer) looked at closely: scores split by hop count and query position, whether a mixed
score is a mixture of inputs, and an "ever pure" tally that one noisy excursion cannot make.

For the layer that never turns pure in our runs (and ends mixed in the paper's Fig. 6). The stage loads the
run's checkpoints, calls :func:`possym.scores.mixture.mixture_tables` on the score stage's
own inputs (:func:`possym.scores.checkpoints.score_inputs`) and writes RUN/l0/ (artifact ``l0``; each table
``l0_{name}``): ``per_input.csv`` (every input's scores), ``split.csv`` and ``split_position.csv``
(:func:`possym.scores.split.split_scores` by hop count and by window position; n_hops 0 pools),
``modality.csv`` (:func:`possym.scores.modality.unimodality_test`; ``mixture`` at α = 0.05),
``sustained.csv`` (:func:`possym.scores.sustained.sustained_purity`), ``tally.csv`` (heads ever pure by the
plain and the sustained rule) and ``settings.json``. See docs/reproduce.md, "Stages".

Example:
    >>> from possym.experiment import run_stage                                            # doctest: +SKIP
    >>> result = run_stage(RunDir.open("runs/paper3/runs/number-s0"), "l0").result         # doctest: +SKIP
    >>> result.modality.query("layer == 0 and query == 'last'")                            # doctest: +SKIP"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from possym.config import ConfigError
from possym.errors import PossymError
from possym.records import GAMMA
from possym.runs import RunDir, StepSpec
from possym.scores.checkpoints import score_inputs
from possym.scores.metric import TAU
from possym.scores.mixture import mixture_tables
from possym.scores.sustained import LEVEL, MIN_RUN
from possym.stages.registry import Execution, Stage, StageContext

__all__ = ["L0Config", "L0Result", "l0_run"]


@dataclass(frozen=True)
class L0Config(Execution):
    """Settings of the l0 stage.

    layers: the layers tested for a mixture (the split and the sustained tally cover every layer).
    steps: the checkpoints of the split and the modality test (``"best"``, ``"final"`` or numbers).
    n_inputs, seed, tau: the scoring inputs and temperature (as the score stage's; paper: 100, 0, 1e-4).
    gamma, min_run, level, n_boot: the sustained-purity rule (:mod:`possym.scores.sustained`).
    every: the sustained tally scores every ``every``-th checkpoint (1: all; consecutive then means
        consecutive among those scored).
    modality_boot: Silverman's bootstrap resamples. bootstrap_seed: seeds every resample of this stage.
    """

    layers: tuple[int, ...] = (0,)
    steps: tuple[StepSpec, ...] = ("best", "final")
    n_inputs: int = 100
    seed: int = 0
    tau: float = TAU
    gamma: float = GAMMA
    min_run: int = MIN_RUN
    level: float = LEVEL
    n_boot: int = 1000
    every: int = 1
    modality_boot: int = 500
    bootstrap_seed: int = 0

    def __post_init__(self) -> None:
        if not self.layers or not self.steps:
            raise ConfigError(f"l0 layers={self.layers} and steps={self.steps} must each name at least one")
        for step in self.steps:
            if not (isinstance(step, int) or step in ("best", "final")):
                raise ConfigError(f"l0 steps: {step!r}; allowed: checkpoint step numbers, 'best', 'final'")
        if self.every < 1 or self.n_inputs < 3 or self.modality_boot < 1:
            raise ConfigError(f"l0 every={self.every} >= 1, n_inputs={self.n_inputs} >= 3 and "
                              f"modality_boot={self.modality_boot} >= 1 are needed")


@dataclass(frozen=True)
class L0Result:
    steps: tuple[int, ...]  # the steps of the split and the modality test
    scored_steps: tuple[int, ...]  # the checkpoints of the sustained tally
    per_input: pd.DataFrame
    split: pd.DataFrame
    split_position: pd.DataFrame
    modality: pd.DataFrame
    sustained: pd.DataFrame
    tally: pd.DataFrame  # per kind: heads ever pure by the mean (the plain tally) and by the sustained rule


def l0_run(ctx: StageContext, cfg: L0Config) -> L0Result:
    """Split, modality and sustained purity of a run (module docstring); writes RUN/l0/."""
    run = ctx.run
    n_layers = run.config.model.n_layers
    if not all(0 <= layer < n_layers for layer in cfg.layers):
        raise PossymError(f"l0 layers={list(cfg.layers)} must lie in 0..{n_layers - 1}")
    samples = score_inputs(run.config.task, run.config.seeds.data, cfg.n_inputs, cfg.seed)
    steps = tuple(dict.fromkeys(run.resolve_step(s) for s in cfg.steps))
    every = run.checkpoint_steps()
    scored = tuple(every[:: cfg.every]) if every[-1] in every[:: cfg.every] else (*every[:: cfg.every], every[-1])
    t = mixture_tables(ctx.model(steps[0]), run.load_state_dict, samples, steps, scored, cfg.layers,
                       np.random.default_rng(cfg.bootstrap_seed), tau=cfg.tau, gamma=cfg.gamma, min_run=cfg.min_run,
                       level=cfg.level, n_boot=cfg.n_boot, modality_boot=cfg.modality_boot)
    result = L0Result(steps, scored, t.per_input, t.split, t.split_position, t.modality, t.sustained, t.tally)
    for name in ("per_input", "split", "split_position", "modality", "sustained", "tally"):
        ctx.write_table(f"l0_{name}", getattr(result, name))  # through its record: a changed column is refused
    ctx.record(steps_measured=list(steps), scored_steps=list(scored))
    return result


def _check(run: RunDir, cfg: L0Config, device: torch.device) -> L0Config:
    """The settings as they run on ``run``: its layers, and ``n_inputs`` at most its test split."""
    from possym.stages.score import fit_inputs

    n_layers = run.config.model.n_layers
    if not all(0 <= layer < n_layers for layer in cfg.layers):
        raise PossymError(f"l0 layers={list(cfg.layers)} must lie in 0..{n_layers - 1}")
    return dataclasses.replace(cfg, n_inputs=fit_inputs(run, cfg.n_inputs, "l0.n_inputs"))


STAGE = Stage("l0", L0Config, l0_run, scope="run", check=_check, device="cpu", record="l0",
              summary="scores split by hop count and query position, Silverman's test of whether a mixed layer "
                      "is a mixture of inputs, and a sustained, input-bootstrapped 'ever pure' tally")
