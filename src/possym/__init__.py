"""possym: positional versus symbolic attention heads in RoPE Transformers.

The library API (:mod:`possym.api`), imported on first use so that ``import possym`` stays light::

    import possym
    run = possym.open_run("runs/demo/runs/number-s0")
    run.model(step="best"); run.metrics(); run.scores(); run.purity(gamma=0.1); run.table1()
    run.length_curve(grid=(0, 100, 1000), step="best")
    possym.head_scores(model, tokens)          # a possym, Hugging Face or TransformerLens model
    possym.to_hooked_transformer(model); run.hooked_transformer(step="best")   # pip install "possym[tl3]"
    possym.to_transformer_bridge(model); run.transformer_bridge(step="best")   # TransformerLens 3.9 or 4.x
    possym.from_transformer_lens(ht_or_bridge)   # the way back, edits and fine-tuning included
    possym.train_model(possym.load_config("number", "quick", train__steps=500), out="runs/x")
    possym.train_models([cfg0, cfg1, cfg2], ["runs/s0", "runs/s1", "runs/s2"])   # one batched step for all three
    possym.load_model("runs/x/checkpoints/step_000500.safetensors")
    exp = possym.load_experiment("paper", seeds=(0, 1, 2), overrides=["score.n_inputs=100"])
    possym.run_experiment(exp, out="runs/paper")   # resumable; a rerun does only what is missing
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_API = ("Run", "from_transformer_lens", "head_scores", "load_config", "load_model", "open_run",
        "to_hooked_transformer", "to_transformer_bridge", "train_model", "train_models")
_EXPERIMENT = ("load_experiment", "run_experiment")
__all__ = [*_API, *_EXPERIMENT, "PossymError", "reproduce", "__version__"]


def __getattr__(name: str) -> Any:
    if name in _API:
        return getattr(importlib.import_module("possym.api"), name)
    if name in _EXPERIMENT:
        return getattr(importlib.import_module("possym.experiment"), name)
    if name == "reproduce":
        return importlib.import_module("possym.experiment.reproduce").reproduce
    if name == "PossymError":
        return importlib.import_module("possym.errors").PossymError
    raise AttributeError(f"module 'possym' has no attribute {name!r}")


def __dir__() -> list[str]:
    """The lazy API too, so that a notebook's tab completion offers ``possym.open_run``."""
    return sorted({*globals(), *__all__})
