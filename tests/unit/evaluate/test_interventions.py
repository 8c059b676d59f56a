"""Interventions on a possym model, its Hugging Face export and its TransformerLens conversion give the same
patterns and logits (three implementations of one model are each other's oracle); on a Llama built from a
config, each edit equals its definition computed by hand from the rotated q and k."""

from __future__ import annotations

import math

import pytest
import torch

from possym.config import ModelConfig
from possym.errors import PossymError
from possym.evaluate.interventions import (
    GatePlanes,
    KnockOut,
    Sharpen,
    attention_mass,
    attention_patterns,
    intervene,
    model_logits,
)
from possym.model.gptj import GPTJ
from possym.model.hf import to_hf

ATOL = 1e-5  # float32


def possym_model(**kw) -> GPTJ:
    """Random, far from uniform attention (init_range 0.3), partial rotary by default: 2 of 4 planes per head."""
    cfg = ModelConfig(**({"n_layers": 2, "d_model": 16, "n_heads": 2, "d_mlp": 32, "d_vocab": 11, "dropout": 0.0,
                          "init_range": 0.3, "rotary_dim": 4} | kw))  # fmt: skip
    return GPTJ(cfg, torch.Generator().manual_seed(0)).eval()


def tokens(batch: int = 3, n: int = 12, d_vocab: int = 11) -> torch.Tensor:
    return torch.randint(0, d_vocab, (batch, n), generator=torch.Generator().manual_seed(1))


EDITS = {
    "none": [],
    "knock_out_set": [KnockOut(layers=(0, 1), keys=(0, 3, 4, 7))],
    "knock_out_some_queries": [KnockOut(layers=(1,), keys=(1, 2), queries=(9, 11))],
    "sharpen": [Sharpen(layers=(0,), beta=1.7)],
    "gate": [GatePlanes({0: (1,), 1: (2,)}, heads=(1,))],
    "all_three": [GatePlanes({1: (1, 2)}), Sharpen(layers=(1,), beta=0.6), KnockOut(layers=(1,), keys=(5,))],
}


def converted(model: GPTJ, kind: str):
    if kind == "hf":
        return to_hf(model, n_positions=64).eval()
    pytest.importorskip("transformer_lens")
    from possym.model.tl import to_hooked_transformer

    return to_hooked_transformer(model, n_ctx=64).eval()


@pytest.mark.parametrize("kind", ["hf", "tl"])
@pytest.mark.parametrize("edit", list(EDITS))
def test_every_edit_gives_the_same_patterns_and_logits_on_possym_hf_and_transformer_lens(kind, edit):
    model = possym_model()
    other = converted(model, kind)
    x = tokens()
    ours, theirs = attention_patterns(model, x, edits=EDITS[edit]), attention_patterns(other, x, edits=EDITS[edit])
    for layer in ours:
        torch.testing.assert_close(theirs[layer], ours[layer], rtol=0, atol=ATOL)
    torch.testing.assert_close(model_logits(other, x, EDITS[edit]), model_logits(model, x, EDITS[edit]),
                               rtol=0, atol=ATOL)


def test_an_edit_changes_what_it_should_and_intervene_removes_it_on_exit():
    model = possym_model()
    x = tokens()
    clean = attention_patterns(model, x)
    knocked = attention_patterns(model, x, edits=[KnockOut(layers=(0,), keys=(0, 3))])[0]
    assert knocked[:, :, 4:, [0, 3]].abs().max() == 0  # the queries after key 3 give them nothing
    torch.testing.assert_close(knocked[:, :, :4], clean[0][:, :, :4], rtol=0, atol=ATOL)  # earlier queries untouched
    # the rest renormalised: A' = A / (1 - A_0 - A_3)
    kept = clean[0][:, :, 4:] / (1 - clean[0][:, :, 4:, [0, 3]].sum(-1, keepdim=True))
    kept[..., [0, 3]] = 0
    torch.testing.assert_close(knocked[:, :, 4:], kept, rtol=0, atol=ATOL)
    with intervene(model, Sharpen(layers=(0, 1), beta=3.0)):
        sharp = model_logits(model, x)
    torch.testing.assert_close(model_logits(model, x), model_logits(model, x, []))
    assert not torch.allclose(sharp, model_logits(model, x))


