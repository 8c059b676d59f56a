"""Figures of the canonical grid: records in, Figure out (never trains or scores).

- :func:`accuracy_by_band`: accuracy against condition (fastest band .. slowest, then NoPE, two-angle,
  fast+slow, all), one panel per task, at 1x/2x/4x the training length, seeds as dots;
- :func:`accuracy_by_position`: accuracy against answer position at the training length, one line
  per band (the U and inverted-U curves), one panel per task;
- :func:`positional_symbolic_plane`: every trained toy head as a point (s_SYM, s_POS);
- :func:`wmax_curves`: Theorem 7's w_max(j) of H_POS and the simplified H_SYM.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from matplotlib import colormaps
from matplotlib.figure import Figure

from possym.canonical.records import CellRecord, PositionRecord, WmaxRecord
from possym.records import SOLVED
from possym.runs import save_figure


def _tasks(rows: Sequence[CellRecord | PositionRecord]) -> list[str]:
    return list(dict.fromkeys(r.task for r in rows))


def accuracy_by_band(runs: Sequence[CellRecord], conditions: Sequence[str]) -> Figure:
    tasks = _tasks(runs)
    fig = Figure(figsize=(4.6 * len(tasks), 3.4), layout="constrained")
    axes = np.atleast_1d(fig.subplots(1, len(tasks), sharey=True))
    x = np.arange(len(conditions))
    for ax, task in zip(axes, tasks, strict=True):
        for key, label, style in (("acc", "1x", "-o"), ("acc_2x", "2x", "--s"), ("acc_4x", "4x", ":^")):
            per = [
                [getattr(r, key) for r in runs if r.task == task and r.condition == c and r.head == 0]
                for c in conditions
            ]
            mean = [np.mean(v) if v else np.nan for v in per]
            line = ax.plot(x, mean, style, label=f"{label} length", markersize=4)[0]
            if key == "acc":
                for xi, v in zip(x, per, strict=True):
                    ax.scatter([xi] * len(v), v, s=8, color=line.get_color(), alpha=0.5)
        ax.set_xticks(x, conditions, rotation=60, fontsize=7)
        ax.set_title(task)
        ax.set_ylim(-0.02, 1.02)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("accuracy")
    axes[0].legend(fontsize=7)
    fig.suptitle("Accuracy by frequency condition (fastest band → slowest, then NoPE and mixed heads)", fontsize=9)
    return fig


def accuracy_by_position(positions: Sequence[PositionRecord], conditions: Sequence[str], length: int) -> Figure:
    tasks = _tasks(positions)
    fig = Figure(figsize=(4.6 * len(tasks), 3.4), layout="constrained")
    axes = np.atleast_1d(fig.subplots(1, len(tasks), sharey=True))
    cmap = colormaps["viridis"]
    bands = [c for c in conditions if c.startswith("band")]
    for ax, task in zip(axes, tasks, strict=True):
        for c in conditions:
            tally: dict[int, list[float]] = defaultdict(list)
            for p in positions:
                if p.task == task and p.condition == c and p.length == length:
                    tally[p.position].append(p.correct / p.total)
            if not tally:
                continue
            xs = sorted(tally)
            color = cmap(bands.index(c) / max(1, len(bands) - 1)) if c in bands else None
            style = "-" if c in bands else "--"
            ax.plot(xs, [np.mean(tally[x]) for x in xs], style, color=color, label=c, marker=".")
        ax.set_title(task)
        ax.set_xlabel("answer position")
        ax.set_ylim(-0.02, 1.02)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("accuracy (mean over seeds)")
    axes[-1].legend(fontsize=6, ncol=2)
    fig.suptitle(f"Accuracy by answer position at the training length {length} (bands: yellow = slowest)", fontsize=9)
    return fig


def positional_symbolic_plane(runs: Sequence[CellRecord]) -> Figure:
    fig = Figure(figsize=(4.2, 4.0), layout="constrained")
    ax = fig.subplots()
    style = {"index": ("o", "tab:blue"), "retrieval": ("s", "tab:orange"), "induction": ("^", "tab:green")}
    for task in _tasks(runs):
        marker, color = style.get(task, ("x", "grey"))
        for solved in (True, False):
            rs = [r for r in runs if r.task == task and (r.acc >= SOLVED) == solved]
            ax.scatter(
                [r.s_sym for r in rs],
                [r.s_pos for r in rs],
                marker=marker,
                s=22,
                alpha=0.6,
                facecolors=color if solved else "none",
                edgecolors=color,
                label=f"{task} ({'solved' if solved else 'not solved'})",
            )
    ax.plot([0, 1], [1, 0], color="grey", lw=0.5)
    ax.set_xlabel("symbolic score s_SYM")
    ax.set_ylabel("positional score s_POS")
    ax.set_xlim(-0.02, 1.02)
    ax.set_ylim(-0.02, 1.02)
    ax.legend(fontsize=6, title=f"filled: accuracy >= {SOLVED}", title_fontsize=6)
    ax.set_title("Toy heads on the positional-symbolic plane", fontsize=9)
    return fig


def wmax_curves(wmax: Sequence[WmaxRecord]) -> Figure:
    fig = Figure(figsize=(8.4, 3.2), layout="constrained")
    axes = fig.subplots(1, 2)
    for ax, head in zip(axes, ("H_POS", "H_SYM"), strict=True):
        for theta in sorted({w.theta for w in wmax if w.head == head}):
            pts = sorted((w.j, w.w_max, w.shape) for w in wmax if w.head == head and w.theta == theta)
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker=".", label=f"θ={theta:g} ({pts[0][2]})")
        ax.set_xlabel("answer position j")
        ax.set_ylabel("w_max(j)")
        ax.set_title(
            f"{head}: " + ("Index construction" if head == "H_POS" else "simplified symbolic head"), fontsize=9
        )
        ax.legend(fontsize=7)
        ax.grid(alpha=0.3)
    return fig


def save_figures(
    conditions: Sequence[str], length: int, runs: Sequence[CellRecord], positions: Sequence[PositionRecord],
    wmax: Sequence[WmaxRecord], out: Path,
) -> list[Path]:
    """Write the four figures of the grid (its ``conditions`` in order, training ``length``) into ``out`` as PNG and
    SVG; returns the paths."""
    conditions = list(conditions)
    figs = {
        "fig_accuracy_by_band": accuracy_by_band(runs, conditions),
        "fig_accuracy_by_position": accuracy_by_position(positions, conditions, length),
        "fig_plane": positional_symbolic_plane(runs),
        "fig_theorem7_wmax": wmax_curves(wmax),
    }
    return [p for stem, fig in figs.items() for p in save_figure(fig, out / stem)]
