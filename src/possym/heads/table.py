"""A ``possym heads`` summary as a row of the results tables in docs/heads.md.

The columns: median s_pos over the early and the late half of the layers, the same for s_sym, Pearson's
r across heads with its p, and the next-token accuracy (:func:`possym.heads.scores.depth_summary`).

Example:
    >>> summary = {"median_s_pos_early": 0.981, "median_s_pos_late": 0.6, "median_s_sym_early": 0.44,
    ...            "median_s_sym_late": 0.877, "pearson_r": -0.8614, "pearson_p": 1.2e-21, "accuracy": 0.3}
    >>> summary_row("Gemma-3-270M · binding, 16 pairs", summary)
    '| Gemma-3-270M · binding, 16 pairs | 0.98 → 0.60 | 0.44 → 0.88 | −0.86 (p 1e-21) | 0.30 |'
"""

from __future__ import annotations

from typing import Any


def _signed(x: float) -> str:
    return f"{x:.2f}".replace("-", "−")  # the docs' tables use the minus sign, not a hyphen


def summary_row(label: str, summary: dict[str, Any]) -> str:
    """The markdown row of one run: label, s_pos early → late, s_sym early → late, r (p), accuracy."""
    s = summary
    accuracy = "—" if s.get("accuracy") is None else f"{s['accuracy']:.2f}"
    return (f"| {label} | {s['median_s_pos_early']:.2f} → {s['median_s_pos_late']:.2f} "
            f"| {s['median_s_sym_early']:.2f} → {s['median_s_sym_late']:.2f} "
            f"| {_signed(s['pearson_r'])} (p {s['pearson_p']:.0e}) | {accuracy} |")


def replace_row(markdown: str, label: str, row: str) -> str:
    """``markdown`` with its one table row whose first cell is ``label`` replaced by ``row``."""
    lines = markdown.split("\n")
    hits = [i for i, line in enumerate(lines) if line.startswith(f"| {label} |")]
    if len(hits) != 1:
        raise ValueError(f"expected one table row labelled {label!r}, found {len(hits)}")
    lines[hits[0]] = row
    return "\n".join(lines)
