"""One call, one result: s_POS, s_SYM, entropy and the head detectors of any model on any inputs.

:func:`score_any` is what :func:`possym.head_scores` runs: a possym GPT-J, a Hugging Face RoPE causal LM, a
TransformerLens ``HookedTransformer`` or ``TransformerBridge``, or any of them in an nnsight wrapper
(:mod:`possym.heads.wrappers`), on a LongTensor [batch, pos] (the last token queries, or ``query=``; blocks of
``block_size`` tile the keys), strings (each tokenized alone, as ``detect_head`` does; ``tokenizer=`` or the
model's own), :class:`~possym.heads.prompts.HeadPrompt` or :class:`~possym.heads.layout.EncodedPrompt` lists. It
returns one :class:`~possym.scores.swaps.HeadScores` whatever the kind. A possym GPT-J on a tensor runs the exact
engine (:func:`possym.scores.swaps.head_scores`) in chunks of ``batch_size`` (64); on prompts, the loop every kind
shares (:func:`possym.heads.scores.score_gptj_prompts`); ``progress(k)`` is called after each chunk. See
docs/heads.md, "Scores of a TransformerLens model" (one result type).

Example:
    >>> import torch
    >>> from possym.config import ModelConfig
    >>> from possym.model.gptj import GPTJ
    >>> model = GPTJ(ModelConfig(n_layers=2, d_model=16, d_mlp=32, d_vocab=10), torch.Generator().manual_seed(0))
    >>> scores = score_any(model.eval(), torch.randint(0, 10, (3, 6), generator=torch.Generator().manual_seed(1)))
    >>> list(scores.frame().columns)[:8]
    ['layer', 'head', 'kv_head', 's_pos', 's_sym', 'entropy', 'n_inputs', 's_pos_sd']
    >>> scores.detectors.shape                              # [input, layer, head, detector]
    torch.Size([3, 2, 1, 3])"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import Tensor

from possym.errors import PossymError
from possym.heads.detectors import HEAD_NAMES, detector_scores
from possym.heads.layout import EncodedPrompt, check_token_ids, token_prompts
from possym.scores.metric import TAU
from possym.scores.swaps import HeadScores

GPTJ_BATCH = 64  # inputs per forward pass of a possym GPT-J on a tensor


def concat(parts: Sequence[HeadScores]) -> HeadScores:
    """The scores of consecutive chunks of inputs as one result (inputs in order)."""
    first = parts[0]

    def cat(name: str) -> Tensor | None:
        values = [getattr(p, name) for p in parts]
        return None if any(v is None for v in values) else torch.cat(values)

    return HeadScores(torch.cat([p.s_pos for p in parts]), torch.cat([p.s_sym for p in parts]),
                      torch.cat([p.entropy for p in parts]), first.layers, torch.cat([p.query for p in parts]),
                      cat("detectors"), cat("correct"), first.n_kv_heads, first.detector_names)


def score_gptj_tokens(
    model: Any,
    tokens: Tensor,
    *,
    query: int | Tensor | None = None,
    layers: list[int] | None = None,
    batch_size: int = GPTJ_BATCH,
    progress: Callable[[int], None] | None = None,
    **engine: Any,
) -> HeadScores:
    """A possym GPT-J's scores on ``tokens`` [batch, pos] by the exact engine, with the detectors of each input
    over all its positions, ``batch_size`` inputs per forward pass; ``engine``: the engine's options
    (``block_size``, ``tau``, ``dtype``, ``cosine``)."""
    from possym.scores.swaps import head_scores, query_positions

    if model.training:
        raise PossymError("scores need a model in eval mode (dropout would perturb the attention); call model.eval()")
    if batch_size < 1:
        raise PossymError(f"batch_size={batch_size} must be >= 1")
    layers = list(range(model.cfg.n_layers)) if layers is None else list(layers)
    try:
        queries = query_positions(tokens, query)
    except ValueError as e:
        raise PossymError(str(e)) from None
    tokens = tokens.to(model.W_E.device)
    names = [f"blocks.{layer}.attn.hook_{h}" for layer in layers for h in ("rot_q", "rot_k", "pattern")]
    parts = []
    for start in range(0, tokens.shape[0], batch_size):
        chunk = tokens[start : start + batch_size]
        with torch.no_grad():
            _, cache = model.run_with_cache(chunk, names_filter=names)
        acts = {layer: (cache["rot_q", layer], cache["rot_k", layer]) for layer in layers}
        scores = head_scores(model, chunk, query=queries[start : start + batch_size], layers=layers, acts=acts,
                             **{"tau": TAU, **engine})
        detectors = torch.stack([detector_scores(cache["pattern", layer], chunk[:, None]) for layer in layers], 1)
        parts.append(HeadScores(scores.s_pos, scores.s_sym, scores.entropy, scores.layers, scores.query,
                                detectors, None, model.cfg.n_heads, HEAD_NAMES))
        if progress is not None:
            progress(chunk.shape[0])
    return concat(parts)


def _tokenize(model: Any, tokenizer: Any) -> Callable[[str], list[int]]:
    """How a string becomes token ids: the tokenizer given, else a TransformerLens model's own ``to_tokens``."""
    from possym.heads.tl import is_transformer_lens

    if tokenizer is not None:
        return lambda text: list(tokenizer(text).input_ids)
    if is_transformer_lens(model) and getattr(model, "tokenizer", None) is not None:
        return lambda text: model.to_tokens(text)[0].tolist()
    raise PossymError(
        f"strings need a tokenizer to become token ids: head_scores(model, texts, tokenizer=...) (a "
        f"{type(model).__name__} has none of its own; a possym run's is "
        "possym.model.hf.hf_tokenizer(task_vocab(task).tokens, PAD))"
    )


