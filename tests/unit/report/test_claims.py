"""The claim rules on hand-made evidence: each verdict can come out either way."""

import dataclasses

import pytest

from possym.records import BoundCheckRecord, LengthPoint, PurityRecord, ScoreRecord
from possym.report.claims import (
    Evidence,
    TaskEvidence,
    check_claims,
    verdict_for_set,
    verdict_for_value,
)


def metrics(first: dict[str, int], total: int = 1000) -> list[dict]:
    """Eval records in which each accuracy key jumps from 0 to 1 at its given step."""
    keys = list(first)
    return [{"event": "eval", "step": s, **{k: float(s >= first[k]) for k in keys}} for s in range(0, total + 1, 50)]


def claim(claims: list[dict], text: str) -> dict:
    return next(c for c in claims if text in c["claim"])


def scores(kinds: list[str], step: int = 1000) -> list[ScoreRecord]:
    value = {"positional": (1.0, 0.0), "symbolic": (0.0, 1.0), "": (0.5, 0.5)}
    return [ScoreRecord(step, "last", i, 0, value[k][0], value[k][1], entropy=0.0, n_inputs=1)
            for i, k in enumerate(kinds)]


def purity(kinds: list[str]) -> list[PurityRecord]:
    return [PurityRecord(i, 0, "last", 0.1, k, step=0 if k else None, final_kind=k, final_kind_step=0 if k else None)
            for i, k in enumerate(kinds)]


def test_value_and_set_rules():
    assert verdict_for_value(0.78, 0.74) == "match"
    assert verdict_for_value(0.85, 0.74) == "partial"
    assert verdict_for_value(0.90, 0.74, half_width=0.2) == "match"
    assert verdict_for_value(0.20, 0.74) == "differs"
    assert verdict_for_set({0, 1, 2, 3}, {0, 1, 2, 3}) == "match"
    assert verdict_for_set({5, 6}, {0, 1, 2, 3}) == "differs"


@pytest.mark.parametrize("steps,verdict", [((100, 200, 300, 300), "match"), ((300, 200, 300, 400), "differs")])
def test_hop_order(steps, verdict):
    m = metrics({f"acc_hop{h}": s for h, s in zip(range(1, 5), steps, strict=True)} | {"accuracy": 400})
    ev = Evidence(tasks={"number": TaskEvidence(n_layers=12, metrics=m)})
    assert claim(check_claims(ev), "learned in order")["verdict"] == verdict


def test_layer_sets_need_the_papers_twelve_layers_and_follow_jaccard():
    twelve = ["positional"] * 4 + ["symbolic"] * 8
    ev = Evidence(tasks={"number": TaskEvidence(n_layers=12, purity=purity(twelve), scores=scores(twelve))})
    assert claim(check_claims(ev), "become pure positional")["verdict"] == "match"
    for shift, verdict in ((1, "partial"), (2, "differs")):  # J = 3/5, then 2/6
        shifted = ["symbolic"] * shift + ["positional"] * 4 + ["symbolic"] * (8 - shift)
        ev = Evidence(tasks={"number": TaskEvidence(n_layers=12, purity=purity(shifted), scores=scores(shifted))})
        assert claim(check_claims(ev), "become pure positional")["verdict"] == verdict
    six = ["positional"] * 2 + ["symbolic"] * 4
    ev = Evidence(tasks={"number": TaskEvidence(n_layers=6, purity=purity(six), scores=scores(six))})
    assert claim(check_claims(ev), "become pure positional")["verdict"] == "n/a"


def test_positional_layers_in_the_number_task_only():
    number = TaskEvidence(n_layers=12, scores=scores(["positional"] + ["symbolic"] * 11))
    clean = TaskEvidence(n_layers=12, scores=scores(["symbolic"] * 12))
    dirty = TaskEvidence(n_layers=12, scores=scores(["positional"] + ["symbolic"] * 11))
    assert claim(check_claims(Evidence({"number": number, "letter": clean})), "number task only")["verdict"] == "match"
    assert (
        claim(check_claims(Evidence({"number": number, "letter": dirty})), "number task only")["verdict"] == "differs"
    )


def curve(values: dict[int, float], half: float = 0.01) -> list[LengthPoint]:
    return [LengthPoint(extra=k, n_hops=0, seq_len=k + 40, accuracy=v, n=100, correct=round(100 * v), ci_low=v - half,
                        ci_high=v + half, n_prefixes=8, prefix_sd=0.0, cluster_low=v - half, cluster_high=v + half,
                        mode="cached")
            for k, v in values.items()]


