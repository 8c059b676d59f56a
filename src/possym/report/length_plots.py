"""Fig. 5B, length generalisation: our curves beside the paper's digitised ones, every seed shown.

Per task, a DataFrame of :class:`~possym.records.LengthRecord` columns (``possym.records.frame(points)``,
or ``run.length_curve(...)``), with a ``seed`` column when it holds several seeds. A DataFrame in, a
matplotlib Figure out; nothing here evaluates or writes files.

Example:
    >>> import pandas as pd
    >>> pts = pd.DataFrame({"seed": [0, 0, 1, 1], "extra": [0, 100, 0, 100], "n_hops": 0, "accuracy": [1, .4, 1, .5],
    ...                     "cluster_low": [1, .3, 1, .4], "cluster_high": [1, .5, 1, .6]})
    >>> len(plot_length_curves({"number": pts}).axes[0].lines)  # one line per seed
    2
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd
from matplotlib.figure import Figure

from possym.report.compare_plots import SEED_STYLE, by_seed
from possym.report.score_plots import HOP_COLOURS

TASK_COLOURS = {"number": "tab:red", "letter": "tab:green"}
HOP_LINES = {"letter": "-"}  # the per-hop curves' line style by task; any other task's are dashed


def plot_length_curves(curves: Mapping[str, pd.DataFrame], paper: dict[str, Any] | None = None) -> Figure:
    """Accuracy against extra tokens K, pooled over hops, per task: one thin line per seed (one seed: with its
    per-prefix 95% band), the paper's digitised Fig. 5B dashed with markers; per hop count on the right, the
    mean over seeds with the seeds' range as a band."""
    fig = Figure(figsize=(11, 4.2))
    ax, ax_hops = fig.subplots(1, 2)
    for task, df in curves.items():
        colour = TASK_COLOURS.get(task, "tab:blue")
        seeds = list(by_seed(df))
        for i, (seed, rows) in enumerate(seeds):
            pooled = rows[rows["n_hops"] == 0].sort_values("extra")
            label = f"{task} task (ours{f', {len(seeds)} seeds' if len(seeds) > 1 else ''})"
            ax.plot(pooled["extra"], pooled["accuracy"], "-", color=colour, **SEED_STYLE,
                    label=label if i == 0 else f"_{task} s{seed}")
            if len(seeds) == 1:
                ax.fill_between(pooled["extra"], pooled["cluster_low"], pooled["cluster_high"], color=colour,
                                alpha=0.2, linewidth=0)
        if paper and f"{task}_task" in paper:
            px = [e for e, v in zip(paper["extra"], paper[f"{task}_task"], strict=True) if v is not None]
            py = [v for v in paper[f"{task}_task"] if v is not None]
            ax.plot(px, py, "o--", color=colour, alpha=0.6, markersize=4, label=f"{task} task (paper, digitised)")
            # the paper's pooled curve beside our per-hop ones as well
            ax_hops.plot(px, py, "o:", color=colour, alpha=0.5, markersize=3, label=f"{task} task (paper, pooled)")
        hops = df[df["n_hops"] > 0]
        for i, (h, rows) in enumerate(hops.groupby("n_hops", sort=True)):
            stats = rows.groupby("extra")["accuracy"].agg(["mean", "min", "max"]).reset_index()
            hop_colour = HOP_COLOURS[i % len(HOP_COLOURS)]
            ax_hops.plot(stats["extra"], stats["mean"], HOP_LINES.get(task, "--"), color=hop_colour,
                         label=f"{task}, {h} hop(s)")
            if len(seeds) > 1:
                ax_hops.fill_between(stats["extra"], stats["min"], stats["max"], color=hop_colour, alpha=0.12,
                                     linewidth=0)
    for a in (ax, ax_hops):
        a.set_xscale("symlog", linthresh=100)
        a.set_xlabel("extra tokens K before the target window")
        a.set_ylim(-0.02, 1.02)
        a.grid(alpha=0.3)
    ax.set_ylabel("test accuracy")
    ax.set_title("Length generalisation (paper Fig. 5B)")
    ax_hops.set_title("per hop count (ours; several seeds: mean, band = seed range)")
    ax.legend(fontsize=8)
    ax_hops.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    return fig
