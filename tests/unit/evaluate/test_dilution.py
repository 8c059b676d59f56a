"""Dilution on constructed heads whose answer is known: a flat head loses mass exactly as 1 / (1 + W + K e^(−Δ))
predicts with Δ = 0, a head whose logits shun the extra window loses none, and knocking out keys no head
attends to changes nothing; random knock-outs are seeded and leave K(1 − f) keys."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import torch

from possym.config import ModelConfig
from possym.errors import PossymError
from possym.evaluate.dilution import (
    compare_dilution,
    knockout_controls,
    logit_margins,
    mass_subset,
    predicted_mass,
    random_subsets,
)
from possym.evaluate.interventions import KnockOut, model_logits
from possym.model.gptj import GPTJ

WINDOW = 8  # tokens of the window after the extra keys; the query is its last token, the right key its third


def flat_model() -> GPTJ:
    """W_Q = 0 in every layer: every visible key gets the same logit."""
    model = GPTJ(ModelConfig(n_layers=2, d_model=16, n_heads=2, d_mlp=32, d_vocab=10, dropout=0.0),
                 torch.Generator().manual_seed(0))
    for block in model.blocks:
        block.attn.qkv.weight.data[:16].zero_()
    return model.eval()


def shunning_model(c: float = 3.0) -> GPTJ:
    """One NoPE attention-only head on 4 dims. Token 0 (the extra window's) embeds as (1, −1, 0, 0), every other
    token as (−1, 1, 0, 0); after the LayerNorm they are ±(√2, −√2, 0, 0), and with W_Q = W_K = c·I the logit
    is c²·h_q·h_k / 2: 2c² between window tokens, −2c² from a window query to an extra key (Δ = 4c² = 36)."""
    model = GPTJ(ModelConfig(n_layers=1, d_model=4, n_heads=1, d_mlp=8, d_vocab=10, mlp=False, p_rope=0.0,
                             dropout=0.0), torch.Generator().manual_seed(0))
    with torch.no_grad():
        model.embed.weight[:] = torch.tensor([-1.0, 1.0, 0.0, 0.0])
        model.embed.weight[0] = torch.tensor([1.0, -1.0, 0.0, 0.0])
        model.blocks[0].ln.weight.fill_(1.0)
        model.blocks[0].ln.bias.zero_()
        model.blocks[0].attn.qkv.weight[:8] = torch.cat([c * torch.eye(4), c * torch.eye(4)])
    return model.eval()


def window_inputs(extra: int, batch: int = 3, extra_token: int | None = None) -> torch.Tensor:
    g = torch.Generator().manual_seed(extra)
    window = torch.randint(1, 10, (batch, WINDOW), generator=g)
    prefix = (torch.full((batch, extra), extra_token) if extra_token is not None
              else torch.randint(1, 10, (batch, extra), generator=g))
    return torch.cat([prefix, window], 1)


def margins_at(model: GPTJ, extra: int, **kw) -> object:
    x = window_inputs(extra, **kw)
    return logit_margins(model, x, query=extra + WINDOW - 1, right_key=extra + 2, extra_keys=range(extra))


def test_a_flat_head_shows_the_predicted_dilution_exactly():
    model = flat_model()
    rows = pd.concat([margins_at(model, k) for k in (0, 10, 40, 100)], ignore_index=True)
    for k, at in rows.groupby("n_extra"):
        assert at["mass"].to_numpy() == pytest.approx(1 / (k + WINDOW), abs=1e-6)  # uniform over the visible keys
        assert at["window"].to_numpy() == pytest.approx(WINDOW - 1, abs=1e-4)
    table = compare_dilution(rows, reference_extra=40)
    assert len(table) == 2 * 2 * 4  # layers x heads x K
    assert table["reference_margin"].to_numpy() == pytest.approx(0.0, abs=1e-5)
    assert table["residual"].abs().max() < 1e-6
    assert table["predicted"].to_numpy() == pytest.approx(1 / (table["n_extra"].to_numpy() + WINDOW), abs=1e-6)


def test_a_head_that_ignores_the_extra_window_shows_no_dilution():
    model = shunning_model()
    k0, k100 = margins_at(model, 0, extra_token=0), margins_at(model, 100, extra_token=0)
    assert k0["mass"].to_numpy() == pytest.approx(1 / WINDOW, abs=1e-6)  # flat over the window's 8 keys
    assert k100["mass"].to_numpy() == pytest.approx(1 / WINDOW, abs=1e-6)  # and still, after 100 extra keys
    assert k100["margin"].to_numpy() == pytest.approx(36.0, abs=1e-3)
    table = compare_dilution(pd.concat([k0, k100]))
    assert table["residual"].abs().max() < 1e-6 and table["measured"].to_numpy() == pytest.approx(1 / WINDOW)


def test_knocking_out_keys_that_no_head_attends_to_changes_nothing():
    model = shunning_model()
    x = window_inputs(50, extra_token=0)
    clean = model_logits(model, x)
    knocked = model_logits(model, x, [KnockOut((0,), keys=range(50))])
    torch.testing.assert_close(knocked[:, 50:], clean[:, 50:], rtol=0, atol=1e-6)


def test_the_prediction_follows_its_formula_and_limits():
    assert predicted_mass(2.0, 0, window=3.0) == pytest.approx(1 / 4)  # no extra keys: the window alone
    assert predicted_mass(0.0, 99) == pytest.approx(1 / 100)
    assert predicted_mass(1.0, 10, beta=1.5) == pytest.approx(1 / (1 + 10 * math.exp(-1.5)))
    assert float(predicted_mass(50.0, 10**6)) == pytest.approx(1.0, abs=1e-9)  # a margin that beats any K
    with pytest.raises(PossymError, match="beta > 0"):
        predicted_mass(1.0, 3, beta=0.0)


def test_the_sharpened_prediction_equals_the_model_sharpened_in_that_layer():
    """Layer 0's logits are its own: sharpening layer 0 by β moves its mass to 1 / (1 + W_β + K e^(−βΔ))
    when the extra window is flat, which it is in a model whose extra tokens are all one token at one logit
    (NoPE), so the prediction is exact there."""
    from possym.evaluate.interventions import Sharpen

    model = shunning_model(c=0.6)  # Δ = 1.44: dilution bites
    x = window_inputs(30, extra_token=0)
    rows = logit_margins(model, x, query=37, right_key=32, extra_keys=range(30), betas=(1.0, 2.0))
    sharp = logit_margins(model, x, query=37, right_key=32, extra_keys=range(30), edits=[Sharpen((0,), 2.0)])
    predicted = rows[rows["beta"] == 2.0]["predicted"].to_numpy()
    assert sharp["mass"].to_numpy() == pytest.approx(predicted, abs=1e-6)
    assert (predicted > rows[rows["beta"] == 1.0]["mass"].to_numpy()).all()


def test_random_subsets_are_seeded_and_sized_and_the_mass_subset_takes_the_heaviest_keys():
    keys = list(range(40))
    a = random_subsets(keys, (0.1, 0.5, 0.9), torch.Generator().manual_seed(3), n_draws=2)
    b = random_subsets(keys, (0.1, 0.5, 0.9), torch.Generator().manual_seed(3), n_draws=2)
    assert a == b and [len(s.keys) for s in a] == [4, 4, 20, 20, 36, 36] and a[0].keys != a[1].keys
    model = flat_model()
    model.blocks[0].attn.qkv.weight.data[:16].normal_(generator=torch.Generator().manual_seed(0))
    x = window_inputs(40)
    chosen = mass_subset(model, x, 47, keys, 5, layers=[0])
    from possym.evaluate.interventions import attention_patterns

    row = attention_patterns(model, x, [0])[0][:, :, 47, :40].mean((0, 1))
    assert set(chosen) == set(row.topk(5).indices.tolist())


def test_knockout_controls_on_a_flat_head_restore_mass_as_the_shrunken_window_predicts():
    model = flat_model()
    x = window_inputs(40)
    answers = torch.zeros(len(x), dtype=torch.long)
    table = knockout_controls(model, x, 47, 42, range(40), layers=[0], generator=torch.Generator().manual_seed(0),
                              answers=answers)
    assert set(table["chosen"]) == {"none", "random", "mass"} and "accuracy" in table
    layer0 = table[table["layer"] == 0]
    # layer 0 is flat: K(1 − f) extra keys remain, mass 1 / (8 + K(1 − f)), as predicted, random or by mass
    expected = 1 / (WINDOW + 40 - layer0["n_knocked"].to_numpy())
    assert layer0["mass"].to_numpy() == pytest.approx(expected, abs=1e-6)
    assert layer0["predicted"].to_numpy() == pytest.approx(expected, abs=1e-6)
    assert sorted(set(layer0["fraction"])) == [0.0, 0.1, 0.3, 0.5, 0.7, 0.9]
    assert np.isfinite(table["mass"]).all()


def test_hop_margins_read_every_hop_of_the_length_protocol_and_a_flat_model_follows_the_prediction():
    from possym.evaluate.dilution import hop_margins
    from possym.evaluate.lengthgen import LengthGenConfig
    from possym.tasks import task_config, task_vocab

    task = task_config("letter")
    model = GPTJ(ModelConfig(n_layers=1, d_model=16, d_mlp=32, d_vocab=len(task_vocab(task)), dropout=0.0),
                 torch.Generator().manual_seed(0))
    model.blocks[0].attn.qkv.weight.data[:16].zero_()
    rows = hop_margins(model.eval(), task, LengthGenConfig(grid=(0, 10, 30), n=4, n_prefixes=2), hops=(2,))
    assert sorted(set(rows["query_hop"])) == [0, 1] and sorted(set(rows["extra"])) == [0, 10, 30]
    assert (rows["n_extra"] == rows["extra"]).all()
    table = compare_dilution(rows, by=("layer", "head", "n_hops", "query_hop"))
    assert len(table) == 2 * 3 and table["residual"].abs().max() < 1e-6  # flat: Δ = 0 at every K


def test_protocol_knockouts_give_each_hop_its_controls_and_the_final_hop_its_accuracy():
    from possym.evaluate.dilution import protocol_knockouts
    from possym.evaluate.lengthgen import LengthGenConfig
    from possym.tasks import task_config, task_vocab

    task = task_config("letter")
    model = GPTJ(ModelConfig(n_layers=1, d_model=16, d_mlp=32, d_vocab=len(task_vocab(task)), dropout=0.0),
                 torch.Generator().manual_seed(0))
    model.blocks[0].attn.qkv.weight.data[:16].zero_()  # flat: mass 1 / (window + K − knocked)
    table = protocol_knockouts(model.eval(), task, LengthGenConfig(grid=(0, 20), n=4, n_prefixes=2), layers=[0],
                               generator=torch.Generator().manual_seed(0), hops=(2,), fractions=(0.5,))
    assert set(table["extra"]) == {20} and sorted(set(table["query_hop"])) == [0, 1]
    assert table["accuracy"].notna().tolist() == (table["query_hop"] == 0).tolist()
    assert table["mass"].to_numpy() == pytest.approx(table["predicted"].to_numpy(), abs=1e-6)
