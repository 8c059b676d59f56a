"""Length curves of a run, cached in the run directory (paper Fig. 5B).

``lengthgen.csv`` holds :class:`~possym.records.LengthRecord` rows for one or more checkpoints (its
``step`` column); ``lengthgen.json`` holds the :class:`~possym.evaluate.lengthgen.LengthGenConfig`
they were measured with and, per step, the seconds and inputs it took. Asking again for a step with
the same settings reads the rows back; other settings start the file afresh. A file written before
steps were recorded (its settings held one ``step``) is read as that one step.

Example:
    >>> points = length_curve(RunDir.open("runs/demo/number"), LengthGenConfig(n=100), step="best")  # doctest: +SKIP
    >>> [(p.extra, p.accuracy) for p in points if p.n_hops == 0]                                     # doctest: +SKIP
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from possym.config import ConfigError, TaskConfig
from possym.devices import resolve_device, torch_threads
from possym.evaluate.lengthgen import LengthGenConfig, measure_length_curve
from possym.records import LengthRecord, points_at
from possym.runs import RunDir, StepSpec, atomic_write_text
from possym.settings import from_dict
from possym.stages.registry import Stage
from possym.tasks import prefix_per_hop

__all__ = ["LengthGenConfig", "LengthStageConfig", "length_curve"]


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

    def run(self, run: RunDir, force: bool = False,
            progress: Callable[[int], None] | None = None) -> list[LengthRecord]:
        """The curve at each of ``steps`` (measured afresh with ``force``; ``progress`` as :func:`length_curve`)."""
        with torch_threads(self.threads):  # restored after: the caller's process is left as it was
            return [p for step in self.steps
                    for p in length_curve(run, self.curve, step, force, progress, device=self.device)]


def _settings(cfg: LengthGenConfig) -> dict[str, Any]:
    return {**dataclasses.asdict(cfg), "grid": list(cfg.grid)}


def _cache(run: RunDir) -> dict[str, Any]:
    """``lengthgen.json`` as ``{"settings", "steps": {step: info}}``, or empty."""
    file = run.artifact("lengthgen_settings")
    return json.loads(file.read_text()) if file.is_file() else {}


# The protocol's version: 2 balances letter windows over answer letters (possym.tasks.prefix_plan). A file
# from version 1 is stale for a task with per-hop prefixes (its windows changed) and current for the others.
PROTOCOL = 2


def _current(cache: dict[str, Any], task: TaskConfig) -> bool:
    return cache.get("protocol", 1) >= PROTOCOL or not prefix_per_hop(task)


def _same(stored: dict[str, Any] | None, now: dict[str, Any]) -> bool:
    """Whether a curve stored with ``stored`` settings was measured as ``now`` asks: a setting the file lacks
    was added to LengthGenConfig after it was written, and held its default then."""
    if stored is None:
        return False
    defaults = _settings(LengthGenConfig())
    return all(stored.get(k, defaults[k]) == v for k, v in now.items()) and set(stored) <= set(now)


def length_curve(run: RunDir, cfg: LengthGenConfig | None = None, step: StepSpec = "final",
                 force: bool = False, progress: Callable[[int], None] | None = None,
                 device: str = "auto") -> list[LengthRecord]:
    """The run's length curve at checkpoint ``step`` (a number, ``"best"`` or ``"final"``), measured once on
    ``device`` and then read from RUN/lengthgen.csv; ``progress(n)`` after each batch of ``n`` inputs.

    Reading a stored curve takes no lock; measuring one holds the run's writer lock
    (:meth:`RunDir.writing`), so it is refused, naming the holder, while another process writes the run."""
    cfg = cfg or LengthGenConfig()
    at = run.resolve_step(step)
    if not force:
        same, cache, stored = _stored(run, cfg)
        if same and str(at) in cache["steps"]:
            return points_at(stored, at)
    with run.writing():
        return _measure(run, cfg, at, progress, device)


def _stored(run: RunDir, cfg: LengthGenConfig) -> tuple[bool, dict[str, Any], list[LengthRecord]]:
    """Whether RUN/lengthgen.csv was measured as ``cfg`` asks, its settings file, and its rows if so."""
    cache = _cache(run)
    same = _same(cache.get("settings"), _settings(cfg)) and _current(cache, run.config.task)
    return same, cache, run.read("lengthgen", LengthRecord) if same else []


def _measure(run: RunDir, cfg: LengthGenConfig, at: int, progress: Callable[[int], None] | None,
             device: str) -> list[LengthRecord]:
    # Read again under the lock: the rows of other steps are kept, and a writer may have added some.
    same, cache, stored = _stored(run, cfg)
    model = run.load_model(at, device=resolve_device(device))
    start = time.perf_counter()
    rows = measure_length_curve(model, run.config.task, cfg, on_batch=progress)
    info = {"seconds": time.perf_counter() - start, "inputs": cfg.n * len(run.config.task.hops) * len(cfg.grid),
            "threads": torch.get_num_threads(), "device": str(model.embed.weight.device)}
    fresh = [LengthRecord.from_dict({**r, "step": at}) for r in rows]
    kept = [p for p in stored if p.step != at]
    steps = {k: v for k, v in cache.get("steps", {}).items() if same and k != str(at)} | {str(at): info}
    points = sorted(kept + fresh, key=lambda p: (p.step or 0, p.extra, p.n_hops))
    run.write("lengthgen", points)
    # The settings file goes last: its entry for a step says that step's rows beside it are complete.
    record = {"settings": _settings(cfg), "protocol": PROTOCOL,
              "steps": dict(sorted(steps.items(), key=lambda kv: int(kv[0])))}
    atomic_write_text(run.artifact("lengthgen_settings"), json.dumps(record, indent=2) + "\n")
    return fresh


def _lengthgen_stage(run: RunDir, cfg: LengthStageConfig) -> list[LengthRecord]:
    return cfg.run(run)


def _flat(cfg: LengthStageConfig) -> dict[str, Any]:
    return {**dataclasses.asdict(cfg.curve), "steps": list(cfg.steps), "threads": cfg.threads, "device": cfg.device}


STAGE = Stage("lengthgen", LengthStageConfig, _lengthgen_stage, scope="run",
              from_dict=LengthStageConfig.from_dict, to_dict=_flat,
              summary="accuracy with K extra tokens before the target window (Fig. 5B), at each of its steps")
