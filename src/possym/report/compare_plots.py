"""The paper's numbers drawn beside ours on the same axes (Figs. 2A, 5A, 6 and Table 1), every seed shown.

Each function takes, per task, a DataFrame of one record type's columns (``possym.records.frame``) with a
``seed`` column (absent: one seed), and draws every seed as a thin line; the paper's digitised values
(:func:`possym.paper.paper_numbers`) are hollow markers joined by dashed lines. A DataFrame in, a Figure
out; nothing here reads or writes files.

Example:
    >>> import pandas as pd
    >>> evals = pd.DataFrame({"seed": [0, 0, 1, 1], "step": [0, 50, 0, 50], "accuracy": [0.1, 0.9, 0.1, 0.8]})
    >>> fig = fig2a_compare({"letter": evals}, {})
    >>> len(fig.axes[1].lines)   # one line per seed; the legend names the first
    2
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import pandas as pd
from matplotlib.figure import Figure

from possym.records import Fig5aRecord
from possym.report.score_plots import ACC, HOP_COLOURS, POS, SYM

# The paper's Fig. 2A, panel by panel: the hop counts it plots one curve each for (the letter panel: global only).
FIG2A_HOPS: dict[str, tuple[int, ...]] = {"number": (1, 2, 3, 4), "letter": ()}
PAPER_STYLE: dict[str, Any] = dict(linestyle="--", marker="o", markerfacecolor="none", alpha=0.8)
SEED_STYLE: dict[str, Any] = dict(linewidth=1.0, alpha=0.7)


def by_seed(df: pd.DataFrame | None) -> Iterator[tuple[int, pd.DataFrame]]:
    """(seed, rows) in seed order; a frame without a ``seed`` column is seed 0."""
    if df is None or df.empty:
        return
    if "seed" not in df.columns:
        yield 0, df
        return
    for seed, rows in df.groupby("seed", sort=True):
        yield int(seed), rows


def _label(text: str, first: bool, n_seeds: int) -> str:
    """A legend entry for the first seed only ("_" hides the others)."""
    if not first:
        return "_" + text
    return f"{text}, {n_seeds} seeds" if n_seeds > 1 else text


def fig2a_compare(evals: Mapping[str, pd.DataFrame], paper: Mapping[str, Any]) -> Figure:
    """Validation accuracy against step (rows of the runs' eval events: ``step``, ``accuracy``, ``acc_hop1``..):
    per hop for the number task, global for both, one thin line per seed."""
    fig = Figure(figsize=(11, 4))
    axes = fig.subplots(1, 2, sharey=True)
    for ax, (task, hops) in zip(axes, FIG2A_HOPS.items(), strict=True):
        ref = (paper.get(f"fig2a_{task}_task_test_accuracy_by_hop")
               or paper.get(f"fig2a_{task}_task_test_accuracy_global"))
        seeds = list(by_seed(evals.get(task)))
        keys = [f"acc_hop{h}" for h in hops]
        for i, (_, rows) in enumerate(seeds):
            rows = rows.sort_values("step")
            for h, key in enumerate(keys):
                if key in rows.columns:
                    ax.plot(rows["step"], rows[key], color=HOP_COLOURS[h], **SEED_STYLE,
                            label=_label(f"{key[4:]} (ours)", i == 0, len(seeds)))
            ax.plot(rows["step"], rows["accuracy"], color=ACC, **SEED_STYLE,
                    label=_label("global (ours)", i == 0, len(seeds)))
        for h, key in enumerate(keys):
            if ref and key[4:] in ref:
                ax.plot(ref["step"], ref[key[4:]], color=HOP_COLOURS[h], **PAPER_STYLE, label=f"{key[4:]} (paper)")
        if ref and "global" in ref:
            ax.plot(ref["step"], ref["global"], color=ACC, **PAPER_STYLE, label="global (paper)")
        _dress(ax, "training step", f"{task} task (paper Fig. 2A)", legend=7, ncol=2)
    axes[0].set_ylabel("accuracy")
    fig.tight_layout()
    return fig


def fig6_compare(final_scores: Mapping[str, pd.DataFrame], paper: Mapping[str, Any]) -> Figure:
    """Final s_pos and s_sym per layer (ScoreRecord columns; last-token query, head 0), one thin line per seed;
    the paper's hollow.

    The paper gives exact pairs only for its mixed and positional layers; for the rest it gives a
    range (e.g. "s_pos <= 0.06, s_sym >= 0.99"), drawn as a shaded band over those layers.
    """
    fig = Figure(figsize=(11, 4))
    axes = fig.subplots(1, 2, sharey=True)
    for ax, task in zip(axes, ("number", "letter"), strict=True):
        seeds = list(by_seed(final_scores.get(task)))
        for i, (_, rows) in enumerate(seeds):
            rows = rows[rows["head"] == 0].sort_values("layer")
            ax.plot(rows["layer"], rows["s_pos"], "o-", color=POS, **SEED_STYLE, markersize=4,
                    label=_label("s_pos (ours)", i == 0, len(seeds)))
            ax.plot(rows["layer"], rows["s_sym"], "s-", color=SYM, **SEED_STYLE, markersize=4,
                    label=_label("s_sym (ours)", i == 0, len(seeds)))
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
        ax.set_ylim(-0.05, 1.05)
        _dress(ax, "layer", f"{task} task, final scores (paper Fig. 6)", legend=7)
    axes[0].set_ylabel("score")
    fig.tight_layout()
    return fig


def table1_compare(table1: Mapping[str, pd.DataFrame], paper: Mapping[str, Any]) -> Figure:
    """Weighted-average frequency ID per layer (Table1Record columns), one thin line per seed, against the paper's."""
    fig = Figure(figsize=(7, 4))
    ax = fig.subplots()
    for task, colour in (("number", POS), ("letter", SYM)):
        seeds = list(by_seed(table1.get(task)))
        for i, (_, rows) in enumerate(seeds):
            rows = rows[rows["head"] == 0].sort_values("layer")
            ax.plot(rows["layer"], rows["weighted_id"], "o-", color=colour, **SEED_STYLE, markersize=4,
                    label=_label(f"{task} (ours)", i == 0, len(seeds)))
        want = paper.get(f"{task}_task")
        if want:
            ax.plot(range(len(want)), want, color=colour, **PAPER_STYLE, label=f"{task} (paper)")
    return _finish(fig, ax, "layer", "weighted-average frequency ID (1 = fastest)",
                   "Frequency use per layer (paper Table 1)")


def fig5a_compare(bounds: Sequence[Fig5aRecord], paper: Mapping[str, Any]) -> Figure:
    """Theorem 3.2's bounds against n (ours, ``fig5a.csv``) with the paper's digitised Fig. 5A points."""
    fig = Figure(figsize=(7, 4))
    ax = fig.subplots()
    for function, colour in (("index", POS), ("retrieval", SYM)):
        rows = sorted((r for r in bounds if r.function == function), key=lambda r: r.n)
        ax.plot([r.n for r in rows], [r.bound for r in rows], "-", color=colour, label=f"{function} bound (ours)")
        pts = [(n, v) for n, v in zip(paper["n"], paper[function], strict=True) if v is not None]
        ax.plot([p[0] for p in pts], [p[1] for p in pts], color=colour, **PAPER_STYLE, label=f"{function} (paper)")
    return _finish(fig, ax, "input length n", "discrepancy bound", "Theorem 3.2's bounds (paper Fig. 5A)")


def _dress(ax, xlabel: str, title: str, *, ylabel: str = "", legend: float = 8, ncol: int = 1,
           **title_style: Any) -> None:
    """Labels, title, grid and legend of one panel."""
    ax.set_xlabel(xlabel)
    if ylabel:
        ax.set_ylabel(ylabel)
    ax.set_title(title, **title_style)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=legend, ncol=ncol)


