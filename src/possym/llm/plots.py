"""Accuracy against target-window length, beside the paper's Table 3 (its Figure 5C-D, one panel per task).

Records in, ``Figure`` out: nothing here runs a model or writes a file.
"""

from __future__ import annotations

import importlib.resources
import json
from collections.abc import Mapping, Sequence
from typing import Any

from matplotlib.figure import Figure

from possym.llm.results import PivotCell

TASK_COLOURS = {"number": "#c0392b", "letter": "#27ae60"}  # the paper's red and green
PAPER_STYLES = {"GPT 5.4": ":", "GPT 5.5": "-.", "Claude Sonnet 3.7": (0, (5, 2))}


def load_paper_table3() -> dict[str, Any]:
    """The paper's Table 3 (means and sds by model, task and length), with its source."""
    text = importlib.resources.files("possym").joinpath("data/paper_table3.json").read_text("utf-8")
    return json.loads(text)


def plot_accuracy(
    results: Mapping[str, Sequence[PivotCell]],
    paper: Mapping[str, Any] | None = None,
    *,
    title: str | None = None,
) -> Figure:
    """Mean accuracy (error bars: sd over runs) against length, one panel per task.

    ``results`` maps a model label to its Table 3 pivot; ``paper`` (default: the packaged Table 3)
    is drawn in grey, one line style per model.
    """
    paper = load_paper_table3() if paper is None else paper
    # A fixed layout: constrained layout would cost more CPU than everything else in a small run.
    fig = Figure(figsize=(10, 4.2))
    fig.subplots_adjust(left=0.07, right=0.99, bottom=0.13, top=0.86 if title else 0.92, wspace=0.06)
    axes = fig.subplots(1, 2, sharey=True)
    markers = ["o", "s", "^", "D", "v"]
    for ax, task in zip(axes, ("number", "letter"), strict=True):
        for model, styles in paper.get("models", {}).items():
            ax.plot(
                paper["length"],
                styles[task]["mean"],
                color="0.55",
                linestyle=PAPER_STYLES.get(model, "--"),
                linewidth=1.3,
                label=f"{model} (paper)",
            )
        for i, (label, table) in enumerate(results.items()):
            points = sorted((p for p in table if p.task == task), key=lambda p: p.length)
            if not points:
                continue
            ax.errorbar(
                [p.length for p in points],
                [p.mean for p in points],
                yerr=[0.0 if p.sd != p.sd else p.sd for p in points],
                color=TASK_COLOURS[task],
                marker=markers[i % len(markers)],
                markersize=4,
                capsize=2,
                linewidth=1.8,
                label=label,
            )
        ax.set_xscale("log")
        lengths = sorted(set(paper.get("length", [])) | {p.length for t in results.values() for p in t})
        ax.set_xticks(lengths, [str(x) for x in lengths], fontsize=7)
        ax.minorticks_off()
        ax.set_ylim(-0.03, 1.03)
        ax.set_xlabel("target-window length")
        ax.set_title(f"1-hop {task} task")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("accuracy")
    # Upper right of the number panel is empty in the paper's curves (they fall with length).
    axes[0].legend(fontsize=7, loc="upper right")
    if title:
        fig.suptitle(title)
    return fig
