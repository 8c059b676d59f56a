import dataclasses

import pytest
import torch
from transformers.models.gptj import modeling_gptj

from possym.config import ModelConfig
from possym.model.gptj import GPTJ, hook_names
from possym.model.hf import from_hf, to_hf


def random_model(dtype=torch.float64, **kw) -> GPTJ:
    # A larger init than the paper's 0.02 makes attention far from uniform, so equality is a real test.
    defaults = dict(n_layers=3, d_model=32, d_mlp=64, d_vocab=40, dropout=0.0, init_range=0.3)
    cfg = ModelConfig(**(defaults | kw))
    return GPTJ(cfg, torch.Generator().manual_seed(0)).to(dtype).eval()


def attention_is_not_uniform(model: GPTJ, tokens: torch.Tensor) -> bool:
    _, cache = model.run_with_cache(tokens, ["blocks.0.attn.hook_pattern"])
    row = cache["blocks.0.attn.hook_pattern"][0, 0, -1]
    return float(row.max()) > 3.0 / tokens.shape[1]


@pytest.mark.parametrize("dtype,attn,tol", [(torch.float64, "sdpa", 1e-9), (torch.float32, "eager", 1e-5)])
@pytest.mark.parametrize("length", [17, 1100])
@pytest.mark.parametrize("activation", ["gelu_new", "gelu"])
def test_logits_equal_hf_gptj(dtype, attn, tol, length, activation):
    model = random_model(dtype, activation=activation)
    hf = to_hf(model, n_positions=2048, attn_implementation=attn)
    tokens = torch.randint(0, 40, (2, length), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        ours, theirs = model(tokens), hf(tokens).logits
    assert attention_is_not_uniform(model, tokens)
    torch.testing.assert_close(ours, theirs, atol=tol, rtol=tol)


def test_stock_hf_table_agrees_at_training_length():
    # HF's own float32 rotary table (as from_pretrained builds it) is exact enough at 17 tokens.
    model = random_model(torch.float32)
    hf = to_hf(model, n_positions=64)
    hf.transformer.rotary_emb.embed_positions = modeling_gptj.create_sinusoidal_positions(64, model.cfg.rot_dim)
    tokens = torch.randint(0, 40, (4, 17))
    with torch.no_grad():
        torch.testing.assert_close(model(tokens), hf(tokens).logits, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("kw", [dict(n_heads=4), dict(n_heads=2, rotary_dim=8), dict(rotary_dim=6)])
def test_multi_head_and_partial_rotary_equal_hf(kw):
    model = random_model(torch.float64, **kw)
    tokens = torch.randint(0, 40, (3, 30), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        torch.testing.assert_close(model(tokens), to_hf(model, n_positions=64)(tokens).logits, atol=1e-5, rtol=1e-5)


def test_hf_round_trip_restores_every_weight_exactly():
    model = random_model()
    back = from_hf(to_hf(model, n_positions=64))
    for (name, a), (_, b) in zip(model.state_dict().items(), back.state_dict().items(), strict=True):
        assert torch.equal(a, b), name


def test_the_exact_gelu_is_not_the_tanh_one():
    # The two GELUs differ by ~1e-3 at moderate inputs: a model that ignored the knob would fail here.
    exact, approx = random_model(activation="gelu"), random_model(activation="gelu_new")
    approx.load_state_dict(exact.state_dict())
    tokens = torch.randint(0, 40, (2, 17), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        assert not torch.allclose(exact(tokens), approx(tokens), atol=1e-6, rtol=0)


@pytest.mark.parametrize(("embd", "activation"), [(0.0, "gelu"), (None, "gelu_new"), (0.25, "gelu")])
def test_hf_config_carries_the_recipe_and_comes_back(embd, activation):
    from transformers import GPTJConfig

    model = random_model(dropout=0.1, embd_dropout=embd, activation=activation)
    hf = to_hf(model, n_positions=64)
    assert hf.config.embd_pdrop == (0.1 if embd is None else embd)
    assert hf.config.resid_pdrop == hf.config.attn_pdrop == 0.1
    assert hf.config.activation_function == activation
    back = from_hf(hf).cfg
    assert (back.embd_p, back.activation) == (model.cfg.embd_p, activation)
    # the authors' misspelt key, as their scripts passed it: silently ignored, so HF's default 0.0 applies
    assert GPTJConfig(embed_pdrop=0.1).embd_pdrop == 0.0


def test_an_activation_possym_cannot_run_is_refused_on_import():
    hf = to_hf(random_model(), n_positions=64)
    hf.config.activation_function = "relu"
    with pytest.raises(ValueError, match="allowed: \\('gelu_new', 'gelu'\\)"):
        from_hf(hf)


def test_attention_only_blocks_have_no_mlp_and_refuse_hf_export():
    model = random_model(mlp=False)
    assert all(block.mlp is None for block in model.blocks)
    assert not any("mlp" in name for name, _ in model.named_parameters())
    with pytest.raises(ValueError, match="mlp=false"):
        to_hf(model)


def test_any_length_works_without_a_position_table():
    model = random_model(torch.float32, n_layers=1, d_model=16, d_mlp=16)
    with torch.no_grad():
        logits = model(torch.randint(0, 40, (1, 6000)))
    assert logits.shape == (1, 6000, 40) and torch.isfinite(logits).all()


def test_fused_and_explicit_attention_paths_agree():
    model = random_model()
    tokens = torch.randint(0, 40, (2, 20))
    with torch.no_grad():
        fused = model(tokens)
        explicit, cache = model.run_with_cache(tokens, ["blocks.2.attn.hook_pattern"])
    torch.testing.assert_close(fused, explicit)
    pattern = cache["blocks.2.attn.hook_pattern"]
    torch.testing.assert_close(pattern.sum(-1), torch.ones(2, 1, 20, dtype=torch.float64))
    assert torch.all(pattern.triu(1) == 0), "attention must be causal"


def test_cached_rotated_q_k_give_the_pre_softmax_scores():
    model = random_model(n_heads=2)
    names = ["blocks.1.attn.hook_rot_q", "blocks.1.attn.hook_rot_k", "blocks.1.attn.hook_attn_scores"]
    _, cache = model.run_with_cache(torch.randint(0, 40, (1, 9)), names)
    q, k, scores = (cache[n] for n in names)
    expected = torch.einsum("bqhd,bkhd->bhqk", q, k) / (model.cfg.d_head**0.5)
    causal = torch.ones(9, 9, dtype=torch.bool).tril()
    torch.testing.assert_close(scores[..., causal], expected[..., causal])


def test_a_patching_hook_changes_the_output_and_is_removed_afterwards():
    model = random_model()
    tokens = torch.randint(0, 40, (1, 10))
    with torch.no_grad():
        clean = model(tokens)
        with model.hooks({"blocks.1.hook_resid_pre": lambda x, hook: torch.zeros_like(x)}):
            patched = model(tokens)
        again = model(tokens)
    assert not torch.allclose(clean, patched)
    torch.testing.assert_close(clean, again)
    assert all(not m._forward_hooks for m in model.modules())


def test_hooks_are_removed_even_when_the_forward_pass_fails():
    model = random_model()

    def boom(_, hook):
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError), model.hooks({"blocks.0.attn.hook_pattern": boom}):
        model(torch.randint(0, 40, (1, 5)))
    assert all(not m._forward_hooks for m in model.modules())


def test_unknown_hook_names_are_rejected_with_the_pattern_to_use():
    with pytest.raises(ValueError, match="hook_pattern"):
        with random_model().hooks({"blocks.0.attn.nope": print}):
            pass


def test_weight_views_have_transformerlens_shapes():
    model = random_model(n_heads=4)
    attn = model.blocks[0].attn
    assert attn.W_Q.shape == attn.W_K.shape == attn.W_V.shape == (4, 32, 8)
    assert attn.W_O.shape == (4, 8, 32)
    assert model.W_E.shape == (40, 32) and model.W_U.shape == (32, 40)


@pytest.mark.parametrize("mlp", [True, False])
def test_hook_names_lists_every_hook_in_the_order_the_forward_pass_fires_them(mlp):
    model = random_model(mlp=mlp)
    fired = []
    with torch.no_grad(), model.hooks([(lambda name: True, lambda t, hook: fired.append(hook.name))]):
        model.run_with_cache(torch.randint(0, 40, (1, 5)), ["blocks.0.attn.hook_pattern"])  # the explicit path too
    assert fired == hook_names(model.cfg) == list(model.hook_dict)


def test_same_init_seed_gives_identical_weights_and_different_seed_does_not():
    cfg = dataclasses.replace(ModelConfig(n_layers=2, d_model=16, d_mlp=16, d_vocab=10))
    a, b, c = (GPTJ(cfg, torch.Generator().manual_seed(s)) for s in (0, 0, 1))
    assert all(torch.equal(x, y) for x, y in zip(a.parameters(), b.parameters(), strict=True))
    assert not torch.equal(a.embed.weight, c.embed.weight)


@pytest.mark.parametrize("shared", [True, False])
@pytest.mark.parametrize("options", [{}, {"activation": "gelu", "mlp": False}, {"activation": "gelu"}])
def test_a_cached_prefix_gives_the_full_forward_logits(shared, options):
    # The length-generalisation evaluator computes a prefix once and continues many inputs from it;
    # in a causal model this must equal the plain forward pass over prefix + continuation.
    model = random_model(rotary_dim=16, n_heads=2, **options)
    g = torch.Generator().manual_seed(2)
    prefix = torch.randint(0, 40, (1 if shared else 3, 50), generator=g)
    rest = torch.randint(0, 40, (3, 7), generator=g)
    _, past = model.forward_kv(prefix)
    full = model(torch.cat((prefix.expand(3, -1), rest), dim=1))[:, 50:]
    assert attention_is_not_uniform(model, torch.cat((prefix.expand(3, -1), rest), dim=1))
    torch.testing.assert_close(model(rest, past=past), full, atol=1e-10, rtol=0)
    # The explicit-pattern path (taken when a hook reads the pattern) agrees with it too.
    logits, cache = model.run_with_cache(rest, ["blocks.1.attn.hook_pattern"], past=past)
    torch.testing.assert_close(logits, full, atol=1e-10, rtol=0)
    assert cache["blocks.1.attn.hook_pattern"].shape == (3, 2, 7, 57)


@pytest.mark.parametrize("cached", [True, False])
@pytest.mark.parametrize("options", [{}, {"mlp": False}])
def test_last_position_only_equals_the_last_row_of_the_full_pass(cached, options):
    # Evaluations read the last position: with last=True the final block computes one query row. It
    # must give the full pass's last row, keep every layer's keys and values (a cache built with it
    # continues as the full one does), and leave a hooked model's shapes alone.
    model = random_model(n_heads=2, **options)
    g = torch.Generator().manual_seed(4)
    prefix, rest = torch.randint(0, 40, (1, 40), generator=g), torch.randint(0, 40, (3, 9), generator=g)
    _, past = model.forward_kv(prefix) if cached else (None, None)
    full = model(rest, past=past)
    short = model(rest, past=past, last=True)
    assert short.shape == (3, 1, 40)
    torch.testing.assert_close(short, full[:, -1:], atol=1e-12, rtol=0)
    _, kv_full = model.forward_kv(rest, past=past)
    _, kv_short = model.forward_kv(rest, past=past, last=True)
    for (k1, v1), (k2, v2) in zip(kv_full, kv_short, strict=True):
        assert torch.equal(k1, k2) and torch.equal(v1, v2)
    logits, cache = model.run_with_cache(rest, ["blocks.2.hook_resid_post"], past=past, last=True)
    torch.testing.assert_close(logits, full[:, -1:], atol=1e-12, rtol=0)
    assert cache["blocks.2.hook_resid_post"].shape == (3, 9, 32)  # every row, as without last


@pytest.mark.parametrize("activation", ["gelu_new", "gelu"])
def test_the_cache_continues_like_hf_past_key_values(activation):
    # An independent second implementation of caching: HF GPT-J's own past_key_values.
    model = random_model(activation=activation)
    hf = to_hf(model, n_positions=256, attn_implementation="sdpa")  # HF's eager path upcasts to float32
    g = torch.Generator().manual_seed(3)
    prefix, rest = torch.randint(0, 40, (2, 30), generator=g), torch.randint(0, 40, (2, 5), generator=g)
    with torch.no_grad():
        out = hf(prefix, use_cache=True)
        theirs = hf(rest, cache=out.past_key_values, use_cache=True).logits
    _, past = model.forward_kv(prefix)
    torch.testing.assert_close(model(rest, past=past), theirs, atol=1e-9, rtol=0)


def test_a_past_with_the_wrong_number_of_layers_is_rejected():
    model = random_model()
    _, past = model.forward_kv(torch.tensor([[1, 2, 3]]))
    with pytest.raises(ValueError, match="past has 2 layers; the model has 3"):
        model(torch.tensor([[4]]), past=past[:2])
