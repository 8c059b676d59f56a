"""Experiment tracking: ``train.log=tensorboard`` or ``train.log=wandb`` mirrors ``metrics.jsonl`` live.

Every record the training loop appends to ``metrics.jsonl`` (each evaluation, and the final test)
goes through :func:`log`, which appends it there and, while :func:`tracking` holds a tracker open
for the run, hands the same record to it as scalars (:func:`scalars`) at the record's step:

    {split}/{key}                          val/accuracy, val/loss, val/acc_hop3, val/eval_s, test/accuracy, ...
    scores/layer{l}.head{h}/{quantity}     the monitor's s_pos, s_sym, entropy of every head (last-token query)

(``event``, ``split``, ``step``, the wall-clock ``time``, ``precision`` and ``device`` are not metrics and
are left out; so are the monitor's per-head spreads.) ``metrics.jsonl`` stays the record of the run; the
trackers are views of it.

- ``tensorboard``: ``torch.utils.tensorboard.SummaryWriter`` (``pip install "possym[tensorboard]"``)
  writes event files into ``RUN/tensorboard/``, flushed after every record, so ``tensorboard --logdir``
  sees each evaluation as it happens.
- ``wandb``: one Weights & Biases run per training session, in ``RUN/wandb/`` (``pip install
  "possym[wandb]"``), named after the run directory, with the run's config. Offline unless
  ``WANDB_MODE`` says otherwise (``WANDB_MODE=online`` uploads; ``wandb sync RUN/wandb/offline-run-*``
  uploads an offline run later); ``WANDB_PROJECT`` names the project (default ``possym``).

A resumed run re-logs the evaluations after its saved state (``metrics.jsonl`` is truncated to the
state's step, and the replayed steps give the same numbers): TensorBoard shows both copies of those
points, wandb starts a new run for the new session.

Example:
    >>> score = {"query": "last", "layer": 0, "head": 1, "s_pos": 0.9, "s_sym": 0.2, "entropy": 1.5}
    >>> tags = scalars(MetricsRecord.from_json({"event": "eval", "step": 50, "split": "val", "accuracy": 0.5,
    ...                                         "acc_hop1": 0.75, "time": 1e9, "scores": [score]}))
    >>> for tag, value in tags.items():
    ...     print(tag, value)
    val/acc_hop1 0.75
    val/accuracy 0.5
    scores/layer0.head1/s_pos 0.9
    scores/layer0.head1/s_sym 0.2
    scores/layer0.head1/entropy 1.5
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any, Protocol

from possym.config import TRACKERS
from possym.errors import ConfigError
from possym.records import MetricsRecord
from possym.runs import RunDir

__all__ = ["TRACKERS", "Tracker", "log", "scalars", "tracking"]
TENSORBOARD_DIR = "tensorboard"  # RUN/tensorboard/events.out.tfevents.*
WANDB_DIR = "wandb"  # RUN/wandb/offline-run-*/run-*.wandb (or run-* online)
SCORE_QUANTITIES = ("s_pos", "s_sym", "entropy")


def scalars(record: MetricsRecord) -> dict[str, float]:
    """The metrics of one ``metrics.jsonl`` record, as tracker tags -> values (see the module docstring)."""
    split = record.split or record.event
    values = {**record.accuracies(), "loss": record.loss, "eval_s": record.eval_s, "monitor_s": record.monitor_s}
    out = {f"{split}/{key}": value for key, value in values.items() if value is not None}
    for row in record.scores or ():
        for quantity in SCORE_QUANTITIES:
            out[f"scores/layer{row['layer']}.head{row['head']}/{quantity}"] = row[quantity]
    return out


class Tracker(Protocol):
    def log(self, record: MetricsRecord) -> None: ...
    def close(self) -> None: ...


class TensorBoardTracker:
    """A ``SummaryWriter`` over ``RUN/tensorboard``."""

    def __init__(self, run: RunDir) -> None:
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError as e:
            raise ConfigError('train.log=tensorboard needs the tensorboard package: pip install "possym[tensorboard]"'
                              ) from e
        self.writer = SummaryWriter(str(run.path / TENSORBOARD_DIR))

    def log(self, record: MetricsRecord) -> None:
        for tag, value in scalars(record).items():
            self.writer.add_scalar(tag, value, record.step)
        self.writer.flush()  # live: a reader sees every evaluation as it is logged

    def close(self) -> None:
        self.writer.close()


class WandbTracker:
    """One wandb run for this training session of ``run``."""

    def __init__(self, run: RunDir) -> None:
        try:
            import wandb
        except ImportError as e:
            raise ConfigError('train.log=wandb needs the wandb package: pip install "possym[wandb]"') from e
        directory = run.path / WANDB_DIR
        directory.mkdir(exist_ok=True)
        # console="off": wandb leaves the caller's stdout and stderr alone; reinit="create_new": the
        # members of a training group each keep their own run in one process.
        settings = wandb.Settings(console="off", silent=True, x_disable_stats=True, x_save_requirements=False)
        self.run = wandb.init(dir=str(directory), project=os.environ.get("WANDB_PROJECT", "possym"),
                              name=Path(run.path).name, config=run.config.to_dict(),
                              mode=os.environ.get("WANDB_MODE") or "offline",  # type: ignore[arg-type]
                              reinit="create_new", settings=settings)

    def log(self, record: MetricsRecord) -> None:
        self.run.log(scalars(record), step=record.step)

    def close(self) -> None:
        self.run.finish()


TRACKER_CLASSES: dict[str, type[TensorBoardTracker] | type[WandbTracker]] = {
    "tensorboard": TensorBoardTracker,
    "wandb": WandbTracker,
}

# run directory -> its open tracker; filled only inside tracking()
_OPEN: dict[Path, Tracker] = {}


@contextmanager
def tracking(runs: Sequence[RunDir]) -> Iterator[None]:
    """Open the tracker each run's ``train.log`` names for the duration, and close them all on exit."""
    with ExitStack() as stack:
        for run in runs:
            name = run.config.train.log
            if name == "none" or run.path in _OPEN:
                continue
            tracker = TRACKER_CLASSES[name](run)
            _OPEN[run.path] = tracker
            stack.callback(_close, run.path)
        yield


def _close(path: Path) -> None:
    _OPEN.pop(path).close()


def log(run: RunDir, line: dict[str, Any]) -> None:
    """Append ``line`` (a :class:`~possym.records.MetricsRecord`'s JSON) to the run's ``metrics.jsonl`` and
    mirror it to the run's open tracker, if any."""
    record = MetricsRecord.from_json(line)
    run.log(record)
    tracker = _OPEN.get(run.path)
    if tracker is not None:
        tracker.log(record)
