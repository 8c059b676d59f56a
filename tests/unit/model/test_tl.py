"""A possym GPT-J as a TransformerLens HookedTransformer (and a TransformerBridge): the same logits, the same
attention pattern in every layer, the same TransformerLens-style analysis; a conversion that gets one
convention wrong fails the comparison these tests make."""

from __future__ import annotations

import warnings
from importlib.metadata import version

import pytest
import torch

transformer_lens = pytest.importorskip("transformer_lens")

import possym  # noqa: E402
from possym.config import ModelConfig  # noqa: E402
from possym.errors import PossymError  # noqa: E402
from possym.model import tl  # noqa: E402
from possym.model.gptj import GPTJ  # noqa: E402
from possym.tasks import task_config, task_vocab  # noqa: E402

TL_MAJOR = int(version("transformer-lens").split(".")[0])
hooked = pytest.mark.skipif(TL_MAJOR >= 4, reason="transformer-lens 4.x has no HookedTransformer (possym[tl3] has 3.x)")

LOGIT_ATOL = 1e-5  # float32


def model_for(task: str = "number", **kw) -> GPTJ:
    """A random float32 GPT-J with ``task``'s vocabulary; init_range 0.3 so that attention is far from uniform,
    and LayerNorms and biases off their initial 1s and 0s, so that a mapping that drops one shows."""
    d_vocab = len(task_vocab(task_config(task)))
    cfg = ModelConfig(**({"n_layers": 2, "d_model": 32, "n_heads": 4, "d_mlp": 64, "d_vocab": d_vocab,
                          "dropout": 0.0, "init_range": 0.3} | kw))  # fmt: skip
    model = GPTJ(cfg, torch.Generator().manual_seed(0)).eval()
    g = torch.Generator().manual_seed(2)
    with torch.no_grad():
        for p in model.parameters():
            if p.ndim == 1:  # LayerNorm weights and biases, MLP and unembedding biases
                p.add_(0.3 * torch.randn(p.shape, generator=g))
    return model


def tokens_for(model: GPTJ, batch: int = 3, n: int = 17) -> torch.Tensor:
    return torch.randint(0, model.cfg.d_vocab, (batch, n), generator=torch.Generator().manual_seed(1))


def assert_same_model(converted, model: GPTJ, tokens: torch.Tensor) -> None:
    """Logits and every layer's hook_pattern to 1e-5, against possym's own forward pass."""
    with torch.no_grad():
        ours, cache = model.run_with_cache(tokens)
        theirs, their_cache = converted.run_with_cache(tokens)
    torch.testing.assert_close(theirs, ours, rtol=0, atol=LOGIT_ATOL)
    for layer in range(model.cfg.n_layers):
        name = f"blocks.{layer}.attn.hook_pattern"
        torch.testing.assert_close(their_cache[name], cache["pattern", layer], rtol=0, atol=LOGIT_ATOL)


@hooked
@pytest.mark.parametrize("task", ["number", "letter"])
@pytest.mark.parametrize("options", [{}, {"activation": "gelu_new"}, {"mlp": False}, {"rotary_dim": 4}],
                         ids=["exact-gelu", "tanh-gelu", "attention-only", "partial-rotary"])  # fmt: skip
def test_a_converted_model_has_possyms_logits_and_pattern_in_every_layer(task, options):
    model = model_for(task, **options)
    ht = possym.to_hooked_transformer(model)
    assert ht.cfg.rotary_adjacent_pairs and ht.cfg.positional_embedding_type == "rotary"
    assert_same_model(ht, model, tokens_for(model))


@hooked
@pytest.mark.parametrize("options", [
    {"p_rope": 0.5}, {"p_rope": 0.5, "rotary_dim": 4}, {"freq_gate": "0@2-3;1@1,4", "rotary_dim": 8},
    {"p_rope": 0.5, "freq_gate": "1@1"}], ids=["p-rope", "p-rope-partial", "freq-gate", "p-rope-and-gate"])  # fmt: skip
def test_p_rope_and_gated_models_convert_exactly(options):
    model = model_for(**options)
    assert_same_model(possym.to_hooked_transformer(model), model, tokens_for(model))


