"""possym.head_scores of TransformerLens models, read from their own hooks, against two independent paths:
possym's own engine on the possym model a HookedTransformer was converted from, and the Hugging Face
path on the HF model whose weights TransformerLens's own converter (or its TransformerBridge) holds.
Everything is built locally from configs; nothing is downloaded."""

from __future__ import annotations

import warnings
from importlib.metadata import version

import pytest
import torch

transformer_lens = pytest.importorskip("transformer_lens")
transformers = pytest.importorskip("transformers")

import possym  # noqa: E402
from possym.config import ModelConfig  # noqa: E402
from possym.errors import PossymError  # noqa: E402
from possym.heads.layout import BlockLayout, EncodedPrompt, token_prompts  # noqa: E402
from possym.model.gptj import GPTJ  # noqa: E402
from possym.scores.swaps import head_scores as possym_head_scores  # noqa: E402
from possym.tasks import task_vocab  # noqa: E402

TL_MAJOR = int(version("transformer-lens").split(".")[0])
hooked = pytest.mark.skipif(TL_MAJOR >= 4, reason="transformer-lens 4.x has no HookedTransformer (possym[tl3] has 3.x)")

# Scores divide attention differences by τ = 1e-4, so float32 attention (~1e-7) gives score errors of ~1e-6.
SCORE_ATOL_FP32 = 2e-5
SCORE_ATOL = {torch.float32: SCORE_ATOL_FP32, torch.float64: 1e-9}


@pytest.fixture(autouse=True)
def offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def possym_model(dtype: torch.dtype = torch.float32, **kw) -> GPTJ:
    cfg = ModelConfig(**({"n_layers": 2, "d_model": 32, "n_heads": 4, "d_mlp": 64, "d_vocab": 40, "dropout": 0.0,
                          "init_range": 0.3} | kw))  # fmt: skip
    return GPTJ(cfg, torch.Generator().manual_seed(0)).to(dtype).eval()


def ids(d_vocab: int, batch: int = 4, n: int = 13, seed: int = 1) -> torch.Tensor:
    return torch.randint(0, d_vocab, (batch, n), generator=torch.Generator().manual_seed(seed))


def assert_same_scores(a, b, atol: float) -> None:
    assert a.s_pos.shape == b.s_pos.shape
    torch.testing.assert_close(b.s_pos, a.s_pos, rtol=0, atol=atol)
    torch.testing.assert_close(b.s_sym, a.s_sym, rtol=0, atol=atol)


@hooked
@pytest.mark.parametrize("options", [{}, {"mlp": False}, {"p_rope": 0.5}, {"freq_gate": "0@2-3;1@1,4"},
                                     {"rotary_dim": 4}], ids=["rope", "attn-only", "p-rope", "freq-gate", "partial"])
@pytest.mark.parametrize("block_size", [1, 3])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=["fp64", "fp32"])
def test_a_converted_possym_model_scores_as_possyms_own_engine_does(options, block_size, dtype):
    model = possym_model(dtype, **options)
    tokens = ids(model.cfg.d_vocab)
    ours = possym_head_scores(model, tokens, block_size=block_size)
    theirs = possym.head_scores(possym.to_hooked_transformer(model), tokens, block_size=block_size)
    assert theirs.s_pos.shape == (4, 2, 4)
    assert_same_scores(ours, theirs, SCORE_ATOL[dtype])


@pytest.mark.tl4
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=["fp64", "fp32"])
def test_a_transformer_bridge_of_a_possym_model_scores_as_possyms_own_engine_does(dtype):
    model = possym_model(dtype)
    tokens = ids(model.cfg.d_vocab)
    bridge = possym.to_transformer_bridge(model)
    # The bridge's q and k are rotated at HF GPT-J's frequencies, which HF computes in float32
    # (possym.heads.capture.rope_spec), while possym's are float64: 1e-7 apart in the scores.
    atol = max(SCORE_ATOL[dtype], 1e-6)
    assert_same_scores(possym_head_scores(model, tokens), possym.head_scores(bridge, tokens), atol)


