"""Interventions on a possym model against independent oracles: a plane gated through the hooks is the model
built with that plane gated (``model.freq_gate``), a knock-out and a sharpening are the softmax of the
unedited logits edited by hand, with and without a key-value cache."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from possym.config import ModelConfig
from possym.errors import PossymError
from possym.evaluate.interventions import GatePlanes, KnockOut, Sharpen, intervene
from possym.model.gptj import GPTJ

CFG = ModelConfig(n_layers=3, d_model=32, n_heads=2, d_mlp=64, d_vocab=12, dropout=0.0)


def model(cfg: ModelConfig = CFG) -> GPTJ:
    return GPTJ(cfg, torch.Generator().manual_seed(1)).double().eval()


TOKENS = torch.randint(0, 12, (3, 9), generator=torch.Generator().manual_seed(2))


@pytest.mark.parametrize("layer, ids", [(0, [1]), (1, [2, 5]), (2, [1, 2, 3, 4, 5, 6, 7, 8])])
def test_a_plane_gated_at_evaluation_is_the_model_trained_with_that_plane_gated(layer, ids):
    plain = model()
    gated = GPTJ(dataclasses.replace(CFG, freq_gate=f"{layer}@{','.join(str(k) for k in set(range(1, 9)) - set(ids))}"
                                     if len(ids) < 8 else None)).double().eval()
    gated.load_state_dict(plain.state_dict())
    with intervene(plain, GatePlanes({layer: ids})):
        hooked = plain(TOKENS)
    if len(ids) < 8:
        torch.testing.assert_close(hooked, gated(TOKENS), rtol=0, atol=1e-12)
    assert not torch.allclose(hooked, plain(TOKENS))  # it did something, and the hooks are gone after
    torch.testing.assert_close(plain(TOKENS), model()(TOKENS), rtol=0, atol=0)


def test_every_plane_gated_leaves_content_alone_and_one_head_can_be_gated():
    m = model()
    with intervene(m, GatePlanes({0: range(1, 9)})):
        _, cache = m.run_with_cache(torch.full((1, 5), 3))
    torch.testing.assert_close(cache["pattern", 0][0, :, 4], torch.full((2, 5), 0.2, dtype=torch.float64))
    with intervene(m, GatePlanes({0: [1]}, heads=(1,))):
        _, one = m.run_with_cache(TOKENS)
    _, base = m.run_with_cache(TOKENS)
    torch.testing.assert_close(one["pattern", 0][:, 0], base["pattern", 0][:, 0], rtol=0, atol=0)
    assert not torch.allclose(one["pattern", 0][:, 1], base["pattern", 0][:, 1])


def test_a_knock_out_is_the_softmax_over_the_other_keys_with_and_without_a_cache():
    m = model()
    _, base = m.run_with_cache(TOKENS)
    with intervene(m, KnockOut((1,), keys=(2, 3, 4), queries=(6, 7, 8))):
        _, cache = m.run_with_cache(TOKENS)
        full = m(TOKENS)
        _, past = m.forward_kv(TOKENS[:, :4])
        cached = m(TOKENS[:, 4:], past=past)
    scores = base["attn_scores", 1].clone()
    scores[:, :, 6:, 2:5] = float("-inf")
    torch.testing.assert_close(cache["pattern", 1], scores.softmax(-1), rtol=0, atol=1e-12)
    torch.testing.assert_close(cache["pattern", 0], base["pattern", 0], rtol=0, atol=0)  # other layers as they were
    torch.testing.assert_close(cached, full[:, 4:], rtol=0, atol=1e-10)  # absolute positions past a cache


def test_sharpening_is_the_softmax_of_beta_times_the_logits():
    m = model()
    _, base = m.run_with_cache(TOKENS)
    for layer in (0, 2):  # one layer at a time: the layers below it see what they saw
        with intervene(m, Sharpen((layer,), beta=1.4)):
            _, cache = m.run_with_cache(TOKENS)
        torch.testing.assert_close(cache["pattern", layer], (1.4 * base["attn_scores", layer]).softmax(-1),
                                   rtol=0, atol=1e-12)
    with intervene(m, Sharpen((0, 1, 2), beta=1.0)):
        torch.testing.assert_close(m(TOKENS), m.run_with_hooks(TOKENS), rtol=0, atol=1e-12)


@pytest.mark.parametrize("call, message", [
    (lambda m: intervene(m, GatePlanes({3: [1]})), "layer must lie in 0..2"),
    (lambda m: intervene(m, GatePlanes({0: [0]})), "plane ID must lie in 1..8"),
    (lambda m: intervene(m, GatePlanes({0: [1]}, heads=(2,))), "head must lie in 0..1"),
    (lambda m: intervene(m, KnockOut((0,), keys=())), "at least one key position"),
    (lambda m: intervene(m, Sharpen((0,), beta=0.0)), "must be a number > 0"),
    (lambda m: intervene(m, Sharpen((), beta=2.0)), "at least one layer"),
])
def test_bad_interventions_say_what_is_allowed(call, message):
    with pytest.raises(PossymError, match=message), call(model()):
        pass


def test_a_knock_out_that_would_leave_a_query_no_key_is_refused():
    m = model()
    every_key_of_query_2 = KnockOut((0,), keys=(0, 1, 2), queries=(2,))
    with pytest.raises(PossymError, match="no key to attend to"), intervene(m, every_key_of_query_2):
        m(TOKENS)
