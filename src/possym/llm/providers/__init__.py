"""One interface, four providers: ``openai``, ``anthropic``, ``openai-compatible`` and ``hf`` (local transformers).

A provider turns prompts into replies and nothing else: it never touches the store, never prints,
and raises on failure (the runner retries and records). Every provider:

* sends one user message holding the whole prompt (the paper's setting), at temperature 0, with a
  small ``max_tokens`` and, where the API allows it, reasoning switched off;
* reports ``params()``: everything that changes a reply (this is part of the store's key) and no
  secret: API keys come from environment variables, are checked before any request, and are only
  ever handed to the official client;
* says which of its errors are worth retrying (429, 5xx, time-outs, lost connections).

The modules: ``base`` (settings, the :class:`Provider` interface), ``api`` (the API clients), ``hf``
(a local model, decoded by :mod:`possym.llm.decode`, loaded by :mod:`possym.local_models`).
:data:`PROVIDERS` maps each name to the function that builds it; :func:`make_provider` looks it up.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from possym.errors import PossymError
from possym.llm.providers.api import (
    AnthropicProvider,
    OpenAICompatibleProvider,
    OpenAIProvider,
    openai_reasoning_effort,
)
from possym.llm.providers.base import REASONING_MODES, GenerationSettings, MissingAPIKeyError, Provider
from possym.llm.providers.hf import HFProvider


@dataclass(frozen=True)
class ProviderOptions:
    """Everything a provider may take besides its model and settings; each provider reads its own."""

    base_url: str | None = None
    api_key_env: str | None = None
    reasoning_effort: str | None = None
    batch_size: int = 8
    gguf_file: str | None = None
    device: str = "auto"
    device_map: str | None = None
    stop_when_decided: bool = False

    def key_env(self) -> dict[str, str]:
        return {} if self.api_key_env is None else {"api_key_env": self.api_key_env}


def _openai(model: str, settings: GenerationSettings, o: ProviderOptions) -> Provider:
    return OpenAIProvider(model, settings, base_url=o.base_url, reasoning_effort=o.reasoning_effort, **o.key_env())


def _anthropic(model: str, settings: GenerationSettings, o: ProviderOptions) -> Provider:
    return AnthropicProvider(model, settings, base_url=o.base_url, **o.key_env())


def _openai_compatible(model: str, settings: GenerationSettings, o: ProviderOptions) -> Provider:
    return OpenAICompatibleProvider(model, settings, base_url=o.base_url or "", **o.key_env())


def _hf(model: str, settings: GenerationSettings, o: ProviderOptions) -> Provider:
    return HFProvider.load(
        model, settings, gguf_file=o.gguf_file, batch_size=o.batch_size, device=o.device,
        device_map=o.device_map, stop_when_decided=o.stop_when_decided,
    )  # fmt: skip


# name -> builder; a new provider is one entry here.
PROVIDERS: dict[str, Callable[[str, GenerationSettings, ProviderOptions], Provider]] = {
    "openai": _openai,
    "anthropic": _anthropic,
    "openai-compatible": _openai_compatible,
    "hf": _hf,
}


def make_provider(provider: str, model: str, settings: GenerationSettings, **options: Any) -> Provider:
    """The provider registered under ``provider``, given :class:`ProviderOptions` fields as keywords.

    A missing API key raises before any request.
    """
    if provider not in PROVIDERS:
        raise PossymError(f"provider={provider!r} is not known; allowed: {tuple(PROVIDERS)}")
    return PROVIDERS[provider](model, settings, ProviderOptions(**options))


__all__ = [
    "PROVIDERS",
    "REASONING_MODES",
    "AnthropicProvider",
    "GenerationSettings",
    "HFProvider",
    "MissingAPIKeyError",
    "OpenAICompatibleProvider",
    "OpenAIProvider",
    "Provider",
    "ProviderOptions",
    "make_provider",
    "openai_reasoning_effort",
]
