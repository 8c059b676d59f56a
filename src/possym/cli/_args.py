"""Argument types shared by several subcommands."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from possym.experiment import StageRun
    from possym.runs import RunDir


def step_arg(text: str) -> int | str:
    """``--step``: a checkpoint step number, ``best`` or ``final``."""
    if text in ("best", "final"):
        return text
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--step {text!r}: give a checkpoint step number, best or final") from None


def device_arg(text: str) -> str:
    """``--device``: checked when the arguments are parsed, so a device this machine lacks stops the command
    before any work."""
    from possym.config import ConfigError
    from possym.devices import resolve_device

    try:
        resolve_device(text)
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def add_device(p: argparse.ArgumentParser, default: str, why: str = "") -> None:
    """``--device``: where the model runs (:func:`possym.devices.resolve_device`)."""
    p.add_argument("--device", type=device_arg, default=default, metavar="DEVICE",
                   help=f"auto, cpu, cuda (cuda:N) or mps; auto is the best here (default {default}{why})")


def add_step(p: argparse.ArgumentParser, help: str = "checkpoint: a step, best or final (default final)") -> None:
    """``--step`` and ``--allow-unfinished`` (for a command without a config that holds the step)."""
    p.add_argument("--step", type=step_arg, default="final", help=help)
    add_allow_unfinished(p)


def add_allow_unfinished(p: argparse.ArgumentParser) -> None:
    """``--allow-unfinished``: ``final`` names the end of training, so on a run that has not finished it is
    refused unless this says to take its last checkpoint."""
    p.add_argument("--allow-unfinished", action="store_true",
                   help="let final name the last checkpoint of a run whose training has not ended")


def add_redo(p: argparse.ArgumentParser, stage: str, memo: str = "RUN/resume.json") -> None:
    """``--redo``: run the stage although its memo (a run's RUN/resume.json) has it done with these settings."""
    p.add_argument("--redo", action="store_true",
                   help=f"run {stage} again although {memo}, the memo that experiments share, has it done "
                        "with these settings" + (" (at every checkpoint asked for)" if memo.startswith("RUN") else ""))


def report_skip(done: StageRun, run_dir: RunDir) -> None:
    """One line saying that the memo had the stage done, and where."""
    from possym.runs import step_list
    from possym.stages.memo import MEMO_FILE

    steps = f" at {step_list(done.kept)}" if done.kept else ""
    print(f"{done.stage}: done with these settings{steps} (the memo {run_dir.path / MEMO_FILE}); "
          "read back, not rerun (--redo reruns it)")


def add_overrides(p: argparse.ArgumentParser, section: str, defaults: dict[str, Any], example: str,
                  config: type | None = None) -> None:
    """The command's settings as ``section.key=value`` overrides (:mod:`possym.settings`), the one syntax of
    every config; ``--help`` lists the section's keys with their defaults, so that no flag restates one, and
    the docstring of ``config``, which says what each key means."""
    import inspect

    from possym.settings import defaults_help

    p.add_argument("overrides", nargs="*", default=[], metavar=f"{section}.KEY=VALUE",
                   help=f"settings, e.g. {example}; every key and its default is listed below")
    p.formatter_class = argparse.RawDescriptionHelpFormatter
    p.epilog = (f"{section} keys and their defaults (set any as {section}.KEY=VALUE; values are YAML: "
                f"true, null, [0, 10]):\n{defaults_help(section, defaults)}")
    if config is not None:  # what each key means; the doctest is for the library's reader, not the command's
        prose = (inspect.getdoc(config) or "").split("\n>>>")[0].removesuffix("Example:").rstrip()
        p.epilog += "\n\n" + prose


def engine_help() -> str:
    """The ``engine`` section's keys with their defaults (:class:`possym.sweep.engines.EngineConfig`), for
    ``--help``."""
    import dataclasses

    from possym.settings import defaults_help
    from possym.sweep.engines import EngineConfig

    return defaults_help("engine", {f.name: f.default for f in dataclasses.fields(EngineConfig)})
