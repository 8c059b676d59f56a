"""s_POS, s_SYM and entropy of every head of a TransformerLens model, read from its own hooks.

Two kinds of TransformerLens model are scored, by the engine and loop of :mod:`possym.heads.scores`:

- a rotary ``HookedTransformer`` (transformer-lens 3.x; any, e.g. one from
  :func:`possym.model.tl.to_hooked_transformer`);
- a ``TransformerBridge`` (TransformerLens's wrapper over a Hugging Face model) whose attention fires
  ``hook_rot_q``/``hook_rot_k`` (Llama, Qwen, Gemma, Mistral, ...; in transformer-lens 3.9 not GPT-J
  or GPT-NeoX, whose bridges list the hooks but rotate inside the HF module, so they never fire:
  those are refused, with the advice to score ``bridge.original_model``, the same weights, instead).

One forward pass per batch reads, per layer, ``hook_rot_q`` [batch, pos, head, d_head] and
``hook_rot_k`` [batch, pos, kv_head, d_head] (after RoPE), the mask at the last query from
``hook_attn_scores`` (a masked key's score is −inf, or the dtype's most negative number), and the
model's own attention row from ``hook_pattern``. The rest is what the Hugging Face path knows:

- the logit scale: a HookedTransformer divides by ``attn.attn_scale``; a bridge's HF attention
  module multiplies by its ``scaling``; the soft-cap is ``cfg.attn_scores_soft_cap`` (HookedTransformer)
  or the HF config's ``attn_logit_softcapping``;
- the RoPE frequencies: a HookedTransformer's are read from the rotary tables each attention module
  actually applies (θ_k = atan2(sin, cos) at position 1, so rope scaling, local/global bases and
  the conversion's exact tables are all honoured), with its pairing (``rotary_adjacent_pairs``:
  GPT-J's adjacent dims, else NeoX's halves); a bridge's from its HF model (:func:`possym.heads.capture.rope_spec`).

Values (``hook_v``) are not needed: the scores compare attention rows, which q, k, the scale, the cap and
the mask determine. Before scoring a layer the engine's clean row must equal ``hook_pattern`` to
1e-4 (:func:`possym.heads.scores.check_last_row`); a model computing its logits otherwise (an
attention sink, ALiBi, a query rescaled after its hook) is refused rather than scored wrongly.

Example:
    >>> ht = possym.to_hooked_transformer(model)                      # doctest: +SKIP
    >>> possym.head_scores(ht, tokens).s_pos.shape                    # doctest: +SKIP
    torch.Size([8, 2, 1])
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import Tensor

from possym.errors import PossymError
from possym.heads.capture import AttentionRecord, RopeSpec, attention_module, decoder_layers, rope_spec
from possym.heads.layout import EncodedPrompt
from possym.heads.scores import PromptScores, score_prompts
from possym.scores.metric import TAU

_NEEDED = ("hook_rot_q", "hook_rot_k", "hook_attn_scores", "hook_pattern")


def is_transformer_lens(model: Any) -> bool:
    """Whether ``model`` is a TransformerLens model (checked by its class's module; TransformerLens is not imported)."""
    return type(model).__module__.split(".")[0] == "transformer_lens"


def _is_bridge(model: Any) -> bool:
    return hasattr(model, "original_model")


def _check(model: Any, layers: list[int]) -> None:
    if model.training:
        raise PossymError("scores need a model in eval mode (dropout would perturb the attention); call model.eval()")
    if model.cfg.positional_embedding_type != "rotary":
        raise PossymError(
            f"positional_embedding_type={model.cfg.positional_embedding_type!r}: possym scores RoPE models only "
            "(a swap moves content across positions, and without RoPE the logits do not see it)"
        )
    missing = [f"blocks.{layer}.attn.{h}" for layer in layers for h in _NEEDED
               if f"blocks.{layer}.attn.{h}" not in model.hook_dict]  # fmt: skip
    if missing:
        raise PossymError(f"{type(model).__name__} has no hook point {missing[0]} ({len(missing)} missing)")


def tl_rope_spec(model: Any, layer: int) -> RopeSpec:
    """How layer ``layer`` rotates (frequencies in float64, pairing, rotated dims); read after a forward pass."""
    if _is_bridge(model):
        return rope_spec(model.original_model, layer)
    attn = model.blocks[layer].attn
    rot = int(model.cfg.rotary_dim)
    adjacent = bool(model.cfg.rotary_adjacent_pairs)
    cols = slice(0, rot, 2) if adjacent else slice(0, rot // 2)  # one column per plane
    sin, cos = attn.rotary_sin[1, cols].double(), attn.rotary_cos[1, cols].double()
    return RopeSpec(torch.atan2(sin, cos).cpu(), "gptj" if adjacent else "neox", rot)


def _scale_and_cap(model: Any, layer: int) -> tuple[float, float | None]:
    if _is_bridge(model):
        hf = model.original_model
        scale = getattr(attention_module(decoder_layers(hf)[layer]), "scaling", model.cfg.d_head**-0.5)
        return float(scale), getattr(hf.config, "attn_logit_softcapping", None)
    cap = float(model.cfg.attn_scores_soft_cap)
    return 1.0 / float(model.blocks[layer].attn.attn_scale), cap if cap > 0 else None


def tl_forward(model: Any, ids: Tensor, layers: list[int]) -> tuple[dict[int, AttentionRecord], Tensor]:
    """One pass over ``ids`` [batch, pos]: each layer's record for the last query, and the last-token logits."""
    acts: dict[str, Tensor] = {}

    def keep(t: Tensor, hook: Any) -> None:
        acts[hook.name] = t.detach()

    def keep_last(t: Tensor, hook: Any) -> None:  # [batch, head, query_pos, key_pos] -> the last query's row
        acts[hook.name] = t[:, :, -1].detach()

    hooks: list[tuple[str, Callable[..., None]]] = []
    for layer in layers:
        p = f"blocks.{layer}.attn."
        hooks += [(p + "hook_rot_q", keep), (p + "hook_rot_k", keep)]
        hooks += [(p + "hook_attn_scores", keep_last), (p + "hook_pattern", keep_last)]
    with torch.no_grad():
        logits = model.run_with_hooks(ids.to(next(model.parameters()).device), fwd_hooks=hooks)[:, -1]
    silent = [name for name, _ in hooks if name not in acts]
    if silent:
        advice = ""
        if _is_bridge(model):
            advice = (" This bridge's attention rotates inside its Hugging Face module (GPT-J's and GPT-NeoX's do); "
                      "score that model instead: possym.head_scores(bridge.original_model, prompts).")
        name = type(model).__name__
        raise PossymError(f"{name}'s hook point {silent[0]} never fired ({len(silent)} silent).{advice}")
    batch, n = ids.shape
    records = {}
    for layer in layers:
        p = f"blocks.{layer}.attn."
        scores = acts[p + "hook_attn_scores"][:, 0]  # [batch, key_pos]: the mask is the same for every head
        row = torch.where(scores > torch.finfo(scores.dtype).min / 2, 0.0, -math.inf)
        # Only the last query's row of the mask is ever read (AttentionRecord.mask_row), so it is
        # broadcast over the query positions instead of stored pos times.
        mask = row[:, None, None, :].expand(batch, 1, n, n)
        scale, cap = _scale_and_cap(model, layer)
        q, k = (acts[p + h].transpose(1, 2) for h in ("hook_rot_q", "hook_rot_k"))  # [batch, (kv_)head, pos, d]
        records[layer] = AttentionRecord(q, k, scale, cap, mask, last_row=acts[p + "hook_pattern"])
    return records, logits


def score_transformer_lens(
    model: Any,
    prompts: Sequence[EncodedPrompt],
    *,
    layers: list[int] | None = None,
    tau: float = TAU,
    batch_size: int = 8,
    progress: Callable[[int], None] | None = None,
) -> PromptScores:
    """s_POS, s_SYM and entropy of every head of ``layers`` (default all) of a TransformerLens model on
    every prompt (options as :func:`possym.heads.scores.score_heads`)."""
    layers = list(range(model.cfg.n_layers)) if layers is None else list(layers)
    _check(model, layers)
    return score_prompts(
        prompts,
        lambda ids, layers: tl_forward(model, ids, layers),
        lambda layer: tl_rope_spec(model, layer),
        layers,
        model.cfg.n_heads,
        tau=tau,
        batch_size=batch_size,
        progress=progress,
    )
