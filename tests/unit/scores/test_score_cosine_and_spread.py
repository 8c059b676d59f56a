"""The authors' cosine (``F.cosine_similarity``) as an option, and the spread of a mean score over inputs."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from possym.config import ModelConfig
from possym.model.gptj import GPTJ
from possym.scores.cosines import cosine_verdicts
from possym.scores.metric import TAU, pair_cosine, swap_pairs
from possym.scores.spread import mean_spread
from possym.scores.swap_and_rerun import reference_swap_attention
from possym.scores.swaps import head_scores


def test_torch_cosine_is_f_cosine_similarity_in_float32():
    g = torch.Generator().manual_seed(0)
    a, b = torch.rand(50, 2, generator=g, dtype=torch.float64), torch.rand(50, 2, generator=g, dtype=torch.float64)
    want = F.cosine_similarity(a.float(), b.float(), dim=-1).double()
    assert torch.equal(pair_cosine(a, b, "torch"), want)
    # away from tiny masses the two cosines agree to float32 rounding
    torch.testing.assert_close(pair_cosine(a, b, "torch"), pair_cosine(a, b), atol=1e-6, rtol=0)


def test_torch_cosine_collapses_where_both_masses_are_tiny_and_exact_does_not():
    for scale in (1e-9, 1e-12, 1e-30):
        v = torch.tensor([[3.0, 4.0]], dtype=torch.float64) * scale
        assert float(pair_cosine(v, v)) == pytest.approx(1.0, abs=1e-12)
        assert float(pair_cosine(v, v, "torch")) < 0.3  # eps 1e-8 clamps each norm: 25·s²/1e-16
    with pytest.raises(ValueError, match="allowed: \\('exact', 'torch'\\)"):
        pair_cosine(v, v, "cos")


@pytest.mark.parametrize("cosine", ["exact", "torch"])
def test_engine_with_either_cosine_equals_swap_and_rerun_scored_by_hand(cosine):
    """The engine's scores against an independent computation: swap-and-rerun rows, each swap's
    cosine computed one by one (F.cosine_similarity in float32 for "torch", float64 norms otherwise)."""
    cfg = ModelConfig(n_layers=2, d_model=16, d_mlp=32, d_vocab=12, init_range=0.5, dropout=0.0)
    model = GPTJ(cfg, torch.Generator().manual_seed(0)).double().eval()
    tokens = torch.randint(0, 12, (4, 9), generator=torch.Generator().manual_seed(1))
    fast = head_scores(model, tokens, cosine=cosine)
    for layer in range(2):
        rerun = reference_swap_attention(model, tokens, layer=layer, query=8)
        clean, swapped = swap_pairs(rerun.row, rerun.swapped, rerun.blocks)  # [batch, head, swap, 2]
        for i in range(4):
            c, s = clean[i, 0], swapped[i, 0]
            alpha = ((c[:, 0] - c[:, 1]).abs() / TAU).softmax(0)
            if cosine == "torch":
                cos_pos = torch.stack([F.cosine_similarity(s[k].float(), c[k].float(), dim=0) for k in range(len(c))])
                cos_sym = torch.stack([F.cosine_similarity(s[k].float(), c[k].flip(0).float(), dim=0)
                                       for k in range(len(c))])
            else:
                cos_pos = torch.stack([s[k] @ c[k] / (s[k].norm() * c[k].norm()) for k in range(len(c))])
                cos_sym = torch.stack([s[k] @ c[k].flip(0) / (s[k].norm() * c[k].norm()) for k in range(len(c))])
            tol = 1e-5 if cosine == "torch" else 1e-9
            assert float(fast.s_pos[i, layer, 0]) == pytest.approx(float((alpha * cos_pos.double()).sum()), abs=tol)
            assert float(fast.s_sym[i, layer, 0]) == pytest.approx(float((alpha * cos_sym.double()).sum()), abs=tol)


def test_a_head_whose_attention_sits_on_the_query_scores_near_zero_under_the_torch_cosine():
    """NoPE head, all but 1e-15 of its mass on the query itself, the rest ordered by content (each key
    e^-4 of the one before): exactly symbolic (s_SYM = 1, s_POS = 0.014), but every swapped 2-vector
    has a norm below eps = 1e-8, so the authors' cosine gives both scores ~0 (masses of 1e-16 to
    1e-23 are far above float32's smallest normal, 1e-38: this is the eps clamp, not underflow)."""
    cfg = ModelConfig(n_layers=1, d_model=8, d_mlp=8, d_vocab=6, rotary_dim=0, dropout=0.0)
    model = GPTJ(cfg, torch.Generator().manual_seed(0)).double().eval()
    with torch.no_grad():
        model.embed.weight.copy_(torch.eye(8)[:6])
        W = model.blocks[0].attn.qkv.weight
        W.zero_()
        W[0:8, 0:8] = torch.diag(torch.tensor([0.0, 40, 80, 120, 160, 50, 0, 0])) * 0.5  # q: a gain per token
        W[8:16, 0:8] = torch.eye(8) * 0.5  # k
    tokens = torch.tensor([[0, 1, 2, 3, 4, 5]])
    table = cosine_verdicts(model, tokens)
    assert table.loc[0, "kind_exact_0.1"] == "symbolic" and table.loc[0, "kind_torch_0.1"] == "mixed"
    assert bool(table.loc[0, "changed"])
    _, cache = model.run_with_cache(tokens, ["blocks.0.attn.hook_pattern"])
    row = cache["blocks.0.attn.hook_pattern"][0, 0, -1]
    assert 1e-24 < float(row[:-1].min()) and float(row[:-1].max()) < 1e-15
    exact, authors = head_scores(model, tokens), head_scores(model, tokens, cosine="torch")
    assert float(exact.s_sym[0, 0, 0]) == pytest.approx(1.0, abs=1e-9) and float(exact.s_pos[0, 0, 0]) < 0.05
    assert float(authors.s_sym[0, 0, 0]) < 1e-6 and float(authors.s_pos[0, 0, 0]) < 1e-6


