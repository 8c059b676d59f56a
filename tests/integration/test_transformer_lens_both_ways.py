"""TransformerLens both ways. Out: a run's bridge and HookedTransformer carry the task's tokenizer, so that
TransformerLens's own tools (``to_str_tokens``, ``run_with_cache`` on text, ``detect_head``) read the task's text,
and equal possym's logits and detectors. Back: ``possym.from_transformer_lens`` of a HookedTransformer or a
bridge, of a possym GPT-J or a Hugging Face GPT-J, edited or fine-tuned there, gives a possym GPT-J with the same
logits; what it cannot hold is refused. The bridge tests are marked tl4 and run on 3.9 and on 4.x."""

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
from possym.heads.detectors import HEAD_NAMES, hooked_detector_scores  # noqa: E402
from possym.model.gptj import GPTJ  # noqa: E402
from possym.scores.checkpoints import score_inputs  # noqa: E402
from possym.tasks import task_vocab  # noqa: E402

TL_MAJOR = int(version("transformer-lens").split(".")[0])
hooked = pytest.mark.skipif(TL_MAJOR >= 4, reason="transformer-lens 4.x has no HookedTransformer (possym[tl3] has 3.x)")
LOGIT_ATOL = 1e-5  # float32


@pytest.fixture(autouse=True)
def offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


@pytest.fixture(scope="module")
def run(tmp_path_factory, tiny_session_overrides):
    cfg = possym.load_config("letter", None, [*tiny_session_overrides, "train.steps=4", "train.eval_every=2",
                                              "train.checkpoint_every=2", "train.warmup_steps=1"])
    return possym.train_model(cfg, out=tmp_path_factory.mktemp("tl") / "run", monitor=False, progress=False)


def task_texts(run, n: int = 4) -> tuple[list[str], torch.Tensor]:
    tokens = torch.as_tensor(score_inputs(run.config.task, run.config.seeds.data, n, 0).tokens)
    words = task_vocab(run.config.task).tokens
    return [" ".join(words[t] for t in row) for row in tokens.tolist()], tokens


def converted_kinds(run) -> dict:
    kinds = {"bridge": run.transformer_bridge()}
    if TL_MAJOR < 4:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            kinds["hooked-transformer"] = run.hooked_transformer()
    return kinds


@pytest.mark.tl4
def test_a_runs_bridge_reads_the_task_text_with_transformer_lens_own_tools(run):
    from transformer_lens.head_detector import detect_head

    texts, tokens = task_texts(run)
    model = run.model()
    ours = hooked_detector_scores(model, tokens).mean(0)  # [layer, head, detector]
    for name, converted in converted_kinds(run).items():
        assert converted.to_str_tokens(texts[0]) == texts[0].split(), name  # no BOS glued to the first word
        assert torch.equal(converted.to_tokens(texts), tokens), name
        logits, cache = converted.run_with_cache(texts)
        torch.testing.assert_close(logits, model(tokens), rtol=0, atol=LOGIT_ATOL, msg=name)
        torch.testing.assert_close(cache["pattern", 1], model.run_with_cache(tokens)[1]["pattern", 1], rtol=0,
                                   atol=LOGIT_ATOL, msg=name)
        for d, detector in enumerate(HEAD_NAMES):
            theirs = detect_head(converted, texts, detector)  # TransformerLens's own, on the task's text
            torch.testing.assert_close(theirs.double(), ours[..., d], rtol=0, atol=1e-6, msg=f"{name} {detector}")
    assert ours.std() > 0.01  # the heads differ: equality is not between two constants


def possym_model(**options) -> GPTJ:
    cfg = ModelConfig(**({"n_layers": 2, "d_model": 32, "n_heads": 4, "d_mlp": 64, "d_vocab": 40, "dropout": 0.0,
                          "init_range": 0.3} | options))  # fmt: skip
    return GPTJ(cfg, torch.Generator().manual_seed(0)).eval()


def hf_gptj() -> torch.nn.Module:
    config = transformers.GPTJConfig(vocab_size=40, n_embd=32, n_layer=2, n_head=4, rotary_dim=4, n_positions=128,
                                     initializer_range=0.3, bos_token_id=0, eos_token_id=0)
    config.architectures = ["GPTJForCausalLM"]
    with torch.random.fork_rng():  # HF initialises from the global generator; keep it out of other tests
        torch.manual_seed(0)
        return transformers.GPTJForCausalLM._from_config(config, attn_implementation="eager").eval()


def bridge_of(hf):
    from transformer_lens.model_bridge.sources import build_bridge_from_module

    return build_bridge_from_module(hf, type(hf).__name__, hf_config=hf.config).eval()


def hooked_from_hf(hf, tmp_path):
    """HF's weights in a HookedTransformer by TransformerLens's own converters, without weight processing."""
    from transformer_lens.loading_from_pretrained import convert_hf_model_config, get_pretrained_state_dict

    hf.config.save_pretrained(tmp_path)
    cfg = transformer_lens.HookedTransformerConfig(**convert_hf_model_config(str(tmp_path)), device="cpu")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        ht = transformer_lens.HookedTransformer(cfg)
    ht.load_and_process_state_dict(get_pretrained_state_dict(str(tmp_path), cfg, hf_model=hf), fold_ln=False,
                                   center_writing_weights=False, center_unembed=False, fold_value_biases=False)
    return ht.eval()


def tokens(n: int = 21) -> torch.Tensor:
    return torch.randint(0, 40, (3, n), generator=torch.Generator().manual_seed(1))


