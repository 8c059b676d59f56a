"""Interventions on attention, for any RoPE model: knock-out, sharpening, plane gating, and the mass they move.

Three edits, each a frozen record applied by :func:`intervene` (or ``edits=``) to a possym GPT-J, a Hugging
Face RoPE causal LM or a TransformerLens model through :mod:`possym.evaluate.backends`; ℓ_ij the logit of query
i on key j: :class:`KnockOut` ℓ_ij ← −∞ for j in S (A'_ij = A_ij / (1 − Σ_{s∈S} A_is); a query left with no
key is refused), :class:`Sharpen` ℓ_ij ← β ℓ_ij, :class:`GatePlanes` zeroes RoPE plane k of the rotated query,
removing its term from every logit. Measurements: :func:`attention_patterns`, :func:`attention_mass` (the mass
on a key set S, the entropy of A within S and the top-k share) and :func:`model_logits`. Scores at chosen
queries: :func:`possym.scores.swaps.head_scores` with ``query=``. See docs/interventions.md.

Example (a possym model: the last query's mass on keys {0, 2}, then with them knocked out):
    >>> import torch
    >>> from possym.config import ModelConfig
    >>> from possym.model.gptj import GPTJ
    >>> model = GPTJ(ModelConfig(n_layers=1, d_model=16, d_mlp=32, d_vocab=10), torch.Generator().manual_seed(0))
    >>> tokens = torch.tensor([[1, 2, 3, 4, 5]])
    >>> before = attention_mass(model.eval(), tokens, keys=[0, 2])
    >>> after = attention_mass(model, tokens, keys=[0, 2], edits=[KnockOut(layers=(0,), keys=(0, 2))])
    >>> bool(before.mass.iloc[0] > 0), float(after.mass.iloc[0])
    (True, 0.0)"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import torch
from torch import Tensor

from possym.errors import PossymError
from possym.evaluate.backends import Backend, LogitEdit, QueryEdit, backend_for
from possym.scores.metric import attention_entropy
from possym.scores.swaps import query_positions

MASS_COLUMNS = ("layer", "head", "n", "n_keys", "mass", "mass_sd", "entropy", "top_k", "top_k_share")


def _check_layers(layers: Sequence[int], backend: Backend, what: str) -> None:
    bad = [layer for layer in layers if not 0 <= layer < backend.n_layers]
    if bad:
        raise PossymError(f"{what}: layers {bad}; a layer must lie in 0..{backend.n_layers - 1}")


def _layer_tuple(layers: Sequence[int], what: str) -> tuple[int, ...]:
    out = tuple(sorted({int(x) for x in layers}))
    if not out:
        raise PossymError(f"{what}: give at least one layer")
    return out


@dataclass(frozen=True)
class KnockOut:
    """In ``layers``, the queries at ``queries`` give the keys ``keys`` the logit −∞.

    keys: absolute positions shared by every input, or a bool mask [batch, key_pos] (True: knocked out)
    for a set that differs per input. queries: absolute positions; None, every query after the last
    knocked-out key (the window's queries, when the keys are the extra tokens before it)."""

    layers: tuple[int, ...]
    keys: tuple[int, ...] | Tensor
    queries: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "layers", _layer_tuple(self.layers, "KnockOut"))
        if not isinstance(self.keys, Tensor):
            keys = tuple(sorted({int(k) for k in self.keys}))
            if not keys or keys[0] < 0:
                raise PossymError(f"KnockOut keys={list(keys)}: give at least one key position, each >= 0")
            object.__setattr__(self, "keys", keys)
        elif self.keys.dtype != torch.bool or self.keys.dim() != 2:
            raise PossymError(f"KnockOut keys: a tensor must be a bool mask [batch, key_pos], got {self.keys.dtype} "
                              f"of shape {tuple(self.keys.shape)}")
        if self.queries is not None:
            object.__setattr__(self, "queries", tuple(sorted({int(q) for q in self.queries})))

    def _edit(self, scores: Tensor, first: int) -> Tensor:  # [batch, head, query_pos, key_pos]
        n_query, n_key = scores.shape[-2:]
        device = scores.device
        positions = torch.arange(first, first + n_query, device=device)
        if isinstance(self.keys, Tensor):
            if self.keys.shape[0] != scores.shape[0] or self.keys.shape[1] < n_key:
                raise PossymError(f"KnockOut keys mask {tuple(self.keys.shape)} does not cover the batch "
                                  f"[{scores.shape[0]}, {n_key}] it meets")
            cols = self.keys[:, :n_key].to(device)[:, None, None, :]  # [batch, 1, 1, key_pos]
            last = int(self.keys.any(0).nonzero().max()) if self.keys.any() else -1
        else:
            cols = torch.zeros(n_key, dtype=torch.bool, device=device)
            cols[[k for k in self.keys if k < n_key]] = True
            last = self.keys[-1]
        rows = (positions > last if self.queries is None
                else torch.isin(positions, torch.tensor(self.queries, device=device)))
        out = scores.masked_fill(rows[:, None] & cols, float("-inf"))
        if torch.isneginf(out).all(-1).any():
            raise PossymError("KnockOut leaves a query with no key to attend to (every visible key knocked out); "
                              "keep each query's own key, or restrict queries=")
        return out

    def compile(self, backend: Backend) -> tuple[dict[int, QueryEdit], dict[int, LogitEdit]]:
        _check_layers(self.layers, backend, "KnockOut")
        return {}, dict.fromkeys(self.layers, self._edit)


