"""Scores split by hop count and query position: each group's mean is the engine's score of that group's
inputs alone, the hop queries are those the score stage uses, and the per-input purity shares are counts."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from possym.config import ModelConfig
from possym.errors import PossymError
from possym.model.gptj import GPTJ
from possym.scores.checkpoints import score_model
from possym.scores.dynamics import purity
from possym.scores.split import per_input_scores, split_scores
from possym.scores.swaps import head_scores
from possym.tasks import generate, task_config, task_vocab

TASK = task_config("number")
SAMPLES = generate(TASK, 24, np.random.default_rng(0))


def model() -> GPTJ:
    cfg = ModelConfig(n_layers=2, d_model=16, d_mlp=32, d_vocab=len(task_vocab(TASK)), dropout=0.0, init_range=0.5)
    return GPTJ(cfg, torch.Generator().manual_seed(0)).double().eval()


def test_each_hop_group_scores_as_its_inputs_alone():
    m = model()
    split = split_scores(per_input_scores(m, SAMPLES, hops=False), np.random.default_rng(0))
    for h in TASK.hops:
        idx = np.flatnonzero(SAMPLES.n_hops == h)
        alone = head_scores(m, torch.as_tensor(SAMPLES.tokens[idx]))
        for layer in (0, 1):
            row = split[(split.n_hops == h) & (split.layer == layer)].iloc[0]
            assert row.n == len(idx)
            assert row.s_pos == pytest.approx(float(alone.s_pos[:, layer, 0].mean()), abs=1e-12)
            assert row.s_sym == pytest.approx(float(alone.s_sym[:, layer, 0].mean()), abs=1e-12)
            assert row.s_pos_low <= row.s_pos <= row.s_pos_high


def test_hop_queries_pooled_are_the_score_stages_hop_scores():
    m = model()
    rows = per_input_scores(m, SAMPLES)
    pooled = split_scores(rows, np.random.default_rng(0), by=("query",))
    stage = {(r["query"], r["layer"]): r for r in score_model(m, SAMPLES, step=0, hops=True)}
    assert {q for q, _ in stage} == set(pooled["query"])
    for r in pooled.itertuples():
        assert r.n == stage[r.query, r.layer]["n_inputs"]
        assert r.s_pos == pytest.approx(stage[r.query, r.layer]["s_pos"], abs=1e-12)
        assert r.s_sym == pytest.approx(stage[r.query, r.layer]["s_sym"], abs=1e-12)
    hop2 = rows[rows["query"] == "hop2"]
    assert (hop2["n_hops"] > 2).all()
    assert (hop2["query_pos"].to_numpy() == SAMPLES.path[hop2["input"].to_numpy(), 2]).all()


def test_purity_shares_count_the_inputs_pure_by_themselves():
    rows = per_input_scores(model(), SAMPLES, hops=False)
    split = split_scores(rows, np.random.default_rng(0), gamma=0.1)
    for r in split.itertuples():
        g = rows[(rows.n_hops == r.n_hops) & (rows.layer == r.layer)]
        kinds = [purity(p, s, 0.1) for p, s in zip(g.s_pos, g.s_sym, strict=True)]
        assert r.share_positional == kinds.count("positional") / len(g)
        assert r.share_symbolic == kinds.count("symbolic") / len(g)
    assert split.share_symbolic.max() > 0 or split.share_positional.max() > 0  # some input is pure: a real check


def test_bad_requests_say_what_is_wrong():
    with pytest.raises(PossymError, match="missing"):
        split_scores(per_input_scores(model(), SAMPLES, hops=False), np.random.default_rng(0), by=("step",))
    with pytest.raises(PossymError, match="no inputs"):
        per_input_scores(model(), SAMPLES.take(np.array([], dtype=np.int64)))