_GPTJ_BRIDGE_HOOKS = ("hook_q", "hook_k", "hook_rot_q", "hook_rot_k", "hook_attn_scores", "hook_pattern")


def fired_hooks(bridge, tokens: torch.Tensor, layer: int) -> dict[str, torch.Tensor]:
    """What each of ``_GPTJ_BRIDGE_HOOKS`` of ``layer`` received in one pass (a silent hook is absent)."""
    fired: dict[str, torch.Tensor] = {}
    names = [f"blocks.{layer}.attn.{h}" for h in _GPTJ_BRIDGE_HOOKS]
    assert all(name in bridge.hook_dict for name in names)  # every one is listed ...
    with torch.no_grad():
        bridge.run_with_hooks(tokens, fwd_hooks=[(n, lambda t, hook, n=n: fired.__setitem__(n.split(".")[-1], t))
                                                 for n in names])
    return fired


@pytest.mark.tl4
def test_the_gptj_bridge_never_fires_its_rotary_hooks_and_fires_attn_scores_after_the_softmax():
    # What docs/heads.md states of GPT-J's bridge (TransformerLens 3.9 and 4.3 alike), against possym's own hooks.
    model = possym_model(torch.float64)
    tokens = ids(model.cfg.d_vocab)
    fired = fired_hooks(possym.to_transformer_bridge(model), tokens, layer=0)
    _, cache = model.run_with_cache(tokens)
    assert sorted(fired) == ["hook_attn_scores", "hook_k", "hook_pattern", "hook_q"]  # ... but hook_rot_q/k stay silent
    # hook_q and hook_k are the projections before RoPE (possym's hook_q, not its hook_rot_q): exact in layer 0
    torch.testing.assert_close(fired["hook_q"], cache["q", 0], rtol=0, atol=1e-12)
    torch.testing.assert_close(fired["hook_k"], cache["k", 0], rtol=0, atol=1e-12)
    assert (fired["hook_q"] - cache["rot_q", 0]).abs().max() > 1e-2
    # hook_attn_scores is the pattern: after the softmax, no masked key left at -inf. 1e-6: HF GPT-J's
    # float32 RoPE frequencies against possym's float64 ones.
    torch.testing.assert_close(fired["hook_attn_scores"], fired["hook_pattern"], rtol=0, atol=0)
    # so a masked key reads 0 there, not -inf: only a row that masks nothing (the last, which possym reads) is right
    assert (fired["hook_attn_scores"][:, :, 0, 1:] == 0).all()
    torch.testing.assert_close(fired["hook_pattern"], cache["pattern", 0], rtol=0, atol=1e-6)
    assert torch.isinf(cache["attn_scores", 0]).any()  # possym's own, before the softmax: -inf above the diagonal


@pytest.mark.tl4
def test_possym_reads_the_gptj_bridge_as_possym_itself_after_rope_with_the_causal_last_row():
    # possym rotates the bridge's hook_q/hook_k itself and reads the mask of the last query only, where a
    # causal row masks nothing: a post-softmax hook_attn_scores (all >= 0) reads as that row, correctly.
    from possym.heads.tl import tl_forward

    model = possym_model(torch.float64)
    tokens = ids(model.cfg.d_vocab)
    records, logits = tl_forward(possym.to_transformer_bridge(model), tokens, layers=[0, 1])
    with torch.no_grad():
        ours, cache = model.run_with_cache(tokens)
    # 1e-6 throughout: HF GPT-J's float32 RoPE frequencies against possym's float64 ones
    torch.testing.assert_close(logits, ours[:, -1], rtol=0, atol=1e-6)
    n = tokens.shape[1]
    for layer, record in records.items():
        # after RoPE: possym's hook_rot_q/k [batch, pos, head, d_head]
        torch.testing.assert_close(record.query, cache["rot_q", layer].transpose(1, 2), rtol=0, atol=1e-6)
        torch.testing.assert_close(record.key, cache["rot_k", layer].transpose(1, 2), rtol=0, atol=1e-6)
        assert record.scale == pytest.approx(model.cfg.d_head**-0.5) and record.softcap is None
        # the last query's row: every key visible, as possym's own causal mask (its pre-softmax scores are finite there)
        assert torch.isfinite(cache["attn_scores", layer][:, :, -1]).all()
        torch.testing.assert_close(record.mask_row(n - 1), torch.zeros(tokens.shape[0], n, dtype=torch.float64))
        torch.testing.assert_close(record.pattern, cache["pattern", layer], rtol=0, atol=1e-6)


