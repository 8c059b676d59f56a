"""Fig. 5B, length generalisation: our curves (``RUN/lengthgen.csv`` rows) beside the paper's digitised ones.

Records in, a matplotlib Figure out; nothing here evaluates or writes files.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from matplotlib.figure import Figure

from possym.report.score_plots import HOP_COLOURS

TASK_COLOURS = {"number": "tab:red", "letter": "tab:green"}


def _curve(rows: Iterable[dict[str, Any]], n_hops: int) -> tuple[list[int], list[float], list[float], list[float]]:
    pts = sorted(
        (int(r["extra"]), float(r["accuracy"]), float(r["cluster_low"]), float(r["cluster_high"]))
        for r in rows
        if int(r["n_hops"]) == n_hops
    )
    return [p[0] for p in pts], [p[1] for p in pts], [p[2] for p in pts], [p[3] for p in pts]


def plot_length_curves(curves: Mapping[str, Sequence[dict[str, Any]]], paper: dict[str, Any] | None = None) -> Figure:
    """Accuracy against extra tokens K, pooled over hops, per task (ours solid with the per-prefix 95%
    band; the paper's digitised Fig. 5B dashed with markers), and per hop count on the right."""
    fig = Figure(figsize=(11, 4.2))
    ax, ax_hops = fig.subplots(1, 2)
    for task, rows in curves.items():
        colour = TASK_COLOURS.get(task, "tab:blue")
        x, y, low, high = _curve(rows, 0)
        ax.plot(x, y, "-", color=colour, label=f"{task} task (ours)")
        ax.fill_between(x, low, high, color=colour, alpha=0.2, linewidth=0)
        if paper and f"{task}_task" in paper:
            px = [e for e, v in zip(paper["extra"], paper[f"{task}_task"], strict=True) if v is not None]
            py = [v for v in paper[f"{task}_task"] if v is not None]
            ax.plot(px, py, "o--", color=colour, alpha=0.6, markersize=4, label=f"{task} task (paper, digitised)")
        hops = sorted({int(r["n_hops"]) for r in rows} - {0})
        for i, h in enumerate(hops):
            hx, hy, _, _ = _curve(rows, h)
            style = "-" if task == "letter" else "--"
            ax_hops.plot(hx, hy, style, color=HOP_COLOURS[i % len(HOP_COLOURS)], label=f"{task}, {h} hop(s)")
    for a in (ax, ax_hops):
        a.set_xscale("symlog", linthresh=100)
        a.set_xlabel("extra tokens K before the target window")
        a.set_ylim(-0.02, 1.02)
        a.grid(alpha=0.3)
    ax.set_ylabel("test accuracy")
    ax.set_title("Length generalisation (paper Fig. 5B)")
    ax_hops.set_title("per hop count (ours)")
    ax.legend(fontsize=8)
    ax_hops.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    return fig
