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


def int_list(text: str) -> tuple[int, ...]:
    """Comma-separated integers, e.g. ``0,10,100``."""
    try:
        return tuple(int(k) for k in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: give comma-separated integers, e.g. 0,10,100") from None