@dataclass(frozen=True)
class Sharpen:
    """In ``layers``, every attention logit times ``beta`` (> 0; 1 leaves the model as it is)."""

    layers: tuple[int, ...]
    beta: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "layers", _layer_tuple(self.layers, "Sharpen"))
        if isinstance(self.beta, bool) or not isinstance(self.beta, int | float) or not self.beta > 0:
            raise PossymError(f"Sharpen beta={self.beta!r} must be a number > 0 (1 leaves the model as it is)")

    def _edit(self, scores: Tensor, first: int) -> Tensor:
        return scores * self.beta  # −∞ stays −∞

    def compile(self, backend: Backend) -> tuple[dict[int, QueryEdit], dict[int, LogitEdit]]:
        _check_layers(self.layers, backend, "Sharpen")
        return {}, dict.fromkeys(self.layers, self._edit)


@dataclass(frozen=True)
class GatePlanes:
    """Gate RoPE planes: ``planes`` maps a layer to the 1-based frequency IDs gated in it, in every head or in
    ``heads`` only (module docstring)."""

    planes: Mapping[int, Sequence[int]]
    heads: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        chosen = {int(layer): tuple(sorted({int(k) for k in ids})) for layer, ids in self.planes.items()}
        if not chosen or not all(chosen.values()):
            raise PossymError(f"GatePlanes planes={dict(self.planes)}: give at least one plane ID for each layer")
        object.__setattr__(self, "planes", chosen)
        if self.heads is not None:
            object.__setattr__(self, "heads", tuple(sorted({int(h) for h in self.heads})))

    def compile(self, backend: Backend) -> tuple[dict[int, QueryEdit], dict[int, LogitEdit]]:
        _check_layers(list(self.planes), backend, "GatePlanes")
        heads = list(range(backend.n_heads)) if self.heads is None else list(self.heads)
        if not heads or not all(0 <= h < backend.n_heads for h in heads):
            raise PossymError(f"GatePlanes heads={heads}: a head must lie in 0..{backend.n_heads - 1}")
        edits: dict[int, QueryEdit] = {}
        for layer, ids in self.planes.items():
            dims = [d for k in ids for d in backend.plane_dims(layer, k)]

            def gate(q: Tensor, first: int, dims: list[int] = dims) -> Tensor:  # [batch, head, pos, d_head]
                q = q.clone()
                q[:, torch.tensor(heads)[:, None], :, torch.tensor(dims)[None, :]] = 0.0
                return q

            edits[layer] = gate
        return edits, {}


