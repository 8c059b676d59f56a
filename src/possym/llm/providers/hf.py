"""The ``hf`` provider: a local transformers causal LM, its chat template, greedy decoding in batches."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from possym.errors import PossymError
from possym.llm.decode import PrefixCache, eos_ids, greedy_generate
from possym.llm.providers.base import GenerationSettings
from possym.local_models import input_device, load_local_model, resolve_local_model
from possym.one_hop import reply_is_decided

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase


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
            raise PossymError(f"batch_size={batch_size} must be >= 1")
        if settings.temperature not in (None, 0.0):
            raise PossymError(f"the hf provider decodes greedily (temperature 0); got {settings.temperature}")
        if (model is None or tokenizer is None) and loader is None:
            raise PossymError("give a model and its tokenizer, or a loader")
        self.model = model_id
        self.settings = settings
        self.batch_size = batch_size
        self.stop_when_decided = stop_when_decided
        self._loader = loader
        self._loaded: tuple[PreTrainedModel, PreTrainedTokenizerBase] | None = None
        self._eos: set[int] = set()
        self._pad = 0
        self._prefix = PrefixCache()
        if model is not None and tokenizer is not None:
            self._adopt(model, tokenizer)

    def _adopt(self, model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase) -> None:
        self._loaded = (model, tokenizer)
        self._eos = eos_ids(model, tokenizer)
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
        device: str = "auto",
        device_map: str | None = None,
        stop_when_decided: bool = False,
    ) -> HFProvider:
        provider = cls.lazy(
            model_id,
            settings,
            gguf_file=gguf_file,
            batch_size=batch_size,
            device=device,
            device_map=device_map,
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
        device: str = "auto",
        device_map: str | None = None,
        stop_when_decided: bool = False,
    ) -> HFProvider:
        """Like ``load``, but the weights are read on the first prompt; a missing model is reported now.

        ``device`` and ``device_map`` as in :func:`possym.local_models.load_local_model`.
        """
        resolve_local_model(model_id, gguf_file)
        return cls(
            model_id,
            None,
            None,
            settings,
            batch_size=batch_size,
            stop_when_decided=stop_when_decided,
            loader=lambda: load_local_model(model_id, gguf_file, device=device, device_map=device_map),
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
        return reply_is_decided(self._decode(tokens))

    def _decode(self, tokens: list[int]) -> str:
        text = self._tokenizer.decode(tokens, skip_special_tokens=True)
        assert isinstance(text, str)  # one sequence of ids decodes to one string
        return text

    def encode(self, prompt: str) -> list[int]:
        """The chat-templated token ids of one user message, ready for the assistant's reply."""
        kwargs: dict[str, Any] = {"enable_thinking": False} if self.settings.reasoning == "off" else {}
        ids = self._tokenizer.apply_chat_template(
            [{"role": "user", "content": prompt}], add_generation_prompt=True, tokenize=True, **kwargs
        )
        if isinstance(ids, dict) or hasattr(ids, "keys"):
            ids = ids["input_ids"]  # type: ignore[call-overload,index]  # a BatchEncoding in newer transformers
        return [int(i) for i in ids]  # type: ignore[arg-type]

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
        return [self._decode(tokens) for tokens in out]

    def reference_complete(self, prompt: str) -> str:
        """The same reply through ``model.generate`` on the full prompt, alone: the test oracle."""
        import torch

        ids = torch.tensor([self.encode(prompt)], device=input_device(self._lm))
        with torch.inference_mode():
            out = self._lm.generate(  # type: ignore[operator]  # GenerationMixin is not in the static type
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
        return self._decode(tokens)

    def is_retryable(self, exc: BaseException) -> bool:
        return False

    def retry_after(self, exc: BaseException) -> float | None:
        return None

    def secrets(self) -> tuple[str, ...]:
        return ()