@hooked
def test_a_nope_layer_or_a_model_without_rope_is_refused_with_what_is_allowed():
    with pytest.raises(PossymError, match="nope_from_layer=null only"):
        possym.to_hooked_transformer(model_for(nope_from_layer=1))
    with pytest.raises(PossymError, match="at least one RoPE plane"):
        possym.to_hooked_transformer(model_for(p_rope=0.0))


@hooked
def test_positions_past_transformer_lens_own_2048_row_table_use_the_exact_angles():
    # TransformerLens would extend its table from float32 angles past 2,048 rows; the conversion writes all n_ctx.
    model = model_for(n_layers=1, d_model=16, n_heads=2, d_mlp=16, rotary_dim=8)
    ht = possym.to_hooked_transformer(model)
    assert ht.blocks[0].attn.rotary_sin.shape[0] == tl.N_CTX
    tokens = tokens_for(model, batch=1, n=2100)
    with torch.no_grad():
        torch.testing.assert_close(ht(tokens)[:, 2040:], model(tokens)[:, 2040:], rtol=0, atol=LOGIT_ATOL)


@hooked
def test_stacked_weights_have_the_same_names_and_values_both_ways():
    model = model_for()
    ht = possym.to_hooked_transformer(model)
    for name in ("W_Q", "W_K", "W_V", "W_O", "W_in", "b_in", "W_out", "b_out", "W_E", "W_U", "b_U"):
        torch.testing.assert_close(getattr(ht, name), getattr(model, name), rtol=0, atol=0, msg=name)


def _wrong_pairing(cfg):
    cfg.rotary_adjacent_pairs = False  # NeoX's halves


def _sequential_block(cfg):
    cfg.parallel_attn_mlp = False  # attention, then the MLP on the updated stream


def _tanh_gelu(cfg):
    cfg.act_fn = "gelu_new"


@hooked
@pytest.mark.parametrize("mutate", [_wrong_pairing, _sequential_block, _tanh_gelu])
def test_a_wrong_config_mapping_fails_the_comparison(monkeypatch, mutate):
    model = model_for()
    real = tl.hooked_transformer_config

    def wrong(*args, **kw):
        cfg = real(*args, **kw)
        mutate(cfg)
        return cfg

    monkeypatch.setattr(tl, "hooked_transformer_config", wrong)
    with pytest.raises(AssertionError):
        assert_same_model(possym.to_hooked_transformer(model), model, tokens_for(model))


def _with_their_tables(model: GPTJ, rotary_base: float):
    """The conversion with TransformerLens's own rotary tables, built from ``rotary_base``, left in place."""
    cfg = tl.hooked_transformer_config(model.cfg)
    cfg.rotary_base = rotary_base
    with warnings.catch_warnings():  # 3.x's notice that 4.0 removes HookedTransformer
        warnings.simplefilter("ignore", DeprecationWarning)
        ht = transformer_lens.HookedTransformer(cfg)
    ht.load_state_dict(ht.state_dict() | tl.to_transformer_lens_state_dict(model))
    return ht.eval()


@hooked
def test_a_p_rope_model_needs_the_rescaled_rotary_base_not_ropes_own():
    # Without the exact tables, TransformerLens's own (float32 angles, fine at short lengths) at
    # base^(2·kept/rot_dim) are right, and at RoPE's base 10,000 wrong: the kept planes would turn slower.
    model = model_for(p_rope=0.5)
    base = tl.hooked_transformer_config(model.cfg).rotary_base
    assert base == pytest.approx(10_000.0**0.5)
    assert_same_model(_with_their_tables(model, base), model, tokens_for(model))
    with pytest.raises(AssertionError):
        assert_same_model(_with_their_tables(model, 10_000.0), model, tokens_for(model))


