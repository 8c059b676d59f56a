"""Attention on the hop key against the extra window, and length accuracy under knock-outs and sharpening,
on constructed models whose attention and answers are known in closed form."""

import math

import numpy as np
import pytest
import torch

from possym.config import ConfigError, ModelConfig
from possym.evaluate.interventions import Sharpen, intervene
from possym.evaluate.lengthgen import LengthGenConfig, measure_length_curve, point_prefix, point_samples
from possym.evaluate.window_attention import hop_attention
from possym.evaluate.window_interventions import accuracy_table, knockout_accuracy, sharpened_accuracy
from possym.model.gptj import GPTJ
from possym.tasks import task_config, task_vocab
from possym.tasks.letter import target_tokens

LETTER = task_config("letter")
N_TARGET_IDS = len(target_tokens(LETTER))  # ids 1..64 are (letter, int) targets, 65..128 pairs


def target_attention_model(c: float) -> GPTJ:
    """One NoPE head whose logit is ``c`` on every (letter, int) key and 0 on every other key, for every query.

    Embeddings: a target is e0 - e1 + e2 - e3, anything else e4 - e5 + e2 - e3. After the LayerNorm each of the
    four non-zero entries is ±sqrt(2) (mean 0, variance 1/2 over 8 dims), so q_0 = h_2 = sqrt(2) for every
    token and k_0 = sqrt(8) h_0 = 4 for a target, 0 otherwise: the logit q_0 k_0 / sqrt(d_head) is
    4 sqrt(2) / sqrt(8) = 2 per unit, scaled to c by W_Q.
    """
    cfg = ModelConfig(n_layers=1, d_model=8, n_heads=1, d_mlp=4, rotary_dim=0, dropout=0.0, ln_eps=1e-12,
                      d_vocab=len(task_vocab(LETTER)), mlp=False)
    model = GPTJ(cfg).double().eval()
    with torch.no_grad():
        emb = torch.zeros(cfg.d_vocab, 8, dtype=torch.float64)
        emb[:, 2], emb[:, 3] = 1.0, -1.0
        emb[1:N_TARGET_IDS + 1, 0], emb[1:N_TARGET_IDS + 1, 1] = 1.0, -1.0
        emb[N_TARGET_IDS + 1:, 4], emb[N_TARGET_IDS + 1:, 5] = 1.0, -1.0
        emb[0, 4], emb[0, 5] = 1.0, -1.0
        model.embed.weight.copy_(emb)
        w = torch.zeros(24, 8, dtype=torch.float64)
        w[0, 2] = c / 2.0  # q_0 = (c/2) sqrt(2)
        w[8, 0] = math.sqrt(8)  # k_0 = sqrt(8) sqrt(2) = 4 for a target
        model.blocks[0].attn.qkv.weight.copy_(w)
    return model


@pytest.mark.parametrize("c", [0.0, 1.5])
def test_the_final_query_mass_on_the_answer_and_the_extra_window_is_the_closed_form(c):
    # At the final query: K extra targets and 8 window targets carry e^c, 8 pairs and the query carry 1.
    model = target_attention_model(c)
    cfg = LengthGenConfig(grid=(0, 40, 300), n=8, n_prefixes=2)
    frame = hop_attention(model, LETTER, cfg, hops=(1, 3))
    for extra in cfg.grid:
        z = math.exp(c) * (extra + 8) + 9
        for n_hops in (1, 3):
            row = frame[(frame.extra == extra) & (frame.n_hops == n_hops) & (frame.query_hop == 0)].iloc[0]
            assert row.answer == pytest.approx(math.exp(c) / z, abs=1e-9)
            assert row.extra_mass == pytest.approx(extra * math.exp(c) / z, abs=1e-9)
            # 1 hop: the next key is the answer (a target); 3 hops: a pre-target pair, weight 1.
            assert row.next_hop == pytest.approx((math.exp(c) if n_hops == 1 else 1.0) / z, abs=1e-9)
            assert row.extra_max == pytest.approx(math.exp(c) / z if extra else 0.0, abs=1e-9)
            assert row.rest == pytest.approx(1 - row.chain - row.extra_mass)
            assert row.n == 8 and row.seq_len == extra + 17


def test_an_edit_is_seen_by_the_attention_measurement_sharpening_multiplies_the_logit():
    model = target_attention_model(1.0)
    cfg = LengthGenConfig(grid=(100,), n=4, n_prefixes=1)
    frame = hop_attention(model, LETTER, cfg, hops=(2,), edit=lambda: intervene(model, Sharpen((0,), 1.5)))
    row = frame[frame.query_hop == 0].iloc[0]
    z = math.exp(1.5) * 108 + 9
    assert row.extra_mass == pytest.approx(100 * math.exp(1.5) / z, abs=1e-9)


