"""The exact swap engine: every swap's attention row from one content-by-position logit table.

A swap moves residual rows (and their keys) while the query and every unswapped key stay, so for a query at
position q one table holds every logit any swap can produce (diagonal: the clean row L):

    T[c, p] = q^T R_{p−q} k_c / sqrt(d_head)   (content at c placed at p);   D'(π) = softmax(L with
    L_{I_t} -> T[J_t, I_t], L_{J_t} -> T[I_t, J_t]),  T = scale · Σ_k (A_ck cos((p−c)θ_k) + B_ck sin((p−c)θ_k)) + C_c

from the rotated query and keys (``hook_rot_k``), A, B the per-plane dot and cross products, C the unrotated
dims; each plane's summand is the metric paper's "projection head" (:mod:`possym.scores.frequency`). One
[q+1, q+1] table replaces C(q,2) re-runs of :mod:`possym.scores.swap_and_rerun`, equal to float64 rounding
(tested to 1e-6). :func:`content_position_logits` takes GPT-J or NeoX pairing, partial rotary and any leading
dims (repeat grouped-query key heads first). See docs/heads.md, "How q and k are read" and "Correctness".

Example:
    >>> import torch
    >>> from possym.config import ModelConfig
    >>> from possym.model.gptj import GPTJ
    >>> model = GPTJ(ModelConfig(n_layers=2, d_model=16, d_mlp=32, d_vocab=10), torch.Generator().manual_seed(0))
    >>> s = head_scores(model.eval(), torch.randint(0, 10, (3, 6), generator=torch.Generator().manual_seed(1)))
    >>> s.s_pos.shape, bool(((s.s_pos > 0.9) & (s.s_sym > 0.9)).all())   # random init: near-uniform
    (torch.Size([3, 2, 1]), True)"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, overload

import numpy as np
import torch
from torch import Tensor

from possym.devices import model_device
from possym.model.gptj import GPTJ
from possym.model.rope import layer_frequencies
from possym.scores.metric import (
    TAU,
    Cosine,
    attention_entropy,
    block_swaps,
    pair_scores,
)
from possym.scores.spread import mean_spread

if TYPE_CHECKING:
    import pandas as pd

Pairing = Literal["gptj", "neox"]


def rope_planes(x: Tensor, rot_dim: int, pairing: Pairing = "gptj") -> tuple[Tensor, Tensor, Tensor]:
    """Split heads into RoPE planes: x [..., d_head] -> (x0, x1) each [..., rot_dim/2], rest [..., d_head − rot_dim].

    Plane k is (x0[k], x1[k]). GPT-J pairs adjacent dims (2k, 2k+1); NeoX/Llama pair the halves
    (k, k + rot_dim/2). Pitfall: the two are not interchangeable.
    """
    rot, rest = x[..., :rot_dim], x[..., rot_dim:]
    if pairing == "gptj":
        return rot[..., 0::2], rot[..., 1::2], rest
    if pairing == "neox":
        return rot[..., : rot_dim // 2], rot[..., rot_dim // 2 :], rest
    raise ValueError(f"pairing={pairing!r}; allowed: 'gptj', 'neox'")


def content_position_logits(
    q_rot: Tensor,
    k_rot: Tensor,
    thetas: Tensor,
    *,
    scale: float,
    pairing: Pairing = "gptj",
    key_positions: Tensor | None = None,
    per_plane: bool = False,
) -> Tensor | tuple[Tensor, Tensor]:
    """The table T[c, p] = (R_q q)·(R_p k_c)·scale of content c placed at position p.

    q_rot: [..., d_head] the query after RoPE; k_rot: [..., key, d_head] the keys after RoPE at their
    own positions ``key_positions`` (default 0..key−1); thetas: [rot_dim/2] the plane frequencies
    (``rope_frequencies``; empty for NoPE). Leading dims (batch, head) broadcast.

    Returns T [..., content, position], with the clean logits on its diagonal. With
    ``per_plane=True`` returns (planes [..., plane, content, position], rest [..., content]): the
    partial logit of each RoPE plane and the position-free part of the unrotated dims, which sum to T.
    """
    half = thetas.shape[-1]
    n = k_rot.shape[-2]
    pos = torch.arange(n, device=k_rot.device) if key_positions is None else key_positions.to(k_rot.device)
    offsets = (pos[None, :] - pos[:, None]).to(torch.float64)  # [content, position]: p − c
    angles = offsets[..., None] * thetas.to(device=k_rot.device, dtype=torch.float64)  # [c, p, plane]
    cos, sin = angles.cos().to(k_rot.dtype), angles.sin().to(k_rot.dtype)
    q0, q1, q_rest = rope_planes(q_rot[..., None, :], 2 * half, pairing)  # [..., 1, plane]
    k0, k1, k_rest = rope_planes(k_rot, 2 * half, pairing)  # [..., c, plane]
    dot = q0 * k0 + q1 * k1  # [..., c, plane]
    cross = q1 * k0 - q0 * k1
    rest = (q_rest * k_rest).sum(-1) * scale  # [..., c]
    if per_plane:
        planes = dot.mT[..., :, :, None] * cos.permute(2, 0, 1) + cross.mT[..., :, :, None] * sin.permute(2, 0, 1)
        return planes * scale, rest
    table = torch.einsum("...ck,cpk->...cp", dot, cos) + torch.einsum("...ck,cpk->...cp", cross, sin)
    return table * scale + rest[..., None]


@dataclass(frozen=True)
class SwapAttention:
    """A query's clean attention row and, for every swap, the attention it then puts on the two swapped blocks.

    ``moved[..., s, t]`` is the swapped row's weight at ``positions[s, t]`` (block I, then block J);
    every other position p keeps its clean weight times ``rest_factor[..., s]`` (only the normaliser
    changes). :meth:`swapped_rows` assembles the full rows from these.
    """

    row: Tensor  # [..., key_pos] clean post-softmax row over keys 0..q
    moved: Tensor  # [..., swap, 2m] swapped-row weights at the swapped positions
    rest_factor: Tensor  # [..., swap] Z / Z'(π): the factor on every unswapped position
    blocks: Tensor  # [swap, 2] the swapped block pair (I, J)
    positions: Tensor  # [swap, 2m] positions of block I then block J
    block_size: int

    def pairs(self) -> tuple[Tensor, Tensor]:
        """(v_IJ(x), v_IJ(πx)), each [..., swap, 2]: block-mean masses before and after each swap."""
        m = self.block_size
        clean = self.row[..., self.positions].unflatten(-1, (2, m)).mean(-1)
        return clean, self.moved.unflatten(-1, (2, m)).mean(-1)

    def swapped_rows(self) -> Tensor:
        """D'(π) for every swap: [..., swap, key_pos]."""
        rows = self.row[..., None, :] * self.rest_factor[..., None]
        return rows.scatter(-1, self.positions.expand(*self.moved.shape[:-1], -1), self.moved)

    def scores(self, tau: float = TAU, cosine: Cosine = "exact") -> tuple[Tensor, Tensor]:
        """(s_POS, s_SYM), each [...]; NaN when there are fewer than two blocks to swap."""
        return pair_scores(*self.pairs(), tau, cosine)