def test_spread_mean_and_sd_are_the_plain_ones_and_nans_are_skipped():
    g = torch.Generator().manual_seed(0)
    x = torch.rand(80, 3, 2, generator=g, dtype=torch.float64)
    s = mean_spread(x, np.random.default_rng(0))
    torch.testing.assert_close(s.mean, x.mean(0))
    torch.testing.assert_close(s.sd, x.std(0))
    padded = torch.cat((x, torch.full((20, 3, 2), float("nan"), dtype=torch.float64)))
    t = mean_spread(padded, np.random.default_rng(0))
    torch.testing.assert_close(t.mean, s.mean)
    torch.testing.assert_close(t.sd, s.sd)
    assert (t.n == 80).all()
    assert ((t.low <= t.mean) & (t.mean <= t.high)).all()


def test_bootstrap_interval_matches_the_normal_theory_width_and_is_seeded():
    rng = np.random.default_rng(1)
    x = torch.from_numpy(rng.normal(0.4, 0.2, size=(400, 1)))
    s = mean_spread(x, np.random.default_rng(2), n_boot=4000)
    half = 1.959964 * float(x.std()) / math.sqrt(400)
    assert float(s.high[0] - s.low[0]) == pytest.approx(2 * half, rel=0.1)
    again = mean_spread(x, np.random.default_rng(2), n_boot=4000)
    assert torch.equal(s.low, again.low) and torch.equal(s.high, again.high)
    other = mean_spread(x, np.random.default_rng(3), n_boot=4000)
    assert not torch.equal(s.low, other.low)


def test_bootstrap_interval_covers_the_true_mean_about_95_percent_of_the_time():
    rng = np.random.default_rng(5)
    samples = torch.from_numpy(rng.beta(0.5, 0.5, size=(60, 300)))  # 300 independent data sets of 60 inputs
    s = mean_spread(samples, np.random.default_rng(6), n_boot=1000)
    covered = float(((s.low <= 0.5) & (0.5 <= s.high)).double().mean())
    assert 0.90 <= covered <= 0.99


def test_a_constant_head_has_no_spread_and_one_input_has_no_sd():
    s = mean_spread(torch.ones(30, 2, dtype=torch.float64))
    assert (s.sd == 0).all() and (s.low == 1).all() and (s.high == 1).all()
    one = mean_spread(torch.tensor([[0.3]], dtype=torch.float64))
    assert math.isnan(float(one.sd[0])) and float(one.low[0]) == float(one.high[0]) == pytest.approx(0.3)


def test_score_records_carry_the_spread_of_their_inputs():
    cfg = ModelConfig(n_layers=2, d_model=16, d_mlp=32, d_vocab=12, init_range=0.5, dropout=0.0)
    model = GPTJ(cfg, torch.Generator().manual_seed(0)).double().eval()
    tokens = torch.randint(0, 12, (40, 9), generator=torch.Generator().manual_seed(1))
    scores = head_scores(model, tokens)
    for r in scores.records(step=0):
        per_input = scores.s_pos[:, r["layer"], r["head"]]
        assert r["s_pos_sd"] == pytest.approx(float(per_input.std()))
        assert r["s_pos_low"] <= r["s_pos"] <= r["s_pos_high"]
        assert r["s_sym_low"] <= r["s_sym"] <= r["s_sym_high"]
    # a bigger sample of the same inputs' distribution gives a narrower interval
    more = head_scores(model, torch.randint(0, 12, (400, 9), generator=torch.Generator().manual_seed(2)))
    width = [r["s_pos_high"] - r["s_pos_low"] for r in scores.records()]
    width_more = [r["s_pos_high"] - r["s_pos_low"] for r in more.records()]
    assert all(b < a for a, b in zip(width, width_more, strict=True))
