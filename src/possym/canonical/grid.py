"""The canonical grid's measurements: the analysis of one trained cell, and the cells' records.

The grid itself is an experiment file (``possym/configs/sweeps/canonical.yaml``: the tasks, the seeds, the
toy model and its training as run overrides, the frequency conditions as variants), run by the one
executor; a cell is one of its runs. :func:`analyse_cell` measures one trained cell (accuracy at 1x, 2x
and 4x the training length by answer position, scores with the exact engine, frequency use and plane
geometry) with :class:`CanonicalCellConfig`, and :func:`cell_rows` turns a cell's measurements into the
grid's records; the stages ``canonical_cell`` and ``canonical_report`` (:mod:`possym.stages.canonical`)
run them, the report adding Theorem 7's curves and the verdicts (:mod:`possym.canonical.claims`).

The toy model (every choice in docs/canonical.md): possym's GPTJ with one layer, one head,
``model.mlp=false`` (attention only), d_model 32 (16 RoPE planes), no dropout; AdamW at lr 3e-3 with
100 warm-up steps then linear decay, no weight decay, batch 64, 1,500 steps of fresh data (one
epoch of 96,000 inputs). Length 8, 32 symbols, 8 attributes.

Example:
    >>> from possym.experiment import load_experiment
    >>> exp = load_experiment("canonical_quick")
    >>> len(exp.tasks), [v.name for v in exp.variants], exp.seeds
    (3, ['band1', 'band4', 'band8', 'nope', 'two_angle'], (0,))
    >>> exp.stage("canonical_cell").n_score, exp.runs()[0].config().model.freq_gate
    (32, '0@1-2')
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from possym.canonical.analysis import accuracy_by_position, analyse_heads
from possym.canonical.conditions import Condition, band_centre_theta
from possym.canonical.records import CellRecord, PositionRecord, WmaxRecord
from possym.canonical.theorem7 import theorem7_curves
from possym.config import ConfigError
from possym.errors import PossymError
from possym.runs import RunDir, atomic_write_text
from possym.tasks.canonical import CANONICAL_TASKS, CanonicalTaskConfig

if TYPE_CHECKING:
    from pathlib import Path

    import pandas as pd


@dataclass(frozen=True)
class CanonicalCellConfig:
    """The analysis of one cell (the ``canonical_cell`` stage): inputs per answer position at each length
    factor, scoring and geometry inputs, and the seed of those inputs. The inputs of a cell are drawn from
    (seed, analysis_seed, task), the same for every condition, so that conditions are compared on paired inputs."""

    n_eval_per_position: int = 128
    length_factors: tuple[int, ...] = (1, 2, 4)
    n_score: int = 64
    n_geometry: int = 32
    analysis_seed: int = 18

    def __post_init__(self) -> None:
        object.__setattr__(self, "length_factors", tuple(self.length_factors))
        if self.length_factors[:1] != (1,) or any(f < 1 for f in self.length_factors):
            raise ConfigError(f"length_factors={self.length_factors} must start with 1 (the training length)")
        for name in ("n_eval_per_position", "n_score", "n_geometry"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name}={getattr(self, name)} must be >= 1")

    def check(self, spec: CanonicalTaskConfig) -> None:
        """Refuse a task whose every evaluation length is not possible (Retrieval at 4x needs 4x the symbols).

        >>> from possym.tasks import task_config
        >>> CanonicalCellConfig().check(task_config("retrieval", n_symbols=16))  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        possym.errors.ConfigError: canonical_cell.length_factors=(1, 2, 4) on retrieval: ... needs n_symbols >= 32 ...
        >>> CanonicalCellConfig().check(task_config("number"))  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        possym.errors.ConfigError: canonical_cell analyses a run of a canonical task (...), not of 'number'
        """
        if not isinstance(spec, CanonicalTaskConfig):
            raise ConfigError(f"canonical_cell analyses a run of a canonical task {CANONICAL_TASKS}, "
                              f"not of {spec.name!r}")
        for f in self.length_factors:
            try:
                spec.check_length(f * spec.length)
            except ValueError as exc:
                raise ConfigError(f"canonical_cell.length_factors={self.length_factors} on {spec.name}: {exc}"
                                  ) from None


@dataclass(frozen=True)
class CanonicalReportConfig:
    """The grid's report (the ``canonical_report`` stage): the seed of the verdicts' bootstraps. Everything
    else it reads from the cells: their conditions (the runs' variants), sizes and analyses."""

    claims_seed: int = 18


def analyse_cell(run: RunDir, cfg: CanonicalCellConfig) -> dict[str, Any]:
    """The analysis of one trained cell as plain data, written to ``RUN/canonical.json`` with ``cfg``'s
    settings: ``{"accuracy": {factor: acc}, "positions": [{length, position, correct, total}], "heads":
    {...}}``. The caller holds the run's writer lock (the executor does). Whether a cell is analysed is the
    run's memo's to say (the ``canonical_cell`` stage, :func:`possym.experiment.run_stage`)."""
    cfg.check(run.config.task)  # type: ignore[arg-type]
    return _analyse_cell(run, cfg, run.artifact("canonical"), _cell_key(cfg))


def read_cell(run: RunDir) -> dict[str, Any]:
    """What :func:`analyse_cell` wrote into ``run``, its settings under ``"settings"`` (an error if it has not)."""
    file = run.artifact("canonical")
    data = json.loads(file.read_text()) if file.is_file() else {}
    if "settings" not in data:
        raise PossymError(f"{run.path} holds no canonical analysis; run the canonical_cell stage on it first")
    return data


def _cell_key(cfg: CanonicalCellConfig) -> dict[str, Any]:
    return dataclasses.asdict(cfg) | {"length_factors": list(cfg.length_factors)}


def _analyse_cell(run: RunDir, cfg: CanonicalCellConfig, cache: Path, key: dict[str, Any]) -> dict[str, Any]:
    spec: CanonicalTaskConfig = run.config.task  # type: ignore[assignment]
    model = run.load_model().eval()
    rng = np.random.default_rng([run.config.seeds.init, cfg.analysis_seed, CANONICAL_TASKS.index(spec.name)])
    positions, acc = [], {}
    with torch.no_grad():
        for f in cfg.length_factors:
            length = f * spec.length
            rows = accuracy_by_position(model, spec, length, cfg.n_eval_per_position, rng)
            positions += [{"length": length, **r} for r in rows]
            acc[str(f)] = sum(r["correct"] for r in rows) / sum(r["total"] for r in rows)
    heads = analyse_heads(model, spec, cfg.n_score, cfg.n_geometry, rng)
    data = {"settings": key, "accuracy": acc, "positions": positions, "heads": dataclasses.asdict(heads),
            "train_s": _train_seconds(run)}
    atomic_write_text(cache, json.dumps(data, indent=1) + "\n")
    return data


def _train_seconds(run: RunDir) -> float:
    """Wall-clock seconds from the first logged record to the final one (a resumed run's pause included)."""
    times = [m.time for m in run.metrics_log() if m.time is not None]
    return times[-1] - times[0] if len(times) > 1 else 0.0


def cell_rows(data: dict[str, Any], task: str, cond: Condition, seed: int
              ) -> tuple[list[CellRecord], list[PositionRecord]]:
    """A cell's measurements as the grid's records (one CellRecord per head, one PositionRecord per position)."""
    acc, heads = data["accuracy"], data["heads"]
    planes = ",".join(str(p) for p in cond.planes)
    runs = [
        CellRecord(task=task, condition=cond.name, seed=seed, head=h, planes=planes,
               theta_centre=band_centre_theta(cond), acc=acc["1"], acc_2x=acc.get("2", float("nan")),
               acc_4x=acc.get("4", float("nan")), s_pos=heads["s_pos"][h], s_sym=heads["s_sym"][h],
               entropy=heads["entropy"][h], dominant_id=heads["dominant_id"][h],
               dominant_s_pos=heads["dominant_s_pos"][h], dominant_s_sym=heads["dominant_s_sym"][h],
               key_collapse=heads["key_collapse"][h], query_alignment=heads["query_alignment"][h],
               query_alignment_shuffled=heads["query_alignment_shuffled"][h], train_s=round(data["train_s"], 3))
        for h in range(len(heads["s_pos"]))
    ]
    positions = [PositionRecord(task, cond.name, seed, p["length"], p["position"], p["correct"], p["total"])
                 for p in data["positions"]]
    return runs, positions


@dataclass(frozen=True)
class GridResults:
    """Everything the grid produced, as records (``frame`` turns any of them into a DataFrame)."""

    runs: list[CellRecord]
    positions: list[PositionRecord]
    wmax: list[WmaxRecord]
    claims: list[Any]  # ClaimRecord

    def table(self, name: str) -> pd.DataFrame:
        """One of ``runs``, ``positions``, ``wmax``, ``claims`` as a DataFrame with its record's columns.

        >>> GridResults([], [], [], []).table("runs").columns[:3].tolist()
        ['task', 'condition', 'seed']
        """
        from possym.records import ClaimRecord, frame

        kinds = {"runs": CellRecord, "positions": PositionRecord, "wmax": WmaxRecord, "claims": ClaimRecord}
        if name not in kinds:
            raise ValueError(f"table {name!r}; allowed: {list(kinds)}")
        return frame(getattr(self, name), kinds[name])


def wmax_rows(n_content: int = 16, beta: float = 8.0) -> list[WmaxRecord]:
    """Theorem 7's curves (:func:`~possym.canonical.theorem7.theorem7_curves`) as rows."""
    return [
        WmaxRecord(shape=c.shape, **{k: v for k, v in r.items()})  # type: ignore[arg-type]
        for c in theorem7_curves(n_content=n_content, beta=beta)
        for r in c.records()
    ]

