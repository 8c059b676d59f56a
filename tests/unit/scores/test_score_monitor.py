"""The live monitor the training loop calls at every evaluation step."""

from __future__ import annotations

import copy
import doctest

import pytest
import torch
from score_fixtures import random_model, random_tokens

import possym.scores.dynamics
import possym.scores.frequency
import possym.scores.metric
import possym.scores.monitor
import possym.scores.patterns
import possym.scores.swaps
from possym.scores.monitor import monitor_scores
from possym.scores.swaps import head_scores


def test_monitor_logs_the_mean_scores_of_every_head_for_the_last_token(trained_model):
    tokens = random_tokens(batch=8)
    records = monitor_scores(copy.deepcopy(trained_model).float(), tokens)  # the fixture is shared: copy it
    want = head_scores(trained_model, tokens)
    assert [(r["layer"], r["head"], r["query"]) for r in records] == [
        (0, 0, "last"), (0, 1, "last"), (1, 0, "last"), (1, 1, "last")
    ]
    for r in records:
        assert r["s_pos"] == pytest.approx(float(want.s_pos[:, r["layer"], r["head"]].mean()), abs=1e-4)
        assert r["s_sym"] == pytest.approx(float(want.s_sym[:, r["layer"], r["head"]].mean()), abs=1e-4)
        assert r["n_inputs"] == 8


def test_monitor_refuses_a_model_in_training_mode_and_leaves_no_graph():
    model = random_model()
    with pytest.raises(ValueError, match="eval mode"):
        monitor_scores(model.train(), random_tokens())
    model.eval()
    outputs = []  # every forward pass the monitor runs: none may record an autograd graph
    handle = model.register_forward_hook(lambda _m, _inputs, logits: outputs.append(logits))
    assert torch.is_grad_enabled() and all(p.requires_grad for p in model.parameters())
    try:
        records = monitor_scores(model, random_tokens())
    finally:
        handle.remove()
    assert all(isinstance(r["s_pos"], float) for r in records)
    assert outputs and all(out.grad_fn is None and not out.requires_grad for out in outputs)


@pytest.mark.parametrize(
    "module",
    [
        possym.scores.metric,
        possym.scores.swaps,
        possym.scores.monitor,
        possym.scores.patterns,
        possym.scores.frequency,
        possym.scores.dynamics,
    ],
)
def test_docstring_examples_run(module):
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0
