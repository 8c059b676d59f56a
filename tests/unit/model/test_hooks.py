"""TransformerLens habits on possym's GPT-J: hooks as fn(activation, hook), a shorthand cache, stacked weights."""

import pytest
import torch
import torch.nn.functional as F

from possym.config import ModelConfig
from possym.errors import PossymError
from possym.model.gptj import GPTJ
from possym.model.hooks import act_name
from possym.model.rope import apply_rope, rope_cos_sin


def random_model(**kw) -> GPTJ:
    defaults = dict(n_layers=2, d_model=32, n_heads=4, d_mlp=64, d_vocab=40, dropout=0.0, init_range=0.3)
    return GPTJ(ModelConfig(**(defaults | kw)), torch.Generator().manual_seed(0)).double().eval()


def tokens(batch: int = 2, n: int = 9) -> torch.Tensor:
    return torch.randint(0, 40, (batch, n), generator=torch.Generator().manual_seed(1))


def test_the_cache_shorthand_names_the_same_tensor_as_the_full_name():
    _, cache = random_model().run_with_cache(tokens())
    assert cache["pattern", 0] is cache["blocks.0.attn.hook_pattern"]
    assert cache["resid_post", -1] is cache["blocks.1.hook_resid_post"]
    assert cache["k1"] is cache["blocks.1.attn.hook_k"] and cache["embed"] is cache["hook_embed"]
    assert cache.stack_activation("pattern").shape == (2, 2, 4, 9, 9)
    with pytest.raises(KeyError, match="blocks.0.attn.hook_result"):
        cache["result", 0]


def test_names_filter_takes_a_name_a_list_or_a_predicate():
    model = random_model()
    every = set(model.run_with_cache(tokens())[1])
    assert every == set(model.hook_dict)
    assert set(model.run_with_cache(tokens(), names_filter="blocks.1.hook_mlp_out")[1]) == {"blocks.1.hook_mlp_out"}
    assert set(model.run_with_cache(tokens(), ["hook_embed", "blocks.0.attn.hook_z"])[1]) == {
        "hook_embed", "blocks.0.attn.hook_z"}  # fmt: skip
    patterns = model.run_with_cache(tokens(), names_filter=lambda n: n.endswith("hook_pattern"))[1]
    assert sorted(patterns) == ["blocks.0.attn.hook_pattern", "blocks.1.attn.hook_pattern"]


def test_a_hook_is_called_with_the_activation_and_its_named_hook_point():
    model = random_model()
    seen = []

    def record(act, hook):
        seen.append((hook.name, hook.layer(), tuple(act.shape)))

    model.run_with_hooks(tokens(), fwd_hooks=[("blocks.1.attn.hook_q", record), (lambda n: n.endswith("z"), record)])
    assert seen == [("blocks.0.attn.hook_z", 0, (2, 9, 4, 8)), ("blocks.1.attn.hook_q", 1, (2, 9, 4, 8)),
                    ("blocks.1.attn.hook_z", 1, (2, 9, 4, 8))]  # fmt: skip
    assert all(not m._forward_hooks for m in model.modules())


@pytest.mark.parametrize(
    "options", [{}, {"activation": "gelu_new"}, {"mlp": False}, {"freq_gate": "0@2-3", "rotary_dim": 6}]
)
def test_every_block_hook_is_recomputed_from_the_one_before_with_the_stacked_weights(options):
    # A second, hand-written forward pass from the stacked TransformerLens-shaped weights: the hooks
    # hold what their names say, and W_Q ... b_out are the weights the model uses.
    model = random_model(**options)
    cfg = model.cfg
    _, cache = model.run_with_cache(tokens())
    cos, sin = rope_cos_sin(torch.arange(9), cfg.rot_dim, cfg.rope_base, torch.float64)
    torch.testing.assert_close(cache["embed"], model.W_E[tokens()])
    for layer, block in enumerate(model.blocks):
        x = cache["resid_pre", layer]
        h = F.layer_norm(x, (cfg.d_model,), block.ln.weight, block.ln.bias, cfg.ln_eps)
        q, k, v = (torch.einsum("bpm,hmd->bphd", h, w[layer]) for w in (model.W_Q, model.W_K, model.W_V))
        for name, t in (("q", q), ("k", k), ("v", v)):
            torch.testing.assert_close(cache[name, layer], t)
        gate = block.attn.gate if block.attn.gate is not None else torch.ones(cfg.n_heads, cfg.d_head)
        torch.testing.assert_close(cache["rot_q", layer], apply_rope(q * gate, cos, sin))
        torch.testing.assert_close(cache["rot_k", layer], apply_rope(k * gate, cos, sin))
        z = torch.einsum("bhqk,bkhd->bqhd", cache["pattern", layer], v)
        torch.testing.assert_close(cache["z", layer], z)
        attn_out = torch.einsum("bphd,hdm->bpm", z, model.W_O[layer])
        torch.testing.assert_close(cache["attn_out", layer], attn_out)
        if cfg.mlp:
            pre = h @ model.W_in[layer] + model.b_in[layer]
            torch.testing.assert_close(cache["pre", layer], pre)
            gelu = F.gelu(pre, approximate="tanh" if cfg.activation == "gelu_new" else "none")
            torch.testing.assert_close(cache["post", layer], gelu)
            mlp_out = cache["post", layer] @ model.W_out[layer] + model.b_out[layer]
            torch.testing.assert_close(cache["mlp_out", layer], mlp_out)
            attn_out = attn_out + mlp_out
        torch.testing.assert_close(cache["resid_post", layer], x + attn_out)
    ln = model.ln_final
    final = F.layer_norm(cache["resid_post", -1], (cfg.d_model,), ln.weight, ln.bias, cfg.ln_eps)
    torch.testing.assert_close(model(tokens()), final @ model.W_U + model.b_U)


def test_zero_ablating_a_head_by_its_hook_z_equals_zeroing_its_rows_of_W_O():
    model = random_model()

    def ablate(z, hook):
        z[:, :, 2] = 0.0
        return z

    with torch.no_grad():
        hooked = model.run_with_hooks(tokens(), fwd_hooks=[("blocks.1.attn.hook_z", ablate)])
        clean = model(tokens())
        model.blocks[1].attn.out.weight[:, 16:24] = 0.0  # head 2's d_head columns of the output projection
        surgery = model(tokens())
    torch.testing.assert_close(hooked, surgery)
    assert (hooked - clean).abs().max() > 1e-3


def test_stacked_weights_are_new_tensors_so_writing_to_them_leaves_the_model_alone():
    model = random_model()
    before = model(tokens())
    W_Q = model.W_Q
    torch.testing.assert_close(W_Q[1], model.blocks[1].attn.W_Q)
    with torch.no_grad():
        W_Q.zero_()
    torch.testing.assert_close(model(tokens()), before)


def test_an_attention_only_model_says_it_has_no_mlp_weights():
    model = random_model(mlp=False)
    with pytest.raises(PossymError, match="mlp=false"):
        model.W_in  # noqa: B018
    assert "blocks.0.hook_mlp_out" not in model.hook_dict


def test_act_name_passes_full_names_through_and_expands_shorthand():
    assert act_name("blocks.3.attn.hook_pattern") == "blocks.3.attn.hook_pattern"
    assert act_name("attn", 2) == "blocks.2.attn.hook_pattern"  # TransformerLens's alias
    assert act_name("mlp_out", 0) == "blocks.0.hook_mlp_out"
    assert act_name("normalized") == "ln_final.hook_normalized"
