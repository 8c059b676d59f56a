"""Length generalisation: the cached-prefix evaluator against the plain forward pass and an oracle model."""

import dataclasses

import numpy as np
import pytest
import torch
from torch import nn

from possym.config import ConfigError, ModelConfig, TaskConfig
from possym.evaluate.lengthgen import (
    PAPER_GRID,
    LengthGenConfig,
    cluster_interval,
    last_logits_after,
    last_logits_plain,
    measure_length_curve,
    point_samples,
    prefix_cache,
    slice_cache,
    window_counts,
)
from possym.model.gptj import GPTJ
from possym.tasks import draw_prefix, solve, task_config, task_vocab


def random_model(task: TaskConfig) -> GPTJ:
    # A large init keeps attention far from uniform, so equal logits are a real test.
    cfg = ModelConfig(n_layers=2, d_model=32, d_mlp=64, d_vocab=len(task_vocab(task)), dropout=0.0, init_range=0.3)
    return GPTJ(cfg, torch.Generator().manual_seed(0)).double().eval()


@pytest.mark.parametrize("name", ["number", "letter"])
def test_cached_prefix_logits_equal_the_plain_forward_pass(name):
    task = task_config(name)
    model = random_model(task)
    cfg = LengthGenConfig(grid=(0, 30, 400), n=12, n_prefixes=2, token_budget=2048)
    long = draw_prefix(task, 400, 2, np.random.default_rng(0))
    cache = prefix_cache(model, long)
    for extra in cfg.grid:
        samples = point_samples(task, cfg, 2, 0, extra, long)
        tokens = torch.as_tensor(samples.tokens)
        cached = last_logits_after(model, tokens[:, extra:], slice_cache(cache, extra), cfg.token_budget)
        plain = last_logits_plain(model, tokens, cfg.token_budget)
        torch.testing.assert_close(cached, plain, atol=1e-9, rtol=0)


def test_both_modes_give_the_same_curve():
    task = task_config("letter")
    model = random_model(task)
    cached = measure_length_curve(model, task, LengthGenConfig(grid=(0, 25, 90), n=10, n_prefixes=3))
    plain = measure_length_curve(model, task, LengthGenConfig(grid=(0, 25, 90), n=10, n_prefixes=3, mode="plain"))
    strip = [{k: v for k, v in r.items() if k != "mode"} for r in cached]
    assert strip == [{k: v for k, v in r.items() if k != "mode"} for r in plain]


class WindowOracle(nn.Module):
    """Answers from the last 17 tokens with the independent solver (or always ``fixed``), exposing the
    forward/forward_kv interface the evaluator uses; positional answers fit inside the window."""

    def __init__(self, task: TaskConfig, fixed: str | None = None) -> None:
        super().__init__()
        self.task, self.vocab, self.fixed = task, task_vocab(task), fixed

    def forward(self, tokens, positions=None, past=None, last=False):
        logits = torch.zeros(*tokens.shape, len(self.vocab))
        for i, row in enumerate(tokens[:, -self.task.seq_len :].tolist()):
            answer = self.fixed or solve(self.task.name, self.vocab.decode(row)).answer
            logits[i, -1, self.vocab.id(answer)] = 1.0
        return logits[:, -1:] if last else logits

    def forward_kv(self, tokens, positions=None, past=None, last=False):  # only ever called on a prefix
        kv = torch.zeros(1, 1, tokens.shape[1], 1)
        return torch.zeros(tokens.shape[0], 1 if last else tokens.shape[1], len(self.vocab)), [(kv, kv)]


@pytest.mark.parametrize("mode", ["cached", "plain"])
def test_an_oracle_scores_one_and_a_constant_scores_its_share(mode):
    task = task_config("number")
    cfg = LengthGenConfig(grid=(0, 7, 60), n=40, n_prefixes=4, mode=mode)
    rows = measure_length_curve(WindowOracle(task), task, cfg)
    assert [(r["extra"], r["n_hops"]) for r in rows] == [(k, h) for k in (0, 7, 60) for h in (0, 1, 2, 3, 4)]
    assert all(r["accuracy"] == 1.0 and r["ci_high"] == 1.0 and r["ci_low"] > 0.9 for r in rows)
    assert all(r["n"] == (160 if r["n_hops"] == 0 else 40) and r["n_prefixes"] == 4 for r in rows)
    # A model that always says "a" is right exactly on the windows whose answer is "a".
    const = measure_length_curve(WindowOracle(task, fixed="a"), task, cfg)
    samples = [
        point_samples(task, cfg, h, j, 60, draw_prefix(task, 60, h, np.random.default_rng(0)))
        for h in task.hops
        for j in range(4)
    ]
    expected = sum(int((s.answer == task_vocab(task).id("a")).sum()) for s in samples)
    assert [r["correct"] for r in const if r["extra"] == 60 and r["n_hops"] == 0] == [expected]


def test_pooled_rows_add_up_and_intervals_contain_the_accuracy():
    task = task_config("letter")
    rows = measure_length_curve(random_model(task), task, LengthGenConfig(grid=(0, 50), n=9, n_prefixes=3))
    for extra in (0, 50):
        at = [r for r in rows if r["extra"] == extra]
        assert at[0]["correct"] == sum(r["correct"] for r in at[1:]) and at[0]["n"] == 36
        assert all(r["ci_low"] <= r["accuracy"] <= r["ci_high"] for r in at)
        assert at[0]["n_prefixes"] == 12 and at[1]["n_prefixes"] == 3  # letter prefixes are per hop count


def test_cluster_interval_is_a_t_interval_over_prefixes():
    lo, hi = cluster_interval(np.array([0.2, 0.4, 0.6]))
    half = 4.302652729911275 * 0.2 / np.sqrt(3)  # t_{0.975, 2} * sd / sqrt(P)
    assert (lo, hi) == pytest.approx((0.0, min(1.0, 0.4 + half)))
    assert np.isnan(cluster_interval(np.array([0.5]))[0])


def test_the_paper_grid_and_window_split():
    assert PAPER_GRID[:3] == (0, 10, 20) and 100 in PAPER_GRID and 1000 in PAPER_GRID and 1500 in PAPER_GRID
    assert len(PAPER_GRID) == 28 and PAPER_GRID[-1] == 5000
    assert window_counts(500, 8) == [63, 63, 63, 63, 62, 62, 62, 62]


@pytest.mark.parametrize(
    "kw,match",
    [
        (dict(grid=()), "at least one K >= 0"),
        (dict(grid=(-5, 10)), "K = -5 is negative; every K must be >= 0"),
        (dict(n=4, n_prefixes=8), "need 1 <= n_prefixes <= n"),
        (dict(mode="fast"), "allowed: 'cached', 'plain'"),
        (dict(token_budget=10), "token_budget=10 must be >= 1024"),
    ],
)
def test_bad_settings_are_refused_with_what_is_allowed(kw, match):
    with pytest.raises(ConfigError, match=match):
        LengthGenConfig(**kw)


def test_the_grid_is_sorted_and_deduplicated():
    assert dataclasses.replace(LengthGenConfig(), grid=(50, 0, 50)).grid == (0, 50)
