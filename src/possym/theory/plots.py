"""Figures of the theory part: records in, matplotlib Figure out (no files, no computation of results).

- :func:`fig5a_figure`: the paper's Fig. 5A (Theorem 3.2's bounds for n <= 100, with the digitised points)
  beside the exact discrepancies of the constructions over the same range.
- :func:`discrepancy_figure`: exact Delta_max / Delta_min / Delta_proof against the bounds up to n = 5000,
  the failures marked.
- :func:`beta_figure`: the smallest softmax inverse temperature beta*(n0) and Lemma F.1's sufficient one.
- :func:`trained_figure`: per-layer discrepancy of a trained model against extra tokens, over its accuracy.
"""

from __future__ import annotations

import matplotlib
from matplotlib.figure import Figure
from matplotlib.ticker import NullFormatter, ScalarFormatter

from possym.paper import paper_numbers

# Figs. 5A and 5B of the paper, digitised from its vector graphics (how: ``possym/data/paper_numbers.json``), from the
# package's copy of the paper's numbers.
_FIG5A = paper_numbers()["fig5a_discrepancy_bounds"]
PAPER_FIG5A = {k: _FIG5A[k] for k in ("n", "index", "retrieval")}
_FIG5B = paper_numbers()["fig5b_length_generalisation"]
PAPER_FIG5B = {"extra": _FIG5B["extra"], "number": _FIG5B["number_task"], "letter": _FIG5B["letter_task"]}
COLORS = {"index": "tab:red", "retrieval": "tab:green"}
STYLES = {"max": "-", "min": "--", "proof": ":"}


def _series(rows: list[dict], **where) -> tuple[list[int], list[float], list[float], list[bool], list[bool]]:
    sel = sorted((r for r in rows if all(r[k] == v for k, v in where.items())), key=lambda r: r["n"])
    return (
        [r["n"] for r in sel],
        [r["discrepancy"] for r in sel],
        [r["bound"] for r in sel],
        [r["holds"] for r in sel],
        [r["premise"] for r in sel],
    )


def fig5a_figure(bound_rows: list[dict], rows: list[dict], index_domain: str = "ints<=n-1") -> Figure:
    """(A) Theorem 3.2's bounds for n <= 100 with the paper's digitised points; (B) exact discrepancies.

    ``bound_rows``: {"function", "n", "bound"} for n = 1..100; ``rows``: :func:`discrepancy_records` output.
    """
    fig = Figure(figsize=(11, 4.2))
    ax_a, ax_b = fig.subplots(1, 2)
    for function, label in (("index", "Index, θ = 0.8"), ("retrieval", "Retrieval, θ = 0.0027, |ALPH| = 8")):
        sel = sorted((r for r in bound_rows if r["function"] == function), key=lambda r: r["n"])
        ax_a.plot([r["n"] for r in sel], [r["bound"] for r in sel], color=COLORS[function], label=f"bound: {label}")
        pts = [(n, v) for n, v in zip(PAPER_FIG5A["n"], PAPER_FIG5A[function], strict=True) if v is not None]
        ax_a.plot(*zip(*pts, strict=True), "o", mfc="none", color=COLORS[function], label="paper Fig. 5A (digitised)")
    ax_a.set(xlabel="input length n", ylabel="discrepancy upper bound", title="A. Fig. 5A reproduced (Theorem 3.2)")
    ax_a.legend(fontsize=7)
    for function, domain in (("index", index_domain), ("retrieval", None)):
        for definition in ("max", "min", "proof"):
            where = {"function": function, "definition": definition}
            if domain is not None:
                where["domain"] = domain
            n, d, b, _, _ = _series(rows, **where)
            keep = [i for i, x in enumerate(n) if x <= 100]
            if not keep:
                continue
            ax_b.plot(
                [n[i] for i in keep],
                [d[i] for i in keep],
                STYLES[definition],
                color=COLORS[function],
                label=f"{function}: Δ_{definition}",
            )
            if definition == "max":
                ax_b.plot([n[i] for i in keep], [b[i] for i in keep], color="k", lw=0.8, alpha=0.6)
    ax_b.set_yscale("log")
    ax_b.set(xlabel="input length n", ylabel="discrepancy (log)", title="B. exact discrepancy vs bound (black)")
    ax_b.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    return fig