Edit = KnockOut | Sharpen | GatePlanes


def _compiled(backend: Backend, edits: Sequence[Edit]) -> tuple[dict[int, QueryEdit], dict[int, LogitEdit]]:
    """The edits' per-layer functions, several on one layer applied in the order given."""
    queries: dict[int, list[QueryEdit]] = {}
    logits: dict[int, list[LogitEdit]] = {}
    for edit in edits:
        if not isinstance(edit, KnockOut | Sharpen | GatePlanes):
            raise PossymError(f"an edit is a KnockOut, Sharpen or GatePlanes, not {type(edit).__name__}")
        q, s = edit.compile(backend)
        for layer, fn in q.items():
            queries.setdefault(layer, []).append(fn)
        for layer, fn in s.items():
            logits.setdefault(layer, []).append(fn)

    def chain(fns: list[Any]) -> Any:
        def run(x: Tensor, first: int) -> Tensor:
            for fn in fns:
                x = fn(x, first)
            return x
        return run

    return {k: chain(v) for k, v in queries.items()}, {k: chain(v) for k, v in logits.items()}


@contextmanager
def intervene(model: Any, *edits: Edit) -> Iterator[Any]:
    """Every forward pass of ``model`` inside the context runs with ``edits``; removed on exit, also on an error.

    >>> import torch
    >>> from possym.config import ModelConfig
    >>> from possym.model.gptj import GPTJ
    >>> model = GPTJ(ModelConfig(n_layers=1, d_model=16, d_mlp=32, d_vocab=10), torch.Generator().manual_seed(0))
    >>> with intervene(model.eval(), GatePlanes({0: range(1, model.cfg.n_planes + 1)})):   # content only
    ...     row = model.run_with_cache(torch.tensor([[3, 3, 3]]))[1]["pattern", 0][0, 0, 2]
    >>> torch.allclose(row, torch.full((3,), 1 / 3))                                     # equal keys, no position
    True
    """
    backend = backend_for(model)
    queries, logits = _compiled(backend, edits)
    with backend.attach(queries, logits, {}):
        yield model


def model_logits(model: Any, tokens: Tensor, edits: Sequence[Edit] = ()) -> Tensor:
    """The output logits [batch, pos, d_vocab] of ``tokens`` [batch, pos] under ``edits``."""
    backend = backend_for(model)
    queries, logits = _compiled(backend, edits)
    with backend.attach(queries, logits, {}):
        return backend.forward(torch.as_tensor(tokens))


def attention_patterns(model: Any, tokens: Tensor, layers: Sequence[int] | None = None,
                       edits: Sequence[Edit] = ()) -> dict[int, Tensor]:
    """The attention patterns of ``layers`` (default all) under ``edits``: layer -> [batch, head, query_pos,
    key_pos], float64, on the model's device."""
    backend = backend_for(model)
    chosen = list(range(backend.n_layers)) if layers is None else list(_layer_tuple(layers, "attention_patterns"))
    _check_layers(chosen, backend, "attention_patterns")
    out: dict[int, Tensor] = {}

    def keep(layer: int) -> Any:
        return lambda pattern, first: out.__setitem__(layer, pattern.detach().double())

    queries, logits = _compiled(backend, edits)
    with backend.attach(queries, logits, {layer: keep(layer) for layer in chosen}):
        backend.forward(torch.as_tensor(tokens))
    return out


def key_mask(keys: Sequence[int] | Tensor, batch: int, n_key: int) -> Tensor:
    """``keys`` (positions shared by every input, or a bool mask [batch, key_pos]) as a bool mask [batch, n_key]."""
    if isinstance(keys, Tensor) and keys.dtype == torch.bool:
        if keys.shape != (batch, n_key):
            raise PossymError(f"keys mask has shape {tuple(keys.shape)}; expected ({batch}, {n_key})")
        return keys.cpu()
    positions = sorted({int(k) for k in (keys.tolist() if isinstance(keys, Tensor) else keys)})
    if not positions or not all(0 <= k < n_key for k in positions):
        raise PossymError(f"keys={positions}: give at least one key position, each in 0..{n_key - 1}")
    mask = torch.zeros(batch, n_key, dtype=torch.bool)
    mask[:, positions] = True
    return mask


