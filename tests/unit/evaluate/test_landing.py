"""Attention landing on a constructed positional head whose answer is known: plane 1 (θ = 1 rad) makes
the last query attend d positions back; a key 44 positions before the right one looks almost the same to
that plane, so it wins when the right key is weakened; gating plane 1 leaves a plane that tells them apart."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import torch

from possym.config import ModelConfig
from possym.errors import PossymError
from possym.evaluate.interventions import GatePlanes, intervene
from possym.evaluate.landing import alias_distance, attention_landing, landing_summary, plane_margins, wrapped_angle
from possym.model.gptj import GPTJ
from possym.model.rope import rope_frequencies
from possym.tasks import TaskSamples, generate, solve, task_config, task_vocab

D = 3  # the head attends D positions back
FILLER, WEAK, LETTER, QUERY = 0, 1, 2, 3
C1, C2 = 80.0, 4.0  # plane 1 strong, plane 2 weak: plane 2 alone still finds the right key


def _embedding(alpha: float, beta: float, gamma: float) -> torch.Tensor:
    """A zero-mean vector with mean square 1 (LayerNorm leaves it as it is) that carries alpha, beta, gamma
    as the differences of the dimension pairs (0, 1), (2, 3), (4, 5); dims 6, 7 pad the norm."""
    e = torch.zeros(16, dtype=torch.float64)
    pad = math.sqrt(8 - alpha**2 - beta**2 - gamma**2)
    for i, v in enumerate((alpha, beta, gamma, pad)):
        e[2 * i], e[2 * i + 1] = v, -v
    return e


def positional_head() -> GPTJ:
    """One layer, one head, no MLP: the key's plane 1 is (alpha, 0) and plane 2 (beta, 0) of its token;
    the query token's q is pre-rotated by −D·θ in both planes, so the logit of key j at query i is
    (C1·alpha_j·cos((i−j−D)θ_1) + C2·beta_j·cos((i−j−D)θ_2)) / 4, largest at j = i − D."""
    cfg = ModelConfig(n_layers=1, d_model=16, n_heads=1, d_mlp=32, mlp=False, d_vocab=4, dropout=0.0)
    model = GPTJ(cfg).double().eval()
    theta = rope_frequencies(cfg.rot_dim, cfg.rope_base)
    with torch.no_grad():
        model.embed.weight[FILLER] = _embedding(0.0, 0.0, 0.0)
        model.embed.weight[WEAK] = _embedding(0.9, 1.0, 0.0)  # the right key's content, weakened in plane 1
        model.embed.weight[LETTER] = _embedding(1.0, 1.0, 0.0)
        model.embed.weight[QUERY] = _embedding(0.0, 0.0, 1.0)
        w = torch.zeros(48, 16, dtype=torch.float64)
        read = {name: torch.zeros(16, dtype=torch.float64) for name in "abg"}
        for name, dim in zip("abg", (0, 2, 4), strict=True):
            read[name][dim], read[name][dim + 1] = 0.5, -0.5
        for plane, c in ((0, C1), (1, C2)):
            angle = -D * float(theta[plane])
            w[2 * plane] = c * math.cos(angle) * read["g"]  # q
            w[2 * plane + 1] = c * math.sin(angle) * read["g"]
        w[16 + 0], w[16 + 2] = read["a"], read["b"]  # k: plane 1 carries alpha, plane 2 beta
        model.blocks[0].attn.qkv.weight.copy_(w)
    return model


def one_input(length: int, right: int, alias: int | None) -> TaskSamples:
    tokens = np.full((1, length), FILLER)
    tokens[0, -1] = QUERY
    tokens[0, length - 1 - D] = right
    if alias is not None:
        tokens[0, length - 1 - D - 44] = alias
    return TaskSamples(tokens=tokens, answer=np.array([LETTER]), n_hops=np.array([1]),
                       path=np.array([[length - 1, length - 1 - D]]), extra=0)


def test_the_right_key_wins_when_it_looks_as_the_alias_does():
    land = attention_landing(positional_head(), one_input(60, LETTER, LETTER))
    row = land.iloc[0]
    assert (row.offset, row.right_key, row.query_pos, bool(row.alias_exists)) == (0, 56, 59, True)
    # Plane 1 cannot tell them apart: the alias keeps a large share (e^{-(C1(1-cos 44) + C2(1-cos 44θ2))/4}).
    assert 0.2 < row.p_alias / row.p_right < 0.6 and row.p_right + row.p_alias > 0.99


def test_a_weakened_right_key_loses_to_the_key_44_before_it_and_gating_plane_1_restores_it():
    model = positional_head()
    samples = one_input(60, WEAK, LETTER)
    row = attention_landing(model, samples).iloc[0]
    assert (row.argmax_key, row.offset) == (12, -44)
    assert row.p_alias == row.p_max > 0.5
    with intervene(model, GatePlanes({0: [1]})):
        gated = attention_landing(model, samples).iloc[0]
    assert gated.offset == 0 and gated.p_alias < gated.p_right
    summary = landing_summary(attention_landing(model, samples), alias=44, by=("layer",))
    assert (summary.share_alias.item(), summary.share_right.item(), summary.mode_offset.item()) == (1.0, 0.0, -44)


def test_no_alias_key_before_the_start():
    row = attention_landing(positional_head(), one_input(30, WEAK, None)).iloc[0]
    assert row.offset == 0 and not row.alias_exists and math.isnan(row.p_alias)


def test_right_keys_follow_the_solvers_hop_path():
    task = task_config("number")
    samples = generate(task, 12, np.random.default_rng(0))
    model = GPTJ(ModelConfig(n_layers=2, d_model=16, d_mlp=32, d_vocab=len(task_vocab(task))),
                 torch.Generator().manual_seed(0)).eval()
    land = attention_landing(model, samples, queries="hops")
    vocab = task_vocab(task)
    for r in land.itertuples():
        path = solve(task, vocab.decode(samples.tokens[r.input])).path
        assert (r.query_pos, r.right_key, r.n_hops) == (path[r.query], path[r.query + 1], len(path) - 1)
        assert r.offset == r.argmax_key - r.right_key and r.argmax_key <= r.query_pos
    # every hop query of every input, in both layers
    assert len(land) == 2 * int(samples.n_hops.sum())
    assert len(attention_landing(model, samples, layers=[1])) == 12


def test_alias_distance_is_the_best_whole_turn():
    for theta in (1.0, 0.866, 0.3):
        a = alias_distance(theta, 100)
        turns = [abs(float(wrapped_angle(d * theta))) for d in range(1, 101)]
        assert turns[a - 1] == min(turns)
    assert abs(44 - 7 * 2 * math.pi) == pytest.approx(float(wrapped_angle(44.0)))


def test_bad_requests_say_what_is_wrong():
    model = positional_head()
    with pytest.raises(PossymError, match="queries"):
        attention_landing(model, one_input(30, LETTER, None), queries="all")  # type: ignore[arg-type]
    with pytest.raises(PossymError, match="layers"):
        attention_landing(model, one_input(30, LETTER, None), layers=[3])
    with pytest.raises(PossymError, match="theta"):
        alias_distance(0.0, 10)


def test_plane_margins_say_plane_1_favours_the_alias_and_plane_2_the_right_key():
    model = positional_head()
    theta = rope_frequencies(model.cfg.rot_dim, model.cfg.rope_base)
    margins = plane_margins(model, one_input(60, WEAK, LETTER)).set_index("plane")["margin"]
    # partial logits of the construction, at the alias (distance D + 44) minus at the right key (distance D)
    ln = 1 / (1 + model.cfg.ln_eps)  # LayerNorm's eps shrinks q and k by sqrt(1 + eps) each
    want_1 = ln * C1 * (1.0 * math.cos(44 * float(theta[0])) - 0.9) / 4
    want_2 = ln * C2 * (1.0 * math.cos(44 * float(theta[1])) - 1.0) / 4
    assert margins[1] == pytest.approx(want_1, abs=1e-9) and margins[1] > 0
    assert margins[2] == pytest.approx(want_2, abs=1e-9) and margins[2] < 0
    assert margins.drop([1, 2]).abs().max() < 1e-12  # no other plane and no unrotated part carries a logit
    assert margins.sum() > 0  # the alias won by their sum
    assert plane_margins(model, one_input(60, LETTER, LETTER)).empty  # the right key won: nothing missed


def test_plane_margins_sum_to_the_models_own_logit_margin_at_every_hop_query():
    task = task_config("number")
    samples = generate(task, 16, np.random.default_rng(1))
    model = GPTJ(ModelConfig(n_layers=2, d_model=16, d_mlp=32, d_vocab=len(task_vocab(task)), init_range=0.5),
                 torch.Generator().manual_seed(0)).double().eval()
    margins = plane_margins(model, samples, queries="hops")
    _, cache = model.run_with_cache(torch.as_tensor(samples.tokens))
    land = attention_landing(model, samples, queries="hops").set_index(["input", "query", "layer", "head"])
    total = margins.groupby(["input", "query", "layer", "head"])["margin"].sum()
    assert len(total) > 5
    for (i, h, layer, head), m in total.items():
        scores = cache["attn_scores", layer][i, head, samples.path[i, h]]
        right, best = samples.path[i, h + 1], land.loc[(i, h, layer, head), "argmax_key"]
        assert m == pytest.approx(float(scores[best] - scores[right]), abs=1e-9) and m >= 0
    assert len(land[land.offset != 0]) == len(total)  # every missed landing has its margins


def test_landing_after_a_cached_prefix_is_the_plain_landing():
    from possym.evaluate.lengthgen import prefix_cache
    from possym.tasks import draw_prefix, generate_after

    task = task_config("number")
    model = GPTJ(ModelConfig(n_layers=2, d_model=16, d_mlp=32, d_vocab=len(task_vocab(task)), init_range=0.5),
                 torch.Generator().manual_seed(0)).double().eval()
    prefix = draw_prefix(task, 30, 1, np.random.default_rng(0))
    samples = generate_after(task, prefix, 12, 3, np.random.default_rng(1))
    plain = attention_landing(model, samples, queries="hops")
    cached = attention_landing(model, samples, queries="hops", past=prefix_cache(model, prefix), token_budget=1024)
    pd.testing.assert_frame_equal(cached.drop(columns=["p_max", "p_right", "p_alias"]),
                                  plain.drop(columns=["p_max", "p_right", "p_alias"]))
    for c in ("p_max", "p_right", "p_alias"):
        np.testing.assert_allclose(cached[c], plain[c], rtol=0, atol=1e-12)
    assert (plain.extra == 30).all() and plain.right_key.min() >= 30
    with pytest.raises(PossymError, match="inside"):
        attention_landing(model, samples, queries="hops", past=prefix_cache(model, samples.tokens[0, :-2]))
