"""Train a run directory (new or interrupted) to its last step, with a progress bar.

Example:
    >>> from possym.config import load_config
    >>> run = RunDir.create("runs/x", load_config("number", "quick", ["train.steps=500"]))   # doctest: +SKIP
    >>> train_run(run)["accuracy"]                                                          # doctest: +SKIP
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from tqdm import tqdm

from possym.config import ConfigError
from possym.devices import torch_threads
from possym.runs import RunDir
from possym.stages.registry import Stage
from possym.tasks import make_splits


def is_trained(run: RunDir) -> bool:
    """The run logged its final test evaluation."""
    return any(r.get("event") == "final" for r in run.metrics())


def train_run(run: RunDir, monitor: bool = False, position: int = 0, progress: bool = True) -> dict[str, Any]:
    """Train (or resume) ``run`` to its last step; returns the final test metrics. ``monitor`` logs the
    positional/symbolic scores at every evaluation; ``position`` places the progress bar (two at once)."""
    from possym.train.loop import train

    cfg = run.config
    if cfg.train.threads:
        torch.set_num_threads(cfg.train.threads)
    splits = make_splits(cfg.task, cfg.seeds.data)
    monitor_fn = None
    if monitor:
        from possym.scores.monitor import monitor_scores

        monitor_fn = monitor_scores
    bar = tqdm(total=cfg.total_steps, desc=f"{cfg.task.name}", position=position, dynamic_ncols=True,
               disable=not progress)
    acc = {"acc": float("nan")}

    def on_step(info: dict) -> None:
        if bar.n == 0 and info["step"] > 1:
            bar.update(info["step"] - 1)  # resumed
        if "eval" in info and info["eval"]:
            acc["acc"] = info["eval"]["accuracy"]
        # refresh=False: the bar redraws at tqdm's own pace, not once per step into a log file
        postfix = {"loss": f"{info['loss']:.3f}", "acc": f"{acc['acc']:.3f}", "it_s": f"{info['steps_per_s']:.1f}"}
        bar.set_postfix(postfix, refresh=False)
        bar.update(1)

    final = train(run, splits, on_step=on_step, monitor=monitor_fn)
    bar.close()
    return final


@dataclass(frozen=True)
class TrainStageConfig:
    """Training as a stage: with the live score monitor (``monitor``), and a progress bar per run."""

    monitor: bool = True
    progress: bool = True

    def __post_init__(self) -> None:
        if not isinstance(self.monitor, bool) or not isinstance(self.progress, bool):
            raise ConfigError("train monitor and progress must be true or false")


def train_all(runs: list[RunDir], cfg: TrainStageConfig) -> list[dict[str, Any]]:
    """Train (or finish) every run not yet trained; returns the final test metrics of those it trained."""
    out = []
    for i, run in enumerate(runs):
        if not is_trained(run):
            with torch_threads(run.config.train.threads):
                out.append(train_run(run, monitor=cfg.monitor, progress=cfg.progress, position=i % 2))
    return out


def _settings(cfg: TrainStageConfig) -> dict[str, Any]:
    return {"monitor": cfg.monitor}  # the bar is a display, not a setting of what is trained


STAGE = Stage("train", TrainStageConfig, train_all, scope="runs", to_dict=_settings,
              summary="train every run to its last step (resuming a killed one), with the live score monitor")
