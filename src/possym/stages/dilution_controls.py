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
- ``settings.json``: the settings and the steps measured.

It measures a task whose longer inputs are extra tokens before a window (``Task.extends_by_prefix``);
another run is skipped, and the result says so. The windows are the length protocol's, with full forward
passes: keep ``n`` and the grid modest on a CPU.

Example:
    >>> dilution_controls_run(RunDir.open("runs/paper3/runs/letter-s0"), DilutionControlsConfig())  # doctest: +SKIP
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass

import pandas as pd
import torch

from possym.config import ConfigError
from possym.devices import resolve_device, torch_threads
from possym.evaluate.dilution import FRACTIONS, compare_dilution, hop_margins, protocol_knockouts
from possym.evaluate.lengthgen import EXTRA_TOKENS, LengthGenConfig
from possym.runs import RunDir, StepSpec, atomic_write_text
from possym.stages.registry import Stage
from possym.tasks import get_task

__all__ = ["DilutionControlsConfig", "DilutionControlsResult", "dilution_controls_run"]

BY = ("layer", "head", "n_hops", "query_hop")


@dataclass(frozen=True)
class DilutionControlsConfig:
    """Settings of the stage (module docstring).

    grid, hops, n, n_prefixes, seed, extra_tokens: the length protocol's windows
    (:class:`~possym.evaluate.lengthgen.LengthGenConfig`); steps: the checkpoints whose margins are compared
    ("best", "final" or numbers; the knock-outs use the first); layers: where the knock-outs apply (None: every
    layer); fractions, n_draws, knockout_seed: the random knock-outs (seeded, one generator for the stage).
    """

    grid: tuple[int, ...] = (0, 100, 300)
    hops: tuple[int, ...] = (3, 4)
    n: int = 16
    n_prefixes: int = 2
    seed: int = 0
    extra_tokens: str = "targets"
    steps: tuple[StepSpec, ...] = ("best", "final")
    layers: tuple[int, ...] | None = None
    fractions: tuple[float, ...] = FRACTIONS
    n_draws: int = 1
    knockout_seed: int = 0
    threads: int | None = None
    device: str = "auto"

    def __post_init__(self) -> None:
        self.curve()  # validates grid, n, n_prefixes
        if self.extra_tokens not in EXTRA_TOKENS:
            raise ConfigError(f"dilution_controls extra_tokens={self.extra_tokens!r}; allowed: {EXTRA_TOKENS}")
        if not self.steps or not all(isinstance(s, int) or s in ("best", "final") for s in self.steps):
            raise ConfigError(f"dilution_controls steps={list(self.steps)}; allowed: step numbers, 'best', 'final'")
        if not self.fractions or not all(0 < f <= 1 for f in self.fractions) or self.n_draws < 1:
            raise ConfigError(f"dilution_controls fractions={list(self.fractions)} must lie in (0, 1] and "
                              f"n_draws={self.n_draws} be >= 1")

    def curve(self) -> LengthGenConfig:
        return LengthGenConfig(grid=self.grid, n=self.n, n_prefixes=self.n_prefixes, seed=self.seed,
                               extra_tokens=self.extra_tokens)  # type: ignore[arg-type]


@dataclass(frozen=True)
class DilutionControlsResult:
    """The steps measured and the three tables (empty, with ``skipped`` set, on a run the stage does not measure)."""

    steps: dict[str, int]
    margins: pd.DataFrame
    prediction: pd.DataFrame
    knockouts: pd.DataFrame
    skipped: str = ""


def dilution_controls_run(run: RunDir, cfg: DilutionControlsConfig | None = None) -> DilutionControlsResult:
    """Measure and write RUN/dilution_controls/ (module docstring), holding the run's writer lock
    (:meth:`RunDir.writing`: refused, naming the holder, while another process writes it)."""
    cfg = cfg or DilutionControlsConfig()
    task = run.config.task
    if not get_task(task.name).extends_by_prefix:
        empty = pd.DataFrame()
        return DilutionControlsResult({}, empty, empty, empty, skipped=f"task {task.name!r} has no extra tokens "
                                      "before a window (its longer inputs are longer content)")
    bad = [h for h in cfg.hops if h not in task.hops]
    if bad:
        raise ConfigError(f"dilution_controls hops {bad}: the run's task has hop counts {list(task.hops)}")
    with run.writing():
        return _dilution_controls(run, cfg)


def _dilution_controls(run: RunDir, cfg: DilutionControlsConfig) -> DilutionControlsResult:
    task = run.config.task
    steps = {str(s): run.resolve_step(s) for s in cfg.steps}
    curve = cfg.curve()
    margins, predictions = [], []
    with torch_threads(cfg.threads):
        for name, at in steps.items():
            model = run.load_model(at, device=resolve_device(cfg.device))
            rows = hop_margins(model, task, curve, cfg.hops)
            margins.append(rows.groupby(["extra", *BY], sort=True)[["margin", "window", "mass", "extra_mass"]]
                           .mean().reset_index().assign(checkpoint=name, step=at))
            predictions.append(compare_dilution(rows, by=BY).assign(checkpoint=name, step=at))
        model = run.load_model(next(iter(steps.values())), device=resolve_device(cfg.device))
        layers = list(range(model.cfg.n_layers)) if cfg.layers is None else list(cfg.layers)
        knockouts = protocol_knockouts(model, task, curve, layers, torch.Generator().manual_seed(cfg.knockout_seed),
                                       cfg.hops, cfg.fractions, cfg.n_draws)
    keys = ["extra", "n_hops", "query_hop", "chosen", "fraction", "draw", "n_knocked", "layer", "head"]
    knockouts = knockouts.groupby(keys, sort=True).mean(numeric_only=True).drop(columns=["prefix"]).reset_index()
    result = DilutionControlsResult(steps, pd.concat(margins, ignore_index=True),
                                    pd.concat(predictions, ignore_index=True), knockouts)
    for name in ("margins", "prediction", "knockouts"):
        run.write_table(f"dilution_controls_{name}", getattr(result, name))  # through its record type
    settings = {**json.loads(json.dumps(dataclasses.asdict(cfg))), "steps_measured": steps}
    atomic_write_text(run.artifact("dilution_controls") / "settings.json", json.dumps(settings, indent=2) + "\n")
    return result


STAGE = Stage("dilution_controls", DilutionControlsConfig, dilution_controls_run, scope="run",
              summary="dilution's prediction beside the measured mass per hop and layer (best and final), and "
                      "random knock-outs of the extra window beside a same-size knock-out by attention mass")
