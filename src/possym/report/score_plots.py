"""Figures of the scores (paper A Figs. 2, 3, 4B, 6, 7, 8): records in, a matplotlib Figure out.

Every function takes records (:class:`~possym.records.ScoreRecord`, :class:`~possym.records.TallyRecord`,
:class:`~possym.records.PurityRecord`, ...) or the DataFrame of them, and the metrics log's JSON
records, and returns a :class:`matplotlib.figure.Figure`.
Nothing here trains, scores or writes files. Colours follow the paper: positional red, symbolic
green, normalised entropy purple, global accuracy magenta, max-accuracy step a dashed grey line.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from typing import Any, TypeAlias

import pandas as pd
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from possym.records import MetricsLog, Record

POS, SYM, ENT, ACC = "tab:red", "tab:green", "tab:purple", "magenta"
HOP_COLOURS = ("tab:blue", "tab:orange", "tab:cyan", "tab:brown", "tab:olive", "tab:pink")


Rows: TypeAlias = pd.DataFrame | Sequence[Record] | Sequence[dict[str, Any]]


def table(rows: Rows) -> pd.DataFrame:
    """Records, plain dicts or a DataFrame, as a DataFrame (its column types as the records give them).

    >>> from possym.records import TallyRecord
    >>> int(table([TallyRecord(gamma=0.1, step=5, positional=1, symbolic=2)]).loc[0, "symbolic"])
    2
    """
    if isinstance(rows, pd.DataFrame):
        return rows
    return pd.DataFrame([r.to_dict() if isinstance(r, Record) else dict(r) for r in rows])


def _head(scores: pd.DataFrame, layer: int, head: int, query: str) -> pd.DataFrame:
    if scores.empty:
        return scores
    query_of = scores["query"] if "query" in scores else pd.Series("last", index=scores.index)
    return scores[(scores["layer"] == layer) & (scores["head"] == head) & (query_of == query)].sort_values("step")


def _series(scores: pd.DataFrame, layer: int, key: str, head: int = 0, query: str = "last"):
    rows = _head(scores, layer, head, query)
    rows = rows[rows[key].notna()] if key in rows else rows.iloc[0:0]
    return rows["step"].tolist(), rows[key].tolist() if key in rows else []


def _layers(scores: pd.DataFrame) -> list[int]:
    return sorted(scores["layer"].unique().tolist()) if not scores.empty else []


def _vline(ax, step: int | None) -> None:
    if step is not None:
        ax.axvline(step, color="grey", ls="--", lw=1)


def _band(scores: pd.DataFrame, layer: int, key: str, head: int, query: str):
    """(steps, low, high) of ``key``'s bootstrap interval, at the steps whose record has one."""
    rows = _head(scores, layer, head, query)
    if f"{key}_low" not in rows or f"{key}_high" not in rows:
        return [], [], []
    rows = rows[rows[f"{key}_low"].notna() & rows[f"{key}_high"].notna()]
    return rows["step"].tolist(), rows[f"{key}_low"].tolist(), rows[f"{key}_high"].tolist()


def _score_panel(ax, scores, layer, head, query, best_step) -> None:
    lines = (("s_pos", POS, "positional"), ("s_sym", SYM, "symbolic"), ("entropy_norm", ENT, "entropy"))
    for key, colour, label in lines:
        x, y = _series(scores, layer, key, head, query)
        if x:
            ax.plot(x, y, color=colour, lw=1.2, label=label)
        bx, lo, hi = _band(scores, layer, key, head, query) if key != "entropy_norm" else ([], [], [])
        if bx:  # the bootstrap 95% interval of the mean over the scored inputs
            ax.fill_between(bx, lo, hi, color=colour, alpha=0.2, lw=0)
    _vline(ax, best_step)
    ax.set_ylim(-0.05, 1.05)
    ax.set_title(f"L{layer}" + (f" H{head}" if head else ""), fontsize=9)


def accuracy_panel(ax, metrics: MetricsLog, best_step: int | None = None) -> None:
    """Per-hop and global evaluation accuracy against step (Fig. 2A) on ``ax``."""
    evals = metrics.evals
    steps = [r.step for r in evals]
    for i, h in enumerate(sorted({h for r in evals for h in r.hops})):
        ax.plot(steps, [r.hops.get(h, math.nan) for r in evals], color=HOP_COLOURS[i % 6], lw=1, label=f"{h}-hop")
    if evals:
        ax.plot(steps, [r.accuracy for r in evals], color=ACC, lw=2, label="global")
    _vline(ax, best_step)
    ax.set_ylim(-0.02, 1.02)
    ax.set_ylabel("accuracy")
    ax.legend(fontsize=7, loc="lower right")


