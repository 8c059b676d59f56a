"""Fixtures of the misuse probes: a tiny run, and one trained undisturbed as the reference."""

from __future__ import annotations

import pytest

from possym.config import load_config
from possym.runs import RunDir
from possym.tasks import make_splits
from possym.train.loop import train


@pytest.fixture
def make_run(tmp_path, tiny_overrides):
    """``make_run(name, *overrides)``: a new tiny run directory, not trained."""
    def make(name: str, *overrides: str) -> RunDir:
        return RunDir.create(tmp_path / name, load_config("number", None, [*tiny_overrides, *overrides]),
                             argv=["test"])
    return make


@pytest.fixture
def reference(make_run):
    """The tiny run trained undisturbed, in this process."""
    run = make_run("reference")
    train(run, make_splits(run.config.task, run.config.seeds.data))
    return run