def test_inner_hops_are_measured_from_their_own_position():
    # Uniform attention: the query at window position p (absolute K + p) gives each visible key 1 / (K + p + 1).
    model = target_attention_model(0.0)
    cfg = LengthGenConfig(grid=(50,), n=6, n_prefixes=1)
    frame = hop_attention(model, LETTER, cfg, hops=(4,))
    samples = point_samples(LETTER, cfg, 4, 0, 50, point_prefix(LETTER, cfg, 4, 0))
    for k in range(4):
        expect = np.mean(1.0 / (samples.path[:, k] + 1))
        row = frame[frame.query_hop == k].iloc[0]
        assert row.next_hop == pytest.approx(expect, abs=1e-9)
        assert row.extra_mass == pytest.approx(np.mean(50.0 / (samples.path[:, k] + 1)), abs=1e-9)


def bag_of_targets_model() -> GPTJ:
    """Uniform attention copying each key's one-hot token, read out over the (letter, int) targets only: the
    argmax is the most frequent target of the context (ties to the lowest id). The answer is a window target
    that no prefix token shares, so with a long prefix a prefix token always wins, and alone the window's
    answer sometimes does."""
    d = len(task_vocab(LETTER))
    cfg = ModelConfig(n_layers=1, d_model=d, n_heads=1, d_mlp=4, rotary_dim=0, dropout=0.0, d_vocab=d, mlp=False)
    model = GPTJ(cfg).double().eval()
    with torch.no_grad():
        model.embed.weight.copy_(torch.eye(d, dtype=torch.float64))
        w = torch.zeros(3 * d, d, dtype=torch.float64)
        w[2 * d:] = torch.eye(d)  # V = identity; Q = K = 0: every logit 0
        model.blocks[0].attn.qkv.weight.copy_(w)
        model.blocks[0].attn.out.weight.copy_(1000.0 * torch.eye(d))  # the mean outweighs the query's own token
        model.unembed.weight.copy_(torch.eye(d))
        model.unembed.bias.fill_(-1e9)
        # Only targets can be the prediction; a tie goes to the lowest id by a margin far above rounding.
        model.unembed.bias[1:N_TARGET_IDS + 1] = -1e-3 * torch.arange(N_TARGET_IDS, dtype=torch.float64)
    return model


def test_knocking_out_the_extra_window_gives_the_window_alone_and_changes_accuracy():
    model = bag_of_targets_model()
    cfg = LengthGenConfig(grid=(0, 200), n=48, n_prefixes=4)
    frame = knockout_accuracy(model, LETTER, cfg, hops=(1, 3), together=True)
    for n_hops in (1, 3):
        # Oracle: the same windows run alone.
        correct = 0
        for j in range(cfg.n_prefixes):
            samples = point_samples(LETTER, cfg, n_hops, j, 200, point_prefix(LETTER, cfg, n_hops, j))
            with torch.inference_mode():
                logits = model(torch.as_tensor(samples.tokens[:, 200:]))[:, -1]
            correct += int((logits.argmax(-1).numpy() == samples.answer).sum())
        at = frame[(frame.extra == 200) & (frame.n_hops == n_hops)].set_index("knocked_out")
        assert at.loc["L0", "correct"] == at.loc["all", "correct"] == correct
        assert at.loc["none", "correct"] == 0 < correct  # the prefix's tokens outvote the window's
    table = accuracy_table(frame, "knocked_out")
    assert list(table.columns) == [0, 200] and ("L0", 3) in table.index


def test_the_unsharpened_rows_are_the_length_curves_per_hop_points():
    model = target_attention_model(1.0)
    with torch.no_grad():  # read out the attended token, so that the answer depends on the attention
        model.blocks[0].attn.qkv.weight[16:].copy_(torch.eye(8, dtype=torch.float64))
        model.blocks[0].attn.out.weight.copy_(torch.eye(8, dtype=torch.float64))
    cfg = LengthGenConfig(grid=(0, 60), n=16, n_prefixes=2)
    sharp = sharpened_accuracy(model, LETTER, cfg, betas=(1.0, 3.0))
    curve = {(r["extra"], r["n_hops"]): r["correct"] for r in measure_length_curve(model, LETTER, cfg) if r["n_hops"]}
    plain = sharp[sharp.beta == 1.0]
    assert {(r.extra, r.n_hops): r.correct for r in plain.itertuples()} == curve
    assert set(sharp.layers) == {"0"} and len(sharp) == 2 * 2 * 4


@pytest.mark.parametrize("call, match", [
    (lambda m: hop_attention(m, LETTER, LengthGenConfig(grid=(0,), n=2, n_prefixes=1), hops=(5,)),
     r"allowed: \[1, 2, 3, 4\]"),
    (lambda m: sharpened_accuracy(m, LETTER, LengthGenConfig(grid=(0,), n=2, n_prefixes=1), betas=(0.0,)),
     "each > 0"),
    (lambda m: knockout_accuracy(m, LETTER, LengthGenConfig(grid=(0,), n=2, n_prefixes=1), layers=[3]),
     r"must lie in 0..0"),
    (lambda m: knockout_accuracy(m, LETTER, LengthGenConfig(grid=(0,), n=2, n_prefixes=1, mode="plain")),
     "cached prefix"),
])
def test_bad_requests_say_what_is_allowed(call, match):
    with pytest.raises(ConfigError, match=match):
        call(target_attention_model(1.0))


