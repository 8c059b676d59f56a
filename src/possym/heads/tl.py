"""s_POS, s_SYM and entropy of every head of a TransformerLens model, read from its own hooks.

A rotary ``HookedTransformer`` (transformer-lens 3.x) or a ``TransformerBridge`` (3.9 and 4.x) is scored by
the engine and loop of :mod:`possym.heads.scores`. One forward pass per batch reads, per layer,
``hook_rot_q`` [batch, pos, head, d_head] and ``hook_rot_k`` [batch, pos, kv_head, d_head] (GPT-J's and
GPT-NeoX's bridges never fire them: their ``hook_q``/``hook_k`` are rotated here with the HF model's RoPE,
:func:`possym.heads.capture.rope_spec`), the last query's mask from ``hook_attn_scores`` and the pattern from
``hook_pattern`` (which checks the engine's row to 1e-4, :func:`possym.heads.scores.check_last_row`, and feeds
:mod:`possym.heads.detectors`); scale, soft-cap and RoPE frequencies come from the model (a HookedTransformer's
from the rotary tables it applies, θ_k = atan2(sin, cos) at position 1). Values are not needed. What each
bridge fires, and the tests: docs/heads.md, "Scores of a TransformerLens model".

Example:
    >>> ht = possym.to_hooked_transformer(model)                      # doctest: +SKIP
    >>> possym.head_scores(ht, tokens).s_pos.shape                    # doctest: +SKIP
    torch.Size([8, 2, 1])"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import Tensor

from possym.errors import PossymError
from possym.heads.capture import AttentionRecord, RopeSpec, attention_module, decoder_layers, rope_spec
from possym.heads.layout import EncodedPrompt
from possym.heads.scores import score_prompts
from possym.scores.metric import TAU
from possym.scores.swaps import HeadScores, rope_planes

_NEEDED = ("hook_q", "hook_k", "hook_attn_scores", "hook_pattern")  # and hook_rot_q/k, or q/k rotated here


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


def rotate(x: Tensor, rope: RopeSpec) -> Tensor:
    """x [batch, head, pos, d_head] rotated by RoPE at each position: R_p x, plane by plane, in float64."""
    angles = torch.arange(x.shape[-2], dtype=torch.float64, device=x.device)[:, None] * rope.thetas.to(x.device)
    cos, sin = angles.cos(), angles.sin()  # [pos, plane]
    x0, x1, rest = rope_planes(x.double(), rope.rot_dim, rope.pairing)
    y0, y1 = x0 * cos - x1 * sin, x0 * sin + x1 * cos
    rot = torch.stack((y0, y1), -1).flatten(-2) if rope.pairing == "gptj" else torch.cat((y0, y1), -1)
    return torch.cat((rot, rest.double()), -1)


def tl_forward(model: Any, ids: Tensor, layers: list[int]) -> tuple[dict[int, AttentionRecord], Tensor]:
    """One pass over ``ids`` [batch, pos]: each layer's record for the last query, and the last-token logits."""
    acts: dict[str, Tensor] = {}

    # Kept under the name asked for, not hook.name: a bridge's hook_q is an alias of its q.hook_out.
    def keep(name: str) -> Callable[[Tensor, Any], None]:
        return lambda t, hook: acts.__setitem__(name, t.detach())

    def keep_last(name: str) -> Callable[[Tensor, Any], None]:  # [batch, head, query_pos, key_pos] -> last row
        return lambda t, hook: acts.__setitem__(name, t[:, :, -1].detach())

    rotated = [h for h in ("hook_rot_q", "hook_rot_k") if f"blocks.{layers[0]}.attn.{h}" in model.hook_dict]
    hooks: list[tuple[str, Callable[[Tensor, Any], None]]] = []
    for layer in layers:
        p = f"blocks.{layer}.attn."
        # the whole pattern, not only its last row: the head detectors read every query (possym.heads.detectors)
        hooks += [(p + h, keep(p + h)) for h in ("hook_q", "hook_k", "hook_pattern", *rotated)]
        hooks += [(p + "hook_attn_scores", keep_last(p + "hook_attn_scores"))]
    with torch.no_grad():
        logits = model.run_with_hooks(ids.to(next(model.parameters()).device), fwd_hooks=hooks)[:, -1]
    silent = [name for name, _ in hooks if name not in acts and "hook_rot_" not in name]
    if silent:
        advice = ""
        if _is_bridge(model) and any("attn_scores" in n or "pattern" in n for n in silent):
            advice = (": its Hugging Face attention returned no weights; build the HF model with "
                      'attn_implementation="eager" before wrapping it in a TransformerBridge')
        raise PossymError(f"{type(model).__name__}'s hook point {silent[0]} never fired ({len(silent)} silent){advice}")
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
        if p + "hook_rot_q" in acts and p + "hook_rot_k" in acts:
            q, k = (acts[p + h].transpose(1, 2) for h in ("hook_rot_q", "hook_rot_k"))  # [batch, (kv_)head, pos, d]
        else:  # a bridge whose HF attention rotates out of the hooks' sight (GPT-J, GPT-NeoX)
            rope = tl_rope_spec(model, layer)
            q, k = (rotate(acts[p + h].transpose(1, 2), rope) for h in ("hook_q", "hook_k"))
        pattern = acts[p + "hook_pattern"]  # [batch, head, pos, key_pos]
        records[layer] = AttentionRecord(q, k, scale, cap, mask, last_row=pattern[:, :, -1], pattern=pattern)
    return records, logits


def score_transformer_lens(
    model: Any,
    prompts: Sequence[EncodedPrompt],
    *,
    layers: list[int] | None = None,
    tau: float = TAU,
    batch_size: int = 8,
    progress: Callable[[int], None] | None = None,
) -> HeadScores:
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
        model.cfg.d_vocab,
        tau=tau,
        batch_size=batch_size,
        progress=progress,
        n_kv_heads=getattr(model.cfg, "n_key_value_heads", None) or model.cfg.n_heads,
    )