@pytest.mark.parametrize("kind", ["possym", "hf", "tl"])
def test_gating_every_plane_leaves_content_only_attention(kind):
    """With every plane gated (and all dims rotary) the logit sees no position: equal tokens share attention."""
    model = possym_model(rotary_dim=None)
    m = model if kind == "possym" else converted(model, kind)
    x = torch.full((1, 6), 3)
    every = GatePlanes({0: range(1, model.cfg.n_planes + 1)})
    row = attention_patterns(m, x, layers=[0], edits=[every])[0][0, :, 5]
    torch.testing.assert_close(row, torch.full_like(row, 1 / 6))


def test_sharpening_by_one_and_an_unused_knock_out_change_nothing():
    model = possym_model()
    x = tokens()
    clean = model_logits(model, x)
    # possym runs SDPA when nothing reads the logits and its explicit softmax when an edit does: float32 apart
    torch.testing.assert_close(model_logits(model, x, [Sharpen((0, 1), 1.0)]), clean, rtol=0, atol=ATOL)
    # keys past every query are never attended to: knocking them out is no edit
    torch.testing.assert_close(model_logits(model, x, [KnockOut((0, 1), keys=(40, 41), queries=(11,))]), clean,
                               rtol=0, atol=ATOL)


def test_bad_edits_are_refused_with_the_allowed_values():
    model = possym_model()
    x = tokens()
    with pytest.raises(PossymError, match="plane ID must lie in 1..2"):
        attention_patterns(model, x, edits=[GatePlanes({0: (3,)})])
    with pytest.raises(PossymError, match=r"layer must lie in 0..1"):
        model_logits(model, x, [Sharpen((5,), 2.0)])
    with pytest.raises(PossymError, match="beta"):
        Sharpen((0,), 0.0)
    with pytest.raises(PossymError, match="no key to attend to"):
        model_logits(model, x, [KnockOut((0,), keys=range(0, 12), queries=(5,))])
    with pytest.raises(PossymError, match="eval mode"):
        model_logits(possym_model().train(), x)


def llama():
    transformers = pytest.importorskip("transformers")
    cfg = transformers.LlamaConfig(vocab_size=11, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=2, attn_implementation="eager")
    torch.manual_seed(0)  # transformers initialises from the global generator; the test's own state
    model = transformers.AutoModelForCausalLM.from_config(cfg).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(10.0) if p.ndim == 2 else None  # far from uniform attention
    return model


def test_a_llama_unedited_gives_its_own_eager_attention():
    model = llama()
    x = tokens()
    with torch.no_grad():
        own = model(input_ids=x, output_attentions=True)
    ours = attention_patterns(model, x)
    for layer, pattern in ours.items():
        torch.testing.assert_close(pattern.float(), own.attentions[layer], rtol=0, atol=ATOL)
    torch.testing.assert_close(model_logits(model, x), own.logits, rtol=0, atol=1e-4)


def test_a_llama_plane_gate_removes_that_planes_term_from_every_logit_rotate_half_pairing():
    """Oracle: layer 0's logits recomputed from the captured rotated q and k, with plane k's dims (k−1 and
    k−1+rot/2: NeoX pairs halves) of q zeroed. Adjacent dims instead would give other logits."""
    from possym.heads.capture import capture_attention

    model = llama()
    x = tokens(batch=2)
    with capture_attention(model, layers=[0]) as records:
        with torch.no_grad():
            model(input_ids=x)
    rec = records[0][0]
    q, k = rec.query.double().clone(), rec.keys_per_head().double()
    half = q.shape[-1] // 2
    q[..., [1, 1 + half]] = 0.0  # plane 2
    logits = rec.scale * q @ k.transpose(-1, -2)
    logits = logits.masked_fill(torch.ones(12, 12, dtype=torch.bool).triu(1), -math.inf)
    gated = attention_patterns(model, x, layers=[0], edits=[GatePlanes({0: (2,)})])[0]
    torch.testing.assert_close(gated, logits.softmax(-1), rtol=0, atol=ATOL)