_COMMON = dict(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
               num_key_value_heads=2, max_position_embeddings=128, initializer_range=0.3)


def _hf_configs() -> dict:
    t = transformers
    return {
        "qwen2-gqa": t.Qwen2Config(**_COMMON),
        "llama-gqa": t.LlamaConfig(**_COMMON),
        "neox-partial-rotary": t.GPTNeoXConfig(vocab_size=64, hidden_size=32, intermediate_size=64,
                                               num_hidden_layers=2, num_attention_heads=4, rotary_pct=0.5,
                                               initializer_range=0.3),
        "gptj-partial-rotary": t.GPTJConfig(vocab_size=64, n_embd=32, n_layer=2, n_head=4, rotary_dim=4,
                                            n_positions=128, initializer_range=0.3, bos_token_id=0, eos_token_id=0),
    }


def hf_model(name: str) -> torch.nn.Module:
    config = _hf_configs()[name]
    config.architectures = [transformers.AutoModelForCausalLM._model_mapping[type(config)].__name__]
    with torch.random.fork_rng():  # HF initialises from the global generator; keep it out of other tests
        torch.manual_seed(0)
        # eager attention, so that the model returns the weights a bridge's hook_pattern shows
        return transformers.AutoModelForCausalLM.from_config(config, attn_implementation="eager").eval()


def hooked_from_hf(hf, tmp_path):
    """The HF model's weights in a HookedTransformer, by TransformerLens's own config and weight converters
    (from a config.json on disk: nothing is looked up by name or downloaded). No weight processing."""
    from transformer_lens.loading_from_pretrained import convert_hf_model_config, get_pretrained_state_dict

    hf.config.save_pretrained(tmp_path)
    cfg = transformer_lens.HookedTransformerConfig(**convert_hf_model_config(str(tmp_path)), device="cpu")
    with warnings.catch_warnings():  # 3.x's notice that 4.0 removes HookedTransformer
        warnings.simplefilter("ignore", DeprecationWarning)
        ht = transformer_lens.HookedTransformer(cfg)
    ht.load_and_process_state_dict(get_pretrained_state_dict(str(tmp_path), cfg, hf_model=hf), fold_ln=False,
                                   center_writing_weights=False, center_unembed=False, fold_value_biases=False)
    return ht.eval()


def bridge_of(hf):
    from transformer_lens.model_bridge.sources import build_bridge_from_module

    return build_bridge_from_module(hf, type(hf).__name__, hf_config=hf.config).eval()


PROMPT_LAYOUTS = [BlockLayout(start=0, block_size=1, n_blocks=12), BlockLayout(start=2, block_size=2, n_blocks=4)]


def prompts(d_vocab: int) -> list[EncodedPrompt]:
    out = []
    for k, layout in enumerate(PROMPT_LAYOUTS):
        for row in ids(d_vocab, batch=3, n=13, seed=k).tolist():
            out.append(EncodedPrompt(tuple(row), layout, None, "random"))
    return out


@hooked
@pytest.mark.parametrize("name", ["qwen2-gqa", "neox-partial-rotary", "gptj-partial-rotary"])
def test_a_hugging_face_model_and_its_weights_in_a_hooked_transformer_score_alike(name, tmp_path):
    hf = hf_model(name)
    ht = hooked_from_hf(hf, tmp_path)
    assert ht.cfg.rotary_adjacent_pairs == (name.startswith("gptj"))  # both pairings are exercised
    ps = prompts(64)
    with torch.no_grad():
        torch.testing.assert_close(ht(torch.tensor([p.ids for p in ps])),
                                   hf(torch.tensor([p.ids for p in ps])).logits, rtol=0, atol=1e-4)
    assert_same_scores(possym.head_scores(hf, ps), possym.head_scores(ht, ps), SCORE_ATOL_FP32)


