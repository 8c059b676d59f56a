"""Sweep figures with ±sd bands across seeds: records in (:func:`possym.sweep.aggregate.trial_facts`), Figure out.

Each figure has one panel per task (columns) and one line per variant: the mean across seeds, with a
band of ± one sample standard deviation (no band for a single seed).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from matplotlib.figure import Figure


def _groups(facts: list[dict[str, Any]]) -> dict[str, dict[str, list[dict[str, Any]]]]:
    """task -> variant -> the trials' facts, in first-seen order."""
    out: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for f in facts:
        out.setdefault(f["task"], {}).setdefault(f["variant"], []).append(f)
    return out


def _band(ax, x: np.ndarray, ys: np.ndarray, label: str, **kw) -> None:
    """Mean of ys [seed, x] with a ±sd band; NaN entries are ignored."""
    with np.errstate(all="ignore"):
        mean = np.nanmean(ys, axis=0)
        sd = np.nanstd(ys, axis=0, ddof=1) if len(ys) > 1 else np.zeros_like(mean)
    line = ax.plot(x, mean, label=f"{label} (n={len(ys)})", **kw)[0]
    if len(ys) > 1:
        ax.fill_between(x, mean - sd, mean + sd, color=line.get_color(), alpha=0.2, linewidth=0)


def _legend(ax) -> None:
    if ax.lines:  # a panel with nothing measured yet (e.g. no lengthgen.csv) stays empty, without a warning
        ax.legend(fontsize=7)


def _panels(n: int, rows: int = 1) -> tuple[Figure, np.ndarray]:
    fig = Figure(figsize=(5.2 * n, 3.6 * rows), layout="constrained")
    return fig, np.atleast_2d(fig.subplots(rows, n, squeeze=False))


def accuracy_curves(facts: list[dict[str, Any]]) -> Figure:
    """Validation accuracy against training step, per task and variant."""
    groups = _groups(facts)
    fig, axes = _panels(max(len(groups), 1))
    for ax, (task, variants) in zip(axes[0], groups.items(), strict=False):
        for variant, rows in variants.items():
            steps = sorted({s for r in rows for s, _ in r["curve"]})
            ys = np.array([[dict(r["curve"]).get(s, math.nan) for s in steps] for r in rows])
            _band(ax, np.array(steps), ys, variant)
        ax.set(title=f"{task} task", xlabel="training step", ylabel="validation accuracy", ylim=(0, 1.02))
        _legend(ax)
    return fig


def length_curves(facts: list[dict[str, Any]]) -> Figure:
    """Accuracy against the number of extra tokens before the target window (``possym lengthgen``)."""
    groups = _groups(facts)
    fig, axes = _panels(max(len(groups), 1))
    for ax, (task, variants) in zip(axes[0], groups.items(), strict=False):
        for variant, rows in variants.items():
            extras = sorted({int(k[8:]) for r in rows for k in r if k.startswith("len_acc_")})
            if not extras:
                continue
            ys = np.array([[r.get(f"len_acc_{k}", math.nan) for k in extras] for r in rows])
            _band(ax, np.array(extras), ys, variant, marker="o", markersize=3)
        ax.set_xscale("symlog", linthresh=10)
        ax.set(title=f"{task} task", xlabel="extra tokens before the target window", ylabel="accuracy",
               ylim=(0, 1.02))
        _legend(ax)
    return fig


def layer_scores(facts: list[dict[str, Any]]) -> Figure:
    """Final-checkpoint s_POS (top) and s_SYM (bottom) per layer, last-token query."""
    groups = _groups(facts)
    fig, axes = _panels(max(len(groups), 1), rows=2)
    for col, (task, variants) in enumerate(groups.items()):
        for variant, rows in variants.items():
            layers = sorted({int(k[7:]) for r in rows for k in r if k.startswith("s_pos_L")})
            for row, name in enumerate(("s_pos", "s_sym")):
                ys = np.array([[r.get(f"{name}_L{layer}", math.nan) for layer in layers] for r in rows])
                _band(axes[row, col], np.array(layers), ys, variant, marker="o", markersize=3)
        for row, name in enumerate(("s_POS", "s_SYM")):
            axes[row, col].set(title=f"{task} task: {name} at the last checkpoint", xlabel="layer", ylabel=name,
                               ylim=(-0.02, 1.02))
            _legend(axes[row, col])
    return fig
