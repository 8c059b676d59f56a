"""The verdict rules on synthetic grids whose answer is known."""

from __future__ import annotations

import dataclasses

import numpy as np

from possym.canonical.claims import canonical_claims, length_claim
from possym.canonical.grid import wmax_rows
from possym.canonical.records import CellRecord, PositionRecord

CONDITIONS = ("band1", "band2", "band3", "nope", "two_angle")
SEEDS = (0, 1, 2)
CHANCE = {"index": 1 / 32, "retrieval": 1 / 8, "induction": 1 / 8}  # 1/values at the grid's sizes
U = np.array([1.0, 0.5, 0.3, 0.25, 0.25, 0.3, 0.5, 1.0])


def _grid(acc: dict[tuple[str, str], float], curve: dict[tuple[str, str], np.ndarray] | None = None):
    runs, positions = [], []
    for (task, cond), a in acc.items():
        for seed in SEEDS:
            positional = task == "index"
            runs.append(
                CellRecord(
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
            positions += [PositionRecord(task, cond, seed, 8, p, int(round(c[p] * 500)), 500) for p in range(8)]
    return runs, positions


def _claims(acc, curve=None, wmax=None):
    runs, positions = _grid(acc, curve)
    wmax = wmax_rows(n_content=8) if wmax is None else wmax
    return canonical_claims(CONDITIONS, 8, CHANCE, runs, positions, wmax, np.random.default_rng(0))


def _verdicts(acc, curve=None, wmax=None):
    return {c.claim.split(":")[0].split(" under")[0].split(", at")[0]: c.verdict for c in _claims(acc, curve, wmax)}


def _verdict(claims, start: str) -> str:
    return next(c.verdict for c in claims if c.claim.startswith(start))


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
    assert v["Partial induction"] == "match"  # Thm 6 and Cor. 1's symbolic half
    assert v["Index"] == "match" and v["Retrieval"] == "match"  # the U and the inverted U
    claims = _claims(PAPER, {("index", "band2"): U * 0.6 + 0.2, ("retrieval", "band1"): 1.2 - U * 0.8})
    assert _verdict(claims, "Theorem 7: w_max(j) of H_POS") == "match"


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


def test_partial_induction_solved_by_a_single_band_refutes_needs_but_not_theorem_6():
    """The claim says only the two-angle head (or both bands) solves f_MIX: a single moderate band solving it at
    0.95 makes it differ, while Theorem 6 (the two-angle head solves it) and Cor. 1 (NoPE does not) still hold."""
    claims = _claims({**PAPER, ("induction", "band2"): 0.95})
    assert _verdict(claims, "Partial induction needs") == "differs"
    assert _verdict(claims, "Partial induction: θ₁ = 0") == "match"
    claims = _claims({**PAPER, ("induction", "band2"): 0.89})  # just below solved
    assert _verdict(claims, "Partial induction needs") == "match"
    claims = _claims({**PAPER, ("induction", "nope"): 0.95})
    assert _verdict(claims, "Partial induction needs") == "differs"
    assert _verdict(claims, "Partial induction: θ₁ = 0") == "partial"  # NoPE, pure symbolic, solves it


def test_theorem7_for_h_sym_is_graded_under_both_pre_rotations():
    """Centred (c = (N+1)/2) the simplified symbolic head is an inverted U; unrotated (c = 0) monotone: partial.
    Curves inverted-U under both readings would match; under neither, differ."""
    rows = wmax_rows(n_content=8)
    assert {r.shape for r in rows if r.head == "H_SYM_c0"} == {"none"}
    assert _verdict(_claims(PAPER, wmax=rows), "Theorem 7: w_max(j) of a simplified H_SYM") == "partial"
    both = [dataclasses.replace(r, shape="inverted-U") if r.head == "H_SYM_c0" else r for r in rows]
    assert _verdict(_claims(PAPER, wmax=both), "Theorem 7: w_max(j) of a simplified H_SYM") == "match"
    neither = [dataclasses.replace(r, shape="none") if r.head.startswith("H_SYM") else r for r in rows]
    assert _verdict(_claims(PAPER, wmax=neither), "Theorem 7: w_max(j) of a simplified H_SYM") == "differs"


def _length_runs(drops: dict[tuple[str, str], float]) -> list[CellRecord]:
    runs, _ = _grid({k: 1.0 for k in drops})
    return [dataclasses.replace(r, acc_2x=1.0 - drops[r.task, r.condition] / 2, acc_4x=1.0 - drops[r.task, r.condition])
            for r in runs]


def test_the_length_claim_compares_index_and_retrieval_heads_of_one_condition_at_equal_theta_l():
    """Index loses 0.30 at 4x where Retrieval on the same planes loses 0.10: holds. A Retrieval head on other planes
    losing 0.60 (band3 in the grid) does not enter: it is not at the same θ·L. Index losing only 0.04 more: fails."""
    runs = _length_runs({("index", "band1"): 0.30, ("retrieval", "band1"): 0.10, ("retrieval", "band3"): 0.60})
    c = length_claim(runs, 8)
    assert c.verdict == "match" and "retrieval/band3" in c.ours
    runs = _length_runs({("index", "band1"): 0.14, ("retrieval", "band1"): 0.10})
    assert length_claim(runs, 8).verdict == "differs"
    runs = _length_runs({("index", "band1"): 0.30, ("retrieval", "band3"): 0.10})
    assert length_claim(runs, 8).verdict == "n/a"  # no condition that both solve