def tally_panel(ax, tally: Rows, first: Rows = (), title: str = "") -> None:
    """Cumulative count of pure heads per kind (Fig. 2C, 7), labelled with the layer of each new head."""
    tally_t, first_t = table(tally), table(first)
    steps = tally_t["step"].tolist() if not tally_t.empty else []
    for kind, colour in (("positional", POS), ("symbolic", SYM)):
        counts = tally_t[kind].tolist() if not tally_t.empty else []
        ax.step(steps, counts, where="post", color=colour, label=kind)
        by_step: dict[int, list[str]] = defaultdict(list)
        if not first_t.empty:
            for f in first_t[(first_t["kind"] == kind) & first_t["step"].notna()].itertuples():
                by_step[int(f.step)].append(f"L{f.layer}")
        for s, labels in sorted(by_step.items()):
            y = int(tally_t.loc[tally_t["step"] <= s, kind].max()) if (tally_t["step"] <= s).any() else 0
            ax.annotate(",".join(labels), (s, y), fontsize=6, color=colour, xytext=(2, 2), textcoords="offset points")
    ax.set_ylabel("pure heads")
    ax.set_xlabel("training step")
    ax.legend(fontsize=7, loc="upper left")
    if title:
        ax.set_title(title, fontsize=9)


def _panel_grid(n: int, height: float, sharey: bool = False) -> tuple[Figure, list[Any]]:
    """A Figure of ``n`` panels sharing x, in rows of 4 (at least one), ``height`` inches a row; the rest off."""
    cols = 4
    rows = max(1, math.ceil(n / cols))
    fig = Figure(figsize=(3 * cols, height * rows))
    axes = list(fig.subplots(rows, cols, sharex=True, sharey=sharey, squeeze=False).flat)
    for ax in axes[n:]:
        ax.axis("off")
    return fig, axes


def fig2_dynamics(
    scores: Rows,
    metrics: MetricsLog,
    tally: Rows,
    first: Rows,
    *,
    layers: Sequence[int] = (1, 5, 11),
    best_step: int | None = None,
    title: str = "",
) -> Figure:
    """Fig. 2 for one run: (A) accuracy per hop, (B) s_POS, s_SYM and entropy of ``layers``, (C) the purity tally."""
    scores_t = table(scores)
    layers = [layer for layer in layers if layer in _layers(scores_t)] or _layers(scores_t)[:3]
    fig = Figure(figsize=(5, 2.0 * (len(layers) + 2)))
    axes = fig.subplots(len(layers) + 2, 1, sharex=True)
    accuracy_panel(axes[0], metrics, best_step)
    axes[0].set_title(title or "accuracy", fontsize=10)
    for ax, layer in zip(axes[1:-1], layers, strict=True):
        _score_panel(ax, scores_t, layer, 0, "last", best_step)
    axes[1].legend(fontsize=7, loc="center right")
    tally_panel(axes[-1], tally, first)
    fig.tight_layout()
    return fig


def fig6_layer_scores(
    scores: Rows, *, best_step: int | None = None, query: str = "last", title: str = ""
) -> Figure:
    """Fig. 6: one panel per (layer, head) with s_POS, s_SYM and normalised entropy against step."""
    scores_t = table(scores)
    mine = scores_t[scores_t["query"] == query] if not scores_t.empty else scores_t
    keys = sorted(set(zip(mine["layer"], mine["head"], strict=True))) if not mine.empty else []
    fig, axes = _panel_grid(len(keys), 2.2, sharey=True)
    for ax, (layer, head) in zip(axes, keys, strict=False):
        _score_panel(ax, scores_t, layer, head, query, best_step)
    axes[0].legend(fontsize=7)
    fig.suptitle(title or f"scores per layer (query: {query})", fontsize=10)
    fig.supxlabel("training step", fontsize=9)
    fig.tight_layout()
    return fig


def fig7_purity(tallies: dict[float, Rows], firsts: dict[float, Rows], *, title: str = "") -> Figure:
    """Fig. 7: the purity tally for each γ (rows)."""
    gammas = sorted(tallies, reverse=True)
    fig = Figure(figsize=(5, 2.6 * len(gammas)))
    axes = fig.subplots(len(gammas), 1, sharex=True, squeeze=False)
    for ax, gamma in zip(axes[:, 0], gammas, strict=True):
        tally_panel(ax, tallies[gamma], firsts.get(gamma, ()), title=f"{title} γ = {gamma}".strip())
    fig.tight_layout()
    return fig


