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

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from possym.config import ConfigError
from possym.devices import resolve_device, torch_threads
from possym.evaluate.lengthgen import LengthGenConfig, check_curve_memory, measure_length_curve
from possym.records import LengthRecord
from possym.runs import RunDir, StepSpec
from possym.settings import from_dict
from possym.stages.registry import Stage

__all__ = ["LengthGenConfig", "LengthStageConfig", "measure_curves"]


@dataclass(frozen=True)
class LengthStageConfig:
    """The lengthgen stage of a pipeline: the curve's settings, at each of ``steps``, on ``device``."""

    curve: LengthGenConfig = field(default_factory=LengthGenConfig)
    steps: tuple[StepSpec, ...] = ("final",)
    threads: int | None = None
    device: str = "auto"

    def __post_init__(self) -> None:
        for step in self.steps:
            if not (isinstance(step, int) or step in ("best", "final")):
                raise ConfigError(f"lengthgen steps: {step!r}; allowed: checkpoint step numbers, 'best', 'final'")

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> LengthStageConfig:
        """From flat settings: :class:`LengthGenConfig`'s keys, ``steps``, ``threads`` and ``device``."""
        own: dict[str, Any] = {k: data[k] for k in ("steps", "threads", "device") if k in data}
        curve = from_dict(LengthGenConfig, {k: v for k, v in data.items() if k not in own}, "lengthgen",
                          also=("steps", "threads", "device"))
        return from_dict(cls, {"curve": curve, **own}, "lengthgen")


def measure_curves(run: RunDir, cfg: LengthStageConfig, keep: tuple[int, ...] = (),
                   progress: Callable[[int], None] | None = None) -> list[LengthRecord]:
    """The curve at each of ``cfg.steps``, measured on ``cfg.device``; rewrites RUN/lengthgen.csv with them and
    the rows already there at the steps ``keep`` (measured before with these settings: the memo knows,
    :func:`possym.experiment.run_stage`). ``progress(n)`` after each batch of ``n`` inputs. Returns the
    fresh rows. Holds the run's writer lock (:meth:`RunDir.writing`)."""
    with run.writing(), torch_threads(cfg.threads):  # restored after: the caller's process is left as it was
        steps = list(dict.fromkeys(run.resolve_step(s) for s in cfg.steps))
        device = resolve_device(cfg.device)
        fresh: list[LengthRecord] = []
        for at in steps:
            rows = measure_length_curve(run.load_model(at, device=device), run.config.task, cfg.curve,
                                        on_batch=progress)
            fresh += [LengthRecord.from_dict({**r, "step": at}) for r in rows]
        old: list[LengthRecord] = run.read("lengthgen", LengthRecord) if keep else []
        kept = [p for p in old if p.step in set(keep) - set(steps)]
        points = sorted(kept + fresh, key=lambda p: (p.step or 0, p.extra, p.n_hops))
        run.write("lengthgen", points)
        return fresh


def _flat(cfg: LengthStageConfig) -> dict[str, Any]:
    return {**dataclasses.asdict(cfg.curve), "steps": list(cfg.steps), "threads": cfg.threads, "device": cfg.device}


def _check(run: RunDir, cfg: LengthStageConfig) -> LengthStageConfig:
    """A grid whose largest K does not fit in the device's memory is refused before anything is written."""
    check_curve_memory(cfg.curve, run.config.task, run.model_config, resolve_device(cfg.device))
    return cfg


STAGE = Stage("lengthgen", LengthStageConfig, measure_curves, scope="run", per_step=True, check=_check,
              from_dict=LengthStageConfig.from_dict, to_dict=_flat,
              summary="accuracy with K extra tokens before the target window (Fig. 5B), at each of its steps")
