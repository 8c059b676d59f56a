"""s_POS, s_SYM and entropy of every head of a Hugging Face RoPE LM, with the exact swap engine.

For one layer, one prompt and the query at its last token q, the engine of :mod:`possym.scores.swaps` needs
the table T[c, p] = cap(scale · (R_q q)·(R_p k_c)) + mask[p] over the K = M·m block positions only
(``content_position_logits`` with ``key_positions``); every other key j ≤ q, which no swap moves, is merged
into one pseudo-key of logit log Σ_j exp L_j, so ``swap_attention`` on the [K+1, K+1] table is exact (tested
against :mod:`possym.heads.swap_and_rerun`) and blocks may start anywhere. ``cap`` is Gemma-2's soft-cap,
``mask`` the model's own row (causal, sliding window); grouped-query head h reads key head
h // (heads / kv_heads). Per-frequency scores (:mod:`possym.scores.frequency`) use the same merge per plane.
See docs/heads.md, "How q and k are read" and "Correctness".

Example (a tiny random Llama built locally; a real model comes from
:func:`possym.local_models.load_local_model` and its prompts from :func:`possym.heads.prompts.encode`):
    >>> import transformers
    >>> from possym.heads.layout import BlockLayout, EncodedPrompt, check_token_ids
    >>> cfg = transformers.LlamaConfig(vocab_size=50, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
    ...                                num_attention_heads=4, num_key_value_heads=2)
    >>> model = transformers.AutoModelForCausalLM.from_config(cfg).eval()
    >>> prompt = EncodedPrompt(tuple(range(1, 13)), BlockLayout(start=2, block_size=2, n_blocks=4), None, "demo")
    >>> scores = score_heads(model, [prompt])
    >>> scores.s_pos.shape                                  # [prompt, layer, head]
    torch.Size([1, 2, 4])
    >>> bool(((scores.s_pos >= 0) & (scores.s_pos <= 1)).all())
    True"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch import Tensor

from possym.errors import PossymError
from possym.heads.capture import AttentionRecord, RopeSpec, capture_attention, rope_spec, silent_capture_message
from possym.heads.detectors import HEAD_NAMES, detector_scores
from possym.heads.layout import BlockLayout, EncodedPrompt, check_token_ids
from possym.local_models import input_device
from possym.scores.metric import TAU, attention_entropy
from possym.scores.swaps import HeadScores, SwapAttention, content_position_logits, rope_planes, swap_attention

if TYPE_CHECKING:
    from transformers import PreTrainedModel


def _cap(logits: Tensor, softcap: float | None) -> Tensor:
    return logits if softcap is None else softcap * torch.tanh(logits / softcap)


def merged_table(table: Tensor, clean: Tensor, layout: BlockLayout) -> Tensor:
    """Block table [..., K, K] and clean logits [..., q+1] -> the merged table [..., K+1, K+1].

    Entry [K, K] is log Σ exp of the clean logits outside the blocks (the query's key is always
    there); row and column K are otherwise never read by ``swap_attention``.
    """
    k = table.shape[-1]
    outside = torch.ones(clean.shape[-1], dtype=torch.bool, device=clean.device)
    outside[layout.positions] = False
    out = table.new_zeros(*table.shape[:-2], k + 1, k + 1)
    out[..., :k, :k] = table
    out[..., k, k] = clean[..., outside].logsumexp(-1)
    return out


def layer_swap_attention(
    record: AttentionRecord, rope: RopeSpec, layout: BlockLayout, query: int, *, per_plane: bool = False
) -> tuple[SwapAttention, Tensor]:
    """Every swap of one layer in closed form: (SwapAttention over the merged table, clean rows).

    Shapes: [batch, head, ...] or, with ``per_plane``, [batch, head, plane, ...]; the clean rows are
    softmax(L) over keys 0..query, the SwapAttention's rows are over the K block positions then the
    merged rest (its last entry).
    """
    if layout.end > query:
        raise PossymError(f"blocks end at {layout.end} but must end before the query at {query}")
    # float64 where the layer ran; MPS has no float64, so its layers are scored on the CPU
    device = torch.device("cpu") if record.query.device.type == "mps" else record.query.device
    q = record.query[:, :, query].to(device, torch.float64)  # [batch, head, d_head]
    k = record.keys_per_head()[:, :, : query + 1].to(device, torch.float64)  # [batch, head, key_pos, d_head]
    pos = layout.positions
    mask = record.mask_row(query).to(device)  # [batch, key_pos]
    if per_plane:
        table, _ = content_position_logits(
            q, k[:, :, pos], rope.thetas, scale=record.scale, pairing=rope.pairing, key_positions=pos, per_plane=True
        )  # [batch, head, plane, K, K]
        q0, q1, _ = rope_planes(q[..., None, :], rope.rot_dim, rope.pairing)
        k0, k1, _ = rope_planes(k, rope.rot_dim, rope.pairing)
        clean = ((q0 * k0 + q1 * k1) * record.scale).mT  # [batch, head, plane, key_pos]
        mask = mask[:, None, None]
    else:
        table = content_position_logits(
            q, k[:, :, pos], rope.thetas, scale=record.scale, pairing=rope.pairing, key_positions=pos
        )  # [batch, head, K, K]
        clean = (q[..., None, :] * k).sum(-1) * record.scale  # [batch, head, key_pos]
        mask = mask[:, None]
    table = _cap(table, record.softcap) + mask[..., None, pos]  # the mask follows the position, not the content
    clean = _cap(clean, record.softcap) + mask
    return swap_attention(merged_table(table, clean, layout), layout.block_size), clean.softmax(-1)


def layout_pairs(row: Tensor, swapped: Tensor, layout: BlockLayout, blocks: Tensor) -> tuple[Tensor, Tensor]:
    """Block means (d_I, d_J) before and after each swap from full rows: row [..., key_pos], swapped
    [..., swap, key_pos], blocks [swap, 2] -> (clean, swapped), each [..., swap, 2]."""

    def means(r: Tensor) -> Tensor:
        return r[..., layout.positions].unflatten(-1, (layout.n_blocks, layout.block_size)).mean(-1)

    clean = means(row)[..., blocks]  # [..., swap, 2]
    after = means(swapped)  # [..., swap, n_blocks]
    return clean, after.gather(-1, blocks.expand(*after.shape[:-1], 2))


PromptScores = HeadScores
"""The scores of a list of prompts: the one result type of every model kind (:class:`possym.scores.swaps.HeadScores`),
under the name it had when prompts had a type of their own."""


def _groups(prompts: Sequence[EncodedPrompt], batch_size: int) -> list[list[int]]:
    """Batches of prompt indices with one length and one layout (no padding is ever needed)."""
    by_key: dict[tuple, list[int]] = {}
    for i, p in enumerate(prompts):
        by_key.setdefault((len(p.ids), p.layout), []).append(i)
    return [idx[s : s + batch_size] for idx in by_key.values() for s in range(0, len(idx), batch_size)]


def _forward(model: PreTrainedModel, ids: Tensor, layers: list[int]) -> tuple[dict[int, AttentionRecord], Tensor]:
    ids = ids.to(input_device(model))
    with torch.no_grad(), capture_attention(model, layers) as records:
        logits = model(input_ids=ids, use_cache=False).logits[:, -1]
    silent = [layer for layer, recs in records.items() if not recs]
    if silent:
        raise PossymError(silent_capture_message(model, silent))
    return {layer: recs[0] for layer, recs in records.items()}, logits


def _check(model: PreTrainedModel) -> None:
    if model.training:
        raise PossymError("scores need a model in eval mode (dropout would perturb the attention); call model.eval()")


PATTERN_ATOL = 1e-4  # float32 attention against its float64 recomputation differs by ~1e-6


def check_last_row(record: AttentionRecord, row: Tensor, layer: int) -> None:
    """If the record carries the model's own attention row at the last query, the engine's clean row
    (from q, k, scale, cap and mask) must reproduce it: otherwise the model computes its logits in a way
    the engine does not model (an attention sink, a bias, a rescaled query), and its scores would be wrong."""
    if record.last_row is None:
        return
    theirs = record.last_row.to(row.device, torch.float64)
    err = float((row - theirs).abs().max())
    if not err <= PATTERN_ATOL:
        raise PossymError(
            f"layer {layer}: the attention recomputed from the rotated q and k differs from the model's own "
            f"hook_pattern by {err:.2g} (allowed {PATTERN_ATOL}); this model computes attention logits in a way "
            "the score engine does not model (cap(scale·q·k) + mask), so its scores are refused"
        )


Forward = Callable[[Tensor, list[int]], tuple[dict[int, AttentionRecord], Tensor]]
"""``forward(ids, layers)`` -> (each layer's record of one pass over ``ids`` [batch, pos], last-token logits)."""


def score_prompts(
    prompts: Sequence[EncodedPrompt],
    forward: Forward,
    rope: Callable[[int], RopeSpec],
    layers: list[int],
    n_heads: int,
    d_vocab: int,
    *,
    tau: float = TAU,
    batch_size: int = 8,
    progress: Callable[[int], None] | None = None,
    n_kv_heads: int | None = None,
) -> HeadScores:
    """The scoring loop of every model kind: one ``forward`` per batch of same-layout prompts records each
    layer's rotated q and k; ``rope(layer)`` says how that layer rotates; the engine does the rest.

    :func:`score_heads` (Hugging Face), :func:`score_gptj_prompts` (possym) and
    :func:`possym.heads.tl.score_transformer_lens` differ only in the two functions they pass. Each prompt's
    query is its last token. ``n_kv_heads``: the model's key heads, carried into the result. Raises
    :class:`~possym.errors.PossymError` for no prompts or a token id outside 0..d_vocab−1.
    """
    if not prompts:
        raise PossymError("head_scores needs at least one prompt (or a [batch, pos] tensor with batch >= 1); got none")
    shape = (len(prompts), len(layers), n_heads)
    s_pos, s_sym, ent = (torch.full(shape, float("nan"), dtype=torch.float64) for _ in range(3))
    detectors = torch.full((*shape, len(HEAD_NAMES)), float("nan"), dtype=torch.float64)
    correct = torch.full((len(prompts),), float("nan"), dtype=torch.float64)
    for idx in _groups(prompts, batch_size):
        ids = torch.tensor([prompts[i].ids for i in idx])
        check_token_ids(ids, d_vocab)
        records, logits = forward(ids, layers)
        query, layout = ids.shape[1] - 1, prompts[idx[0]].layout
        for li, layer in enumerate(layers):
            sw, row = layer_swap_attention(records[layer], rope(layer), layout, query)
            check_last_row(records[layer], row, layer)
            s_pos[idx, li], s_sym[idx, li] = (t.cpu() for t in sw.scores(tau))  # layers may sit on several devices
            ent[idx, li] = attention_entropy(row).cpu()
            pattern = records[layer].pattern
            if pattern is not None:
                detectors[idx, li] = detector_scores(pattern, ids[:, None]).cpu()
        for j, i in enumerate(idx):
            if prompts[i].answer_id is not None:
                correct[i] = float(int(logits[j].argmax()) == prompts[i].answer_id)
        if progress is not None:
            progress(len(idx))
    queries = torch.tensor([len(p.ids) - 1 for p in prompts])  # each prompt's last token
    return HeadScores(s_pos, s_sym, ent, tuple(layers), queries, detectors, correct, n_kv_heads, HEAD_NAMES)


def _n_embeddings(model: PreTrainedModel) -> int:
    """The embedding rows, which bound the valid token ids (a config's vocab_size may differ)."""
    weight = model.get_input_embeddings().weight
    assert isinstance(weight, Tensor)
    return int(weight.shape[0])


def score_heads(
    model: PreTrainedModel,
    prompts: Sequence[EncodedPrompt],
    *,
    layers: list[int] | None = None,
    tau: float = TAU,
    batch_size: int = 8,
    progress: Callable[[int], None] | None = None,
) -> HeadScores:
    """s_POS, s_SYM and entropy of every head of ``layers`` (default all) on every prompt.

    One forward pass per batch records the rotated q and k of every layer; the engine does the
    rest. ``progress(k)`` is called after each batch with its number of prompts.
    """
    _check(model)
    layers = list(range(model.config.num_hidden_layers)) if layers is None else list(layers)
    n_heads = model.config.num_attention_heads
    return score_prompts(
        prompts,
        lambda ids, layers: _forward(model, ids, layers),
        lambda layer: rope_spec(model, layer),
        layers,
        n_heads,
        _n_embeddings(model),
        tau=tau,
        batch_size=batch_size,
        progress=progress,
        n_kv_heads=getattr(model.config, "num_key_value_heads", None) or n_heads,
    )


def _gptj_forward(model: Any, ids: Tensor, layers: list[int]) -> tuple[dict[int, AttentionRecord], Tensor]:
    """A possym GPT-J's rotated q and k and pattern of each layer, from its hook points, in one pass."""
    names = [f"blocks.{layer}.attn.hook_{h}" for layer in layers for h in ("rot_q", "rot_k", "pattern")]
    ids = ids.to(model.W_E.device)
    with torch.no_grad():
        logits, cache = model.run_with_cache(ids, names_filter=names)
    scale = model.cfg.d_head**-0.5
    records = {}
    for layer in layers:
        q, k, pattern = (cache[h, layer].transpose(1, 2) if h != "pattern" else cache[h, layer]
                         for h in ("rot_q", "rot_k", "pattern"))
        records[layer] = AttentionRecord(q, k, scale, None, None, last_row=pattern[:, :, -1], pattern=pattern)
    return records, logits[:, -1]


def gptj_rope_spec(model: Any, layer: int) -> RopeSpec:
    """How a possym GPT-J's layer rotates: its planes' angles (0 for a p-RoPE or NoPE plane), adjacent pairs."""
    from possym.model.rope import layer_frequencies

    return RopeSpec(layer_frequencies(model.cfg, layer), "gptj", model.cfg.rot_dim)


def score_gptj_prompts(
    model: Any,
    prompts: Sequence[EncodedPrompt],
    *,
    layers: list[int] | None = None,
    tau: float = TAU,
    batch_size: int = 8,
    progress: Callable[[int], None] | None = None,
) -> HeadScores:
    """s_POS, s_SYM and entropy of every head of a possym GPT-J on prompts with their own block layouts (options
    as :func:`score_heads`): the rotated q and k of its hook points in the prompt loop every model kind shares.
    A LongTensor of inputs is scored by the engine directly (:func:`possym.scores.swaps.head_scores`); the two
    agree to float rounding (tests)."""
    if model.training:
        raise PossymError("scores need a model in eval mode (dropout would perturb the attention); call model.eval()")
    layers = list(range(model.cfg.n_layers)) if layers is None else list(layers)
    return score_prompts(prompts, lambda ids, layers: _gptj_forward(model, ids, layers),
                         lambda layer: gptj_rope_spec(model, layer), layers, model.cfg.n_heads, model.cfg.d_vocab,
                         tau=tau, batch_size=batch_size, progress=progress, n_kv_heads=model.cfg.n_heads)


@dataclass(frozen=True)
class FrequencyScores:
    """Per-frequency scores of one head: the mean over prompts of each RoPE plane's projection head."""

    layer: int
    head: int
    s_pos: Tensor  # [plane], plane k has frequency ID k + 1 (ID 1 the fastest)
    s_sym: Tensor  # [plane]
    thetas: Tensor  # [plane] radians per position

    def records(self, **fields: Any) -> list[dict[str, Any]]:
        return [
            {
                **fields,
                "layer": self.layer,
                "head": self.head,
                "frequency_id": k + 1,
                "theta": float(self.thetas[k]),
                "s_pos": float(self.s_pos[k]),
                "s_sym": float(self.s_sym[k]),
            }
            for k in range(len(self.thetas))
        ]


def frequency_scores(
    model: PreTrainedModel,
    prompts: Sequence[EncodedPrompt],
    heads: Sequence[tuple[int, int]],
    *,
    tau: float = TAU,
    batch_size: int = 8,
) -> list[FrequencyScores]:
    """Per-frequency s_POS and s_SYM of each (layer, head) in ``heads``, averaged over the prompts."""
    _check(model)
    layers = sorted({layer for layer, _ in heads})
    per_batch: dict[tuple[int, int], list[tuple[Tensor, Tensor]]] = {h: [] for h in heads}
    for idx in _groups(prompts, batch_size):
        ids = torch.tensor([prompts[i].ids for i in idx])
        records, _ = _forward(model, ids, layers)
        query, layout = ids.shape[1] - 1, prompts[idx[0]].layout
        for layer, head in heads:
            one = records[layer].head(head)  # the per-plane tables of one head, not of all
            sw, _ = layer_swap_attention(one, rope_spec(model, layer), layout, query, per_plane=True)
            s_pos, s_sym = sw.scores(tau)  # [batch, 1, plane]
            per_batch[(layer, head)].append((s_pos[:, 0].cpu(), s_sym[:, 0].cpu()))
    out = []
    for layer, head in heads:
        s_pos, s_sym = (torch.cat(parts).nanmean(0) for parts in zip(*per_batch[(layer, head)], strict=True))
        out.append(FrequencyScores(layer, head, s_pos, s_sym, rope_spec(model, layer).thetas))
    return out


def depth_summary(records: Sequence[dict[str, Any]], n_layers: int) -> dict[str, float]:
    """The metric paper's two LLM findings from per-head records (paper B §5; docs/heads.md).

    Medians of s_POS and s_SYM over the heads of the early half of the layers (layer < n_layers/2)
    and of the late half, and Pearson's r (with its two-sided p) between s_POS and s_SYM across
    heads. Gemma-2-2b-it on binding: median s_POS 0.83 early vs 0.56 late, r = −0.91.
    """
    from scipy.stats import pearsonr

    def median(key: str, early: bool) -> float:
        vals = [r[key] for r in records if (r["layer"] < n_layers / 2) == early]
        return float(np.nanmedian(vals)) if vals else float("nan")

    sp = [r["s_pos"] for r in records]
    ss = [r["s_sym"] for r in records]
    r, p = pearsonr(sp, ss) if len(records) > 2 else (float("nan"), float("nan"))
    return {
        "n_heads": len(records),
        "median_s_pos_early": median("s_pos", True),
        "median_s_pos_late": median("s_pos", False),
        "median_s_sym_early": median("s_sym", True),
        "median_s_sym_late": median("s_sym", False),
        "pearson_r": float(r),
        "pearson_p": float(p),
    }


def extreme_heads(records: Sequence[dict[str, Any]]) -> tuple[tuple[int, int], tuple[int, int]]:
    """(layer, head) of the most positional and of the most symbolic head: largest s_POS − s_SYM and s_SYM − s_POS."""
    best_pos = max(records, key=lambda r: r["s_pos"] - r["s_sym"])
    best_sym = max(records, key=lambda r: r["s_sym"] - r["s_pos"])
    return (best_pos["layer"], best_pos["head"]), (best_sym["layer"], best_sym["head"])
