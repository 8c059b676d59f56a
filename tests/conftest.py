"""Shared fixtures: tiny configs that train in seconds."""

from __future__ import annotations

import os

import pytest
import torch

# Tiny models gain nothing from a second thread, and an OpenMP team spinning on a shared, busy
# machine makes them 100x slower.
torch.set_num_threads(1)

# Set by `make test-tl4`, the TransformerLens 4 environment: there a skipped tl4 test is a failure, not a pass.
REQUIRE_TL4 = "POSSYM_REQUIRE_TL4"


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if report.skipped and os.environ.get(REQUIRE_TL4) and item.get_closest_marker("tl4") is not None:
        reason = report.longrepr[-1] if isinstance(report.longrepr, tuple) else report.longrepr
        report.outcome, report.longrepr = "failed", f"{REQUIRE_TL4} is set, but this tl4 test skipped: {reason}"
    return report


# A model and dataset small enough for a unit test; the tasks themselves are the paper's.
TINY = [
    "model.n_layers=2",
    "model.d_model=16",
    "model.d_mlp=32",
    "model.dropout=0.1",
    "task.n_train=4000",
    "task.n_val=200",
    "task.n_test=200",
    "train.steps=30",
    "train.eval_every=10",
    "train.checkpoint_every=10",
    "train.eval_size=100",
    "train.warmup_steps=5",
    "train.lr=1e-3",
    "train.threads=1",
]


@pytest.fixture
def tiny_overrides() -> list[str]:
    return list(TINY)


@pytest.fixture(scope="session")
def tiny_session_overrides() -> list[str]:
    """TINY for fixtures that outlive one test (module- or session-scoped runs)."""
    return list(TINY)


@pytest.fixture
def cut_and_resume():
    """``cut_and_resume(run, splits, at_step)``: train ``run`` until an exception stops it after step
    ``at_step`` (as a kill would, minus the process), then resume it from its directory to the end."""
    from possym.runs import RunDir
    from possym.train.loop import train

    class Interrupt(Exception):
        pass

    def cut_then_resume(run, splits, at_step: int) -> None:
        def cut(info):
            if info["step"] == at_step:
                raise Interrupt

        with pytest.raises(Interrupt):
            train(run, splits, on_step=cut)
        train(RunDir.open(run.path), splits)

    return cut_then_resume
