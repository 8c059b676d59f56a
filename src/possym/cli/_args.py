"""Argument types shared by several subcommands."""

from __future__ import annotations

import argparse


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


def int_list(text: str) -> tuple[int, ...]:
    """Comma-separated integers, e.g. ``0,10,100``."""
    try:
        return tuple(int(k) for k in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: give comma-separated integers, e.g. 0,10,100") from None


def add_step(p: argparse.ArgumentParser, help: str = "checkpoint: a step, best or final (default final)") -> None:
    """``--step`` and ``--allow-unfinished``: ``final`` names the end of training, so on a run that has not
    finished it is refused unless ``--allow-unfinished`` says to take its last checkpoint."""
    p.add_argument("--step", type=step_arg, default="final", help=help)
    p.add_argument("--allow-unfinished", action="store_true",
                   help="let final name the last checkpoint of a run whose training has not ended")