def swap_attention(table: Tensor, block_size: int = 1) -> SwapAttention:
    """Every swap's attention row in closed form from a table T [..., q+1, q+1] (query at position q).

    The query's own key (position q) is never swapped; blocks of ``block_size`` tokens tile 0..q−1
    (:func:`~possym.scores.metric.block_swaps`). With clean logits L (T's diagonal), the swapped
    logits at the 2m swapped positions are T[contents, positions]; the normaliser is
    Z'(π) = Σ_{p unswapped} e^{L_p} + Σ_t e^{T[contents_t, positions_t]}. The first sum is a masked
    sum, not Z minus the swapped terms, so it does not cancel when the swapped blocks hold almost all
    the mass; everything is shifted by max(L) and by the largest moved logit, so nothing overflows.
    """
    n = table.shape[-1]
    blocks, positions, contents = (t.to(table.device) for t in block_swaps(n - 1, block_size))
    logits = table.diagonal(dim1=-2, dim2=-1)  # [..., key_pos]
    shift = logits.amax(-1, keepdim=True)
    weights = (logits - shift).exp()  # [..., key_pos], max entry 1
    keep = torch.ones(blocks.shape[0], n, dtype=table.dtype, device=table.device).scatter_(1, positions, 0.0)
    rest = weights @ keep.T  # [..., swap]: unnormalised mass left on the unswapped positions
    moved = table[..., contents, positions] - shift[..., None]  # [..., swap, 2m]
    extra = moved.amax(-1).clamp_min(0.0)  # [..., swap]: second shift, only if a moved logit beats max(L)
    moved = (moved - extra[..., None]).exp()
    norm = rest * (-extra).exp() + moved.sum(-1)  # Z'(π) · e^{-shift-extra}
    z = weights.sum(-1, keepdim=True)
    row = weights / z
    return SwapAttention(row, moved / norm[..., None], z * (-extra).exp() / norm, blocks, positions, block_size)


@dataclass(frozen=True)
class HeadScores:
    """Per-input scores of every (layer, head) for one query per input: what :func:`possym.head_scores` returns
    for every kind of model (possym, Hugging Face, TransformerLens, nnsight), and the engine's own result.

    ``detectors`` (TransformerLens's head detectors of each input, [input, layer, head, detector], named by
    ``detector_names``: :data:`possym.heads.detectors.HEAD_NAMES`; NaN where the model returned no pattern), ``correct``
    (whether the greedy next token is each prompt's answer, NaN where a prompt has none) and ``n_kv_heads``
    (the model's key heads, grouped-query attention) are filled in by :func:`possym.head_scores`; the
    engine's training-time callers leave them None, and then :meth:`records` has no columns for them.
    """

    s_pos: Tensor  # [batch, layer, head]
    s_sym: Tensor  # [batch, layer, head]
    entropy: Tensor  # [batch, layer, head] entropy (nats) of the clean query row
    layers: tuple[int, ...]
    query: Tensor  # [batch] query position of each input (−1: not scored, its scores are NaN)
    detectors: Tensor | None = None  # [batch, layer, head, detector]
    correct: Tensor | None = None  # [batch] 1.0 / 0.0, NaN: no answer
    n_kv_heads: int | None = None  # key heads; head h reads key head h // (n_heads / n_kv_heads)
    detector_names: tuple[str, ...] = ()  # the detectors' names, in the order of their last axis

    def records(self, rng: np.random.Generator | None = None, *, n_kv_heads: int | None = None,
                **fields: Any) -> list[dict[str, Any]]:
        """One record per (layer, head) with the means over scored inputs; ``fields`` are added to each.

        Each score also carries its spread over the inputs (:mod:`possym.scores.spread`): ``*_sd``, the
        sd of the per-input scores, and ``*_low``/``*_high``, the bootstrap 95% interval of the mean
        (resamples from ``rng``; default: the fixed :data:`~possym.scores.spread.BOOTSTRAP_SEED`). Where
        known, ``kv_head`` (the key head the head reads; ``n_kv_heads`` overrides the model's count) follows
        ``head``, and the detectors' means over the inputs (TransformerLens's mean over a list of inputs)
        close the record. An int in ``rng``'s place is taken for ``n_kv_heads``, as ``records(n_kv_heads)``
        was called when prompts had a result type of their own.
        """
        if isinstance(rng, int) and not isinstance(rng, bool):  # records(n_kv_heads), as the prompts' result took it
            rng, n_kv_heads = None, rng
        pos, sym = mean_spread(self.s_pos, rng), mean_spread(self.s_sym, rng)
        n_heads = self.s_pos.shape[-1]
        kv = n_kv_heads or self.n_kv_heads
        detectors: dict[str, Tensor] = {}
        if self.detectors is not None:
            means = self.detectors.detach().to("cpu", torch.float64).nanmean(0)  # [layer, head, detector]
            detectors = {name: means[..., d] for d, name in enumerate(self.detector_names)}
        out = []
        for li, layer in enumerate(self.layers):
            for head in range(n_heads):
                ok = ~self.s_pos[:, li, head].isnan()
                at = (li, head)
                out.append(
                    {
                        **fields,
                        "layer": layer,
                        "head": head,
                        **({} if kv is None else {"kv_head": head // (n_heads // kv)}),
                        "s_pos": float(self.s_pos[ok, li, head].mean()) if ok.any() else float("nan"),
                        "s_sym": float(self.s_sym[ok, li, head].mean()) if ok.any() else float("nan"),
                        "entropy": float(self.entropy[ok, li, head].mean()) if ok.any() else float("nan"),
                        "n_inputs": int(ok.sum()),
                        "s_pos_sd": float(pos.sd[at]),
                        "s_pos_low": float(pos.low[at]),
                        "s_pos_high": float(pos.high[at]),
                        "s_sym_sd": float(sym.sd[at]),
                        "s_sym_low": float(sym.low[at]),
                        "s_sym_high": float(sym.high[at]),
                        **{name: float(m[li, head]) for name, m in detectors.items()},
                    }
                )
        return out

    def frame(self, rng: np.random.Generator | None = None, **fields: Any) -> pd.DataFrame:
        """:meth:`records` as a DataFrame, one row per (layer, head): ``layer, head, kv_head, s_pos, s_sym,
        entropy, n_inputs``, each score's sd and 95% interval (``s_pos_low``, ``s_pos_high``, ...), and the
        head detectors (``previous_token_head``, ``duplicate_token_head``, ``induction_head``)."""
        import pandas as pd

        return pd.DataFrame(self.records(rng, **fields))


def query_positions(tokens: Tensor, query: int | Tensor | None) -> Tensor:
    """Resolve ``query`` to one position per input: None = the last token; an int (negative counts from the end);
    or a LongTensor [batch] of positions, −1 meaning "no query for this input"."""
    batch, n = tokens.shape
    if query is None:
        return torch.full((batch,), n - 1, dtype=torch.long)
    if isinstance(query, int):
        q = query if query >= 0 else n + query
        if not 0 <= q < n:
            raise ValueError(f"query={query} is outside 0..{n - 1}")
        return torch.full((batch,), q, dtype=torch.long)
    query = torch.as_tensor(query, dtype=torch.long).cpu()
    if query.shape != (batch,):
        raise ValueError(f"query positions have shape {tuple(query.shape)}; expected ({batch},)")
    if ((query < -1) | (query >= n)).any():
        raise ValueError(f"query positions must lie in 0..{n - 1} (or −1 for none)")
    return query


def _check_eval(model: torch.nn.Module) -> None:
    if model.training:
        raise ValueError("scores need a model in eval mode (dropout would perturb the attention); call model.eval()")


def rotated_qk(model: GPTJ, tokens: Tensor, layers: list[int]) -> dict[int, tuple[Tensor, Tensor]]:
    """Each layer's rotated queries and keys from the hook points: layer -> (q, k), each [batch, pos, head, d_head]."""
    names = {layer: (f"blocks.{layer}.attn.hook_rot_q", f"blocks.{layer}.attn.hook_rot_k") for layer in layers}
    with torch.no_grad():
        _, cache = model.run_with_cache(tokens, [n for pair in names.values() for n in pair])
    return {layer: (cache[q], cache[k]) for layer, (q, k) in names.items()}


@overload
def layer_tables(
    model: GPTJ,
    q_rot: Tensor,
    k_rot: Tensor,
    query: int,
    dtype: torch.dtype = ...,
    per_plane: Literal[False] = ...,
    *,
    layer: int | None = ...,
) -> Tensor: ...
@overload
def layer_tables(
    model: GPTJ,
    q_rot: Tensor,
    k_rot: Tensor,
    query: int,
    dtype: torch.dtype = ...,
    *,
    per_plane: Literal[True],
    layer: int | None = ...,
) -> tuple[Tensor, Tensor]: ...
def layer_tables(
    model: GPTJ,
    q_rot: Tensor,
    k_rot: Tensor,
    query: int,
    dtype: torch.dtype = torch.float64,
    per_plane: bool = False,
    *,
    layer: int | None = None,
) -> Tensor | tuple[Tensor, Tensor]:
    """Tables of one layer and query position: hook activations [batch, pos, head, d_head] -> [batch, head, q+1, q+1].

    With ``per_plane=True``: (planes [batch, head, plane, q+1, q+1], rest [batch, head, q+1]).
    ``layer`` says which planes rotate (a p-RoPE or NoPE-layer plane has θ = 0: moving a key does not
    turn it); it may be left out only for a plain-RoPE model, where every layer is the same. A gated
    plane needs nothing: its q and k are already zero in the hooks.
    """
    cfg = model.cfg
    if layer is None and not cfg.plain_rope:
        raise ValueError("layer_tables needs layer= for a model with p_rope, nope_from_layer or freq_gate")
    q = q_rot[:, query].to(dtype)  # [batch, head, d_head]
    k = k_rot[:, : query + 1].to(dtype).transpose(1, 2)  # [batch, head, key, d_head]
    thetas = layer_frequencies(cfg, 0 if layer is None else layer)
    return content_position_logits(q, k, thetas, scale=1 / math.sqrt(cfg.d_head), per_plane=per_plane)


def head_scores(
    model: GPTJ,
    tokens: Tensor,
    *,
    query: int | Tensor | None = None,
    layers: list[int] | None = None,
    block_size: int = 1,
    tau: float = TAU,
    dtype: torch.dtype = torch.float64,
    acts: dict[int, tuple[Tensor, Tensor]] | None = None,
    cosine: Cosine = "exact",
) -> HeadScores:
    """s_POS, s_SYM and the entropy of every head for one query per input, with the exact engine.

    tokens: [batch, pos]; query: see :func:`query_positions` (default: the last token, as paper A);
    layers: default all. One forward pass reads ``hook_rot_q``/``hook_rot_k`` (or pass its result,
    ``acts = rotated_qk(model, tokens, layers)``, to score several query sets from one pass);
    everything after it runs in ``dtype`` (float64 by default, so a float32 model's tiny attention
    masses stay exact). ``cosine``: the paper's exact cosine, or ``"torch"``, the authors'
    ``F.cosine_similarity`` (:mod:`possym.scores.metric`).
    """
    return head_scores_over_tau(model, tokens, (tau,), query=query, layers=layers, block_size=block_size,
                                dtype=dtype, acts=acts, cosine=cosine)[tau]


def head_scores_over_tau(
    model: GPTJ,
    tokens: Tensor,
    taus: Sequence[float],
    *,
    query: int | Tensor | None = None,
    layers: list[int] | None = None,
    block_size: int = 1,
    dtype: torch.dtype = torch.float64,
    acts: dict[int, tuple[Tensor, Tensor]] | None = None,
    cosine: Cosine = "exact",
) -> dict[float, HeadScores]:
    """:func:`head_scores` at each swap temperature in ``taus``, from one swap-and-rerun: τ only weighs the
    swaps (α(π) = softmax(|d_I − d_J| / τ)), so the swapped rows are computed once for every τ."""
    _check_eval(model)
    taus = tuple(dict.fromkeys(float(t) for t in taus))
    if not taus or any(not t > 0 for t in taus):
        raise ValueError(f"taus={taus}: give at least one swap temperature, each > 0")
    layers = list(range(model.cfg.n_layers)) if layers is None else list(layers)
    qpos = query_positions(tokens, query)  # on the CPU: its values steer the loop
    device = model_device(model)  # the scores stay there, with the activations
    tokens = tokens.to(device)
    shape = (tokens.shape[0], len(layers), model.cfg.n_heads)
    ent = torch.full(shape, float("nan"), dtype=dtype, device=device)
    scores = {t: (torch.full(shape, float("nan"), dtype=dtype, device=device),
                  torch.full(shape, float("nan"), dtype=dtype, device=device)) for t in taus}
    acts = rotated_qk(model, tokens, layers) if acts is None else acts
    with torch.no_grad():
        for li, layer in enumerate(layers):
            q_rot, k_rot = acts[layer]
            for q in qpos.unique().tolist():
                if q < 0:
                    continue
                idx = (qpos == q).nonzero().squeeze(1)
                sw = swap_attention(layer_tables(model, q_rot[idx], k_rot[idx], q, dtype, layer=layer), block_size)
                for t, (s_pos, s_sym) in scores.items():
                    s_pos[idx, li], s_sym[idx, li] = sw.scores(t, cosine)
                ent[idx, li] = attention_entropy(sw.row)
    return {t: HeadScores(s_pos, s_sym, ent, tuple(layers), qpos) for t, (s_pos, s_sym) in scores.items()}