def fig3_hop_attention(attention: Any, tokens: Sequence[str], path: Sequence[int], *, head: int = 0) -> Figure:
    """Fig. 3: for one input, the attention of every layer from each hop position, with the hop path drawn.

    attention: [layer, head, hop, key_pos] (:func:`possym.scores.patterns.hop_attention`); path: the
    positions from the query to the answer. One panel per hop query: layers (rows) by keys (columns),
    the hop's query position and its target (the next path position) outlined.
    """
    att = attention[:, head]
    n_layers, n_hops, n_keys = att.shape
    cols = min(n_hops, 2)
    rows = math.ceil(n_hops / cols)
    size = (0.3 * n_keys * cols + 1.5, (0.25 * n_layers + 1.2) * rows)
    fig = Figure(figsize=size)
    axes = fig.subplots(rows, cols, squeeze=False)
    for h, ax in enumerate(axes.flat):
        if h >= n_hops:
            ax.axis("off")
            continue
        q, target = int(path[h]), int(path[h + 1])
        ax.imshow(att[:, h].numpy(), aspect="auto", cmap="Greys", vmin=0, vmax=1)
        ax.add_patch(Rectangle((target - 0.5, -0.5), 1, n_layers, fill=False, ec=SYM, lw=1.5))
        ax.add_patch(Rectangle((q - 0.5, -0.5), 1, n_layers, fill=False, ec=POS, lw=1.5))
        arrow = {"arrowstyle": "->", "color": "black", "connectionstyle": "arc3,rad=0.3"}
        ax.annotate("", xy=(target, -0.9), xytext=(q, -0.9), annotation_clip=False, arrowprops=arrow)
        ax.set_xticks(range(n_keys))
        ax.set_xticklabels(tokens[:n_keys], fontsize=6)
        ax.set_yticks(range(n_layers))
        ax.set_yticklabels([f"L{i}" for i in range(n_layers)], fontsize=6)
        ax.set_title(f"hop {h + 1}: from {q} ({tokens[q]}) to {target} ({tokens[target]})", fontsize=8)
    fig.tight_layout()
    return fig


def fig4b_geometry(geometry: Any, *, title: str = "") -> Figure:
    """Fig. 4B: pre-RoPE keys as points and the query rotated by each offset δ as arrows, on one plane.

    geometry: a :class:`possym.scores.frequency.PlaneGeometry`.
    """
    fig = Figure(figsize=(4.2, 4.2))
    ax = fig.subplots()
    keys, queries = geometry.keys.numpy(), geometry.queries.numpy()
    ax.scatter(keys[:, 0], keys[:, 1], color=SYM, s=18, label="keys k_j", zorder=3)
    for j, (x, y) in enumerate(keys):
        ax.annotate(str(j), (x, y), fontsize=6, color=SYM, xytext=(2, 2), textcoords="offset points")
    for d, (x, y) in zip(geometry.offsets.tolist(), queries, strict=True):
        ax.annotate("", xy=(x, y), xytext=(0, 0), arrowprops={"arrowstyle": "->", "color": POS, "lw": 0.8})
        ax.annotate(f"δ={d}", (x, y), fontsize=6, color=POS)
    lim = 1.15 * max(abs(keys).max(), abs(queries).max())
    ax.set_xlim(-lim, lim)
    ax.set_ylim(-lim, lim)
    ax.set_aspect("equal")
    ax.axhline(0, color="grey", lw=0.5)
    ax.axvline(0, color="grey", lw=0.5)
    ax.set_title(title or f"frequency ID {geometry.frequency_id} (θ = {geometry.theta:.4f})", fontsize=9)
    ax.legend(fontsize=7, loc="lower left")
    fig.tight_layout()
    return fig


def fig8_frequency_use(use: Rows, table1: Rows = (), *, title: str = "") -> Figure:
    """Fig. 8: frequency use against frequency ID, one panel per (layer, head), the weighted mean ID marked.

    use: :class:`~possym.records.FrequencyUseRecord` rows; table1: :class:`~possym.records.Table1Record` rows.
    """
    use_t, ids = table(use), table(table1)
    keys = sorted(set(zip(use_t["layer"], use_t["head"], strict=True))) if not use_t.empty else []
    mean = {} if ids.empty else {(r.layer, r.head): r.weighted_id for r in ids.itertuples()}
    fig, axes = _panel_grid(len(keys), 2.0)
    for ax, key in zip(axes, keys, strict=False):
        pts = use_t[(use_t["layer"] == key[0]) & (use_t["head"] == key[1])].sort_values("frequency_id")
        ax.plot(pts["frequency_id"], pts["use"], color="black", lw=1)
        if key in mean:
            ax.axvline(mean[key], color=POS, ls=":", lw=1.2)
            ax.set_title(f"L{key[0]}" + (f" H{key[1]}" if key[1] else "") + f"  mean ID {mean[key]:.1f}", fontsize=8)
    fig.supxlabel("frequency ID", fontsize=9)
    fig.supylabel("max partial logit", fontsize=9)
    fig.suptitle(title or "frequency use", fontsize=10)
    fig.tight_layout()
    return fig
