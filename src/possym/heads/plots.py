"""Figures of a pretrained model's head scores: heatmaps, the positional–symbolic plane, per-frequency curves.

Records in (:meth:`possym.scores.swaps.HeadScores.records`, :class:`~possym.heads.scores.FrequencyScores`),
``Figure`` out: nothing here runs a model or writes a file.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from matplotlib.figure import Figure

from possym.heads.scores import FrequencyScores


def _grid(records: Sequence[Mapping[str, Any]], key: str) -> np.ndarray:
    layers = sorted({r["layer"] for r in records})
    heads = sorted({r["head"] for r in records})
    grid = np.full((len(layers), len(heads)), np.nan)
    for r in records:
        grid[layers.index(r["layer"]), heads.index(r["head"])] = r[key]
    return grid


DETECTOR_TITLES = {"previous_token_head": "previous-token head", "duplicate_token_head": "duplicate-token head",
                   "induction_head": "induction head"}  # fmt: skip


def plot_heatmaps(records: Sequence[Mapping[str, Any]], *, title: str = "") -> Figure:
    """s_POS and s_SYM over layer (rows, first layer on top) × head, and beside them TransformerLens's head
    detectors (:data:`possym.heads.detectors.HEAD_NAMES`) where the records carry them, on one colour scale [0, 1]."""
    panels = {"s_pos": "positional score", "s_sym": "symbolic score"}
    panels |= {key: name for key, name in DETECTOR_TITLES.items()
               if records and all(key in r for r in records) and not np.isnan(_grid(records, key)).all()}
    fig = Figure(figsize=(3.75 * len(panels), 6.5), layout="constrained")
    axes = fig.subplots(1, len(panels), sharey=True)
    for ax, (key, name) in zip(axes, panels.items(), strict=True):
        grid = _grid(records, key)
        im = ax.imshow(grid, vmin=0, vmax=1, cmap="viridis", aspect="auto", interpolation="nearest")
        ax.set_title(name)
        ax.set_xlabel("head")
        ax.set_xticks(range(grid.shape[1]))
    axes[0].set_ylabel("layer")
    fig.colorbar(im, ax=axes, shrink=0.8)
    if title:
        fig.suptitle(title)
    return fig


def plot_plane(records: Sequence[Mapping[str, Any]], summary: Mapping[str, float], *, title: str = "") -> Figure:
    """Every head as a point (s_POS, s_SYM) coloured by layer, with Pearson's r across heads."""
    fig = Figure(figsize=(5.2, 4.5), layout="constrained")
    ax = fig.subplots()
    layer = np.array([r["layer"] for r in records])
    sc = ax.scatter([r["s_pos"] for r in records], [r["s_sym"] for r in records], c=layer, cmap="plasma", s=18)
    ax.plot([0, 1], [1, 0], color="grey", lw=0.6, ls=":")
    ax.set_xlim(-0.02, 1.02)
    ax.set_ylim(-0.02, 1.02)
    ax.set_xlabel("positional score $s_{POS}$")
    ax.set_ylabel("symbolic score $s_{SYM}$")
    ax.set_title(f"{title}  r = {summary['pearson_r']:.2f}".strip())
    fig.colorbar(sc, ax=ax, label="layer")
    return fig


def plot_frequency(curves: Sequence[FrequencyScores], labels: Sequence[str] = (), *, title: str = "") -> Figure:
    """s_POS and s_SYM of each plane's projection head against frequency ID (1 = fastest), one panel per head."""
    fig = Figure(figsize=(4.2 * len(curves), 3.4), layout="constrained")
    axes = np.atleast_1d(fig.subplots(1, len(curves), sharey=True))
    for i, (ax, c) in enumerate(zip(axes, curves, strict=True)):
        ids = np.arange(1, len(c.thetas) + 1)
        ax.plot(ids, c.s_pos.numpy(), "o-", ms=3, color="#c0392b", label="$s_{POS}$")
        ax.plot(ids, c.s_sym.numpy(), "s-", ms=3, color="#27ae60", label="$s_{SYM}$")
        ax.set_xlabel("frequency ID (1 = fastest)")
        ax.set_title(f"layer {c.layer}, head {c.head}" + (f": {labels[i]}" if i < len(labels) else ""))
        ax.set_ylim(-0.02, 1.02)
    axes[0].set_ylabel("score of the plane alone")
    axes[0].legend()
    if title:
        fig.suptitle(title)
    return fig
