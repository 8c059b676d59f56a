"""The paper's numbers drawn beside ours on the same axes (Figs. 2A, 5A, 6 and Table 1).

Ours are solid lines or filled markers; the paper's digitised values (:func:`possym.paper.paper_numbers`)
are hollow markers joined by dashed lines. Records in, a Figure out; nothing here reads or writes files.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from matplotlib.figure import Figure

from possym.report.score_plots import ACC, HOP_COLOURS, POS, SYM

PAPER_STYLE: dict[str, Any] = dict(linestyle="--", marker="o", markerfacecolor="none", alpha=0.8)


def fig2a_compare(metrics: Mapping[str, Sequence[Mapping[str, Any]]], paper: Mapping[str, Any]) -> Figure:
    """Test (validation) accuracy against step: per hop for the number task, global for the letter task."""
    fig = Figure(figsize=(11, 4))
    axes = fig.subplots(1, 2, sharey=True)
    for ax, task in zip(axes, ("number", "letter"), strict=True):
        evals = [r for r in metrics.get(task, ()) if r.get("event") == "eval"]
        steps = [r["step"] for r in evals]
        ref = paper.get(f"fig2a_{task}_task_test_accuracy_by_hop") or paper.get(
            f"fig2a_{task}_task_test_accuracy_global"
        )
        keys = [f"hop{h}" for h in range(1, 5)] if task == "number" else []
        for i, key in enumerate(keys):
            ax.plot(steps, [r.get(f"acc_{key}") for r in evals], color=HOP_COLOURS[i], label=f"{key} (ours)")
            if ref and key in ref:
                ax.plot(ref["step"], ref[key], color=HOP_COLOURS[i], **PAPER_STYLE, label=f"{key} (paper)")
        ax.plot(steps, [r.get("accuracy") for r in evals], color=ACC, label="global (ours)")
        if ref and "global" in ref:
            ax.plot(ref["step"], ref["global"], color=ACC, **PAPER_STYLE, label="global (paper)")
        ax.set_title(f"{task} task (paper Fig. 2A)")
        ax.set_xlabel("training step")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, ncol=2)
    axes[0].set_ylabel("accuracy")
    fig.tight_layout()
    return fig


def fig6_compare(final_scores: Mapping[str, Sequence[Mapping[str, Any]]], paper: Mapping[str, Any]) -> Figure:
    """Final s_pos and s_sym per layer (last-token query, head 0): ours filled, the paper's hollow.

    The paper gives exact pairs only for its mixed and positional layers; for the rest it gives a
    range (e.g. "s_pos <= 0.06, s_sym >= 0.99"), drawn as a shaded band over those layers.
    """
    fig = Figure(figsize=(11, 4))
    axes = fig.subplots(1, 2, sharey=True)
    for ax, task in zip(axes, ("number", "letter"), strict=True):
        rows = sorted((r for r in final_scores.get(task, ()) if int(r["head"]) == 0), key=lambda r: int(r["layer"]))
        layers = [int(r["layer"]) for r in rows]
        ax.plot(layers, [float(r["s_pos"]) for r in rows], "o-", color=POS, label="s_pos (ours)")
        ax.plot(layers, [float(r["s_sym"]) for r in rows], "s-", color=SYM, label="s_sym (ours)")
        ref = paper.get(f"{task}_task", {})
        pts = {int(k[1:]): v for k, v in ref.items() if k[1:].isdigit()}
        if pts:
            xs = sorted(pts)
            ax.plot(xs, [pts[x][0] for x in xs], color=POS, **PAPER_STYLE, label="s_pos (paper)")
            ax.plot(xs, [pts[x][1] for x in xs], color=SYM, **PAPER_STYLE, label="s_sym (paper)")
        for key, text in ref.items():
            if "_to_" in key:
                lo, hi = (int(x[1:]) for x in key.split("_to_"))
                ax.axvspan(lo - 0.4, hi + 0.4, color="grey", alpha=0.12, label=f"paper: {text}")
        ax.set_title(f"{task} task, final scores (paper Fig. 6)")
        ax.set_xlabel("layer")
        ax.set_ylim(-0.05, 1.05)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    axes[0].set_ylabel("score")
    fig.tight_layout()
    return fig


def table1_compare(table1: Mapping[str, Sequence[Mapping[str, Any]]], paper: Mapping[str, Any]) -> Figure:
    """Weighted-average frequency ID per layer (Table 1), ours against the paper's, both tasks."""
    fig = Figure(figsize=(7, 4))
    ax = fig.subplots()
    for task, colour in (("number", POS), ("letter", SYM)):
        rows = sorted((r for r in table1.get(task, ()) if int(r["head"]) == 0), key=lambda r: int(r["layer"]))
        ax.plot(
            [int(r["layer"]) for r in rows],
            [float(r["weighted_id"]) for r in rows],
            "o-",
            color=colour,
            label=f"{task} (ours)",
        )
        want = paper.get(f"{task}_task")
        if want:
            ax.plot(range(len(want)), want, color=colour, **PAPER_STYLE, label=f"{task} (paper)")
    return _finish(
        fig, ax, "layer", "weighted-average frequency ID (1 = fastest)", "Frequency use per layer (paper Table 1)"
    )


def fig5a_compare(bounds: Sequence[Mapping[str, Any]], paper: Mapping[str, Any]) -> Figure:
    """Theorem 3.2's bounds against n (ours from ``fig5a.csv``) with the paper's digitised Fig. 5A points."""
    fig = Figure(figsize=(7, 4))
    ax = fig.subplots()
    for function, colour in (("index", POS), ("retrieval", SYM)):
        rows = sorted((r for r in bounds if r["function"] == function), key=lambda r: int(r["n"]))
        ax.plot(
            [int(r["n"]) for r in rows],
            [float(r["bound"]) for r in rows],
            "-",
            color=colour,
            label=f"{function} bound (ours)",
        )
        pts = [(n, v) for n, v in zip(paper["n"], paper[function], strict=True) if v is not None]
        ax.plot([p[0] for p in pts], [p[1] for p in pts], color=colour, **PAPER_STYLE, label=f"{function} (paper)")
    return _finish(fig, ax, "input length n", "discrepancy bound", "Theorem 3.2's bounds (paper Fig. 5A)")


def _finish(fig: Figure, ax, xlabel: str, ylabel: str, title: str) -> Figure:
    """Labels, grid and legend of a one-panel comparison."""
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig
