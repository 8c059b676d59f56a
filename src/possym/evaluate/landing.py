"""Attention landing: where each layer's attention maximum falls, as an offset from the key a hop should read.

On a hop path ``path[0] = query → ... → path[n_hops] = answer`` (:class:`~possym.tasks.TaskSamples`), the right
key of the query at path[h] is path[h+1]. Per input, hop query h, layer ℓ and head, :func:`attention_landing`
reports argmax_key = argmax_j A^ℓ[path[h], j], offset = argmax_key − path[h+1], and the weights on the maximum,
the right key and the *alias key* path[h+1] − a, which a plane turning by θ cannot tell from the right one when
a·θ ≈ 0 mod 2π (:func:`alias_distance`; θ = 1 rad: a = 44, as 44 − 7·2π = 0.018; ``alias_exists`` iff
path[h+1] ≥ a). :func:`plane_margins` splits a missed maximum's logit margin into per-plane partial logits
m_k = ℓ_k(argmax) − ℓ_k(right) (plane 0: the unrotated rest); :func:`landing_summary` counts the shares landing on
the right key, the alias or a multiple of it, and the commonest offset. Graded by
:mod:`possym.evaluate.alias_evidence`.

Example (one layer, random weights; the columns):
    >>> import torch
    >>> from possym.config import ModelConfig
    >>> from possym.model.gptj import GPTJ, KV
    >>> from possym.tasks import generate, task_config, task_vocab
    >>> task = task_config("number")
    >>> model = GPTJ(ModelConfig(n_layers=1, d_model=16, d_mlp=32, d_vocab=len(task_vocab(task))),
    ...              torch.Generator().manual_seed(0))
    >>> land = attention_landing(model, generate(task, 4, np.random.default_rng(0)))
    >>> land[["input", "query", "layer", "head"]].shape, alias_distance(1.0, 100)
    ((4, 4), 44)"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

import numpy as np
import pandas as pd
import torch

from possym.devices import batch_size_on, model_device
from possym.errors import PossymError
from possym.model.gptj import GPTJ, KV
from possym.scores.swaps import rope_planes, rotated_qk
from possym.tasks import TaskSamples

__all__ = ["LANDING_COLUMNS", "MARGIN_COLUMNS", "alias_distance", "attention_landing", "landing_summary",
           "plane_margins", "wrapped_angle"]

LANDING_COLUMNS = ("input", "extra", "n_hops", "answer_pos", "correct", "query", "query_pos", "right_key", "layer",
                   "head", "argmax_key", "offset", "p_max", "p_right", "alias_exists", "p_alias")


def wrapped_angle(angle: float | np.ndarray) -> float | np.ndarray:
    """``angle`` reduced to (−π, π]: how far a turn by ``angle`` is from a whole number of turns.

    >>> round(float(wrapped_angle(44.0)), 4)
    0.0177
    """
    return np.pi - np.mod(np.pi - np.asarray(angle, dtype=np.float64), 2 * np.pi)


def alias_distance(theta: float, max_distance: int) -> int:
    """The distance a in 1..max_distance whose turn a·θ is closest to a whole number of turns, i.e. the
    key a positions before the right one that a plane of angle θ confuses with it most (smallest a on ties).

    >>> alias_distance(1.0, 40), alias_distance(1.0, 100), alias_distance(0.8660254, 100)
    (25, 44, 29)
    """
    if not theta > 0 or max_distance < 1:
        raise PossymError(f"alias_distance: theta={theta} must be > 0 and max_distance={max_distance} >= 1")
    d = np.arange(1, max_distance + 1)
    return int(d[np.argmin(np.abs(wrapped_angle(d * theta)))])


def attention_landing(
    model: GPTJ,
    samples: TaskSamples,
    *,
    layers: Sequence[int] | None = None,
    queries: Literal["last", "hops"] = "last",
    alias: int = 44,
    token_budget: int = 2**18,
    past: list[KV] | None = None,
) -> pd.DataFrame:
    """One row per (input, hop query, layer, head): where the attention maximum lands (module docstring).

    queries: ``"last"``, the last token (hop query 0) only, or ``"hops"``: every hop position path[h]
    with h < n_hops. alias: the distance a of the alias key (:func:`alias_distance`). ``correct``
    says whether the model's prediction at the last position is the answer. Run it inside an
    intervention (``with intervene(model, GatePlanes(...)):``, :mod:`possym.evaluate.interventions`) to see
    where the edited attention lands.
    past: the key-value cache (batch 1) of the first P tokens, which every input must share (a length
    curve's prefix, :func:`possym.evaluate.lengthgen.prefix_cache`); only the rest is run, and every
    hop query must lie after it. Positions stay absolute.
    """
    if queries not in ("last", "hops"):
        raise PossymError(f"attention_landing queries={queries!r}; allowed: 'last', 'hops'")
    if alias < 1:
        raise PossymError(f"attention_landing alias={alias} must be >= 1")
    n_layers = model.cfg.n_layers
    layers = list(range(n_layers)) if layers is None else sorted(set(layers))
    if not layers or not all(0 <= layer < n_layers for layer in layers):
        raise PossymError(f"attention_landing layers={layers}: each must lie in 0..{n_layers - 1}")
    if len(samples) == 0:
        raise PossymError("attention_landing: no inputs")
    model = model.eval()
    device = model_device(model)
    n_query = 1 if queries == "last" else samples.path.shape[1] - 1
    n_past = 0 if past is None else past[0][0].shape[-2]
    if n_past and (samples.path[:, :n_query][samples.path[:, :n_query] >= 0] < n_past).any():
        raise PossymError(f"attention_landing: a hop query lies inside the {n_past}-token cached past")
    names = [f"blocks.{layer}.attn.hook_pattern" for layer in layers]
    n_pos = samples.tokens.shape[1]
    step = max(1, batch_size_on(device, token_budget) // ((n_pos - n_past) * n_pos))
    frames = []
    for start in range(0, len(samples), step):
        part = samples.take(slice(start, start + step))
        with torch.no_grad():
            logits, cache = model.run_with_cache(torch.as_tensor(part.tokens[:, n_past:], device=device), names,
                                                 past=past)
        correct = logits[:, -1].argmax(-1).cpu().numpy() == part.answer
        patterns = torch.stack([cache[name] for name in names], 1).to(torch.float64).cpu().numpy()
        frames.append(_rows(part, patterns, layers, n_query, alias, correct, start, n_past))
    return pd.concat(frames, ignore_index=True).sort_values(["input", "query", "layer", "head"], ignore_index=True)


def _rows(s: TaskSamples, patterns: np.ndarray, layers: list[int], n_query: int, alias: int,
          correct: np.ndarray, first: int, n_past: int = 0) -> pd.DataFrame:
    """The rows of one batch; ``patterns`` [batch, layer, head, query (after the past), key (absolute)]."""
    batch, _, n_heads = patterns.shape[:3]
    rows = np.arange(batch)
    answer_pos = s.path[rows, s.n_hops] - s.extra
    out = []
    for h in range(n_query):
        ok = s.n_hops > h
        if not ok.any():
            continue
        b = rows[ok]
        query, right = s.path[b, h], s.path[b, h + 1]
        row = patterns[b, :, :, query - n_past]  # [input, layer, head, key]
        argmax = row.argmax(-1)  # [input, layer, head]
        i = np.arange(len(b))
        exists = right - alias >= 0
        p_alias = np.where(exists[:, None, None], row[i, :, :, np.where(exists, right - alias, 0)], math.nan)
        grid = np.broadcast_to
        shape = argmax.shape
        out.append(pd.DataFrame({
            "input": grid((b + first)[:, None, None], shape).ravel(),
            "extra": s.extra,
            "n_hops": grid(s.n_hops[b][:, None, None], shape).ravel(),
            "answer_pos": grid(answer_pos[b][:, None, None], shape).ravel(),
            "correct": grid(correct[b][:, None, None], shape).ravel(),
            "query": h,
            "query_pos": grid(query[:, None, None], shape).ravel(),
            "right_key": grid(right[:, None, None], shape).ravel(),
            "layer": grid(np.asarray(layers)[None, :, None], shape).ravel(),
            "head": grid(np.arange(n_heads)[None, None, :], shape).ravel(),
            "argmax_key": argmax.ravel(),
            "offset": (argmax - right[:, None, None]).ravel(),
            "p_max": row.max(-1).ravel(),
            "p_right": row[i, :, :, right].ravel(),
            "alias_exists": grid(exists[:, None, None], shape).ravel(),
            "p_alias": p_alias.ravel(),
        }, columns=list(LANDING_COLUMNS)))
    return pd.concat(out, ignore_index=True) if out else pd.DataFrame(columns=list(LANDING_COLUMNS))


def landing_summary(landing: pd.DataFrame, alias: int = 44,
                    by: Sequence[str] = ("layer", "head", "query", "correct"), top: int = 5) -> pd.DataFrame:
    """Per group of ``by``: ``n`` rows, the share landing on the right key (``share_right``, offset 0), on
    the alias key (``share_alias``, offset −alias), on any negative multiple of alias
    (``share_alias_any``), elsewhere (``share_other``); the commonest offset and its share, and the
    ``top`` commonest as ``"offset:share ..."`` (a mechanism other than the alias shows there); the mean
    weight on the right key and (where it exists) on the alias key; and ``n_alias_exists``.

    >>> land = pd.DataFrame({"layer": 0, "head": 0, "query": 0, "correct": [True, False, False, False],
    ...                      "offset": [0, -44, -88, 3], "p_right": 0.5, "p_alias": [0.1, 0.6, 0.2, float("nan")],
    ...                      "alias_exists": [True, True, True, False]})
    >>> shares = landing_summary(land)[["correct", "share_right", "share_alias", "share_alias_any", "share_other"]]
    >>> shares.round(2).values.tolist()
    [[False, 0.0, 0.33, 0.67, 0.33], [True, 1.0, 0.0, 0.0, 0.0]]
    """
    by = list(by)
    missing = [c for c in [*by, "offset", "p_right", "p_alias", "alias_exists"] if c not in landing.columns]
    if missing:
        raise PossymError(f"landing_summary: columns {missing} are missing; the landing has {list(landing.columns)}")
    rows = []
    for key, g in landing.groupby(by, sort=True):
        off = g["offset"].to_numpy()
        counts = pd.Series(off).value_counts()
        mode = int(counts.index[0])
        rows.append({
            **dict(zip(by, key if isinstance(key, tuple) else (key,), strict=True)),
            "n": len(g),
            "share_right": float(np.mean(off == 0)),
            "share_alias": float(np.mean(off == -alias)),
            "share_alias_any": float(np.mean((off < 0) & (off % alias == 0))),
            "share_other": float(np.mean((off != 0) & ~((off < 0) & (off % alias == 0)))),
            "mode_offset": mode,
            "mode_share": float(counts.iloc[0] / len(g)),
            "top_offsets": " ".join(f"{int(o)}:{c / len(g):.2f}" for o, c in counts.iloc[:top].items()),
            "mean_p_right": float(g["p_right"].mean()),
            "mean_p_alias": float(g["p_alias"].mean()) if g["alias_exists"].any() else math.nan,
            "n_alias_exists": int(g["alias_exists"].sum()),
        })
    return pd.DataFrame(rows)


MARGIN_COLUMNS = ("input", "query", "layer", "head", "offset", "plane", "margin")


def plane_margins(model: GPTJ, samples: TaskSamples, *, layers: Sequence[int] | None = None,
                  queries: Literal["last", "hops"] = "last", missed_only: bool = True) -> pd.DataFrame:
    """Per (input, hop query, layer, head, plane): the plane's partial logit at the attention maximum minus at
    the right key (module docstring); ``plane`` is the 1-based frequency ID, 0 the unrotated dimensions.

    ``missed_only``: only the (input, query, layer, head) whose maximum is not the right key (elsewhere every
    margin is 0 by construction). Columns :data:`MARGIN_COLUMNS`; the margins of one row group sum to the
    logit margin of the landing key over the right key (after the 1/sqrt(d_head) scale).
    """
    if queries not in ("last", "hops"):
        raise PossymError(f"plane_margins queries={queries!r}; allowed: 'last', 'hops'")
    n_layers = model.cfg.n_layers
    layers = list(range(n_layers)) if layers is None else sorted(set(layers))
    if not layers or not all(0 <= layer < n_layers for layer in layers):
        raise PossymError(f"plane_margins layers={layers}: each must lie in 0..{n_layers - 1}")
    model = model.eval()
    tokens = torch.as_tensor(samples.tokens, device=model_device(model))
    acts = rotated_qk(model, tokens, layers)
    scale = 1 / math.sqrt(model.cfg.d_head)
    n_query = 1 if queries == "last" else samples.path.shape[1] - 1
    keys = torch.arange(samples.tokens.shape[1])
    frames = []
    for h in range(n_query):
        idx = np.flatnonzero(samples.n_hops > h)
        if len(idx) == 0:
            continue
        query, right = torch.as_tensor(samples.path[idx, h]), torch.as_tensor(samples.path[idx, h + 1])
        at = torch.arange(len(idx))
        for layer in layers:
            q_rot, k_rot = (a.cpu().to(torch.float64) for a in acts[layer])  # [batch, pos, head, d_head]
            q = q_rot[idx][at, query]  # [input, head, d_head]: each input's query after RoPE
            q0, q1, q_rest = rope_planes(q[:, None], model.cfg.rot_dim)  # [input, 1, head, plane]
            k0, k1, k_rest = rope_planes(k_rot[idx], model.cfg.rot_dim)  # [input, key, head, plane]
            # The clean partial logit of each plane is the rotated query's dot product with the rotated key there.
            parts = torch.cat([((q_rest * k_rest).sum(-1, keepdim=True)), q0 * k0 + q1 * k1], -1) * scale
            parts = parts.permute(0, 2, 3, 1)  # [input, head, plane (0 = unrotated), key]
            total = parts.sum(2).masked_fill(keys[None, None, :] > query[:, None, None], float("-inf"))
            best = total.argmax(-1)  # [input, head]: the softmax's maximum
            heads = torch.arange(parts.shape[1])[None, :]
            margin = parts[at[:, None], heads, :, best] - parts[at[:, None], heads, :, right[:, None]]
            offset = (best - right[:, None]).numpy()
            n, n_heads, n_parts = margin.shape
            shape = (n, n_heads, n_parts)
            grid = np.broadcast_to
            frame = pd.DataFrame({
                "input": grid(idx[:, None, None], shape).ravel(),
                "query": h,
                "layer": layer,
                "head": grid(np.arange(n_heads)[None, :, None], shape).ravel(),
                "offset": grid(offset[:, :, None], shape).ravel(),
                "plane": grid(np.arange(n_parts)[None, None, :], shape).ravel(),
                "margin": margin.numpy().ravel(),
            }, columns=list(MARGIN_COLUMNS))
            frames.append(frame[frame["offset"] != 0] if missed_only else frame)
    out = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=list(MARGIN_COLUMNS))
    return out.sort_values(["input", "query", "layer", "head", "plane"], ignore_index=True)
