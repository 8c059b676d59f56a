"""A Hugging Face model whose attention never reaches transformers' attention interface (GPT-J before
transformers 5.24 computed its own) is refused with a PossymError that names the release needed, not an
IndexError deep in the scorer. Built from a config; nothing is downloaded."""

from __future__ import annotations

import importlib.metadata

import pytest
import torch

transformers = pytest.importorskip("transformers")

import possym  # noqa: E402
from possym.errors import PossymError  # noqa: E402
from possym.heads.capture import TRANSFORMERS_NEEDED  # noqa: E402
from possym.heads.layout import token_prompts  # noqa: E402


def llama_that_attends_by_itself(monkeypatch):
    """A Llama whose attention modules run eager attention directly, bypassing the interface."""
    from transformers.models.llama import modeling_llama

    config = transformers.LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    with torch.random.fork_rng():
        torch.manual_seed(0)
        model = transformers.AutoModelForCausalLM.from_config(config).eval()
    # every lookup answers with the default, the module's own eager attention: possym_capture is never called
    monkeypatch.setattr(modeling_llama.ALL_ATTENTION_FUNCTIONS, "get_interface", lambda name, default: default)
    return model


def test_an_older_transformers_is_named_with_the_release_that_fixes_it(monkeypatch):
    model = llama_that_attends_by_itself(monkeypatch)
    real = importlib.metadata.version
    monkeypatch.setattr(importlib.metadata, "version", lambda name: "5.18.0" if name == "transformers" else real(name))
    with pytest.raises(PossymError, match=rf"needs transformers {TRANSFORMERS_NEEDED} or later \(installed: 5\.18\.0\)"
                                          rf".*pip install 'transformers>={TRANSFORMERS_NEEDED}'"):
        possym.head_scores(model, token_prompts(torch.randint(0, 64, (2, 9))))


def test_a_recent_transformers_with_a_model_computing_its_own_attention_says_possym_cannot_read_it(monkeypatch):
    model = llama_that_attends_by_itself(monkeypatch)
    with pytest.raises(PossymError, match=r"layers \[0, 1\] never called .*\(LlamaAttention\) computes attention "
                                          r"itself .*, so possym cannot read it"):
        possym.head_scores(model, token_prompts(torch.randint(0, 64, (2, 9))))
