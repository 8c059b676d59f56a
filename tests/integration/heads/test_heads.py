"""possym heads on tiny, randomly initialised models of each family, built locally (nothing is downloaded).

The oracle is swap-and-rerun through the model's own attention module (possym.heads.swap_and_rerun);
the families cover grouped-query attention, llama3 rope scaling, QK-norm (Qwen3, Gemma-3), per-layer
rope bases and sliding windows (Gemma-3), logit soft-capping (Gemma-2), partial rotary (GPT-NeoX,
GPT-J) and GPT-J's adjacent-dims pairing.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

transformers = pytest.importorskip("transformers")

from possym.heads import capture  # noqa: E402
from possym.heads.capture import capture_attention, rope_spec  # noqa: E402
from possym.heads.layout import BlockLayout, EncodedPrompt  # noqa: E402
from possym.heads.prompts import (  # noqa: E402
    BindingConfig,
    BlockSpec,
    HeadPrompt,
    binding_answer,
    binding_prompt,
    one_hop_prompts,
)
from possym.heads.scores import _forward, depth_summary, layer_swap_attention, score_heads  # noqa: E402
from possym.heads.swap_and_rerun import rerun_swaps  # noqa: E402
from possym.one_hop import one_hop_answer  # noqa: E402

_COMMON = dict(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
               num_key_value_heads=2, max_position_embeddings=128, initializer_range=0.3)


def _configs() -> dict:
    t = transformers
    return {
        "llama-gqa-llama3-scaling": t.LlamaConfig(**_COMMON, rope_parameters={
            "rope_type": "llama3", "rope_theta": 500.0, "factor": 4.0, "low_freq_factor": 1.0,
            "high_freq_factor": 4.0, "original_max_position_embeddings": 16}),
        "qwen2": t.Qwen2Config(**_COMMON),
        "qwen3-qk-norm": t.Qwen3Config(**_COMMON, head_dim=8),
        "gemma3-local-global": t.Gemma3TextConfig(**_COMMON, head_dim=8, sliding_window=6,
                                                  layer_types=["sliding_attention", "full_attention"]),
        "gemma2-softcap": t.Gemma2Config(**_COMMON, head_dim=8, attn_logit_softcapping=2.0, sliding_window=6),
        "neox-partial-rotary": t.GPTNeoXConfig(vocab_size=64, hidden_size=32, intermediate_size=64,
                                               num_hidden_layers=2, num_attention_heads=4, rotary_pct=0.5,
                                               initializer_range=0.3),
        "gptj-partial-rotary": t.GPTJConfig(vocab_size=64, n_embd=32, n_layer=2, n_head=4, rotary_dim=4,
                                            n_positions=128, initializer_range=0.3, bos_token_id=0, eos_token_id=0),
    }


def _model(name: str, dtype: torch.dtype = torch.float32) -> torch.nn.Module:
    with torch.random.fork_rng():  # HF initialises from the global generator; keep it out of other tests
        torch.manual_seed(0)
        return transformers.AutoModelForCausalLM.from_config(_configs()[name]).to(dtype).eval()


@pytest.fixture(scope="module")
def llama():
    return _model("llama-gqa-llama3-scaling")


def _ids(n: int, seed: int = 0) -> torch.Tensor:
    return torch.randint(0, 64, (1, n), generator=torch.Generator().manual_seed(seed))


def _engine(model, ids, layer, layout, **kw):
    records, _ = _forward(model, ids, [layer])
    return layer_swap_attention(records[layer], rope_spec(model, layer), layout, ids.shape[1] - 1, **kw)


def _assert_engine_equals_rerun(model, ids, layer, layout):
    """Rows, the mass left outside the blocks, and both scores. τ = 1e-4 turns a row error e into a score error
    of up to about e/τ, so the scores are compared on a float64 model, where the rerun itself is exact."""
    sw, row = _engine(model, ids, layer, layout)
    ref = rerun_swaps(model, ids, layer, layout)
    pos = layout.positions
    rows = sw.swapped_rows()[0]  # [head, swap, K + 1]: block positions, then every other key merged
    torch.testing.assert_close(row[0], ref.row.double(), rtol=0, atol=1e-5)
    torch.testing.assert_close(rows[..., :-1], ref.swapped[..., pos].double(), rtol=0, atol=1e-5)
    rest = ref.swapped.double().sum(-1) - ref.swapped[..., pos].double().sum(-1)
    torch.testing.assert_close(rows[..., -1], rest, rtol=0, atol=1e-5)
    for ours, theirs in zip(sw.scores(), ref.scores(), strict=True):
        torch.testing.assert_close(ours[0], theirs.double(), rtol=0, atol=1e-5)


@pytest.mark.parametrize("name", list(_configs()))
def test_engine_equals_rerun_of_the_attention_module_on_every_family(name):
    model = _model(name, torch.float64)
    for layer in range(2):
        _assert_engine_equals_rerun(model, _ids(20), layer, BlockLayout(start=2, block_size=2, n_blocks=7))


def test_gemma3_local_and_global_layers_get_their_own_rope_base():
    model = _model("gemma3-local-global")
    local, global_ = rope_spec(model, 0).thetas, rope_spec(model, 1).thetas
    cfg = model.config
    assert local[1] == pytest.approx(cfg.rope_parameters["sliding_attention"]["rope_theta"] ** (-2 / 8), rel=1e-6)
    assert global_[1] == pytest.approx(cfg.rope_parameters["full_attention"]["rope_theta"] ** (-2 / 8), rel=1e-6)


def test_wrong_pairing_is_caught_by_the_rerun(llama):
    """Llama pairs halves (NeoX); the engine with GPT-J pairing must not match, or the oracle is blind to it."""
    ids, layout = _ids(20), BlockLayout(2, 2, 7)
    records, _ = _forward(llama, ids, [0])
    wrong = dataclasses.replace(rope_spec(llama, 0), pairing="gptj")
    sw, _ = layer_swap_attention(records[0], wrong, layout, 19)
    ref = rerun_swaps(llama, ids, 0, layout)
    assert (sw.swapped_rows()[0][..., :-1] - ref.swapped[..., layout.positions].double()).abs().max() > 1e-3


def test_gqa_query_head_reads_key_head_h_over_group_size(llama):
    with torch.no_grad(), capture_attention(llama, [0]) as records:
        llama(input_ids=_ids(10), use_cache=False)
    rec = records[0][0]
    assert rec.query.shape[1] == 4 and rec.key.shape[1] == 2 and rec.n_rep == 2
    from transformers.models.llama.modeling_llama import repeat_kv

    torch.testing.assert_close(rec.keys_per_head(), repeat_kv(rec.key, 2))
    for h in range(4):
        assert torch.equal(rec.keys_per_head()[:, h], rec.key[:, h // 2])


def test_capture_keeps_the_causal_mask_and_the_model_output(llama):
    ids = _ids(16)
    with torch.no_grad():
        clean = llama(input_ids=ids).logits
        with capture_attention(llama) as records:
            captured = llama(input_ids=ids).logits
    torch.testing.assert_close(captured, clean, rtol=0, atol=1e-4)
    assert llama.config._attn_implementation != capture.CAPTURE  # restored on exit
    row = records[0][0].mask_row(5)[0]
    assert torch.isfinite(row).all() and row.shape == (6,)
    assert torch.isinf(records[0][0].mask[0, 0, 5, 6:]).all() or (records[0][0].mask[0, 0, 5, 6:] < -1e30).all()


def test_registering_the_attention_function_alone_drops_the_causal_mask(llama, monkeypatch):
    """The negative control of the test above: without the mask registration the future leaks in."""
    from transformers import AttentionInterface

    monkeypatch.setattr(capture, "_register", lambda: AttentionInterface.register(capture.CAPTURE,
                                                                                 capture._record_then_attend))
    from transformers.masking_utils import AttentionMaskInterface

    monkeypatch.delitem(AttentionMaskInterface._global_mapping, capture.CAPTURE, raising=False)
    ids = _ids(16)
    with torch.no_grad():
        clean = llama(input_ids=ids).logits
        with capture_attention(llama):
            leaky = llama(input_ids=ids).logits
    assert (leaky[0, :-1] - clean[0, :-1]).abs().max() > 1e-2


def test_score_heads_shapes_and_the_future_does_not_matter(llama):
    """Scores of the last query depend on nothing after it: the same prompt inside a batch scores the same."""

    layout = BlockLayout(1, 3, 4)
    prompts = [EncodedPrompt(tuple(_ids(16, seed).tolist()[0]), layout, None, "file") for seed in range(3)]
    batched = score_heads(llama, prompts, batch_size=3)
    alone = score_heads(llama, prompts[1:2])
    assert batched.s_pos.shape == (3, 2, 4)
    torch.testing.assert_close(batched.s_pos[1], alone.s_pos[0], rtol=0, atol=1e-6)
    assert ((batched.s_pos >= 0) & (batched.s_pos <= 1 + 1e-9)).all()
    assert batched.correct.isnan().all()


def test_depth_summary_splits_layers_in_halves_and_correlates_across_heads():
    records = [{"layer": layer, "head": h, "s_pos": 1.0 - 0.1 * layer - 0.01 * h, "s_sym": 0.1 * layer + 0.01 * h}
               for layer in range(4) for h in range(2)]
    s = depth_summary(records, n_layers=4)
    assert s["median_s_pos_early"] == pytest.approx(0.945) and s["median_s_pos_late"] == pytest.approx(0.745)
    assert s["pearson_r"] == pytest.approx(-1.0)


def test_binding_prompts_answer_what_the_text_binds():
    cfg = BindingConfig(n_pairs=6)
    rng = np.random.default_rng(0)
    for _ in range(50):
        p = binding_prompt(cfg, rng)
        assert binding_answer(p.text) == p.answer
        names = [p.text[a:b].split()[0] for a, b in p.blocks]
        assert len(set(names)) == 6 and len(p.blocks) == 6
        assert p.text.endswith(" likes")  # the query token is the one that must retrieve the colour


def test_binding_oracle_rejects_an_unbound_entity():
    with pytest.raises(ValueError, match="bound 0 times"):
        binding_answer("Each person likes one color. Alice likes red.\nWhat color does Bob like? Answer: Bob likes")


def test_binding_config_and_block_spec_say_what_is_wrong():
    with pytest.raises(ValueError, match="distinct names"):
        BindingConfig(n_pairs=5, names=("Ann", "Bo"))
    with pytest.raises(ValueError, match="n_pairs=1 must be >= 2"):
        BindingConfig(n_pairs=1)
    with pytest.raises(ValueError, match="not both"):
        BlockSpec(block_size=2, n_blocks=3)
    with pytest.raises(ValueError, match="n_blocks=2 must be >= 2|must be >= 2"):
        BlockLayout(0, 1, 1)


def test_one_hop_prompts_span_the_window_and_keep_the_oracle_answer():
    for task in ("number", "letter"):
        for p in one_hop_prompts(task, 12, 5):
            window = p.text[p.span[0] : p.span[1]]
            query = p.text[p.span[1] :].split('"')[0].strip()
            assert len(window.split()) == 12
            assert " " + one_hop_answer(task, f"{window} {query}") == p.answer


def test_head_prompt_span_is_validated():
    with pytest.raises(ValueError, match="does not lie inside"):
        HeadPrompt("abc", "file", (0, 9))


def test_frequency_scores_of_one_head_are_those_of_its_planes_among_all_heads(llama):
    """Per-frequency scores computed for one head alone equal that head's slice of all heads' planes."""
    from possym.heads.scores import frequency_scores

    layout = BlockLayout(1, 2, 5)
    prompts = [EncodedPrompt(tuple(_ids(14, seed).tolist()[0]), layout, None, "file") for seed in range(2)]
    (curve,) = frequency_scores(llama, prompts, [(1, 3)])
    ids = torch.tensor([p.ids for p in prompts])
    records, _ = _forward(llama, ids, [1])
    sw, _ = layer_swap_attention(records[1], rope_spec(llama, 1), layout, 13, per_plane=True)
    s_pos, s_sym = sw.scores()
    torch.testing.assert_close(curve.s_pos, s_pos[:, 3].mean(0))
    torch.testing.assert_close(curve.s_sym, s_sym[:, 3].mean(0))
    assert len(curve.thetas) == 4  # d_head 8: four RoPE planes


def test_a_model_loaded_with_device_map_auto_scores_as_a_plain_load(tmp_path):
    """``possym heads --device-map auto``: accelerate places the layers (all on the CPU here, the only
    device), inputs go to the embedding's device, and the scores are those of a plain load."""
    pytest.importorskip("accelerate")
    from tokenizers import Tokenizer, models

    from possym.heads.layout import BlockLayout, EncodedPrompt
    from possym.local_models import load_local_model

    _model("qwen2").save_pretrained(tmp_path)
    vocab = {f"w{i}": i for i in range(64)}
    tokenizer = transformers.PreTrainedTokenizerFast(tokenizer_object=Tokenizer(models.WordLevel(vocab, "w0")))
    tokenizer.save_pretrained(tmp_path)
    mapped, _ = load_local_model(str(tmp_path), device_map="auto")
    plain, _ = load_local_model(str(tmp_path), device="cpu")
    assert {p.device.type for p in mapped.parameters()} == {"cpu"}  # accelerate had nowhere else to put them
    prompt = EncodedPrompt(tuple(_ids(14)[0].tolist()), BlockLayout(start=1, block_size=2, n_blocks=5), None, "t")
    a, b = score_heads(mapped, [prompt]), score_heads(plain, [prompt])
    torch.testing.assert_close(a.s_pos, b.s_pos)
    torch.testing.assert_close(a.s_sym, b.s_sym)
