"""Discrepancy of trained heads: read through the hook points, equal to the scores rebuilt from q and k."""

import math

import numpy as np
import pytest
import torch

from possym.config import ModelConfig
from possym.model.gptj import GPTJ
from possym.tasks import generate, task_config, task_vocab
from possym.theory.trained import collapse_summary, last_query_scores, top_gap, trained_discrepancy

TASK = task_config("number")


def _model(n_layers: int = 2) -> GPTJ:
    cfg = ModelConfig(n_layers=n_layers, d_model=16, n_heads=2, d_mlp=32, d_vocab=len(task_vocab(TASK)))
    model = GPTJ(cfg, torch.Generator().manual_seed(0)).double().eval()
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0.0, 0.5, generator=torch.Generator().manual_seed(1))
    return model


def test_last_query_scores_equal_rotated_queries_dotted_with_rotated_keys():
    model = _model()
    tokens = torch.as_tensor(generate(TASK, 3, np.random.default_rng(0), extra=20).tokens)
    scores, logits = last_query_scores(model, tokens)
    names = [f"blocks.{layer}.attn.hook_rot_{w}" for layer in range(2) for w in "qk"]
    full, cache = model.run_with_cache(tokens, names)
    torch.testing.assert_close(logits, full[:, -1])
    d_head = model.cfg.d_head
    for layer in range(2):
        q = cache[f"blocks.{layer}.attn.hook_rot_q"][:, -1]  # [batch, head, d_head]
        k = cache[f"blocks.{layer}.attn.hook_rot_k"]  # [batch, pos, head, d_head]
        want = torch.einsum("bhd,bphd->bhp", q, k) / math.sqrt(d_head)
        torch.testing.assert_close(scores[:, layer], want, rtol=0, atol=1e-12)


def test_top_gap_is_largest_minus_second_and_zero_on_a_tie():
    s = torch.tensor([[3.0, 1.0, 2.5], [2.0, 2.0, 0.0]], dtype=torch.float64)
    assert top_gap(s).tolist() == [0.5, 0.0]


def test_trained_discrepancy_gives_one_record_per_layer_head_and_length():
    model = _model()
    disc, acc = trained_discrepancy(
        model, TASK, extras=[0, 5, 300], n_samples=3, rng=np.random.default_rng(0), max_batch_elements=100_000
    )  # forces batches of one at 300 extra tokens
    assert len(disc) == 2 * 2 * 3 and [r["extra"] for r in acc] == [0, 5, 300]
    for r in disc:
        assert 0 <= r["min"] <= r["q10"] <= r["median"] <= r["q90"] <= r["max"]
    # Accuracy on the very inputs it measured: redrawn from the same seed and run through the plain forward.
    again = np.random.default_rng(0)
    for record, extra in zip(acc, [0, 5, 300], strict=True):
        samples = generate(TASK, 3, again, extra=extra)
        with torch.no_grad():
            predicted = model(torch.as_tensor(samples.tokens))[:, -1].argmax(-1).numpy()
        assert record["accuracy"] == pytest.approx(float((predicted == samples.answer).mean()))


def test_collapse_summary_finds_where_discrepancy_halves_and_accuracy_breaks():
    extras = [0, 10, 100, 1000]
    acc = [{"extra": e, "accuracy": a} for e, a in zip(extras, [1.0, 0.95, 0.5, 0.1], strict=True)]
    disc = [{"layer": 0, "head": 0, "extra": e, "median": m} for e, m in zip(extras, [4.0, 3.0, 1.0, 0.5], strict=True)]
    disc += [{"layer": 1, "head": 0, "extra": e, "median": 2.0} for e in extras]
    (l0, l1) = collapse_summary(disc, acc)
    assert l0["collapse_extra"] == 100 and l0["accuracy_break_extra"] == 100
    assert l0["spearman"] == pytest.approx(1.0)
    assert l1["collapse_extra"] is None and math.isnan(l1["spearman"])
