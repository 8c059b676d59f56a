"""Experiment tracking: ``train.log=tensorboard`` or ``train.log=wandb`` mirrors ``metrics.jsonl`` live,
with the training curves and the run's config.

Every record the loop appends to ``metrics.jsonl`` goes through :func:`log`, which also hands it to the open
tracker (:func:`tracking`) as scalars (:func:`scalars`): ``{split}/{key}`` (val/accuracy, val/acc_hop3,
test/accuracy, ...) and ``scores/layer{l}.head{h}/{quantity}`` (the monitor's s_pos, s_sym, entropy; not its
spreads, nor a record's event, step, time, precision or device); every ``train.log_every`` steps :func:`log_step`
adds ``train/loss`` and ``train/lr``, which ``metrics.jsonl`` does not keep. ``metrics.jsonl`` stays the record; the
trackers are views of it. ``tensorboard`` writes event files into ``RUN/tensorboard/`` (the config as the text
summary ``config``); ``wandb`` one run per training session under ``RUN/wandb/`` (runs in :data:`WANDB_RUNS`),
offline unless ``WANDB_MODE`` says otherwise, project ``WANDB_PROJECT`` (default ``possym``); an offline run
uploads later with ``wandb sync RUN/wandb/wandb/offline-run-*``. A missing package is refused before the run
directory is made (:func:`require_tracker`). A resumed run re-logs the evaluations after its saved state:
TensorBoard shows both copies, wandb starts a new run.
Installing: README, ``[tensorboard]`` and ``[wandb]``.

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
    scores/layer0.head1/entropy 1.5"""

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

__all__ = ["TRACKERS", "Tracker", "log", "log_step", "require_tracker", "scalars", "tracking"]
TENSORBOARD_DIR = "tensorboard"  # RUN/tensorboard/events.out.tfevents.*
WANDB_DIR = "wandb"  # the directory wandb is given; it writes its runs into a wandb/ of its own inside
WANDB_RUNS = "wandb/wandb/offline-run-*"  # an offline run's folder, relative to RUN (online: wandb/wandb/run-*)
SCORE_QUANTITIES = ("s_pos", "s_sym", "entropy")
CONFIG_TAG = "config"  # TensorBoard's text summary of the run's config
# train.log -> (the package it imports, the install command)
TRACKER_PACKAGES = {"tensorboard": ("tensorboard", 'pip install "possym[tensorboard]"'),
                    "wandb": ("wandb", 'pip install "possym[wandb]"')}  # fmt: skip


def require_tracker(name: str) -> None:
    """Refuse ``train.log=name`` when its package is not installed (:class:`~possym.errors.ConfigError`, saying
    how to install it), without importing it: called before a run directory is made."""
    import importlib.util

    if name not in TRACKER_PACKAGES:
        return
    package, install = TRACKER_PACKAGES[name]
    if importlib.util.find_spec(package) is None:
        raise ConfigError(f"train.log={name} needs the {package} package: {install} (or train.log=none)")


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
    def log(self, values: dict[str, float], step: int) -> None: ...
    def close(self) -> None: ...


def config_yaml(run: RunDir) -> str:
    """The run's resolved config as YAML (the values of ``RUN/config.yaml``, with this session's execution keys)."""
    import yaml

    return yaml.safe_dump(run.config.to_dict(), sort_keys=False)


class TensorBoardTracker:
    """A ``SummaryWriter`` over ``RUN/tensorboard``."""

    def __init__(self, run: RunDir) -> None:
        require_tracker("tensorboard")
        from torch.utils.tensorboard import SummaryWriter

        self.writer = SummaryWriter(str(run.path / TENSORBOARD_DIR))
        # a fenced block, so TensorBoard's markdown keeps the YAML's indentation
        self.writer.add_text(CONFIG_TAG, f"```yaml\n{config_yaml(run)}```", 0)

    def log(self, values: dict[str, float], step: int) -> None:
        for tag, value in values.items():
            self.writer.add_scalar(tag, value, step)
        self.writer.flush()  # live: a reader sees every evaluation as it is logged

    def close(self) -> None:
        self.writer.close()


class WandbTracker:
    """One wandb run for this training session of ``run``."""

    def __init__(self, run: RunDir) -> None:
        require_tracker("wandb")
        import wandb

        directory = run.path / WANDB_DIR
        directory.mkdir(exist_ok=True)
        # console="off": wandb leaves the caller's stdout and stderr alone; reinit="create_new": the
        # members of a training group each keep their own run in one process.
        settings = wandb.Settings(console="off", silent=True, x_disable_stats=True, x_save_requirements=False)
        self.run = wandb.init(dir=str(directory), project=os.environ.get("WANDB_PROJECT", "possym"),
                              name=Path(run.path).name, config=run.config.to_dict(),
                              mode=os.environ.get("WANDB_MODE") or "offline",  # type: ignore[arg-type]
                              reinit="create_new", settings=settings)

    def log(self, values: dict[str, float], step: int) -> None:
        self.run.log(values, step=step)

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
        tracker.log(scalars(record), record.step)


def log_step(run: RunDir, step: int, loss: float, lr: float) -> None:
    """Hand step ``step``'s training loss and learning rate to the run's open tracker, if any, when ``step`` is a
    multiple of ``train.log_every`` (``train/loss``, ``train/lr``)."""
    tracker = _OPEN.get(run.path)
    if tracker is not None and step % run.config.train.log_every == 0:
        tracker.log({"train/loss": loss, "train/lr": lr}, step)