def _finish(fig: Figure, ax, xlabel: str, ylabel: str, title: str) -> Figure:
    """A one-panel comparison, dressed and laid out."""
    _dress(ax, xlabel, title, ylabel=ylabel)
    fig.tight_layout()
    return fig


def decay_compare(theory: Mapping[str, Mapping[int, Sequence[tuple[float, float | None]]]],
                  accuracy: Mapping[str, Mapping[int, Sequence[tuple[float, float | None]]]],
                  paper: Mapping[str, Any]) -> Figure:
    """Sec. 3.6's comparison, ours beside the paper's: left, Theorem 3.2's bounds at each seed's layer-2 angles
    (``theory[function][seed]``: (n, bound)) with Fig. 5A's digitised points; right, each seed's pooled accuracy
    against K (``accuracy[task][seed]``: (K, accuracy)) with Fig. 5B's.

    >>> fig = decay_compare({"index": {0: [(1, 0.3), (100, 0.0)]}}, {"number": {0: [(0, 1.0), (5000, 0.0)]}}, {})
    >>> len(fig.axes)
    2
    """
    fig = Figure(figsize=(11, 4))
    left, right = fig.subplots(1, 2)
    fig5a, fig5b = paper.get("fig5a_discrepancy_bounds"), paper.get("fig5b_length_generalisation")
    for function, colour in (("index", POS), ("retrieval", SYM)):
        for seed, curve in sorted(theory.get(function, {}).items()):
            left.plot([x for x, _ in curve], [y for _, y in curve], color=colour, **SEED_STYLE,
                      label=f"{function}, s{seed} (ours)")
        if fig5a:
            pts = [(n, v) for n, v in zip(fig5a["n"], fig5a[function], strict=True) if v is not None]
            left.plot([p[0] for p in pts], [p[1] for p in pts], color=colour, **PAPER_STYLE,
                      label=f"{function} (paper)")
    for task, colour in (("number", POS), ("letter", SYM)):
        for seed, curve in sorted(accuracy.get(task, {}).items()):
            right.plot([x for x, _ in curve], [y for _, y in curve], color=colour, **SEED_STYLE,
                       label=f"{task}, s{seed} (ours)")
        if fig5b:
            right.plot(fig5b["extra"], fig5b[f"{task}_task"], color=colour, **PAPER_STYLE, label=f"{task} (paper)")
    for ax, xlabel, ylabel, title in ((left, "input length n", "discrepancy bound",
                                       "Fig. 5A: the bounds at layer 2's angles"),
                                      (right, "extra tokens K", "accuracy", "Fig. 5B: accuracy against length")):
        _dress(ax, xlabel, title, ylabel=ylabel, legend=6, fontsize=10)
    fig.tight_layout()
    return fig


