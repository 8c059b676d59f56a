"""Softmax dilution, predicted and tested: how much attention a hop keeps on its right key once K extra keys
precede the window, and the controls that tell dilution from a mechanism that changes with K (Sec. 3.6).

A query reads its right key r; E the K extra keys, V the window's other visible keys (the query's own among them):

    A_r = 1 / (1 + W + K·e^(−Δ)),   W = Σ_{j∈V} e^(ℓ_j − ℓ_r),   Δ = ℓ_r − log( (1/K) Σ_{j∈E} e^(ℓ_j) ),

read from the pattern (ℓ_j − ℓ_r = log A_j − log A_r), an identity at each K. Dilution predicts that Δ and W do
not change with K (:func:`compare_dilution`), that sharpening gives A_r(β) = 1 / (1 + W_β + K·e^(−βΔ))
(:func:`predicted_mass`), and that a random knock-out of a fraction f of the window gives
1 / (1 + W + (1 − f)·K·e^(−Δ)), no less than one chosen by mass unless the window is uneven
(:func:`knockout_controls`). Knocking out the whole window restores K = 0 exactly (RoPE is relative), so it is no
evidence by itself. See docs/interventions.md.

Example (a flat head, W_Q = 0: every key gets the same logit, so Δ = 0 and the mass is 1 / (q + 1)):
    >>> import torch
    >>> from possym.config import ModelConfig
    >>> from possym.model.gptj import GPTJ
    >>> model = GPTJ(ModelConfig(n_layers=1, d_model=16, d_mlp=32, d_vocab=10), torch.Generator().manual_seed(0))
    >>> _ = model.blocks[0].attn.qkv.weight.data[:16].zero_()
    >>> tokens = torch.randint(0, 10, (2, 30), generator=torch.Generator().manual_seed(0))
    >>> rows = logit_margins(model.eval(), tokens, query=29, right_key=25, extra_keys=range(20))
    >>> row = rows.iloc[0]                                    # K = 20, Δ = 0, W = 9, mass 1/30
    >>> print(row.n_extra, abs(round(row.margin, 6)), round(row.window, 6), round(row.mass, 4))
    20.0 0.0 9.0 0.0333
    >>> float(predicted_mass(0.0, 20, window=9.0))
    0.03333333333333333"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import torch
from torch import Tensor

from possym.errors import PossymError
from possym.evaluate.interventions import Edit, KnockOut, attention_patterns, key_mask, model_logits, query_rows
from possym.evaluate.lengthgen import LengthGenConfig, point_prefix, point_samples
from possym.scores.swaps import query_positions
from possym.tasks import TaskConfig, get_task

FRACTIONS = (0.1, 0.3, 0.5, 0.7, 0.9)  # the random knock-outs' shares of the extra window
MARGIN_COLUMNS = ("input", "layer", "head", "beta", "n_extra", "margin", "window", "mass", "extra_mass", "predicted")


def predicted_mass(margin: Any, n_extra: Any, beta: float = 1.0, window: Any = 0.0) -> Any:
    """The mass a flat extra window of ``n_extra`` keys at margin ``margin`` leaves on the right key:
    1 / (1 + W + K·e^(−βΔ)) (module docstring), elementwise over arrays. ``window`` is W_β, the window's
    own competition at this β (0: the right key has the window to itself). K = 0 gives 1 / (1 + W)."""
    margin, n_extra, window = np.asarray(margin, float), np.asarray(n_extra, float), np.asarray(window, float)
    if not beta > 0 or (n_extra < 0).any() or (window < 0).any():
        raise PossymError(f"predicted_mass needs beta > 0 (got {beta}), n_extra >= 0 and window >= 0")
    diluted = np.where(n_extra > 0, n_extra * np.exp(-beta * np.where(n_extra > 0, margin, 0.0)), 0.0)
    return 1.0 / (1.0 + window + diluted)


def _positions(tokens: Tensor, where: int | Tensor | None, what: str) -> Tensor:
    try:
        return query_positions(tokens, where)
    except ValueError as e:
        raise PossymError(f"{what}: {e}") from None


def logit_margins(model: Any, tokens: Tensor, query: int | Tensor | None, right_key: int | Tensor,
                  extra_keys: Sequence[int] | Tensor, layers: Sequence[int] | None = None,
                  edits: Sequence[Edit] = (), betas: Sequence[float] = (1.0,)) -> pd.DataFrame:
    """Per (input, layer, head, β): the extra window's size ``n_extra`` (K), the margin Δ of the right key over
    it, the window's own competition W_β, the measured mass on the right key (β = 1, under ``edits``), the
    mass on the extra window, and the dilution formula's ``predicted`` mass at β (module docstring; at β = 1
    it equals ``mass``, an identity). Δ is NaN where K = 0.

    tokens: [batch, pos]; query and right_key: a position or one per input [batch] (right_key < query);
    extra_keys: positions shared by every input or a bool mask [batch, pos] (the extra window, before
    the window that holds the right key)."""
    tokens = torch.as_tensor(tokens)
    batch, n = tokens.shape
    qpos, rpos = _positions(tokens, query, "query"), _positions(tokens, right_key, "right_key")
    if not (rpos < qpos).all():
        raise PossymError("right_key must lie before the query for every input")
    no_extra = not isinstance(extra_keys, Tensor) and not list(extra_keys)  # K = 0: the window alone
    extra = torch.zeros(batch, n, dtype=torch.bool) if no_extra else key_mask(extra_keys, batch, n)
    visible = torch.arange(n)[None, :] <= qpos[:, None]
    extra &= visible
    if extra[torch.arange(batch), rpos].any():
        raise PossymError("the right key lies in the extra window for some input; the window holds the right key")
    competitors = visible & ~extra
    competitors[torch.arange(batch), rpos] = False
    betas = [float(b) for b in betas]
    if not betas or not all(b > 0 for b in betas):
        raise PossymError(f"betas={betas}: give at least one β, each > 0")
    frames = []
    for layer, row in query_rows(attention_patterns(model, tokens, layers, edits), qpos).items():
        n_heads = row.shape[1]
        a_r = row[torch.arange(batch), :, rpos]  # [batch, head]
        log_ratio = row.log() - a_r.log()[..., None]  # ℓ_j − ℓ_r, [batch, head, key_pos]
        k = extra.sum(-1).double()[:, None].expand(batch, n_heads)
        on_extra = torch.where(extra[:, None, :], log_ratio, -torch.inf)
        margin = torch.where(k > 0, -(on_extra.logsumexp(-1) - k.clamp_min(1).log()), torch.nan)
        extra_mass = (row * extra[:, None, :]).sum(-1)
        for beta in betas:
            window = torch.where(competitors[:, None, :], (beta * log_ratio).exp(), 0.0).sum(-1)
            predicted = predicted_mass(margin.numpy(), k.numpy(), beta, window.numpy())
            frames.append(pd.DataFrame({
                "input": np.repeat(np.arange(batch), n_heads), "layer": layer,
                "head": np.tile(np.arange(n_heads), batch), "beta": beta, "n_extra": k.reshape(-1).numpy(),
                "margin": margin.reshape(-1).numpy(), "window": window.reshape(-1).numpy(),
                "mass": a_r.reshape(-1).numpy(), "extra_mass": extra_mass.reshape(-1).numpy(),
                "predicted": predicted.reshape(-1)}))
    return pd.concat(frames, ignore_index=True)[list(MARGIN_COLUMNS)]


def compare_dilution(rows: pd.DataFrame, by: Sequence[str] = ("layer", "head"),
                     reference_extra: int | None = None) -> pd.DataFrame:
    """Dilution's prediction against the measured mass, per group of ``by`` and K.

    ``rows``: :func:`logit_margins` rows at β = 1 for several K (each call's inputs at one K), with any
    extra columns named in ``by`` (``n_hops``, ``query_hop``, ...). Within a group the margin is held at its
    mean at ``reference_extra`` (default: the group's largest K), Δ_ref, and each input keeps its own W:
    predicted_i = 1 / (1 + W_i + K·e^(−Δ_ref)). One row per (``by``, K): ``n``, the mean ``margin`` at that
    K, ``reference_margin``, ``measured`` and ``predicted`` (means over the inputs) and ``residual`` =
    measured − predicted. A residual near 0 at every K is dilution at a fixed margin; a margin that moves
    with K is something else."""
    missing = [c for c in (*by, "beta", "n_extra", "margin", "window", "mass") if c not in rows.columns]
    if missing:
        raise PossymError(f"compare_dilution: rows lack columns {missing}; pass logit_margins rows")
    rows = rows[rows["beta"] == 1.0]
    out = []
    for key, group in rows.groupby(list(by), sort=True):
        ks = sorted(k for k in group["n_extra"].unique() if k > 0)
        if not ks:
            continue
        ref = float(ks[-1] if reference_extra is None else reference_extra)
        if ref not in ks:
            raise PossymError(f"compare_dilution: reference_extra={reference_extra} is not a K of the rows; have {ks}")
        delta = float(group.loc[group["n_extra"] == ref, "margin"].mean())
        for k, at in group.groupby("n_extra", sort=True):
            predicted = predicted_mass(delta, k, 1.0, at["window"].to_numpy())
            out.append({**dict(zip(by, key if isinstance(key, tuple) else (key,), strict=True)),
                        "n_extra": int(k), "n": len(at), "margin": at["margin"].mean(), "reference_margin": delta,
                        "measured": at["mass"].mean(), "predicted": float(np.mean(predicted)),
                        "residual": at["mass"].mean() - float(np.mean(predicted))})
    return pd.DataFrame(out)

def hop_margins(model: Any, task: TaskConfig, cfg: LengthGenConfig, hops: Sequence[int] | None = None,
                edits: Sequence[Edit] = ()) -> pd.DataFrame:
    """:func:`logit_margins` of every hop on the length protocol's windows (:mod:`possym.evaluate.lengthgen`:
    the same prefixes, windows and seeds as the length curve), with ``extra`` (K), ``n_hops`` and ``query_hop``
    columns: hop k's query and right key come from the task (:meth:`~possym.tasks.Task.hop_queries`,
    :meth:`~possym.tasks.Task.hop_keys`) and the extra window is :meth:`~possym.tasks.Task.extra_window`.
    Full forward passes (no prefix cache): for modest ``cfg.n`` and K. Pass the result to
    :func:`compare_dilution` with ``by=("layer", "head", "n_hops", "query_hop")``."""
    declared = get_task(task.name)
    chosen = tuple(task.hops) if hops is None else tuple(sorted({int(h) for h in hops}))
    bad = [h for h in chosen if h not in task.hops]
    if not chosen or bad:
        raise PossymError(f"hops={list(chosen)}: each must be a hop count of the task; allowed: {list(task.hops)}")
    frames = []
    for n_hops in chosen:
        for j in range(cfg.n_prefixes):
            long = point_prefix(task, cfg, n_hops, j)
            for extra in cfg.grid:
                samples = point_samples(task, cfg, n_hops, j, extra, long)
                tokens = torch.as_tensor(samples.tokens)
                queries, keys = declared.hop_queries(samples), declared.hop_keys(samples)
                window = list(declared.extra_window(samples))
                for k in range(n_hops):
                    rows = logit_margins(model, tokens, torch.as_tensor(queries[:, k]),
                                         torch.as_tensor(keys[:, k]), window, edits=edits)
                    frames.append(rows.assign(extra=extra, n_hops=n_hops, query_hop=k, prefix=j))
    return pd.concat(frames, ignore_index=True)


@dataclass(frozen=True)
class KeySubset:
    """One knock-out of a control: a fraction of the extra window, chosen at random (draw ``draw``) or by mass."""

    fraction: float
    chosen: str  # "random" or "mass"
    draw: int
    keys: tuple[int, ...]


def random_subsets(keys: Sequence[int], fractions: Sequence[float], generator: torch.Generator,
                   n_draws: int = 1) -> list[KeySubset]:
    """For each fraction f and draw, round(f·|keys|) of ``keys`` drawn without replacement by ``generator``."""
    keys = list(keys)
    if not keys or n_draws < 1 or not all(0 < f <= 1 for f in fractions):
        raise PossymError(f"random_subsets: give keys, n_draws >= 1 and fractions in (0, 1]; got {len(keys)} keys, "
                          f"n_draws={n_draws}, fractions={list(fractions)}")
    out = []
    for f in fractions:
        size = max(1, round(f * len(keys)))
        for draw in range(n_draws):
            idx = torch.randperm(len(keys), generator=generator)[:size]
            out.append(KeySubset(float(f), "random", draw, tuple(sorted(keys[i] for i in idx.tolist()))))
    return out


def mass_subset(model: Any, tokens: Tensor, query: int | Tensor | None, keys: Sequence[int], size: int,
                layers: Sequence[int], edits: Sequence[Edit] = ()) -> tuple[int, ...]:
    """The ``size`` keys of ``keys`` with the most attention at the query, mean over inputs, heads and ``layers``."""
    tokens = torch.as_tensor(tokens)
    keys = list(keys)
    if not 1 <= size <= len(keys):
        raise PossymError(f"mass_subset: size={size} must lie in 1..{len(keys)}")
    qpos = _positions(tokens, query, "query")
    rows = query_rows(attention_patterns(model, tokens, layers, edits), qpos)
    mean = torch.stack([r[:, :, keys].mean((0, 1)) for r in rows.values()]).mean(0)  # [len(keys)]
    return tuple(sorted(keys[i] for i in mean.topk(size).indices.tolist()))


def knockout_controls(model: Any, tokens: Tensor, query: int | Tensor | None, right_key: int | Tensor,
                      extra_keys: Sequence[int], layers: Sequence[int], generator: torch.Generator,
                      fractions: Sequence[float] = FRACTIONS, n_draws: int = 1,
                      answers: Tensor | None = None) -> pd.DataFrame:
    """Random knock-outs of each fraction of the extra window beside a same-size knock-out chosen by mass.

    Each subset is knocked out in ``layers`` for the queries after the extra window, and each layer's mass
    on the right key is measured with :func:`logit_margins`; ``predicted`` is the flat-window prediction
    for K(1 − f) extra keys from the unedited margin and W (exact for a layer whose own inputs the knock-out
    leaves unchanged, a prediction for later ones). With ``answers`` [batch] (token ids), ``accuracy`` is the
    share of inputs whose logits at the query put the answer first. Rows per (``chosen``, ``fraction``,
    ``draw``, ``layer``, ``head``), ``chosen`` "none" (fraction 0) being the unedited model."""
    tokens = torch.as_tensor(tokens)
    extra_keys = sorted({int(k) for k in extra_keys})
    base = logit_margins(model, tokens, query, right_key, extra_keys)
    subsets = [KeySubset(0.0, "none", 0, ())]
    for s in random_subsets(extra_keys, fractions, generator, n_draws):
        subsets.append(s)
        if s.draw == 0:
            heaviest = mass_subset(model, tokens, query, extra_keys, len(s.keys), layers)
            subsets.append(KeySubset(s.fraction, "mass", 0, heaviest))
    qpos = _positions(tokens, query, "query")
    frames = []
    for s in subsets:
        edits = [KnockOut(tuple(layers), s.keys)] if s.keys else []
        rows = logit_margins(model, tokens, query, right_key, extra_keys, edits=edits)
        left = len(extra_keys) - len(s.keys)
        rows = rows.assign(chosen=s.chosen, fraction=s.fraction, draw=s.draw, n_knocked=len(s.keys),
                           predicted=predicted_mass(base["margin"].to_numpy(), left, 1.0, base["window"].to_numpy()))
        if answers is not None:
            logits = model_logits(model, tokens, edits)[torch.arange(len(tokens)), qpos.to(tokens.device)]
            correct = (logits.argmax(-1).cpu() == torch.as_tensor(answers).cpu()).double().numpy()
            rows = rows.assign(correct=correct[rows["input"].to_numpy()])
        frames.append(rows)
    rows = pd.concat(frames, ignore_index=True)
    agg: dict[str, Any] = {"n": ("mass", "size"), "mass": ("mass", "mean"), "extra_mass": ("extra_mass", "mean"),
                           "predicted": ("predicted", "mean")}
    if answers is not None:
        agg["accuracy"] = ("correct", "mean")
    keys = ["chosen", "fraction", "draw", "n_knocked", "layer", "head"]
    return rows.groupby(keys, sort=False).agg(**agg).reset_index()


def protocol_knockouts(model: Any, task: TaskConfig, cfg: LengthGenConfig, layers: Sequence[int],
                       generator: torch.Generator, hops: Sequence[int] | None = None,
                       fractions: Sequence[float] = FRACTIONS, n_draws: int = 1) -> pd.DataFrame:
    """:func:`knockout_controls` of every hop on the length protocol's windows at each K > 0 of ``cfg.grid``
    (positions from the task, as :func:`hop_margins`), with ``extra``, ``n_hops``, ``query_hop`` and ``prefix``
    columns; ``accuracy`` (the answer read at the last token) on the final hop's rows (``query_hop`` 0) only."""
    declared = get_task(task.name)
    chosen = tuple(task.hops) if hops is None else tuple(sorted({int(h) for h in hops}))
    frames = []
    for n_hops in chosen:
        for j in range(cfg.n_prefixes):
            long = point_prefix(task, cfg, n_hops, j)
            for extra in (k for k in cfg.grid if k > 0):
                samples = point_samples(task, cfg, n_hops, j, extra, long)
                tokens = torch.as_tensor(samples.tokens)
                queries, keys = declared.hop_queries(samples), declared.hop_keys(samples)
                window = list(declared.extra_window(samples))
                for k in range(n_hops):
                    answers = torch.as_tensor(samples.answer) if k == 0 else None
                    rows = knockout_controls(model, tokens, torch.as_tensor(queries[:, k]), torch.as_tensor(keys[:, k]),
                                             window, layers, generator, fractions, n_draws, answers)
                    frames.append(rows.assign(extra=extra, n_hops=n_hops, query_hop=k, prefix=j))
    return pd.concat(frames, ignore_index=True)


__all__ = ["FRACTIONS", "MARGIN_COLUMNS", "KeySubset", "compare_dilution", "hop_margins", "knockout_controls",
           "logit_margins", "mass_subset", "predicted_mass", "protocol_knockouts", "random_subsets"]