def discrepancy_figure(rows: list[dict], index_domains: tuple[str, ...] = ("ints<=16", "ints<=n-1")) -> Figure:
    """Exact discrepancies against Theorem 3.2's bounds, log-log up to the largest n; x marks a failure
    inside the theorem's premise."""
    fig = Figure(figsize=(12, 4.5))
    axes = fig.subplots(1, 2)
    ax = axes[0]
    for k, domain in enumerate(index_domains):
        for definition in ("max", "min"):
            n, d, b, holds, premise = _series(rows, function="index", definition=definition, domain=domain)
            if not n:
                continue
            ax.plot(n, d, STYLES[definition], color=f"C{k}", lw=0.9, label=f"Δ_{definition} ({domain})")
            bad = [i for i in range(len(n)) if not holds[i] and premise[i]]
            ax.plot([n[i] for i in bad], [d[i] for i in bad], "x", color=f"C{k}", ms=3)
            if k == 0 and definition == "max":
                ax.plot(n, b, color="k", lw=1.2, label="bound min(1 − cos θ, 2π²/n²)")
    ax.set(xscale="log", yscale="log", xlabel="n", ylabel="discrepancy", title="T_Index, θ = 0.8 (x: bound fails)")
    ax.legend(fontsize=7)
    ax = axes[1]
    for definition in ("max", "min", "proof"):
        n, d, b, holds, premise = _series(rows, function="retrieval", definition=definition)
        if not n:
            continue
        ax.plot(
            n,
            d,
            STYLES[definition],
            color={"max": "C2", "min": "C1", "proof": "C4"}[definition],
            lw=0.9,
            label=f"Δ_{definition}",
        )
        bad = [i for i in range(len(n)) if not holds[i] and premise[i]]
        ax.plot([n[i] for i in bad], [d[i] for i in bad], "x", color="k", ms=3)
        if definition == "max":
            ax.plot(n, b, color="k", lw=1.2, label="bound 1 − cos(ω − nθ)")
            inside = [n[i] for i in range(len(n)) if premise[i]]
            if inside:
                ax.axvline(
                    max(inside), color="gray", ls=":", lw=0.8, label=f"premise θ < ω/2n ends (n = {max(inside)})"
                )
    ax.set(
        xscale="log",
        yscale="log",
        xlabel="n",
        ylabel="discrepancy",
        title="T_Retrieval, θ = 0.0027, |ALPH| = 8 (x: fails inside premise)",
    )
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def beta_figure(beta_rows: list[dict]) -> Figure:
    """beta*(n0) (exact smallest) and Lemma F.1's sufficient beta, per construction setting."""
    fig = Figure(figsize=(6.5, 4.2))
    ax = fig.subplots()
    settings = sorted({r["setting"] for r in beta_rows})
    for k, setting in enumerate(settings):
        sel = sorted((r for r in beta_rows if r["setting"] == setting), key=lambda r: r["n0"])
        ax.plot([r["n0"] for r in sel], [r["beta_star"] for r in sel], "o-", color=f"C{k}", ms=3, label=f"β* {setting}")
        ax.plot(
            [r["n0"] for r in sel],
            [r["beta_lemma_f1"] for r in sel],
            "--",
            color=f"C{k}",
            lw=0.8,
            label="Lemma F.1's sufficient β",
        )
    ax.set(
        xscale="log",
        yscale="log",
        xlabel="n0 (longest input)",
        ylabel="inverse temperature β",
        title="Smallest softmax β for exact outputs up to n0",
    )
    ax.xaxis.set_major_formatter(ScalarFormatter())
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def trained_figure(disc_rows: list[dict], acc_rows: list[dict], task: str, title: str = "") -> Figure:
    """Each layer's median last-query discrepancy against extra tokens (absolute, then relative to the
    shortest input), over the accuracy on the same inputs and the paper's Fig. 5B curve for ``task``."""
    fig = Figure(figsize=(7.5, 9))
    ax, ax_rel, ax_acc = fig.subplots(3, 1, sharex=True, gridspec_kw={"height_ratios": [2, 2, 1.2]})
    layers = sorted({r["layer"] for r in disc_rows})
    cmap = matplotlib.colormaps["viridis"]
    for layer in layers:
        sel = sorted((r for r in disc_rows if r["layer"] == layer and r["head"] == 0), key=lambda r: r["extra"])
        x = [r["extra"] for r in sel]
        med = [r["median"] for r in sel]
        color = cmap(layer / max(1, len(layers) - 1))
        ax.plot(x, med, "o-", ms=3, lw=1.2, color=color, label=f"L{layer}")
        ax_rel.plot(x, [m / med[0] for m in med], "o-", ms=3, lw=1.2, color=color, label=f"L{layer}")
    ax.set(yscale="log", ylabel="median top − second score")
    ax.set_title(title or f"Discrepancy of trained heads, {task} task")
    ax.legend(fontsize=7, ncol=6)
    ax_rel.axhline(0.5, color="gray", lw=0.8, ls=":")
    ax_rel.set(yscale="log", ylabel="relative to the shortest input")
    acc = sorted(acc_rows, key=lambda r: r["extra"])
    ax_acc.plot(
        [r["extra"] for r in acc], [r["accuracy"] for r in acc], "o-", color="k", ms=3, label="accuracy (same inputs)"
    )
    if task in PAPER_FIG5B:
        ax_acc.plot(
            PAPER_FIG5B["extra"],
            PAPER_FIG5B[task],
            "s--",
            color="gray",
            ms=3,
            mfc="none",
            label="paper Fig. 5B (digitised)",
        )
    ax_acc.set(xscale="symlog", xlabel="extra tokens before the target window", ylabel="accuracy", ylim=(-0.02, 1.02))
    ax_acc.legend(fontsize=7)
    fig.tight_layout()
    return fig