def test_a_llama_knock_out_and_sharpening_follow_their_definitions():
    model = llama()
    x = tokens()
    clean = attention_patterns(model, x, layers=[0])[0]
    knocked = attention_patterns(model, x, layers=[0], edits=[KnockOut((0,), keys=(2, 5))])[0]
    expected = clean[:, :, 6:].clone()
    expected[..., [2, 5]] = 0
    torch.testing.assert_close(knocked[:, :, 6:], expected / expected.sum(-1, keepdim=True), rtol=0, atol=ATOL)
    sharp = attention_patterns(model, x, layers=[0], edits=[Sharpen((0,), 2.0)])[0]
    squared = clean**2  # softmax(2ℓ) ∝ softmax(ℓ)²
    torch.testing.assert_close(sharp, squared / squared.sum(-1, keepdim=True), rtol=0, atol=ATOL)


def test_attention_mass_reads_a_set_per_input_with_its_concentration():
    model = possym_model()
    model.blocks[0].attn.qkv.weight.data[:16].zero_()  # W_Q = 0 in layer 0: flat attention
    x = tokens()
    mask = torch.zeros(3, 12, dtype=torch.bool)
    mask[0, :4], mask[1, 2:5], mask[2, 7] = True, True, True
    rows = attention_mass(model, x, mask, query=torch.tensor([9, 9, 11]), layers=[0], top_k=2, per_input=True)
    first = rows[rows["input"] == 0]
    assert first["mass"].tolist() == pytest.approx([0.4, 0.4])  # 4 keys of the 10 a query at 9 sees
    assert first["entropy"].tolist() == pytest.approx([math.log(4)] * 2)
    assert first["top_k_share"].tolist() == pytest.approx([0.5, 0.5])
    last = rows[rows["input"] == 2]
    assert last["mass"].tolist() == pytest.approx([1 / 12] * 2)
    assert last["top_k_share"].tolist() == pytest.approx([1, 1])
    summary = attention_mass(model, x, mask, query=torch.tensor([9, 9, 11]), layers=[0])
    assert summary["n"].tolist() == [3, 3] and summary["mass"].iloc[0] == pytest.approx((0.4 + 0.3 + 1 / 12) / 3)


@pytest.mark.parametrize("kind", ["hf", "tl"])
def test_scores_at_chosen_query_positions_agree_across_possym_and_its_conversions(kind):
    """possym scores one query per input with the exact engine; a converted model's prompts end at their query."""
    import possym

    model = possym_model(rotary_dim=None)
    other = converted(model, kind)
    x = tokens()
    queries = torch.tensor([5, 9, 11])
    ours, theirs = possym.head_scores(model, x, query=queries), possym.head_scores(other, x, query=queries)
    torch.testing.assert_close(theirs.s_pos, ours.s_pos.to(theirs.s_pos.dtype), rtol=0, atol=1e-4)
    torch.testing.assert_close(theirs.s_sym, ours.s_sym.to(theirs.s_sym.dtype), rtol=0, atol=1e-4)


@pytest.mark.tl4
@pytest.mark.parametrize("kind", ["llama", "gptj"])
def test_a_bridge_is_refused_naming_the_architecture_it_wraps(kind):
    pytest.importorskip("transformer_lens")
    from transformer_lens.model_bridge.sources import build_bridge_from_module

    hf = llama() if kind == "llama" else to_hf(possym_model(), n_positions=64)
    arch = type(hf).__name__
    bridge = build_bridge_from_module(hf, arch, hf_config=hf.config).eval()
    with pytest.raises(PossymError, match=rf"TransformerBridge \(this one of a {arch}\).*pass the {arch} itself"):
        model_logits(bridge, tokens(), [KnockOut(layers=(0,), keys=(1,))])
