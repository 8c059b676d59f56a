"""The docs/heads.md row that `make heads-gemma` rewrites from a run's summary.json."""

from __future__ import annotations

from pathlib import Path

import pytest

from possym.heads.table import replace_row, summary_row

DOCS = Path(__file__).resolve().parents[3] / "docs" / "heads.md"
GEMMA = "Gemma-3-270M · binding, 16 pairs"


def test_the_committed_gemma_row_is_one_that_summary_row_writes():
    (row,) = [line for line in DOCS.read_text().splitlines() if line.startswith(f"| {GEMMA} |")]
    cells = [c.strip() for c in row.strip("|").split("|")]
    pos, sym, r, acc = cells[1:]
    (pe, pl), (se, sl) = (tuple(map(float, s.split(" → "))) for s in (pos, sym))
    r_value, p_value = r.removesuffix(")").split(" (p ")
    summary = {"median_s_pos_early": pe, "median_s_pos_late": pl, "median_s_sym_early": se,
               "median_s_sym_late": sl, "pearson_r": float(r_value.replace("−", "-")), "pearson_p": float(p_value),
               "accuracy": float(acc)}
    assert summary_row(GEMMA, summary) == row


def test_replace_row_changes_only_the_labelled_row():
    text = DOCS.read_text()
    new = replace_row(text, GEMMA, f"| {GEMMA} | x |")
    changed = [(a, b) for a, b in zip(text.split("\n"), new.split("\n"), strict=True) if a != b]
    assert len(changed) == 1 and changed[0][1] == f"| {GEMMA} | x |"


def test_a_label_without_exactly_one_row_is_refused():
    with pytest.raises(ValueError, match="found 0"):
        replace_row("| a | 1 |\n", "b", "| b | 2 |")
    with pytest.raises(ValueError, match="found 2"):
        replace_row("| a | 1 |\n| a | 2 |\n", "a", "| a | 3 |")


def test_a_run_without_accuracy_shows_a_dash_and_a_positive_r_no_minus():
    summary = {"median_s_pos_early": 0.5, "median_s_pos_late": 0.25, "median_s_sym_early": 0.5,
               "median_s_sym_late": 0.75, "pearson_r": 0.4, "pearson_p": 0.031, "accuracy": None}
    assert summary_row("m", summary) == "| m | 0.50 → 0.25 | 0.50 → 0.75 | 0.40 (p 3e-02) | — |"
