"""possym.head_scores of an nnsight LanguageModel scores the Hugging Face model it wraps: the same scores and
head detectors as the bare model. Models and tokenizers are built from configs; nothing is downloaded."""

from __future__ import annotations

import warnings

import pytest
import torch

nnsight = pytest.importorskip("nnsight", reason='nnsight is not installed: pip install "possym[nnsight]"')
transformers = pytest.importorskip("transformers")

import possym  # noqa: E402
from possym.errors import PossymError  # noqa: E402
from possym.heads.layout import BlockLayout, EncodedPrompt  # noqa: E402
from possym.model.hf import hf_tokenizer  # noqa: E402

WORDS = tuple(f"w{i}" for i in range(64))


@pytest.fixture(autouse=True)
def offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def llama() -> torch.nn.Module:
    config = transformers.LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
                                      initializer_range=0.3)
    with torch.random.fork_rng():  # HF initialises from the global generator; keep it out of other tests
        torch.manual_seed(0)
        return transformers.AutoModelForCausalLM.from_config(config).eval()


def language_model(*args, **kwargs):
    with warnings.catch_warnings():  # 0.8 suggests TransformersModel, of which LanguageModel is the causal-LM case
        warnings.simplefilter("ignore")
        return nnsight.LanguageModel(*args, **kwargs)


def prompts() -> list[EncodedPrompt]:
    g = torch.Generator().manual_seed(1)
    layouts = [BlockLayout(start=0, block_size=1, n_blocks=12), BlockLayout(start=2, block_size=2, n_blocks=4)]
    return [EncodedPrompt(tuple(row), layout, None, "random")
            for layout in layouts for row in torch.randint(0, 64, (3, 13), generator=g).tolist()]


def assert_same(a, b) -> None:
    for name in ("s_pos", "s_sym", "entropy", "detectors"):
        torch.testing.assert_close(getattr(b, name), getattr(a, name), rtol=0, atol=0)


def test_a_language_model_scores_as_the_bare_model_it_wraps():
    bare = possym.head_scores(llama(), prompts())
    wrapped = language_model(llama(), tokenizer=hf_tokenizer(WORDS, WORDS[0]))
    assert_same(bare, possym.head_scores(wrapped, prompts()))
    assert not bare.detectors.isnan().any()
    with torch.no_grad(), wrapped.trace(torch.tensor([prompts()[0].ids])):  # the wrapper still traces after
        logits = wrapped.output.logits.save()
    torch.testing.assert_close(logits, llama()(torch.tensor([prompts()[0].ids])).logits)


def test_a_language_model_without_its_weights_yet_says_how_to_load_them(tmp_path):
    llama().save_pretrained(tmp_path)
    # nnsight builds a meta skeleton from the directory; its weights come at the first trace
    lazy = language_model(str(tmp_path), tokenizer=hf_tokenizer(WORDS, WORDS[0]))
    with pytest.raises(PossymError, match=r"model\.dispatch\(\)"):
        possym.head_scores(lazy, prompts())
    lazy.dispatch()
    assert_same(possym.head_scores(llama(), prompts()), possym.head_scores(lazy.eval(), prompts()))
