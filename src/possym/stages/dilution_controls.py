"""The ``dilution_controls`` stage: the dilution finding of Sec. 3.6 beside its controls, on one run, by
:mod:`possym.evaluate.dilution` (whose docstring gives the maths):

- ``margins.csv``: every hop's logit margin Δ over the extra window, the window's own competition W and the
  mass on the right key, per (checkpoint, K, hop count, hop, layer, head), means over the windows
  (:func:`~possym.evaluate.dilution.hop_margins`); ``best`` and ``final`` side by side;
- ``prediction.csv``: dilution's prediction at a fixed margin, 1 / (1 + W + K·e^(−Δ_ref)), beside the
  measured mass, layer by layer and hop by hop (:func:`~possym.evaluate.dilution.compare_dilution`);
- ``knockouts.csv``: random knock-outs of 10–90% of the extra window beside a knock-out of the same size
  chosen by attention mass, in ``layers``, with the mass left on the right key, dilution's prediction for
  the shrunken window and, at the final hop, the accuracy (:func:`~possym.evaluate.dilution.protocol_knockouts`);
- ``settings.json``: the settings and the steps measured (written by the executor).

It measures a task whose longer inputs are extra tokens before a window (``Task.extends_by_prefix``);
another run is skipped, and the result says so. The windows are the length protocol's, with full forward
passes: keep ``n`` and the grid modest on a CPU.

Example:
    >>> from possym.experiment import run_stage                                                     # doctest: +SKIP
    >>> run_stage(RunDir.open("runs/paper3/runs/letter-s0"), "dilution_controls").result.margins    # doctest: +SKIP
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd
import torch

from possym.config import ConfigError
from possym.evaluate.dilution import FRACTIONS, compare_dilution, hop_margins, protocol_knockouts
from possym.evaluate.lengthgen import LengthGenConfig
from possym.runs import StepSpec
from possym.stages.registry import Execution, Stage, StageContext
from possym.tasks import get_task

__all__ = ["DilutionControlsConfig", "DilutionControlsResult", "dilution_controls_run"]

BY = ("layer", "head", "n_hops", "query_hop")


@dataclass(frozen=True)
class DilutionControlsConfig(Execution):
    """Settings of the stage (module docstring).

    curve: the length protocol's windows (:class:`~possym.evaluate.lengthgen.LengthGenConfig`: grid, n, n_prefixes,
    seed, extra_tokens, ...; flat in the words, ``dilution_controls.n=64``); hops: the hop counts; steps: the
    checkpoints whose margins are compared ("best", "final" or numbers; the knock-outs use the first); layers: where
    the knock-outs apply (None: every layer); fractions, n_draws, knockout_seed: the random knock-outs (seeded, one
    generator for the stage).
    """

    curve: LengthGenConfig = field(default_factory=lambda: LengthGenConfig(grid=(0, 100, 300), n=16, n_prefixes=2))
    hops: tuple[int, ...] = (3, 4)
    steps: tuple[StepSpec, ...] = ("best", "final")
    layers: tuple[int, ...] | None = None
    fractions: tuple[float, ...] = FRACTIONS
    n_draws: int = 1
    knockout_seed: int = 0

    def __post_init__(self) -> None:
        if not self.steps or not all(isinstance(s, int) or s in ("best", "final") for s in self.steps):
            raise ConfigError(f"dilution_controls steps={list(self.steps)}; allowed: step numbers, 'best', 'final'")
        if not self.fractions or not all(0 < f <= 1 for f in self.fractions) or self.n_draws < 1:
            raise ConfigError(f"dilution_controls fractions={list(self.fractions)} must lie in (0, 1] and "
                              f"n_draws={self.n_draws} be >= 1")


@dataclass(frozen=True)
class DilutionControlsResult:
    """The steps measured and the three tables (empty, with ``skipped`` set, on a run the stage does not measure)."""

    steps: dict[str, int]
    margins: pd.DataFrame
    prediction: pd.DataFrame
    knockouts: pd.DataFrame
    skipped: str = ""


def dilution_controls_run(ctx: StageContext, cfg: DilutionControlsConfig) -> DilutionControlsResult:
    """Measure and write RUN/dilution_controls/ (module docstring)."""
    run = ctx.run
    task = run.config.task
    if not get_task(task.name).extends_by_prefix:
        empty = pd.DataFrame()
        return DilutionControlsResult({}, empty, empty, empty, skipped=f"task {task.name!r} has no extra tokens "
                                      "before a window (its longer inputs are longer content)")
    bad = [h for h in cfg.hops if h not in task.hops]
    if bad:
        raise ConfigError(f"dilution_controls hops {bad}: the run's task has hop counts {list(task.hops)}")
    steps = {str(s): run.resolve_step(s) for s in cfg.steps}
    margins, predictions = [], []
    for name, at in steps.items():
        rows = hop_margins(ctx.model(at), task, cfg.curve, cfg.hops)
        margins.append(rows.groupby(["extra", *BY], sort=True)[["margin", "window", "mass", "extra_mass"]]
                       .mean().reset_index().assign(checkpoint=name, step=at))
        predictions.append(compare_dilution(rows, by=BY).assign(checkpoint=name, step=at))
    model = ctx.model(next(iter(steps.values())))
    layers = list(range(model.cfg.n_layers)) if cfg.layers is None else list(cfg.layers)
    knockouts = protocol_knockouts(model, task, cfg.curve, layers, torch.Generator().manual_seed(cfg.knockout_seed),
                                   cfg.hops, cfg.fractions, cfg.n_draws)
    keys = ["extra", "n_hops", "query_hop", "chosen", "fraction", "draw", "n_knocked", "layer", "head"]
    knockouts = knockouts.groupby(keys, sort=True).mean(numeric_only=True).drop(columns=["prefix"]).reset_index()
    result = DilutionControlsResult(steps, pd.concat(margins, ignore_index=True),
                                    pd.concat(predictions, ignore_index=True), knockouts)
    for name in ("margins", "prediction", "knockouts"):
        ctx.write_table(f"dilution_controls_{name}", getattr(result, name))  # through its record type
    ctx.record(steps_measured=steps)
    return result


STAGE = Stage("dilution_controls", DilutionControlsConfig, dilution_controls_run, scope="run",
              record="dilution_controls",
              summary="dilution's prediction beside the measured mass per hop and layer (best and final), and "
                      "random knock-outs of the extra window beside a same-size knock-out by attention mass")