@pytest.mark.tl4
@pytest.mark.parametrize("name", list(_hf_configs()))
def test_a_hugging_face_model_and_its_transformer_bridge_score_alike(name):
    ps = prompts(64)
    reference = possym.head_scores(hf_model(name), ps)  # before the bridge rewires the model's modules
    bridge = bridge_of(hf_model(name))
    assert_same_scores(reference, possym.head_scores(bridge, ps), SCORE_ATOL_FP32)


@hooked
def test_a_model_whose_attention_the_engine_does_not_model_is_refused():
    # An attention sink added to the logits in a hook: the pattern no longer follows from q, k and the scale.
    ht = possym.to_hooked_transformer(possym_model())

    def sink(scores, hook):
        scores[..., 0] = scores[..., 0] + 3.0
        return scores

    ht.blocks[1].attn.hook_attn_scores.add_hook(sink, is_permanent=True)
    with pytest.raises(PossymError, match="layer 1: .*hook_pattern"):
        possym.head_scores(ht, ids(40))
    ht.reset_hooks(including_permanent=True)
    possym.head_scores(ht, ids(40))


@pytest.mark.tl4
def test_a_bridge_over_a_model_that_returns_no_attention_weights_says_how_to_build_it():
    config = _hf_configs()["gptj-partial-rotary"]
    with torch.random.fork_rng():
        torch.manual_seed(0)
        hf = transformers.AutoModelForCausalLM.from_config(config, attn_implementation="sdpa").eval()
    with pytest.raises(PossymError, match='attn_implementation="eager"'):
        possym.head_scores(bridge_of(hf), ids(64))


def _models_of_every_kind():
    model = possym_model()
    from possym.model.hf import to_hf

    kinds = {"possym": model, "hugging-face": to_hf(model), "bridge": possym.to_transformer_bridge(model)}
    if TL_MAJOR < 4:
        kinds["hooked-transformer"] = possym.to_hooked_transformer(model)
    return kinds


@pytest.mark.tl4
def test_token_ids_outside_the_vocabulary_or_an_empty_batch_say_what_is_allowed():
    for kind, model in _models_of_every_kind().items():
        for bad in (torch.tensor([[1, 2, 3, 40, 5]]), torch.tensor([[1, 2, -1, 4, 5]])):
            with pytest.raises(PossymError, match=r"token ids must lie in 0\.\.39"):
                possym.head_scores(model, bad)
        for empty in (torch.zeros(0, 5, dtype=torch.long), []):
            with pytest.raises(PossymError, match="at least one"):
                possym.head_scores(model, empty)
        if kind != "possym":
            with pytest.raises(PossymError, match=r"token ids must lie in 0\.\.39"):
                possym.head_scores(model, token_prompts(torch.tensor([[1, 2, 3, 99]])))


@pytest.fixture(scope="module", params=["number", "letter"])
def trained(request, tmp_path_factory, tiny_session_overrides):
    cfg = possym.load_config(request.param, None, tiny_session_overrides)
    return possym.train_model(cfg, out=tmp_path_factory.mktemp(f"tl-{request.param}") / "run", progress=False)


@hooked
def test_a_trained_run_opens_in_transformer_lens_with_its_logits_scores_and_tokens(trained):
    model = trained.model(step="best")
    ht = trained.hooked_transformer(step="best")
    vocab = task_vocab(trained.config.task)
    tokens = ids(len(vocab), batch=6, n=20)
    with torch.no_grad():
        torch.testing.assert_close(ht(tokens), model(tokens), rtol=0, atol=1e-5)
    assert_same_scores(possym_head_scores(model, tokens), possym.head_scores(ht, tokens), SCORE_ATOL_FP32)
    assert ht.to_str_tokens(tokens[0]) == [vocab.tokens[i] for i in tokens[0].tolist()]