def test_length_claims_compare_with_the_digitised_curve_and_each_other():
    letter = TaskEvidence(n_layers=12, lengthgen=curve({50: 1.0, 100: 1.0, 800: 0.90, 5000: 0.2}))
    number = TaskEvidence(n_layers=12, lengthgen=curve({50: 0.9, 100: 0.72, 800: 0.6, 5000: 0.04}))
    claims = check_claims(Evidence({"number": number, "letter": letter}))
    assert claim(claims, "letter task: accuracy at +800")["verdict"] == "match"  # paper 0.89
    assert claim(claims, "letter task: accuracy at +5000")["verdict"] == "differs"  # paper 0.48
    assert claim(claims, "number task: accuracy at +800")["verdict"] == "differs"  # paper 0.25
    assert claim(claims, "number task: accuracy at +100")["verdict"] == "match"  # paper 0.74
    assert claim(claims, "extrapolates much further")["verdict"] == "match"
    swapped = check_claims(Evidence({"number": letter, "letter": number}))
    assert claim(swapped, "extrapolates much further")["verdict"] == "differs"


@pytest.mark.parametrize(
    "failed,verdict",
    [({"max": 0, "min": 0}, "match"), ({"max": 3, "min": 0}, "partial"), ({"max": 3, "min": 1}, "differs")],
)
def test_bound_claims_read_the_definition_that_holds(failed, verdict):
    bounds = [BoundCheckRecord("index", d, "tasks", 0.8, "2..100", "2..100", 99, n, None, "", None, None, 0)
              for d, n in failed.items()]
    assert claim(check_claims(Evidence({}, bounds=bounds)), "Δ_Index")["verdict"] == verdict


def test_every_claim_carries_its_rule_and_a_known_verdict():
    claims = check_claims(Evidence({}))
    assert claims and all(c["rule"] and c["verdict"] in ("match", "partial", "differs", "n/a") for c in claims)


def _with_interval(rows: list[ScoreRecord], layer: int, s_pos: float, s_sym: float, half: float) -> list[ScoreRecord]:
    return [dataclasses.replace(r, s_pos=s_pos, s_sym=s_sym, s_pos_low=s_pos - half, s_pos_high=s_pos + half,
                                s_sym_low=s_sym - half, s_sym_high=s_sym + half) if r.layer == layer else r
            for r in rows]


def test_a_layer_that_straddles_gamma_neither_makes_nor_breaks_a_layer_set_claim():
    """L0 at (0.88, 0.06): mixed by its point estimate, positional within its interval. With the interval,
    the positional claim (paper: L0-L3) matches and says L0 straddles; without it, L0 is left out (partial).
    A straddling layer the paper does not list (L4) cannot break the match either."""
    kinds = ["positional"] * 4 + ["symbolic"] * 8
    base = scores(kinds)
    noisy = _with_interval(base, 0, 0.88, 0.06, 0.04)
    ev = Evidence(tasks={"number": TaskEvidence(n_layers=12, purity=purity(kinds), scores=noisy)})
    c = claim(check_claims(ev), "become pure positional")
    assert c["verdict"] == "match" and "L0 straddle" in c["ours"]
    point = [dataclasses.replace(r, s_pos_low=None, s_pos_high=None, s_sym_low=None, s_sym_high=None) for r in noisy]
    ev = Evidence(tasks={"number": TaskEvidence(n_layers=12, purity=purity(kinds), scores=point)})
    assert claim(check_claims(ev), "become pure positional")["verdict"] == "partial"
    also = _with_interval(noisy, 4, 0.5, 0.9, 0.06)  # L4 mixed, possibly symbolic; possibly-positional? no
    also = _with_interval(also, 5, 0.88, 0.06, 0.04)  # L5 possibly positional, not in the paper's set
    ev = Evidence(tasks={"number": TaskEvidence(n_layers=12, purity=purity(kinds), scores=also)})
    c = claim(check_claims(ev), "become pure positional")
    assert c["verdict"] == "match" and "L0, L5 straddle" in c["ours"]


def test_a_layer_surely_pure_still_breaks_a_claim():
    kinds = ["positional"] * 5 + ["symbolic"] * 7  # L4 surely positional, the paper says symbolic
    rows = _with_interval(scores(kinds), 4, 0.99, 0.01, 0.005)
    ev = Evidence(tasks={"number": TaskEvidence(n_layers=12, purity=purity(kinds), scores=rows)})
    assert claim(check_claims(ev), "become pure positional")["verdict"] == "partial"  # J = 4/5
