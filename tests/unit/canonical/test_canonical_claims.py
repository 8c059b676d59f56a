"""The verdict rules on synthetic grids whose answer is known."""

from __future__ import annotations

import numpy as np

from possym.canonical.claims import canonical_claims
from possym.canonical.grid import GridConfig, wmax_rows
from possym.canonical.records import PositionRow, RunRow

GRID = GridConfig(conditions=("band1", "band2", "band3", "nope", "two_angle"), seeds=(0, 1, 2))
U = np.array([1.0, 0.5, 0.3, 0.25, 0.25, 0.3, 0.5, 1.0])


def _grid(acc: dict[tuple[str, str], float], curve: dict[tuple[str, str], np.ndarray] | None = None):
    runs, positions = [], []
    for (task, cond), a in acc.items():
        for seed in GRID.seeds:
            positional = task == "index"
            runs.append(
                RunRow(
                    task=task,
                    condition=cond,
                    seed=seed,
                    head=0,
                    planes="1,2",
                    theta_centre=0.5,
                    acc=a,
                    acc_2x=a - 0.1,
                    acc_4x=a - 0.2,
                    s_pos=1.0 if positional else 0.0,
                    s_sym=0.0 if positional else 1.0,
                    entropy=0.1,
                    dominant_id=1,
                    dominant_s_pos=1.0 if positional else 0.0,
                    dominant_s_sym=0.0 if positional else 1.0,
                    key_collapse=1.0,
                    query_alignment=0.95,
                    query_alignment_shuffled=0.2,
                    train_s=1.0,
                )
            )
            c = (curve or {}).get((task, cond), np.full(8, a))
            positions += [PositionRow(task, cond, seed, 8, p, int(round(c[p] * 500)), 500) for p in range(8)]
    return runs, positions


def _verdicts(acc, curve=None):
    runs, positions = _grid(acc, curve)
    claims = canonical_claims(GRID, runs, positions, wmax_rows(n_content=8), np.random.default_rng(0))
    return {c.claim.split(":")[0].split(" under")[0]: c.verdict for c in claims}


PAPER = {
    ("index", "band1"): 1.0,
    ("index", "band2"): 0.5,
    ("index", "band3"): 0.2,
    ("index", "nope"): 0.2,
    ("index", "two_angle"): 0.5,
    ("retrieval", "band1"): 0.6,
    ("retrieval", "band2"): 1.0,
    ("retrieval", "band3"): 1.0,
    ("retrieval", "nope"): 1.0,
    ("retrieval", "two_angle"): 1.0,
    ("induction", "band1"): 0.4,
    ("induction", "band2"): 0.6,
    ("induction", "band3"): 0.5,
    ("induction", "nope"): 0.5,
    ("induction", "two_angle"): 0.97,
}


def test_a_grid_that_behaves_as_the_paper_says_matches() -> None:
    v = _verdicts(PAPER, {("index", "band2"): U * 0.6 + 0.2, ("retrieval", "band1"): 1.2 - U * 0.8})
    assert v["Index is solved only with high-frequency planes"] == "match"
    assert v["Retrieval is solved only with low-frequency planes or NoPE"] == "match"
    assert v["Partial induction needs the two-angle head (or both bands)"] == "match"
    assert v["Index"] == "match" and v["Retrieval"] == "match"  # the U and the inverted U
    assert v["Theorem 7"] == "match"


def test_a_grid_that_behaves_the_other_way_differs() -> None:
    flipped = {
        **PAPER,
        ("index", "band1"): 0.2,
        ("index", "band3"): 1.0,
        ("retrieval", "nope"): 0.3,
        ("retrieval", "band3"): 0.3,
        ("retrieval", "band1"): 1.0,
        ("induction", "two_angle"): 0.5,
    }
    v = _verdicts(flipped, {("index", "band2"): 1.2 - U * 0.8})  # an inverted U where a U was claimed
    assert v["Index is solved only with high-frequency planes"] == "differs"
    assert v["Retrieval is solved only with low-frequency planes or NoPE"] == "differs"
    assert v["Partial induction needs the two-angle head (or both bands)"] == "differs"
    assert v["Index"] == "differs"


def test_a_flat_curve_between_floor_and_solved_is_not_a_u() -> None:
    v = _verdicts(PAPER)  # every curve flat
    assert v["Index"] == "differs"
