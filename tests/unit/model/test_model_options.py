"""The plane options of ModelConfig: frequency gating, p-RoPE, NoPE from a layer on.

Each is checked against an independent computation (zeroed weights, an explicit rotation loop,
positions that do not matter), the score engine against swap-and-rerun, and HF export.
"""

from __future__ import annotations

import copy
import dataclasses
import math

import pytest
import torch

from possym.config import ConfigError, ModelConfig, load_config
from possym.model.gptj import GPTJ
from possym.model.hf import to_hf
from possym.model.rope import rope_cos_sin, rope_frequencies
from possym.scores.frequency import frequency_use, plane_geometry
from possym.scores.swap_and_rerun import reference_swap_attention
from possym.scores.swaps import head_scores, layer_tables, rotated_qk, swap_attention

VOCAB = 12
BASE = dict(n_layers=2, d_model=16, d_mlp=32, d_vocab=VOCAB, init_range=0.5, dropout=0.0)  # 8 planes, 1 head


def model_with(seed: int = 0, **options) -> GPTJ:
    """A float64 model whose large init gives sharp attention; ``options`` are ModelConfig fields."""
    return GPTJ(ModelConfig(**(BASE | options)), torch.Generator().manual_seed(seed)).double().eval()


def tokens(batch: int = 4, pos: int = 10, seed: int = 1) -> torch.Tensor:
    return torch.randint(0, VOCAB, (batch, pos), generator=torch.Generator().manual_seed(seed))


def same_weights(src: GPTJ, **options) -> GPTJ:
    """A model with ``src``'s weights and different plane options."""
    dst = model_with(**(dataclasses.asdict(src.cfg) | options))
    dst.load_state_dict(src.state_dict())
    return dst


def test_default_options_build_the_same_model_as_before():
    model = model_with()
    assert model.cfg.plain_rope
    # No new parameters or buffers in checkpoints, and the option code path is not even entered.
    assert all(b.attn.static_planes is None and b.attn.gate is None for b in model.blocks)
    assert set(model.state_dict()) == set(model_with(p_rope=0.5, freq_gate="0@1").state_dict())


def test_trivial_masks_give_bitwise_the_same_logits():
    # Force the option code path with masks that change nothing: outputs must not move by one bit.
    model, forced = model_with(), model_with()
    for block in forced.blocks:
        block.attn.static_planes = torch.zeros(8, dtype=torch.bool)
        block.attn.gate = torch.ones(1, 16, dtype=torch.float64)
    with torch.no_grad():
        assert torch.equal(model(tokens()), forced(tokens()))


def test_gated_planes_add_nothing_to_the_logits():
    gated = model_with(freq_gate="0@2-3,6;1@1")
    # Independent computation: a plain model whose W_Q and W_K rows of the gated planes are zero.
    plain = same_weights(gated, freq_gate=None)
    with torch.no_grad():
        for layer, keep in ((0, [2, 3, 6]), (1, [1])):
            dims = [d for k in range(8) if k + 1 not in keep for d in (2 * k, 2 * k + 1)]
            w = plain.blocks[layer].attn.qkv.weight
            w[dims] = 0.0  # W_Q rows
            w[[16 + d for d in dims]] = 0.0  # W_K rows
        torch.testing.assert_close(gated(tokens()), plain(tokens()), atol=1e-12, rtol=0)
        # And changing the gated weights changes nothing.
        noisy = copy.deepcopy(gated)
        noisy.blocks[0].attn.qkv.weight[0:2] += 3.0  # plane 1 of W_Q, gated in layer 0
        torch.testing.assert_close(noisy(tokens()), gated(tokens()), atol=1e-12, rtol=0)
    _, cache = gated.run_with_cache(tokens(), ["blocks.1.attn.hook_rot_q", "blocks.1.attn.hook_rot_k"])
    assert cache["blocks.1.attn.hook_rot_q"][..., 2:].abs().max() == 0
    assert cache["blocks.1.attn.hook_rot_k"][..., 2:].abs().max() == 0


def explicit_rotation(x: torch.Tensor, thetas: list[float]) -> torch.Tensor:
    """Rotate plane k of x [batch, pos, head, d_head] by pos * thetas[k], one loop iteration per plane and position."""
    out = x.clone()
    for p in range(x.shape[1]):
        for k, theta in enumerate(thetas):
            c, s = math.cos(p * theta), math.sin(p * theta)
            a, b = x[:, p, :, 2 * k], x[:, p, :, 2 * k + 1]
            out[:, p, :, 2 * k], out[:, p, :, 2 * k + 1] = a * c - b * s, b * c + a * s
    return out


@pytest.mark.parametrize(("p_rope", "kept"), [(0.5, 4), (0.3, 2), (0.0, 0), (1.0, 8)])
def test_p_rope_rotates_the_fastest_planes_and_leaves_the_rest(p_rope, kept):
    model = model_with(p_rope=p_rope)
    names = ["blocks.1.hook_resid_pre", "blocks.1.attn.hook_rot_q"]
    _, cache = model.run_with_cache(tokens(), names)
    block = model.blocks[1]
    q = (block.ln(cache[names[0]]) @ block.attn.W_Q[0]).unsqueeze(2)  # [batch, pos, head=1, d_head], pre-RoPE
    thetas = rope_frequencies(16, 10_000.0)[:kept].tolist()  # RoPE's own frequencies, not rescaled
    torch.testing.assert_close(cache[names[1]], explicit_rotation(q, thetas), atol=1e-12, rtol=0)


