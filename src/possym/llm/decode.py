"""Greedy decoding of a local causal LM in batches that share a cached prompt prefix.

All prompts of a task share a long instruction prefix, so :func:`greedy_generate` keeps the
key/value cache of the longest token prefix a batch shares and runs only the suffixes; the test
suite checks it against ``model.generate`` on the full prompt, one prompt at a time.
"""

from __future__ import annotations

import copy
import inspect
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from possym.errors import PossymError
from possym.local_models import input_device

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase


class PrefixCache:
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
    prefix: PrefixCache | None = None,
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
        raise PossymError("every prompt needs at least two tokens")
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
    device = input_device(model)  # with a device_map, where inputs go
    # transformers 5.x names the cache argument `cache`; earlier versions `past_key_values`.
    cache_arg = "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"
    prefix = prefix if prefix is not None else PrefixCache()
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


def eos_ids(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase) -> set[int]:
    ids: set[int] = set()
    for value in (getattr(model.generation_config, "eos_token_id", None), tokenizer.eos_token_id):
        if isinstance(value, int):
            ids.add(value)
        elif value is not None:
            ids.update(int(v) for v in value)
    if not ids:
        raise PossymError("the model names no end-of-sequence token; greedy decoding would never stop early")
    return ids