@hooked
@pytest.mark.parametrize("key", ["W_Q<->W_K", "ln2 untied", "no b_U", "W_O transposed per head"])
def test_a_wrong_weight_mapping_fails_the_comparison(monkeypatch, key):
    model = model_for()
    real = tl.to_transformer_lens_state_dict

    def wrong(m):
        sd = real(m)
        if key == "W_Q<->W_K":
            sd["blocks.1.attn.W_Q"], sd["blocks.1.attn.W_K"] = sd["blocks.1.attn.W_K"], sd["blocks.1.attn.W_Q"]
        elif key == "no b_U":
            sd["unembed.b_U"] = torch.zeros_like(sd["unembed.b_U"])
        else:
            sd["blocks.0.attn.W_O"] = sd["blocks.0.attn.W_O"].flip(1)
        return sd

    monkeypatch.setattr(tl, "to_transformer_lens_state_dict", wrong)
    ht = possym.to_hooked_transformer(model)
    if key == "ln2 untied":  # ln2 is ln1's very parameters after the conversion, so it is untied after it
        assert ht.blocks[0].ln2.w is ht.blocks[0].ln1.w
        ht.blocks[0].ln2.w = torch.nn.Parameter(torch.ones_like(ht.blocks[0].ln1.w))
    with pytest.raises(AssertionError):
        assert_same_model(ht, model, tokens_for(model))


def tl_style_analysis(model, tokens: torch.Tensor, layer: int = 1, head: int = 2):
    """What a TransformerLens notebook does: cache a pattern, then zero-ablate one head through its hook_z."""
    logits, cache = model.run_with_cache(tokens)
    pattern = cache["pattern", 0]

    def ablate_head(z, hook):
        z[:, :, head] = 0.0
        return z

    ablated = model.run_with_hooks(tokens, fwd_hooks=[(f"blocks.{layer}.attn.hook_z", ablate_head)])
    return pattern, logits, ablated


@hooked
def test_a_transformer_lens_analysis_runs_unchanged_on_possym_and_its_conversion():
    model = model_for()
    tokens = tokens_for(model)
    with torch.no_grad():
        ours = tl_style_analysis(model, tokens)
        theirs = tl_style_analysis(possym.to_hooked_transformer(model), tokens)
    for a, b in zip(ours, theirs, strict=True):
        torch.testing.assert_close(b, a, rtol=0, atol=LOGIT_ATOL)
    assert (ours[2] - ours[1]).abs().max() > 1e-2  # the ablation did something
    # the same ablation as surgery on possym's weights: head 2's rows of W_O in layer 1 set to zero
    d = model.cfg.d_head
    with torch.no_grad():
        model.blocks[1].attn.out.weight[:, 2 * d : 3 * d] = 0.0
        torch.testing.assert_close(model(tokens), ours[2], rtol=0, atol=1e-6)


@pytest.mark.tl4
def test_a_transformer_bridge_of_possym_gives_its_logits_pattern_and_analysis():
    model = model_for()
    tokens = tokens_for(model)
    bridge = possym.to_transformer_bridge(model)
    assert_same_model(bridge, model, tokens)
    with torch.no_grad():
        for a, b in zip(tl_style_analysis(model, tokens), tl_style_analysis(bridge, tokens), strict=True):
            torch.testing.assert_close(b, a, rtol=0, atol=LOGIT_ATOL)


@pytest.mark.tl4
def test_a_transformer_bridge_refuses_what_the_hugging_face_export_cannot_hold():
    with pytest.raises(PossymError, match="p_rope"):
        possym.to_transformer_bridge(model_for(p_rope=0.5))


@pytest.mark.tl4
def test_on_transformer_lens_4_to_hooked_transformer_says_what_to_use_instead(monkeypatch):
    def removed(name):  # what 4.x's module __getattr__ does for the names it removed
        raise ImportError(f"{name!r} was removed in TransformerLens 4.0.")

    if TL_MAJOR < 4:  # on 4.x this is what is installed
        monkeypatch.delattr(transformer_lens, "HookedTransformer")
        monkeypatch.setattr(transformer_lens, "__getattr__", removed, raising=False)
    with pytest.raises(PossymError, match="to_transformer_bridge"):
        possym.to_hooked_transformer(model_for())


@pytest.mark.tl4
def test_the_task_vocabulary_is_the_converted_models_tokenizer():
    from possym.model.hf import hf_tokenizer
    from possym.tasks import PAD

    vocab = task_vocab(task_config("letter"))
    tok = hf_tokenizer(vocab.tokens, PAD)
    model = model_for("letter")
    if TL_MAJOR >= 4:
        converted = possym.to_transformer_bridge(model, tokenizer=tok)
    else:
        converted = possym.to_hooked_transformer(model, tokenizer=tok)
    ids = torch.tensor([[3, 7, 11]])
    assert converted.to_str_tokens(ids[0]) == [vocab.tokens[i] for i in (3, 7, 11)]