def one_hop_reader(c: float) -> GPTJ:
    """One NoPE head that solves 1-hop letter inputs by content, with a fixed logit gap ``c``: the query (x, y)
    gives the logit c to every key whose left letter is y and 0 to every other key, and the readout names the
    (letter, int) target with the most attention mass. So the answer (the one key with left letter y) wins
    iff e^c exceeds the count of the most frequent other target in the context: a long prefix of targets
    outvotes it, and sharpening (e^{βc}) or knocking the prefix out brings it back.

    Every token's embedding has three ones (its one-hot id, its left letter, its right letter or "none"), so
    the LayerNorm is the same affine map (x − μ) / σ for every token and the logit is
    α (1[match] − 2μ + 8μ²) / (σ² sqrt(d_head)): the constant cancels in the softmax, and α sets the gap.
    """
    n_ids = len(task_vocab(LETTER))
    left0, right0, d = n_ids, n_ids + 8, n_ids + 17
    cfg = ModelConfig(n_layers=1, d_model=d, n_heads=1, d_mlp=4, rotary_dim=0, dropout=0.0, d_vocab=n_ids,
                      mlp=False, ln_eps=1e-12)
    model = GPTJ(cfg).double().eval()
    mu = 3 / d
    sigma2 = mu * (1 - mu)
    with torch.no_grad():
        emb = torch.zeros(n_ids, d, dtype=torch.float64)
        emb[torch.arange(n_ids), torch.arange(n_ids)] = 1.0
        for i in range(n_ids):
            if 1 <= i <= N_TARGET_IDS:
                left, right = (i - 1) // LETTER.n_ints, 8  # a target: no right letter
            elif i > N_TARGET_IDS:
                left, right = divmod(i - N_TARGET_IDS - 1, LETTER.n_letters)
            else:
                left, right = 0, 8  # PAD never occurs
            emb[i, left0 + left] = 1.0
            emb[i, right0 + right] = 1.0
        model.embed.weight.copy_(emb)
        w = torch.zeros(3 * d, d, dtype=torch.float64)
        alpha = c * sigma2 * math.sqrt(d)
        for r in range(8):
            w[r, right0 + r] = alpha  # q_r: the query's right letter
            w[d + r, left0 + r] = 1.0  # k_r: the key's left letter
        w[2 * d:2 * d + n_ids, :n_ids] = torch.eye(n_ids)  # v: the key's id
        model.blocks[0].attn.qkv.weight.copy_(w)
        out = torch.zeros(d, d, dtype=torch.float64)
        out[:n_ids, :n_ids] = 1000.0 * torch.eye(n_ids)
        model.blocks[0].attn.out.weight.copy_(out)
        unembed = torch.zeros(n_ids, d, dtype=torch.float64)
        unembed[:, :n_ids] = torch.eye(n_ids)
        model.unembed.weight.copy_(unembed)
        model.unembed.bias.fill_(-1e9)
        model.unembed.bias[1:N_TARGET_IDS + 1] = -1e-3 * torch.arange(N_TARGET_IDS, dtype=torch.float64)
    return model


def test_a_one_hop_reader_loses_to_a_long_prefix_and_sharpening_or_a_knock_out_restores_it():
    c = math.log(6.0)
    model = one_hop_reader(c)
    cfg = LengthGenConfig(grid=(0, 800), n=32, n_prefixes=2)
    attention = hop_attention(model, LETTER, cfg, hops=(1,))
    for extra in cfg.grid:  # the answer's mass is e^c / (e^c + K + 16): 16 window keys and K extra keys carry 1
        row = attention[attention.extra == extra].iloc[0]
        assert row.answer == pytest.approx(6.0 / (6.0 + extra + 16), rel=1e-6)
    sharp = sharpened_accuracy(model, LETTER, cfg, betas=(1.0, 3.0), hops=(1,)).set_index(["beta", "extra"]).accuracy
    # e^c = 6 beats at most 2 copies of a window target, never the ~14-30 copies of a target among 800 extra tokens;
    # e^{3c} = 216 beats them all.
    assert (sharp[1.0, 0], sharp[1.0, 800], sharp[3.0, 800]) == (1.0, 0.0, 1.0)
    knocked = knockout_accuracy(model, LETTER, cfg, hops=(1,)).set_index(["knocked_out", "extra"]).accuracy
    assert (knocked["none", 800], knocked["L0", 800]) == (0.0, 1.0)
