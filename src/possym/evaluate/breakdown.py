"""Accuracy over a fine grid of K, by hop count and by answer position, optionally under an intervention.

The length curve (:mod:`possym.evaluate.lengthgen`) pools each K's windows over answer positions, which hides
a mechanism that depends on where the answer sits (on the number task, a RoPE plane that cannot tell two keys
2π/θ·m apart fails only once K reaches that distance − t). So: :func:`length_points` draws exactly the length
curve's windows, one :class:`LengthPoint` per (prefix, hop count, K); :func:`length_predictions` runs a model
over them inside an optional ``edit`` (the prefix cache computed inside it too), one row per window
(``extra, n_hops, prefix, answer_pos`` (0-based in the window), ``answer_distance`` (query − answer position),
``first_key_pos`` (path[1]), ``answer, predicted, correct``); :func:`accuracy_table` counts them with Wilson
95% intervals; :func:`plane_gate_curves` repeats them with one RoPE plane gated in one layer at a time.

Example:
    >>> import torch
    >>> from possym.config import ModelConfig
    >>> from possym.model.gptj import GPTJ
    >>> from possym.tasks import task_config, task_vocab
    >>> task = task_config("number")
    >>> model = GPTJ(ModelConfig(n_layers=1, d_model=16, d_mlp=32, d_vocab=len(task_vocab(task))),
    ...              torch.Generator().manual_seed(0))
    >>> rows = length_predictions(model, task, LengthGenConfig(grid=(40, 41), n=8, n_prefixes=2))
    >>> len(rows), sorted(rows["extra"].unique().tolist())
    (64, [40, 41])
    >>> table = accuracy_table(rows)
    >>> list(table.columns)[:6], int(table["n"].sum())
    (['extra', 'n_hops', 'answer_pos', 'n', 'correct', 'accuracy'], 64)"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from possym.config import TaskConfig
from possym.devices import batch_size_on, model_device
from possym.errors import PossymError
from possym.evaluate.interventions import GatePlanes, intervene
from possym.evaluate.lengthgen import (
    LengthGenConfig,
    last_logits_after,
    last_logits_plain,
    point_rng,
    point_samples,
    prefix_cache,
    slice_cache,
    wilson_interval,
)
from possym.model.gptj import GPTJ
from possym.tasks import TaskSamples, draw_prefix, prefix_per_hop

__all__ = ["PREDICTION_COLUMNS", "Edit", "LengthPoint", "accuracy_table", "fine_grid", "length_points",
           "length_predictions", "plane_gate_curves", "point_rows"]

Edit = Callable[[GPTJ], AbstractContextManager]
"""An intervention at evaluation: ``edit(model)`` is a context manager inside which the model is edited
(``lambda m: intervene(m, GatePlanes({1: [1]}))``)."""

PREDICTION_COLUMNS = ("extra", "n_hops", "prefix", "answer_pos", "answer_distance", "first_key_pos", "answer",
                      "predicted", "correct")


def fine_grid(start: int = 25, stop: int = 70, step: int = 1) -> tuple[int, ...]:
    """K = start, start + step, ..., stop (inclusive): the grid on which the number model's cliff is looked at.

    >>> fine_grid(25, 30, 2)
    (25, 27, 29)
    """
    if start < 0 or stop < start or step < 1:
        raise PossymError(f"fine grid {start}..{stop} step {step}: need 0 <= start <= stop and step >= 1")
    return tuple(range(start, stop + 1, step))


@dataclass(frozen=True)
class LengthPoint:
    """The windows of one (prefix, hop count, K) point of a length curve, after ``prefix[:extra]``.

    ``prefix`` is the whole drawn prefix (max(grid) tokens), shared by every K of its index ``index``.
    """

    n_hops: int
    index: int
    extra: int
    prefix: np.ndarray
    samples: TaskSamples


def length_points(task: TaskConfig, cfg: LengthGenConfig) -> Iterator[LengthPoint]:
    """Every point of ``measure_length_curve(model, task, cfg)``, with the very windows it evaluates.

    The prefixes and windows come from lengthgen's own generators (``point_rng``, ``point_samples``),
    in its loop order, so a count over these points is the curve's count (a test checks it).
    """
    per_hop = prefix_per_hop(task)
    prefix = np.zeros(0, dtype=np.int64)
    for j in range(cfg.n_prefixes):
        for n_hops in task.hops:
            if per_hop or n_hops == task.hops[0]:  # the number task's prefix j serves every hop count
                prefix = draw_prefix(task, cfg.grid[-1], n_hops, point_rng(cfg.seed, n_hops if per_hop else 0, j))
            for extra in cfg.grid:
                yield LengthPoint(n_hops, j, extra, prefix, point_samples(task, cfg, n_hops, j, extra, prefix))


def point_rows(point: LengthPoint, predicted: np.ndarray) -> pd.DataFrame:
    """One row per window of ``point`` (columns :data:`PREDICTION_COLUMNS`), given its predicted token ids."""
    s = point.samples
    predicted = np.asarray(predicted)
    if predicted.shape != (len(s),):
        raise PossymError(f"predicted has shape {predicted.shape}; the point has {len(s)} windows")
    answer_at = s.path[np.arange(len(s)), s.n_hops]
    query_at = s.tokens.shape[1] - 1
    return pd.DataFrame({
        "extra": point.extra,
        "n_hops": s.n_hops,
        "prefix": point.index,
        "answer_pos": answer_at - s.extra,
        "answer_distance": query_at - answer_at,
        "first_key_pos": s.path[:, 1] - s.extra,
        "answer": s.answer,
        "predicted": predicted,
        "correct": predicted == s.answer,
    }, columns=list(PREDICTION_COLUMNS))


def _predict(model: GPTJ, point: LengthPoint, cfg: LengthGenConfig, cache) -> np.ndarray:
    s = point.samples
    device = model_device(model)
    tokens = torch.as_tensor(s.tokens[:, s.extra:], device=device)
    logits = last_logits_after(model, tokens, slice_cache(cache, s.extra), batch_size_on(device, cfg.token_budget))
    return logits.argmax(-1).cpu().numpy()


def length_predictions(model: GPTJ, task: TaskConfig, cfg: LengthGenConfig, edit: Edit | None = None
                       ) -> pd.DataFrame:
    """Every window's prediction at every point of ``cfg`` (module docstring), inside ``edit(model)`` if given.

    Rows come in :func:`length_points` order. ``mode="cached"`` runs each point after its prefix's
    cache; ``mode="plain"`` runs every window of one K in one batched full forward pass (faster for
    the short sequences of a fine grid at small K).
    """
    model = model.eval()
    points = list(length_points(task, cfg))
    predicted: dict[int, np.ndarray] = {}
    with edit(model) if edit is not None else nullcontext():
        if cfg.mode == "plain":
            for extra in cfg.grid:
                at = [i for i, p in enumerate(points) if p.extra == extra]
                tokens = np.concatenate([points[i].samples.tokens for i in at])
                device = model_device(model)
                logits = last_logits_plain(model, torch.as_tensor(tokens, device=device),
                                           batch_size_on(device, cfg.token_budget))
                chunks = np.split(logits.argmax(-1).cpu().numpy(), np.cumsum([len(points[i].samples) for i in at])[:-1])
                predicted.update(zip(at, chunks, strict=True))
        else:
            cache, cached_for = None, None
            for i, point in enumerate(points):
                if cached_for is not point.prefix:  # one cache per drawn prefix
                    cache, cached_for = prefix_cache(model, point.prefix), point.prefix
                predicted[i] = _predict(model, point, cfg, cache)
    return pd.concat([point_rows(p, predicted[i]) for i, p in enumerate(points)], ignore_index=True)


def accuracy_table(predictions: pd.DataFrame, by: Sequence[str] = ("extra", "n_hops", "answer_pos")
                   ) -> pd.DataFrame:
    """Accuracy of ``predictions`` (rows of :func:`length_predictions`) per group of ``by``: ``n``,
    ``correct``, ``accuracy`` and the Wilson 95% interval ``ci_low``, ``ci_high`` (windows as independent).

    >>> rows = pd.DataFrame({"extra": [1, 1, 1, 2], "n_hops": 1, "answer_pos": [0, 0, 3, 0],
    ...                      "correct": [True, False, True, True]})
    >>> [(r.extra, r.answer_pos, r.n, r.accuracy) for r in accuracy_table(rows).itertuples()]
    [(1, 0, 2, 0.5), (1, 3, 1, 1.0), (2, 0, 1, 1.0)]
    """
    by = list(by)
    missing = [c for c in [*by, "correct"] if c not in predictions.columns]
    if missing:
        raise PossymError(f"accuracy_table: columns {missing} are not in the predictions; "
                          f"they have {list(predictions.columns)}")
    groups = predictions.groupby(by, sort=True)["correct"]
    out = groups.agg(n="size", correct="sum").reset_index()
    out["correct"] = out["correct"].astype(int)
    out["accuracy"] = out["correct"] / out["n"]
    bounds = [wilson_interval(int(k), int(n)) for k, n in zip(out["correct"], out["n"], strict=True)]
    out["ci_low"] = [b[0] for b in bounds]
    out["ci_high"] = [b[1] for b in bounds]
    return out


def plane_gate_curves(model: GPTJ, task: TaskConfig, cfg: LengthGenConfig, layers: Iterable[int],
                      planes: Iterable[int] = (1, 2), by: Sequence[str] = ("extra", "n_hops"),
                      baseline: bool = True) -> pd.DataFrame:
    """Accuracy per ``by`` with RoPE plane p (1-based frequency ID) gated in layer ℓ, for every ℓ in
    ``layers`` and p in ``planes``, one (ℓ, p) at a time (:class:`~possym.evaluate.interventions.GatePlanes`,
    every head). Columns ``layer, plane`` then :func:`accuracy_table`'s; ``baseline`` adds the ungated
    model as ``layer = -1, plane = 0``. Every (ℓ, p) sees the same windows, so differences are paired.
    """
    gates: list[tuple[int, int]] = [(layer, plane) for layer in layers for plane in planes]
    if not gates and not baseline:
        raise PossymError("plane_gate_curves: no layer and plane to gate, and no baseline asked for")
    frames = []
    if baseline:
        frames.append(accuracy_table(length_predictions(model, task, cfg), by).assign(layer=-1, plane=0))
    for layer, plane in gates:
        edit = _gate(layer, plane)
        frames.append(accuracy_table(length_predictions(model, task, cfg, edit), by).assign(layer=layer, plane=plane))
    out = pd.concat(frames, ignore_index=True)
    return out[["layer", "plane", *[c for c in out.columns if c not in ("layer", "plane")]]]


def _gate(layer: int, plane: int) -> Edit:
    planes: Mapping[int, list[int]] = {layer: [plane]}
    return lambda m: intervene(m, GatePlanes(planes))
