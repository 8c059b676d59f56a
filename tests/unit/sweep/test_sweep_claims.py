"""Robustness of a claim across seeds, in words, from its per-seed verdicts."""

from __future__ import annotations

import pytest

from possym.sweep.claims import robustness


@pytest.mark.parametrize(
    ("verdicts", "words"),
    [
        (["match", "match", "match"], "holds for every seed"),
        (["match", "partial", "match"], "holds qualitatively for every seed"),
        (["differs", "differs"], "fails for every seed"),
        (["match", "differs", "partial"], "varies (match ×1, partial ×1, differs ×1)"),
        (["match", "n/a", "match"], "holds for every seed (judged on 2 of 3 seeds)"),
        (["n/a", "n/a"], "n/a"),
    ],
)
def test_robustness_names_what_every_judged_seed_says(verdicts, words):
    assert robustness(verdicts) == words