def flow_compare(flow: pd.DataFrame) -> Figure:
    """Fig. 3 over many inputs: per task and seed, the share of inputs whose attention maximum lands on the next hop,
    by hop query (depth from the answer, rows) and layer (columns); the paper's one-hop-per-layer diagonal outlined.

    flow: :class:`~possym.records.HopFlowRecord` columns.

    >>> rows = pd.DataFrame({"task": ["number"] * 2, "seed": [0, 0], "depth": [1, 1], "layer": [0, 1],
    ...                      "on_next": [1.0, 0.2], "n_inputs": [5, 5]})
    >>> len(flow_compare(rows).axes)
    2
    """
    from matplotlib.patches import Rectangle

    from possym.report.claimspec import load_claims

    # The panels the claims read, in the paper's order, and whether the paper names one layer per hop (Fig. 3A).
    panels = {s.task: bool(s.arg("layer_per_hop")) for s in load_claims() if s.measure == "hop_flow"}
    order = {t: i for i, t in enumerate(panels)}
    keys = sorted({(str(t), int(s)) for t, s in zip(flow["task"], flow["seed"], strict=True)},
                  key=lambda k: (order.get(k[0], len(order)), k))
    cols = min(max(len(keys), 1), 3)
    rows_n = -(-max(len(keys), 1) // cols)
    fig = Figure(figsize=(3.6 * cols + 1, 2.4 * rows_n + 0.5), layout="constrained")
    axes = list(fig.subplots(rows_n, cols, squeeze=False).flat)
    for ax in axes[len(keys):]:
        ax.axis("off")
    image = None
    for ax, (task, seed) in zip(axes, keys, strict=False):
        rows = flow[(flow["task"] == task) & (flow["seed"] == seed)]
        grid = rows.pivot_table(index="depth", columns="layer", values="on_next")
        image = ax.imshow(grid.to_numpy(), aspect="auto", cmap="Greys", vmin=0, vmax=1)
        if panels.get(task):  # the paper's one-hop-per-layer diagonal
            for d in grid.index:
                ax.add_patch(Rectangle((d - 1 - 0.5, d - 1 - 0.5), 1, 1, fill=False, ec=POS, lw=1.5))
        ax.set_xticks(range(grid.shape[1]))
        ax.set_xticklabels([f"L{x}" for x in grid.columns], fontsize=6)
        ax.set_yticks(range(grid.shape[0]))
        ax.set_yticklabels([f"d{d}" for d in grid.index], fontsize=7)
        ax.set_title(f"{task} s{seed} ({int(rows['n_inputs'].iloc[0])} inputs)", fontsize=8)
    if image is not None:
        fig.colorbar(image, ax=axes, shrink=0.8, label="share on the next hop")
    fig.suptitle("Attention from each hop query (d: hops from the answer) on the next hop (paper Fig. 3)", fontsize=9)
    return fig
