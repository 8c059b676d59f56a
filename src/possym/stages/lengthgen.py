"""Length curves of a run (paper Fig. 5B), at one or more checkpoints.

``lengthgen.csv`` holds :class:`~possym.records.LengthRecord` rows for one or more checkpoints (its
``step`` column). A per-step stage: run through :func:`possym.experiment.run_stage` (as ``possym lengthgen``,
:meth:`possym.Run.length_curve` and every experiment do), the run's memo (``RUN/resume.json``) records the
checkpoints measured with these settings, so that asking again reads the rows back and asking for another
checkpoint measures that one alone.

Example:
    >>> from possym.experiment import run_stage                                           # doctest: +SKIP
    >>> run_stage(run, "lengthgen", STAGE.from_overrides(["lengthgen.steps=[best]"]))      # doctest: +SKIP
    >>> [(p.extra, p.accuracy) for p in run.read("lengthgen", LengthRecord) if p.n_hops == 0]  # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field, replace

import torch

from possym.config import ConfigError
from possym.evaluate.lengthgen import LengthGenConfig, check_curve_memory, measure_length_curve
from possym.records import LengthRecord
from possym.runs import RunDir, StepSpec
from possym.stages.registry import Execution, Stage, StageContext

__all__ = ["PRECISIONS", "LengthGenConfig", "LengthStageConfig", "curve_precision", "measure_curves"]


@dataclass(frozen=True)
class LengthStageConfig(Execution):
    """The lengthgen stage of a pipeline: the curve's settings (flat in the words: ``lengthgen.n=500``), at each
    of ``steps``, in ``precision``: ``fp32``, ``bf16`` (``torch.autocast``), or ``train``: bf16 where the run
    trained in bf16 (``train.precision`` as ``auto`` resolved it, in ``meta.json``), fp32 otherwise
    (docs/choices.md). ``train`` is resolved against the run before the memo is read: the memo keys the precision
    used, so curves an fp32 run measured in fp32 are done for ``train`` too."""

    curve: LengthGenConfig = field(default_factory=LengthGenConfig)
    steps: tuple[StepSpec, ...] = ("final",)
    precision: str = "fp32"

    def __post_init__(self) -> None:
        for step in self.steps:
            if not (isinstance(step, int) or step in ("best", "final")):
                raise ConfigError(f"lengthgen steps: {step!r}; allowed: checkpoint step numbers, 'best', 'final'")
        if self.precision not in PRECISIONS:
            raise ConfigError(f"lengthgen.precision={self.precision!r}; allowed: {list(PRECISIONS)} (train: bf16 "
                              "where the run trained in bf16, fp32 otherwise)")


PRECISIONS = ("fp32", "bf16", "train")


def curve_precision(run: RunDir, precision: str) -> str:
    """The precision a curve runs in: ``precision`` itself, or for ``train`` the run's (``bf16`` where it trained
    in bf16, else ``fp32``)."""
    if precision != "train":
        return precision
    return "bf16" if run.meta.get("precision") == "bf16" else "fp32"


def measure_curves(ctx: StageContext, cfg: LengthStageConfig) -> list[LengthRecord]:
    """The curve at each of ``cfg.steps``; rewrites RUN/lengthgen.csv with them and the rows already there at the
    steps ``ctx.keep`` (measured before with these settings: the memo knows, :func:`possym.experiment.run_stage`).
    ``ctx.progress(n)`` after each batch of ``n`` inputs. Returns the fresh rows."""
    run = ctx.run
    steps = list(dict.fromkeys(run.resolve_step(s) for s in cfg.steps))
    used = curve_precision(run, cfg.precision)
    ctx.record(precision=used)
    fresh: list[LengthRecord] = []
    for at in steps:
        model = ctx.model(at)  # fp32 weights: autocast runs the matmuls in bf16, as the training step did
        with (torch.autocast(ctx.device.type, dtype=torch.bfloat16) if used == "bf16" else contextlib.nullcontext()):
            rows = measure_length_curve(model, run.config.task, cfg.curve, on_batch=ctx.progress)
        fresh += [LengthRecord.from_dict({**r, "step": at}) for r in rows]
    old: list[LengthRecord] = run.read("lengthgen", LengthRecord) if ctx.keep else []
    kept = [p for p in old if p.step in set(ctx.keep) - set(steps)]
    points: list[LengthRecord] = sorted(kept + fresh, key=lambda p: (p.step or 0, p.extra, p.n_hops))
    ctx.write_table("lengthgen", points)
    return fresh


def _check(run: RunDir, cfg: LengthStageConfig, device: torch.device) -> LengthStageConfig:
    """A grid whose largest K does not fit in the device's memory is refused before anything is written; ``train``
    becomes the precision it means for this run, the one the memo then records."""
    check_curve_memory(cfg.curve, run.config.task, run.model_config, device)
    return replace(cfg, precision=curve_precision(run, cfg.precision))


STAGE = Stage("lengthgen", LengthStageConfig, measure_curves, scope="run", per_step=True, check=_check,
              summary="accuracy with K extra tokens before the target window (Fig. 5B), at each of its steps")