def as_prompts(model: Any, inputs: Any, tokenizer: Any = None, *, block_size: int | None = None,
               n_blocks: int | None = None, query: int | Tensor | None = None) -> list[EncodedPrompt]:
    """``inputs`` (a tensor, strings, HeadPrompts or EncodedPrompts) as encoded prompts for ``model``."""
    from possym.heads.prompts import BlockSpec, HeadPrompt, encode

    if isinstance(inputs, Tensor):
        if n_blocks is not None:
            raise PossymError("a tensor of token ids is laid out in blocks of block_size; n_blocks is for HeadPrompts")
        return token_prompts(inputs, block_size or 1, query)
    if isinstance(inputs, str):
        raise PossymError("give a list of strings, not one string (a string's characters are not prompts)")
    items = list(inputs)
    if not items:
        raise PossymError("head_scores needs at least one input (a [batch, pos] tensor with batch >= 1, or a "
                          "non-empty list of strings or prompts); got none")
    if query is not None:
        raise PossymError("query= takes token tensors; a prompt or a string is queried at its last token")
    if all(isinstance(p, EncodedPrompt) for p in items):
        return items
    if all(isinstance(p, str) for p in items):
        if n_blocks is not None:
            raise PossymError("strings are laid out in blocks of block_size; n_blocks is for HeadPrompts")
        tokenize = _tokenize(model, tokenizer)
        return [token_prompts(torch.tensor([tokenize(text)]), block_size or 1)[0] for text in items]
    if all(isinstance(p, HeadPrompt) for p in items):
        if tokenizer is None:
            tokenizer = getattr(model, "tokenizer", None)
        if tokenizer is None:
            raise PossymError("HeadPrompts are laid on tokens by a Hugging Face tokenizer: head_scores(model, "
                              "prompts, tokenizer=...)")
        spec = BlockSpec(block_size, n_blocks)
        return [encode(p, tokenizer, spec) for p in items]
    kinds = sorted({type(p).__name__ for p in items})
    raise PossymError(f"head_scores takes a tensor of token ids or a list of strings, HeadPrompts or EncodedPrompts "
                      f"(one kind); got a list of {', '.join(kinds)}")