def test_nope_layers_do_not_see_positions_and_earlier_layers_do():
    model = model_with(nope_from_layer=1)
    h = torch.randn(3, 10, 16, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    shuffled = torch.randperm(10, generator=torch.Generator().manual_seed(1)) * 7 + 100  # any distinct positions
    scores = {}
    for layer in (0, 1):
        for name, pos in (("plain", torch.arange(10)), ("moved", shuffled)):
            keep = lambda s, hook, key=(layer, name): scores.__setitem__(key, s)  # noqa: E731
            hook = {f"blocks.{layer}.attn.hook_attn_scores": keep}
            with torch.no_grad(), model.hooks(hook):
                model.blocks[layer].attn(h, *rope_cos_sin(pos, 16, 10_000.0, torch.float64))
    torch.testing.assert_close(scores[(1, "plain")], scores[(1, "moved")], atol=1e-12, rtol=0)
    assert (scores[(0, "plain")] - scores[(0, "moved")]).nan_to_num().abs().max() > 1e-3


def test_a_nope_layer_scores_purely_symbolic():
    model = model_with(nope_from_layer=1)
    scores = head_scores(model, tokens(batch=6))
    assert torch.allclose(scores.s_sym[:, 1], torch.ones(6, 1, dtype=torch.float64), atol=1e-9)


OPTIONS = {
    "p_rope": dict(p_rope=0.5),
    "nope_from_1": dict(nope_from_layer=1),
    "gate": dict(freq_gate="0@1-2;1@5-8"),
    "all": dict(p_rope=0.75, nope_from_layer=1, freq_gate="0@1,7-8"),
    # not plane options, but the engine must honour them too (layer 1 reads layer 0's MLP)
    "authors' recipe": dict(activation="gelu", embd_dropout=0.0),
    "attention-only": dict(mlp=False),
}


@pytest.mark.parametrize("options", OPTIONS.values(), ids=OPTIONS.keys())
@pytest.mark.parametrize("layer", [0, 1])
def test_engine_matches_swap_and_rerun_with_plane_options(options, layer):
    model = model_with(**options)
    toks = tokens(batch=5, seed=3)
    q_rot, k_rot = rotated_qk(model, toks, [layer])[layer]
    fast = swap_attention(layer_tables(model, q_rot, k_rot, 9, layer=layer))
    slow = reference_swap_attention(model, toks, layer=layer, query=9)
    assert (fast.swapped_rows() - slow.swapped_rows()).abs().max() <= 1e-9
    for a, b in zip(fast.scores(), slow.scores(), strict=True):
        assert (a - b).abs().nan_to_num().max() <= 1e-9


def test_treating_a_nope_layer_as_rotating_would_be_wrong():
    # The engine must not rotate NoPE planes: a plain-RoPE table disagrees with the re-run.
    model = model_with(nope_from_layer=0)
    plain = same_weights(model, nope_from_layer=None)
    q_rot, k_rot = rotated_qk(model, tokens(), [1])[1]
    wrong = swap_attention(layer_tables(plain, q_rot, k_rot, 9)).swapped_rows()
    slow = reference_swap_attention(model, tokens(), layer=1, query=9).swapped_rows()
    assert (wrong - slow).abs().max() > 1e-3
    with pytest.raises(ValueError, match="needs layer="):
        layer_tables(model, q_rot, k_rot, 9)


def test_frequency_tools_see_gated_and_static_planes():
    model = model_with(freq_gate="1@1-2", p_rope=0.5)
    use = frequency_use(model, tokens())
    assert use[1, 0, 2:].abs().max() == 0  # gated planes are never used
    assert use[0, 0, 2:].abs().max() > 0
    geo = plane_geometry(model, tokens()[0], layer=0, frequency_id=6)
    assert geo.theta == 0.0  # a p-RoPE plane does not turn
    assert plane_geometry(model, tokens()[0], layer=0, frequency_id=1).theta == 1.0


def test_kv_cache_continues_exactly_with_plane_options():
    model = model_with(**OPTIONS["all"])
    full = tokens(batch=2, pos=12)
    full[1, :7] = full[0, :7]  # one shared prefix, continued two ways
    _, past = model.forward_kv(full[:1, :7])
    with torch.no_grad():
        torch.testing.assert_close(model(full[:, 7:], past=past), model(full)[:, 7:], atol=1e-10, rtol=0)


def test_gated_model_exports_to_hf_exactly():
    model = model_with(freq_gate="0@2-3;1@8")
    with torch.no_grad():
        ours, theirs = model(tokens()), to_hf(model, n_positions=64, attn_implementation="sdpa")(tokens()).logits
    torch.testing.assert_close(ours, theirs, atol=1e-9, rtol=0)


@pytest.mark.parametrize(("options", "field"), [(dict(p_rope=0.5), "p_rope"), (dict(nope_from_layer=1), "nope_from")])
def test_export_refuses_what_hf_gptj_cannot_express(options, field):
    with pytest.raises(ValueError, match=f"model.{field}.*no HF GPT-J equivalent"):
        to_hf(model_with(**options))


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("model.p_rope=1.5", r"p_rope=1.5 must lie in \[0, 1\]"),
        ("model.nope_from_layer=12", "must be null .* or a layer in 0..n_layers-1=11"),
        ("model.freq_gate=0-3", "must look like LAYERS@IDS"),
        ("model.freq_gate=0@65", r"IDs \[65\] do not exist; allowed: 1..64"),
        ("model.freq_gate=12@1", "layer 12 does not exist; allowed: 0..11"),
        ("model.freq_gate=0@1;0-1@2", "layer 0 is listed twice"),
        ("model.freq_gate=0@3-1", "range 3-1 is empty"),
    ],
)
def test_bad_plane_options_say_what_is_allowed(override, message):
    with pytest.raises(ConfigError, match=message):
        load_config("number", None, [override])
