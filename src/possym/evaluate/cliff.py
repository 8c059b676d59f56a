"""The number model's length cliff (Sec. 3.6, Fig. 5B), measured on a fine K grid: accuracy by hop count, answer
position and first-hop key; where the positional layers' attention lands on the failing inputs; which RoPE plane
put it there; and the curve with one plane gated.

The hypothesis it tests: the positional layers are dominated by plane 1 (θ = 1 rad); since 44 ≈ 7·2π
(0.018 rad off), a key 44 tokens before the right one looks almost the same to that plane, and such a key
exists only once K ≥ 44 − t for a right key at window position t. If so, the failing inputs' attention in
those layers lands at offset −44 far more often than the passing inputs', only where the alias key exists,
and gating plane 1 in the layer that lands there moves or removes the cliff. The tables also hold what is
needed to refute it: every offset's share, the plane-2 alias (θ = 0.866: 29 tokens), and the curve with
plane 2 gated. :func:`cliff_tables` computes them for any possym model and prefix-extended task; the
``cliff`` stage (:mod:`possym.stages.cliff`) loads a run's model, calls it and writes the tables.

Example:
    >>> tables = cliff_tables(model, task, curve, layers=(0, 1))                       # doctest: +SKIP
    >>> tables.landing_summary.query("correct == False and query == 0")             # doctest: +SKIP
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from possym.errors import PossymError
from possym.evaluate.alias_evidence import alias_evidence
from possym.evaluate.breakdown import (
    LengthPoint,
    accuracy_table,
    length_points,
    length_predictions,
    plane_gate_curves,
)
from possym.evaluate.landing import alias_distance, attention_landing, landing_summary, plane_margins
from possym.evaluate.lengthgen import LengthGenConfig, prefix_cache, slice_cache
from possym.model.gptj import GPTJ, KV
from possym.model.rope import layer_frequencies
from possym.tasks import TaskConfig, TaskSamples

__all__ = ["CliffTables", "cliff_tables", "plane_aliases"]


@dataclass(frozen=True)
class CliffTables:
    """What :func:`cliff_tables` measured; each frame is one file of the ``cliff`` stage."""

    aliases: dict[int, int]  # plane ID -> alias distance
    accuracy: pd.DataFrame  # per (extra, n_hops, answer_pos), Wilson intervals
    accuracy_hops: pd.DataFrame  # per (extra, n_hops)
    accuracy_first_key: pd.DataFrame  # per (extra, n_hops, first_key_pos)
    landing: pd.DataFrame  # the failing inputs' landing rows, with their prefix index
    landing_summary: pd.DataFrame  # per (alias, layer, head, query, correct, alias_exists)
    plane_margins: pd.DataFrame  # per (layer, head, query, on_alias, plane) over the failing inputs' missed landings
    gated: pd.DataFrame  # accuracy per (layer, plane, extra, n_hops); layer −1, plane 0: the model as it is
    evidence: pd.DataFrame  # per (layer, plane): the aliasing rule's evidence and verdict


def plane_aliases(model: GPTJ, max_alias: int, planes: Sequence[int] = (1, 2)) -> dict[int, int]:
    """Plane ID -> the distance a in 1..max_alias at which the plane turns closest to a whole turn (aθ ≈ 2πm),
    for the rotating ones of ``planes`` (θ = 1: 44; θ = 0.866: 29)."""
    thetas = layer_frequencies(model.cfg, 0)
    return {p: alias_distance(float(thetas[p - 1]), max_alias) for p in planes
            if p <= model.cfg.n_planes and thetas[p - 1] > 0}


def cliff_tables(model: GPTJ, task: TaskConfig, curve: LengthGenConfig, layers: Sequence[int],
                 planes: Sequence[int] = (1, 2), queries: str = "hops", max_alias: int = 100,
                 gate_every: int = 1) -> CliffTables:
    """The cliff's tables (module docstring) for ``model`` on ``task``'s windows of ``curve`` (its grid, sizes,
    seed and ``mode``: ``"cached"`` runs each window after its prefix's key-value cache, ``"plain"`` each K's
    windows in one full pass; both measure the same windows). ``layers``: the positional layers looked at;
    ``planes``: gated one at a time in each of them, on every ``gate_every``-th K of the grid."""
    n_layers, n_planes = model.cfg.n_layers, model.cfg.n_planes
    if not layers or not all(0 <= layer < n_layers for layer in layers) or any(not 1 <= p <= n_planes for p in planes):
        raise PossymError(f"cliff layers={list(layers)} must lie in 0..{n_layers - 1} and planes={list(planes)} "
                          f"in 1..{n_planes}")
    layers = list(layers)
    aliases = plane_aliases(model, max_alias)
    predictions = length_predictions(model, task, curve)
    main_alias = aliases.get(1, max_alias)
    frames, margin_frames = [], []
    for samples, prefix, past in _batches(model, length_points(task, curve), curve.mode):
        land = attention_landing(model, samples, layers=layers, queries=queries,  # type: ignore[arg-type]
                                 alias=main_alias, token_budget=curve.token_budget, past=past)
        frames.append(land.assign(prefix=prefix[land["input"].to_numpy()]))
        failed = np.unique(land.loc[~land["correct"], "input"].to_numpy())
        if len(failed):
            m = plane_margins(model, samples.take(failed), layers=layers, queries=queries)  # type: ignore[arg-type]
            margin_frames.append(m.assign(extra=samples.extra))
    landing = pd.concat(frames, ignore_index=True)
    margins = _margin_summary(pd.concat(margin_frames, ignore_index=True) if margin_frames else None, main_alias)
    by = ("layer", "head", "query", "correct", "alias_exists")
    summary = pd.concat([landing_summary(_alias_view(landing, a, main_alias), alias=a, by=by).assign(alias=a, plane=p)
                         for p, a in aliases.items()], ignore_index=True)
    gated = plane_gate_curves(model, task, _every(curve, gate_every), layers=layers, planes=planes)
    return CliffTables(
        aliases=aliases, accuracy=accuracy_table(predictions),
        accuracy_hops=accuracy_table(predictions, by=("extra", "n_hops")),
        accuracy_first_key=accuracy_table(predictions, by=("extra", "n_hops", "first_key_pos")),
        landing=landing[~landing["correct"]].reset_index(drop=True), landing_summary=summary, plane_margins=margins,
        gated=gated, evidence=alias_evidence(summary, gated))


def _every(curve: LengthGenConfig, step: int) -> LengthGenConfig:
    return dataclasses.replace(curve, grid=curve.grid[::step])


def _margin_summary(margins: pd.DataFrame | None, alias: int) -> pd.DataFrame:
    """Per (layer, head, query, on_alias, plane) over the failing inputs' missed landings: n, the mean margin
    and the mean absolute margin (which plane put the maximum on the wrong key, and which argued against)."""
    columns = ["layer", "head", "query", "on_alias", "plane", "n", "mean_margin", "mean_abs_margin"]
    if margins is None or margins.empty:
        return pd.DataFrame(columns=columns)
    m = margins.assign(on_alias=margins["offset"] == -alias, abs_margin=margins["margin"].abs())
    out = m.groupby(["layer", "head", "query", "on_alias", "plane"], sort=True).agg(
        n=("margin", "size"), mean_margin=("margin", "mean"), mean_abs_margin=("abs_margin", "mean")).reset_index()
    return out[columns]


def _alias_view(landing: pd.DataFrame, alias: int, measured: int) -> pd.DataFrame:
    """The landing rows as seen for alias distance ``alias``: whether that alias key exists; the weight on it
    is known only for the alias the landing measured."""
    if alias == measured:
        return landing
    return landing.assign(alias_exists=landing["right_key"] >= alias, p_alias=float("nan"))


def _batches(model: GPTJ, points: Iterable[LengthPoint], mode: str
             ) -> Iterator[tuple[TaskSamples, np.ndarray, list[KV] | None]]:
    """The landing's batches with each window's prefix index: ``"plain"``, every window of one K in one
    batch (no cache); ``"cached"``, one point at a time after its prefix's cache (only the window is run)."""
    if mode == "cached":
        cache, cached_for = None, None
        for point in points:
            if cached_for is not point.prefix:
                cache, cached_for = prefix_cache(model, point.prefix), point.prefix
            yield point.samples, np.full(len(point.samples), point.index), slice_cache(cache, point.extra)
        return
    groups: dict[int, list[LengthPoint]] = {}
    for point in points:
        groups.setdefault(point.extra, []).append(point)
    for extra, group in groups.items():
        parts = [p.samples for p in group]
        yield (TaskSamples(np.concatenate([p.tokens for p in parts]), np.concatenate([p.answer for p in parts]),
                           np.concatenate([p.n_hops for p in parts]), np.concatenate([p.path for p in parts]), extra),
               np.concatenate([np.full(len(p.samples), p.index) for p in group]), None)