def query_rows(patterns: Mapping[int, Tensor], query: Tensor) -> dict[int, Tensor]:
    """Each layer's attention row at one query per input: layer -> [batch, head, key_pos] (float64, CPU)."""
    out = {}
    for layer, pattern in patterns.items():
        p = pattern.cpu()
        out[layer] = p[torch.arange(p.shape[0]), :, query]  # [batch, head, key_pos]
    return out


def mass_stats(row: Tensor, mask: Tensor, top_k: int = 1) -> dict[str, Tensor]:
    """Mass, entropy and top-k share of the attention rows ``row`` [batch, head, key_pos] on the keys of ``mask``
    [batch, key_pos] (module docstring), each [batch, head]."""
    on = row * mask[:, None, :]
    mass = on.sum(-1)
    share = on / mass.clamp_min(torch.finfo(on.dtype).tiny)[..., None]
    top = share.topk(min(top_k, share.shape[-1]), -1).values.sum(-1)  # keys outside the set add 0
    return {"mass": mass, "entropy": attention_entropy(share), "top_k_share": top}


def attention_mass(model: Any, tokens: Tensor, keys: Sequence[int] | Tensor, query: int | Tensor | None = None,
                   layers: Sequence[int] | None = None, edits: Sequence[Edit] = (), top_k: int = 1,
                   per_input: bool = False) -> pd.DataFrame:
    """Attention mass on a set of keys at one query per input, per layer and head, with its concentration.

    tokens: [batch, pos]; keys: positions shared by every input, or a bool mask [batch, pos];
    query: None (the last token), a position, or one per input [batch] (:func:`possym.scores.swaps.
    query_positions`); a key after its query holds no mass. Rows (:data:`MASS_COLUMNS`): means over the
    inputs of ``mass`` (sd ``mass_sd``), ``entropy`` and ``top_k_share`` (module docstring); ``n_keys`` is
    the mean set size. ``per_input``: one row per (input, layer, head) instead, with an ``input`` column.
    """
    if top_k < 1:
        raise PossymError(f"top_k={top_k} must be >= 1")
    tokens = torch.as_tensor(tokens)
    batch, n = tokens.shape
    qpos = query_positions(tokens, query)
    mask = key_mask(keys, batch, n)
    patterns = attention_patterns(model, tokens, layers, edits)
    frames = []
    for layer, row in query_rows(patterns, qpos).items():
        stats = {name: v.numpy() for name, v in mass_stats(row, mask, top_k).items()}
        n_heads = row.shape[1]
        frame = pd.DataFrame({
            "input": np.repeat(np.arange(batch), n_heads), "layer": layer, "head": np.tile(np.arange(n_heads), batch),
            "n_keys": np.repeat(mask.sum(-1).numpy(), n_heads), "top_k": top_k,
            **{name: v.reshape(-1) for name, v in stats.items()},
        })
        frames.append(frame)
    rows = pd.concat(frames, ignore_index=True)
    if per_input:
        return rows
    out = rows.groupby(["layer", "head"], sort=True).agg(
        n=("mass", "size"), n_keys=("n_keys", "mean"), mass=("mass", "mean"), mass_sd=("mass", "std"),
        entropy=("entropy", "mean"), top_k=("top_k", "first"), top_k_share=("top_k_share", "mean")).reset_index()
    return out[list(MASS_COLUMNS)]


__all__ = ["MASS_COLUMNS", "Edit", "GatePlanes", "KnockOut", "Sharpen", "attention_mass", "attention_patterns",
           "intervene", "key_mask", "mass_stats", "model_logits", "query_rows"]
