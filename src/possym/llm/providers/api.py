"""The API providers: ``openai``, ``openai-compatible`` and ``anthropic``, through their official clients.

API keys come from environment variables, are checked before any request, and are only ever
handed to the official client. 429, 408, 409 and 5xx statuses, time-outs and lost connections are
worth retrying; the rest are not.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from typing import Any

from possym.errors import PossymError
from possym.llm.providers.base import GenerationSettings, MissingAPIKeyError, reply_settings


def _api_key(env_var: str, provider: str) -> str:
    key = os.environ.get(env_var, "").strip()
    if not key:
        raise MissingAPIKeyError(
            f"the {provider} provider needs an API key in the environment variable {env_var}, which is "
            f"not set; export {env_var}=... (no request was sent)"
        )
    return key


def _http_retryable(exc: BaseException, module: Any) -> bool:
    """429, 408, 409 and 5xx statuses, time-outs and dropped connections are transient; the rest are not."""
    if isinstance(exc, module.APIConnectionError):  # includes APITimeoutError
        return True
    if isinstance(exc, module.APIStatusError):
        return exc.status_code in (408, 409, 429) or exc.status_code >= 500
    return False


def _http_retry_after(exc: BaseException) -> float | None:
    response = getattr(exc, "response", None)
    value = None if response is None else response.headers.get("retry-after")
    try:
        return None if value is None else max(0.0, float(value))
    except ValueError:  # an HTTP date: ignore, the backoff still applies
        return None


def openai_reasoning_effort(model: str, reasoning: str) -> str | None:
    """The ``reasoning_effort`` that switches reasoning off, or as low as the model allows.

    GPT-5.1 and later accept ``none``; GPT-5 (and -mini, -nano) go down to ``minimal``; o-series models
    cannot stop reasoning (``low``); other models take no reasoning parameter at all.
    """
    if reasoning != "off":
        return None
    name = model.lower().rsplit("/", 1)[-1]
    if re.match(r"gpt-5\.\d", name):
        return "none"
    if re.match(r"gpt-5(-mini|-nano)?(-\d{4}-\d{2}-\d{2})?$", name):
        return "minimal"
    if re.match(r"o\d", name):
        return "low"
    return None


class _HTTPProvider:
    batch_size = 1
    _module: Any = None

    def __init__(self, model: str, settings: GenerationSettings) -> None:
        self.model = model
        self.settings = settings
        self._key = ""

    def is_retryable(self, exc: BaseException) -> bool:
        return _http_retryable(exc, self._module)

    def retry_after(self, exc: BaseException) -> float | None:
        return _http_retry_after(exc)

    def secrets(self) -> tuple[str, ...]:
        return (self._key,) if self._key else ()

    def complete(self, prompts: Sequence[str]) -> list[str]:
        return [self._complete_one(p) for p in prompts]

    def _complete_one(self, prompt: str) -> str:  # pragma: no cover - abstract
        raise NotImplementedError


class OpenAIProvider(_HTTPProvider):
    """OpenAI's Chat Completions API through the official ``openai`` client."""

    name = "openai"

    def __init__(
        self,
        model: str,
        settings: GenerationSettings,
        *,
        base_url: str | None = None,
        api_key_env: str = "OPENAI_API_KEY",
        reasoning_effort: str | None = None,
    ) -> None:
        super().__init__(model, settings)
        import openai

        self._module = openai
        self._key = _api_key(api_key_env, self.name)
        self.reasoning_effort = reasoning_effort or openai_reasoning_effort(model, settings.reasoning)
        self._client = openai.OpenAI(api_key=self._key, base_url=base_url, max_retries=0, timeout=settings.timeout_s)

    def params(self) -> dict[str, Any]:
        return {**reply_settings(self.settings), "reasoning_effort": self.reasoning_effort}

    def _complete_one(self, prompt: str) -> str:
        kwargs: dict[str, Any] = {"max_completion_tokens": self.settings.max_tokens}
        if self.settings.temperature is not None:
            kwargs["temperature"] = self.settings.temperature
        if self.reasoning_effort is not None:
            kwargs["reasoning_effort"] = self.reasoning_effort
        response = self._client.chat.completions.create(
            model=self.model, messages=[{"role": "user", "content": prompt}], **kwargs
        )
        return response.choices[0].message.content or ""


class OpenAICompatibleProvider(_HTTPProvider):
    """Any server that speaks the Chat Completions API (vLLM, llama.cpp, ``transformers serve``).

    The key is optional (local servers need none) and read from its own variable, so an OpenAI key
    is never sent to a third-party URL by accident. Reasoning off is asked for the way open-weight
    servers understand it: ``chat_template_kwargs={"enable_thinking": false}``.
    """

    name = "openai-compatible"

    def __init__(
        self,
        model: str,
        settings: GenerationSettings,
        *,
        base_url: str,
        api_key_env: str = "OPENAI_COMPATIBLE_API_KEY",
    ) -> None:
        super().__init__(model, settings)
        if not base_url:
            raise PossymError("the openai-compatible provider needs a base URL (possym llm ... llm.base_url=http://127.0.0.1:8000/v1)")
        import openai

        self._module = openai
        self._key = os.environ.get(api_key_env, "").strip()
        self.base_url = base_url
        self._client = openai.OpenAI(
            api_key=self._key or "not-needed", base_url=base_url, max_retries=0, timeout=settings.timeout_s
        )

    def params(self) -> dict[str, Any]:
        return reply_settings(self.settings)

    def _complete_one(self, prompt: str) -> str:
        kwargs: dict[str, Any] = {"max_tokens": self.settings.max_tokens}
        if self.settings.temperature is not None:
            kwargs["temperature"] = self.settings.temperature
        if self.settings.reasoning == "off":
            kwargs["extra_body"] = {"chat_template_kwargs": {"enable_thinking": False}}
        response = self._client.chat.completions.create(
            model=self.model, messages=[{"role": "user", "content": prompt}], **kwargs
        )
        return response.choices[0].message.content or ""


class AnthropicProvider(_HTTPProvider):
    """Anthropic's Messages API through the official ``anthropic`` client.

    Reasoning off is ``thinking={"type": "disabled"}``. The client no longer lists ``temperature``
    among its arguments, so it travels in the request body, where the API reads it.
    """

    name = "anthropic"

    def __init__(
        self,
        model: str,
        settings: GenerationSettings,
        *,
        base_url: str | None = None,
        api_key_env: str = "ANTHROPIC_API_KEY",
    ) -> None:
        super().__init__(model, settings)
        import anthropic

        self._module = anthropic
        self._key = _api_key(api_key_env, self.name)
        self._client = anthropic.Anthropic(
            api_key=self._key, base_url=base_url, max_retries=0, timeout=settings.timeout_s
        )

    def params(self) -> dict[str, Any]:
        return reply_settings(self.settings)

    def _complete_one(self, prompt: str) -> str:
        kwargs: dict[str, Any] = {}
        if self.settings.reasoning == "off":
            kwargs["thinking"] = {"type": "disabled"}
        if self.settings.temperature is not None:
            kwargs["extra_body"] = {"temperature": self.settings.temperature}
        message = self._client.messages.create(
            model=self.model,
            max_tokens=self.settings.max_tokens,
            messages=[{"role": "user", "content": prompt}],
            **kwargs,
        )
        return "".join(block.text for block in message.content if getattr(block, "type", None) == "text")