def fine_tune(model, steps: int = 2) -> None:
    """A few SGD steps on next-token loss, through the model's own forward pass (TransformerLens's)."""
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.SGD(params, lr=0.5)
    model.train()
    for _ in range(steps):
        logits = model(tokens())
        loss = torch.nn.functional.cross_entropy(logits[:, :-1].flatten(0, 1), tokens()[:, 1:].flatten())
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()


@pytest.mark.tl4
def test_a_possym_model_comes_back_from_its_bridge_with_its_weights_and_after_fine_tuning_there():
    model = possym_model()
    bridge = possym.to_transformer_bridge(model)
    back = possym.from_transformer_lens(bridge)
    assert back.state_dict().keys() == model.state_dict().keys()
    for name, tensor in model.state_dict().items():
        torch.testing.assert_close(back.state_dict()[name], tensor, rtol=0, atol=0, msg=name)
    fine_tune(bridge)
    with torch.no_grad():
        theirs = bridge(tokens())
        assert (theirs - model(tokens())).abs().max() > 1e-2  # the fine-tuning changed the model
        torch.testing.assert_close(possym.from_transformer_lens(bridge)(tokens()), theirs, rtol=0, atol=LOGIT_ATOL)


@pytest.mark.tl4
def test_a_hugging_face_gptj_comes_back_from_its_bridge_with_its_logits():
    hf = hf_gptj()
    with torch.no_grad():
        want = hf(tokens()).logits  # before the bridge replaces its modules
    back = possym.from_transformer_lens(bridge_of(hf))
    with torch.no_grad():
        torch.testing.assert_close(back(tokens()), want, rtol=0, atol=LOGIT_ATOL)
    assert back.cfg.rot_dim == 4 and back.cfg.n_heads == 4


@pytest.mark.tl4
def test_a_bridge_of_another_architecture_is_refused_by_its_name():
    config = transformers.LlamaConfig(vocab_size=40, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                      num_attention_heads=4, num_key_value_heads=2)
    config.architectures = ["LlamaForCausalLM"]
    llama = transformers.AutoModelForCausalLM.from_config(config).eval()
    with pytest.raises(PossymError, match="wraps a LlamaForCausalLM; .* only a bridge of a GPTJForCausalLM"):
        possym.from_transformer_lens(bridge_of(llama))


@hooked
@pytest.mark.parametrize("options", [{}, {"mlp": False}, {"p_rope": 0.5}, {"freq_gate": "0@2-3;1@1,4"},
                                     {"rotary_dim": 4}, {"activation": "gelu_new"}],
                         ids=["rope", "attn-only", "p-rope", "freq-gate", "partial", "gelu-new"])
def test_a_possym_model_comes_back_from_its_hooked_transformer_with_equal_logits(options):
    model = possym_model(**options)
    back = possym.from_transformer_lens(possym.to_hooked_transformer(model))
    with torch.no_grad():
        # the same weights and RoPE frequencies (p-RoPE comes back as the partial rotary that rotates alike)
        torch.testing.assert_close(back(tokens()), model(tokens()), rtol=0, atol=0)
        assert torch.equal(back.W_Q, model.W_Q * (back.W_Q != 0)) and torch.equal(back.W_U, model.W_U)


@hooked
def test_a_hooked_transformer_fine_tuned_or_edited_comes_back_as_it_was_left():
    model = possym_model()
    ht = possym.to_hooked_transformer(model)
    fine_tune(ht)  # ln1 and ln2 are one parameter: they stay equal, as GPT-J's one LayerNorm
    with torch.no_grad():
        ht.blocks[1].attn.W_O[2] = 0.0  # and a head ablated by weight surgery
        theirs = ht(tokens())
        assert (theirs - model(tokens())).abs().max() > 1e-2
        torch.testing.assert_close(possym.from_transformer_lens(ht)(tokens()), theirs, rtol=0, atol=LOGIT_ATOL)


@hooked
def test_a_hugging_face_gptj_comes_back_from_transformer_lens_own_conversion(tmp_path):
    hf = hf_gptj()
    with torch.no_grad():
        want = hf(tokens()).logits
        back = possym.from_transformer_lens(hooked_from_hf(hf, tmp_path))
        torch.testing.assert_close(back(tokens()), want, rtol=0, atol=LOGIT_ATOL)


@hooked
def test_what_a_gptj_cannot_hold_is_refused_and_a_mapping_that_misses_something_is_caught(tmp_path):
    hf = hf_gptj()
    ht = hooked_from_hf(hf, tmp_path)
    ht.blocks[0].ln2.w.data.add_(0.1)  # TransformerLens's own conversion keeps ln1 and ln2 apart
    with pytest.raises(PossymError, match="block 0's ln2 differs from its ln1"):
        possym.from_transformer_lens(ht)
    from transformer_lens.loading_from_pretrained import convert_hf_model_config, get_pretrained_state_dict

    cfg = transformer_lens.HookedTransformerConfig(**convert_hf_model_config(str(tmp_path)), device="cpu")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        folded = transformer_lens.HookedTransformer(cfg)
    folded.load_and_process_state_dict(get_pretrained_state_dict(str(tmp_path), cfg, hf_model=hf_gptj()))
    with pytest.raises(PossymError, match="from_pretrained_no_processing"):
        possym.from_transformer_lens(folded.eval())  # TransformerLens's default: folded LayerNorms
    scaled = possym.to_hooked_transformer(possym_model())
    scaled.blocks[0].attn.attn_scale = scaled.blocks[0].attn.attn_scale * 2  # nothing the mapping reads
    with pytest.raises(PossymError, match="gives other logits"):
        possym.from_transformer_lens(scaled)