def score_any(model: Any, inputs: Any, *, tokenizer: Any = None, progress: Callable[[int], None] | None = None,
              **options: Any) -> HeadScores:
    """The scores of any model on any inputs (see the module docstring); ``options``: ``layers``, ``tau``,
    ``batch_size``, ``block_size``, ``n_blocks`` (HeadPrompts), ``query`` (tensors), and a possym GPT-J's engine
    options (``dtype``, ``cosine``) on a tensor."""
    from possym.heads.tl import is_transformer_lens
    from possym.heads.wrappers import is_nnsight, unwrap
    from possym.model.gptj import GPTJ

    if tokenizer is None and is_nnsight(model):
        tokenizer = getattr(model, "tokenizer", None)  # a LanguageModel's; the module it wraps has none
    model = unwrap(model)
    inputs = _ids_as_tensor(inputs)
    if isinstance(model, GPTJ) and isinstance(inputs, Tensor):
        tokens = torch.as_tensor(inputs)
        check_token_ids(tokens, model.cfg.d_vocab)
        from possym.scores.swaps import head_scores as engine

        check_options(score_gptj_tokens, options, "a possym GPTJ",
                      also=tuple(k for k in _keyword_only(engine) if k not in ("query", "layers")))
        return score_gptj_tokens(model, tokens, progress=progress, **options)
    layouts = ("block_size", "n_blocks", "query")
    layout = {k: options.pop(k) for k in layouts if k in options}
    if isinstance(model, GPTJ):
        from possym.heads.scores import score_gptj_prompts as score
    elif is_transformer_lens(model):
        from possym.heads.tl import score_transformer_lens as score
    else:
        from transformers import PreTrainedModel

        from possym.heads.scores import score_heads as score

        if not isinstance(model, PreTrainedModel):
            raise PossymError(
                "head_scores takes a possym GPTJ, a Hugging Face model, a TransformerLens model or an nnsight "
                f"wrapper, not {type(model).__name__}"
            )
    check_options(score, options, f"a {type(model).__name__}", also=layouts)
    return score(model, as_prompts(model, inputs, tokenizer, **layout), progress=progress, **options)


def _keyword_only(fn: Callable[..., Any]) -> list[str]:
    import inspect

    return [name for name, p in inspect.signature(fn).parameters.items() if p.kind == p.KEYWORD_ONLY]


def check_options(fn: Callable[..., Any], options: dict[str, Any], kind: str, also: tuple[str, ...] = ()) -> None:
    """Refuse an option ``fn`` does not take (:class:`~possym.errors.OptionError`), naming those it does and the
    closest to the one given."""
    from possym.errors import OptionError, did_you_mean

    allowed = [name for name in _keyword_only(fn) if name != "progress"] + list(also)
    unknown = [k for k in options if k not in allowed]
    if unknown:
        raise OptionError(f"head_scores() got an unexpected keyword argument {unknown[0]!r}; its options for {kind}: "
                          f"{', '.join(allowed)}{did_you_mean(unknown[0], allowed)}")


def _ids_as_tensor(inputs: Any) -> Any:
    """Token ids given as an array or as lists of ints, as a tensor; anything else as it is."""
    if isinstance(inputs, Tensor) or isinstance(inputs, str):
        return inputs
    if hasattr(inputs, "__array__"):
        return torch.as_tensor(inputs)
    if isinstance(inputs, list | tuple) and inputs and all(isinstance(row, list | tuple) for row in inputs):
        return torch.as_tensor(inputs)
    return inputs


def n_inputs(inputs: Any) -> int | None:
    """How many inputs ``inputs`` holds (rows of a tensor, items of a list), for a progress bar; None if unknown."""
    if isinstance(inputs, Tensor):
        return int(inputs.shape[0]) if inputs.ndim >= 1 else None
    return len(inputs) if hasattr(inputs, "__len__") and not isinstance(inputs, str) else None
