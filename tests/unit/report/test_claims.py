"""The claims on hand-made evidence over seeds: each verdict can come out either way, and a result on the
wrong side of its rule's threshold flips it."""

import dataclasses

import pytest

from possym.records import BoundCheckRecord, ClaimRecord, LengthRecord, ScoreRecord, Table1Record
from possym.report.claims import Evidence, TaskEvidence, check_claims
from possym.report.rules import VERDICTS

VALUE = {"positional": (1.0, 0.0), "symbolic": (0.0, 1.0), "": (0.5, 0.5)}
PAPER_NUMBER = ["positional"] * 4 + ["symbolic"] * 8  # Fig. 2C's sets


def metrics(first: dict[str, int], total: int = 1000) -> list[dict]:
    """Eval records in which each accuracy key jumps from 0 to 1 at its given step."""
    return [{"event": "eval", "step": s, **{k: float(s >= first[k]) for k in first}} for s in range(0, total + 1, 50)]


def claim(claims: list[ClaimRecord], text: str) -> ClaimRecord:
    return next(c for c in claims if text in c.claim)


def scores(kinds: list[str], step: int = 1000) -> list[ScoreRecord]:
    return [ScoreRecord(step, "last", i, 0, VALUE[k][0], VALUE[k][1], entropy=0.0, n_inputs=1)
            for i, k in enumerate(kinds)]


def te(seed: int, **kw) -> TaskEvidence:
    return TaskEvidence(n_layers=kw.pop("n_layers", 12), seed=seed, **kw)


def verdict(ev: Evidence, text: str) -> str:
    return claim(check_claims(ev), text).verdict


def with_interval(rows: list[ScoreRecord], layer: int, s_pos: float, s_sym: float, half: float) -> list[ScoreRecord]:
    return [dataclasses.replace(r, s_pos=s_pos, s_sym=s_sym, s_pos_low=s_pos - half, s_pos_high=s_pos + half,
                                s_sym_low=s_sym - half, s_sym_high=s_sym + half) if r.layer == layer else r
            for r in rows]


IN_ORDER = {"acc_hop1": 100, "acc_hop2": 200, "acc_hop3": 300, "acc_hop4": 300, "accuracy": 400}
OUT_OF_ORDER = {"acc_hop1": 300, "acc_hop2": 200, "acc_hop3": 300, "acc_hop4": 400, "accuracy": 400}


@pytest.mark.parametrize("n_ordered,want", [(3, "match"), (2, "partial"), (1, "differs")])
def test_hop_order_must_hold_at_every_seed_to_match(n_ordered, want):
    runs = [te(s, metrics=metrics(IN_ORDER if s < n_ordered else OUT_OF_ORDER)) for s in range(3)]
    c = claim(check_claims(Evidence({"number": runs})), "learned in order")
    assert c.verdict == want and c.seeds == "0,1,2" and c.per_seed.startswith("s0 100 / 200")


def test_layer_sets_are_graded_on_the_set_most_seeds_give():
    shifted = ["symbolic"] + ["positional"] * 4 + ["symbolic"] * 7  # L1-L4: J = 3/5
    far = ["symbolic"] * 2 + ["positional"] * 4 + ["symbolic"] * 6  # L2-L5: J = 2/6
    cases = [([PAPER_NUMBER] * 3, "match"), ([PAPER_NUMBER, shifted, shifted], "partial"),
             ([PAPER_NUMBER, far, far], "differs")]
    for kinds, want in cases:
        ev = Evidence({"number": [te(s, scores=scores(k)) for s, k in enumerate(kinds)]})
        assert verdict(ev, "become pure positional") == want
    six = ["positional"] * 2 + ["symbolic"] * 4
    assert verdict(Evidence({"number": [te(0, n_layers=6, scores=scores(six))]}), "become pure positional") == "n/a"


def test_a_tie_for_most_seeds_is_graded_on_the_set_furthest_from_the_paper():
    shifted = ["symbolic"] + ["positional"] * 4 + ["symbolic"] * 7
    far = ["symbolic"] * 2 + ["positional"] * 4 + ["symbolic"] * 6
    ev = Evidence({"number": [te(0, scores=scores(PAPER_NUMBER)), te(1, scores=scores(shifted)),
                              te(2, scores=scores(far))]})
    c = claim(check_claims(ev), "become pure positional")
    assert c.verdict == "differs" and "{L2, L3, L4, L5}" in c.ours and "tie" in c.ours


def test_a_layer_that_straddles_gamma_is_listed_and_never_counted():
    """L0 at (0.88, 0.06): mixed by its point estimate, positional within its interval. It is left out of the set
    (partial against the paper's L0-L3) and named beside it; a straddler the paper does not list (L5) is left
    out too, so it cannot break a match either."""
    noisy = with_interval(scores(PAPER_NUMBER), 0, 0.88, 0.06, 0.04)
    c = claim(check_claims(Evidence({"number": [te(0, scores=noisy)]})), "become pure positional")
    assert c.verdict == "partial" and "{L0} at s0" in c.ours and c.per_seed == "s0 {L1, L2, L3}"
    extra = with_interval(scores(PAPER_NUMBER), 5, 0.88, 0.06, 0.04)
    c = claim(check_claims(Evidence({"number": [te(0, scores=extra)]})), "become pure positional")
    assert c.verdict == "match" and "{L5} at s0" in c.ours


def test_positional_layers_in_the_number_task_only_by_point_estimates():
    number = scores(["", "positional"] + ["symbolic"] * 10)
    clean = scores(["symbolic"] * 12)
    dirty = scores(["positional"] + ["symbolic"] * 11)
    maybe = with_interval(clean, 0, 0.88, 0.06, 0.04)  # might be pure positional: does not count
    for letter, want in ((clean, "match"), (maybe, "match"), (dirty, "differs")):
        ev = Evidence({"number": [te(0, scores=number)], "letter": [te(0, scores=letter)]})
        assert verdict(ev, "number task only") == want
    only_maybe = with_interval(scores(["symbolic"] * 12), 1, 0.88, 0.06, 0.04)  # a number layer that might be
    ev = Evidence({"number": [te(0, scores=only_maybe)], "letter": [te(0, scores=clean)]})
    assert verdict(ev, "number task only") == "differs"
    two = Evidence({"number": [te(0, scores=number), te(1, scores=number)],
                    "letter": [te(0, scores=clean), te(1, scores=dirty)]})
    assert verdict(two, "number task only") == "differs"  # 1 of 2 seeds is not most


@pytest.mark.parametrize("n_pure,want", [(11, "match"), (10, "match"), (9, "partial"), (8, "partial"), (7, "differs")])
def test_the_count_of_pure_heads_at_the_end_flips_past_one_and_three(n_pure, want):
    kinds = [""] * (12 - n_pure) + ["symbolic"] * n_pure
    ev = Evidence({"letter": [te(s, scores=scores(kinds)) for s in range(2)]})
    assert verdict(ev, "letter task: pure heads at the end") == want


def curve(values: dict[int, float], half: float = 0.01, step: int | None = None) -> list[LengthRecord]:
    return [LengthRecord(extra=k, n_hops=0, seq_len=k + 40, accuracy=v, n=100, correct=round(100 * v), ci_low=v - half,
                        ci_high=v + half, n_prefixes=8, prefix_sd=0.0, cluster_low=v - half, cluster_high=v + half,
                        mode="cached", step=step)
            for k, v in values.items()]


def test_an_accuracy_is_graded_on_a_new_seeds_prediction_interval_against_the_papers_interval():
    """The paper's +100 is 0.74 (±0.01 read off, binomial at 500 inputs): four tight seeds near 0.35 differ, near
    0.57 are within a factor 2 in odds (partial), around 0.74 match; each seed has its own verdict, and the claim
    carries its p-value and the verdicts at the other sample sizes."""
    def runs(*acc):
        return [te(s, lengthgen=curve({100: a}, 0.04)) for s, a in enumerate(acc)]

    c = claim(check_claims(Evidence({"number": runs(0.33, 0.34, 0.35, 0.36)})), "number task: accuracy at +100")
    assert c.verdict == "differs" and c.paper_value == 0.74 and (c.seed_min, c.seed_max) == (0.33, 0.36)
    assert c.p_value is not None and c.p_value < 0.05 and c.seed_verdict_counts == "differs at 4 seeds"
    assert "n = 100" in c.paper_uncertainty and "n = 2400" in c.paper_uncertainty
    assert c.reading.startswith("uniform hop mix, best checkpoint")
    assert verdict(Evidence({"number": runs(0.55, 0.56, 0.57, 0.58)}), "number task: accuracy at +100") == "partial"
    c = claim(check_claims(Evidence({"number": runs(0.70, 0.72, 0.74, 0.76)})), "number task: accuracy at +100")
    assert c.verdict == "match" and c.p_value > 0.05
    assert c.seed_verdicts == "s0 match; s1 match; s2 match; s3 match"


def test_the_length_readings_regrade_the_same_seeds_under_each_hop_mix_and_checkpoint():
    """Per-hop points: 1-hop windows at 0.98, the rest at 0.60. The uniform mix (pooled 0.70) matches the paper's
    0.74; 1 hop alone does not; the fitted mix is a reading, never the graded one."""
    def points(acc_by_hop, step):
        pooled = sum(acc_by_hop.values()) / 4
        return [dataclasses.replace(p, n_hops=h, step=step) for h, a in acc_by_hop.items()
                for p in curve({100: a}, 0.02)] + curve({100: pooled}, 0.02, step)

    best = points({1: 0.98, 2: 0.60, 3: 0.60, 4: 0.60}, 100)
    final = points({1: 0.98, 2: 0.98, 3: 0.98, 4: 0.98}, 200)
    runs = [te(s, lengthgen=best, lengthgen_final=final) for s in range(3)]
    c = claim(check_claims(Evidence({"number": runs})), "number task: accuracy at +100")
    readings = dict(r.split(": ") for r in c.readings.split("; "))
    assert c.verdict == readings["uniform hop mix, best checkpoint"] == "match"
    assert readings["1 hop only, best checkpoint"] == "differs"
    assert readings["uniform hop mix, final checkpoint"] == "differs"
    assert "fitted hop mix (after the fact), best checkpoint" in readings
    assert c.robustness == "reading-dependent" and "fitted hop mix" in c.paper_uncertainty


def test_an_accuracy_at_the_floor_for_us_and_the_paper_is_uninformative():
    """The paper's +5000 is 0.04 on the number task, chance 1/120: at the floor, so 0.02 says nothing."""
    low = [te(s, chance=1 / 120, lengthgen=curve({5000: 0.02})) for s in range(2)]
    c = claim(check_claims(Evidence({"number": low})), "number task: accuracy at +5000")
    assert c.verdict == "uninformative" and "chance 0.0083" in c.ours
    high = [te(s, chance=1 / 120, lengthgen=curve({5000: a})) for s, a in enumerate((0.02, 0.30))]
    assert verdict(Evidence({"number": high}), "number task: accuracy at +5000") == "match"  # one seed off the floor
    high = [te(s, chance=1 / 120, lengthgen=curve({5000: a})) for s, a in enumerate((0.30, 0.31, 0.33, 0.35))]
    assert verdict(Evidence({"number": high}), "number task: accuracy at +5000") == "differs"


def test_an_accuracy_at_the_ceiling_for_us_and_the_paper_is_its_own_verdict():
    """The paper's letter +100 is 1.00: seeds at 0.995 are within the figure's resolution (ceiling); seeds at 0.98
    are not, and are graded (the paper's interval reaches 0.982 at 500 inputs: match)."""
    top = [te(s, lengthgen=curve({100: 0.995}, 0.005)) for s in range(3)]
    assert verdict(Evidence({"letter": top}), "letter task: accuracy at +100") == "ceiling"
    near = [te(s, lengthgen=curve({100: a}, 0.01)) for s, a in enumerate((0.97, 0.98, 0.985))]
    assert verdict(Evidence({"letter": near}), "letter task: accuracy at +100") == "match"
    low = [te(s, lengthgen=curve({100: a}, 0.01)) for s, a in enumerate((0.80, 0.81, 0.82, 0.83))]
    assert verdict(Evidence({"letter": low}), "letter task: accuracy at +100") == "differs"


def test_the_length_claims_name_each_seeds_checkpoint():
    runs = [te(s, lengthgen=curve({100: 1.0}), lengthgen_step=f"best {100 * (s + 1)}") for s in range(2)]
    c = claim(check_claims(Evidence({"letter": runs})), "letter task: accuracy at +100")
    assert c.step == "s0 best 100; s1 best 200" and c.verdict == "ceiling"
    same = [dataclasses.replace(r, lengthgen_step="best 100") for r in runs]
    assert claim(check_claims(Evidence({"letter": same})), "letter task: accuracy at +100").step == "best 100"


def test_the_letter_model_extrapolating_further_is_checked_seed_by_seed():
    letter = curve({50: 1.0, 100: 1.0, 800: 0.9})
    number = curve({50: 0.9, 100: 0.7, 800: 0.2})
    ev = Evidence({"number": [te(0, lengthgen=number), te(1, lengthgen=number)],
                   "letter": [te(0, lengthgen=letter), te(1, lengthgen=letter)]})
    assert verdict(ev, "extrapolates much further") == "match"
    ev = Evidence({"number": [te(0, lengthgen=number), te(1, lengthgen=letter)],
                   "letter": [te(0, lengthgen=letter), te(1, lengthgen=number)]})
    assert verdict(ev, "extrapolates much further") == "differs"


def test_the_letter_task_before_the_number_task_pairs_seeds_and_reports_a_two_group_test():
    early = [metrics({"accuracy": 200 + 50 * s}) for s in range(3)]
    late = [metrics({"accuracy": 400 + 50 * s}) for s in range(3)]
    ev = Evidence({"number": [te(s, metrics=late[s]) for s in range(3)],
                   "letter": [te(s, metrics=early[s]) for s in range(3)]})
    c = claim(check_claims(ev), "letter task is learned before")
    assert c.verdict == "match" and "exact permutation p" in c.ours and c.p_value == pytest.approx(0.1)
    ev = Evidence({"number": [te(s, metrics=late[s] if s else early[s]) for s in range(3)],
                   "letter": [te(s, metrics=early[s] if s else late[s]) for s in range(3)]})
    c = claim(check_claims(ev), "letter task is learned before")
    assert c.verdict == "partial" and c.seed_verdict_counts == "match at 2 seeds, differs at 1"


def test_the_step_of_maximum_accuracy_is_a_number_with_the_evaluation_spacing_as_its_interval():
    log = [{"event": "eval", "step": 6750, "accuracy": 1.0}]

    def runs(*best):
        return [te(s, best_step=b, eval_every=50, metrics=log) for s, b in enumerate(best)]

    # The paper's 4800 ± 100 against four seeds: a prediction interval [~4205, ~4495] is within 480 (10%) of 4700
    # (partial); [~3805, ~4095] is not (differs); seeds around 4750 match.
    assert verdict(Evidence({"number": runs(4700, 4750, 4750, 4800)}), "number task: step of maximum") == "match"
    assert verdict(Evidence({"number": runs(4300, 4350, 4350, 4400)}), "number task: step of maximum") == "partial"
    assert verdict(Evidence({"number": runs(3900, 3950, 3950, 4000)}), "number task: step of maximum") == "differs"
    short = [te(0, best_step=4800, eval_every=50, metrics=[{"event": "eval", "step": 30, "accuracy": 1.0}])]
    assert verdict(Evidence({"number": short}), "number task: step of maximum") == "n/a"  # not the paper's 6750 steps


def steps_of(kinds_by_step: dict[int, list[str]]) -> list[ScoreRecord]:
    return [r for step, kinds in kinds_by_step.items() for r in scores(kinds, step)]


def test_accuracy_converging_before_a_head_turns_pure_differs_and_after_matches():
    """Sec. 3.1: L0 turns pure at step 200. The best checkpoint at 300 comes after it (holds); at 100, before it.
    A seed that never reaches 0.9 cannot judge the claim; one that does with no pure layer refutes it."""
    rows = steps_of({100: [""] * 12, 200: ["symbolic"] * 12, 300: ["symbolic"] * 12})
    acc = metrics({"accuracy": 100})
    after = [te(s, scores=rows, metrics=acc, best_step=300) for s in range(2)]
    assert verdict(Evidence({"letter": after}), "letter task: accuracy converges only once") == "match"
    before = [te(0, scores=rows, metrics=acc, best_step=300), te(1, scores=rows, metrics=acc, best_step=100)]
    c = claim(check_claims(Evidence({"letter": before})), "letter task: accuracy converges only once")
    assert c.verdict == "differs" and "pure only later" in c.per_seed
    unlearned = [*after, te(2, scores=rows, metrics=metrics({"accuracy": 5000}), best_step=300)]
    c = claim(check_claims(Evidence({"letter": unlearned})), "letter task: accuracy converges only once")
    assert c.verdict == "match" and c.seeds == "0,1"
    mixed = steps_of({100: [""] * 12, 300: [""] * 12})
    none = [te(s, scores=mixed, metrics=acc, best_step=300) for s in range(2)]
    assert verdict(Evidence({"letter": none}), "letter task: accuracy converges only once") == "differs"


def test_k_hop_accuracy_above_0_9_with_fewer_than_k_minus_one_positional_layers_refutes_the_hop_claim():
    """Sec. 3.3 on constructed runs, as onsets: a seed solving 4 hops with 1 pure positional layer by then is a
    counterexample (it needs 3, the k − 1 that the paper's own Fig. 2A/2C allow); with 4 it is not; a 4-hop
    accuracy of 0.89 is not "solved". Solving 2 hops with one layer passes k − 1 and fails the pre-registered k."""
    one = scores(["", "positional"] + ["symbolic"] * 10, 1000)
    four = scores(["positional"] * 4 + ["symbolic"] * 8, 1000)

    def run(seed, rows, acc4):
        m = [{"event": "eval", "step": 1000, "accuracy": 1.0, "acc_hop1": 1.0, "acc_hop2": 1.0, "acc_hop3": 0.5,
              "acc_hop4": acc4}]
        return te(seed, scores=rows, metrics=m)

    c = claim(check_claims(Evidence({"number": [run(0, one, 0.95), run(1, one, 0.95)]})), "n hops need n")
    assert c.verdict == "differs" and "4-hop at 1000: 1 pure positional by then" in c.per_seed
    assert verdict(Evidence({"number": [run(0, four, 0.95), run(1, four, 0.95)]}), "n hops need n") == "match"
    c = claim(check_claims(Evidence({"number": [run(0, one, 0.89), run(1, one, 0.89)]})), "n hops need n")
    assert c.verdict == "match" and "k layers (pre-registered): differs" in c.readings
    assert c.robustness == "reading-dependent"
    unsolved = te(0, scores=one, metrics=[{"event": "eval", "step": 1000, "accuracy": 0.3, "acc_hop1": 0.5}])
    assert verdict(Evidence({"number": [unsolved]}), "n hops need n") == "n/a"  # nothing solved: nothing to test


def at_query(rows: list[ScoreRecord], query: str) -> list[ScoreRecord]:
    return [dataclasses.replace(r, query=query) for r in rows]


def test_the_hop_claim_is_graded_at_the_hop_queries_where_a_run_was_scored_there():
    """Sec. 3.3 where the mechanism works: 4 hops solved at 1000 with one layer pure positional at the last token
    but four pure positional at some hop query (L0-L1 at hop1, L2-L3 at hop2) holds at the hop queries, which are
    graded; the last token's reading stays beside it. Swapping the last token's and the hop queries' layers swaps
    the verdicts."""
    solved = [{"event": "eval", "step": 1000, "accuracy": 1.0, **{f"acc_hop{k}": 1.0 for k in range(1, 5)}}]
    one = scores(["", "positional"] + ["symbolic"] * 10, 0) + scores(["", "positional"] + ["symbolic"] * 10)
    hop1 = scores(["positional"] * 2 + ["symbolic"] * 10)
    hop2 = scores(["symbolic"] * 2 + ["positional"] * 2 + ["symbolic"] * 8)
    early = at_query(scores([""] * 12, 0), "hop1") + at_query(scores([""] * 12, 0), "hop2")
    rows = one + early + at_query(hop1, "hop1") + at_query(hop2, "hop2")
    runs = [te(s, scores=rows, metrics=solved) for s in range(2)]
    c = claim(check_claims(Evidence({"number": runs})), "n hops need n")
    assert c.verdict == "match" and c.reading == "k − 1 layers at the hop queries"
    assert "k − 1 layers (calibrated on Fig. 2A/2C): differs" in c.readings and "(hop queries)" in c.ours
    assert "4-hop at 1000: 4 pure positional by then" in c.per_seed
    four = scores(["positional"] * 4 + ["symbolic"] * 8)
    swapped = scores([""] * 12, 0) + four + at_query(one, "hop1")
    runs = [te(s, scores=swapped, metrics=solved) for s in range(2)]
    c = claim(check_claims(Evidence({"number": runs})), "n hops need n")
    assert c.verdict == "differs" and "k − 1 layers (calibrated on Fig. 2A/2C): match" in c.readings
    # Seeds scored at the hop queries apart (a retrain) grade that reading; the reproduction's seeds the other.
    last_only = [te(s, scores=one, metrics=solved) for s in range(3)]
    hop_runs = [te(0, scores=rows, metrics=solved)]
    c = claim(check_claims(Evidence({"number": last_only}, hop_queries={"number": hop_runs})), "n hops need n")
    assert c.verdict == "match" and c.seeds == "0" and "holds at 0 of 3 seeds at the last token" in c.ours


def test_the_letter_purify_claim_is_graded_at_the_hop_queries_where_a_run_was_scored_there():
    """The last layer to turn pure symbolic at 2000 at the last token but at 500 at a hop query, with the global
    accuracy at 0.9 from 1000: differs at the last token and holds at the hop queries."""
    late = scores(["symbolic"] * 11 + [""], 500) + scores(["symbolic"] * 12, 2000)
    hop = at_query(scores(["symbolic"] * 12, 500), "hop1")
    runs = [te(s, scores=late + hop, metrics=metrics({"accuracy": 1000}, 2000)) for s in range(2)]
    c = claim(check_claims(Evidence({"letter": runs})), "hops are learned as the layers purify")
    assert c.verdict == "match" and c.reading == "at the hop queries" and "at the last token: differs" in c.readings
    runs = [te(s, scores=late, metrics=metrics({"accuracy": 1000}, 2000)) for s in range(2)]
    c = claim(check_claims(Evidence({"letter": runs})), "hops are learned as the layers purify")
    assert c.verdict == "differs" and c.reading == "at the last token" and not c.readings


def table1(ids: list[float], step: int = 1000) -> list[Table1Record]:
    return [Table1Record(step, layer, 0, i, 1, 1.0, 1) for layer, i in enumerate(ids)]


def test_table1_counts_only_valid_ids_within_three_of_the_papers():
    paper = [1, 2, 2, 2, 10, 39, 38, 38, 38, 37, 37, 38]
    ev = Evidence({"number": [te(0, table1=table1(paper))]})
    assert verdict(ev, "number task: Table 1") == "match"
    invalid = [0.5, -1.0, 0.0, 2.0, *paper[4:]]  # within 3 of 1, 2, 2 but outside the plane range
    c = claim(check_claims(Evidence({"number": [te(0, table1=table1(invalid))]})), "number task: Table 1")
    assert c.verdict == "partial" and "invalid" in c.per_seed and "9 of 12" in c.ours
    ten = [*paper[:10], 30.0, 30.0]  # 10 agree: match; 9: partial
    assert verdict(Evidence({"number": [te(0, table1=table1(ten))]}), "number task: Table 1") == "match"
    nine = [*paper[:9], 30.0, 30.0, 30.0]
    assert verdict(Evidence({"number": [te(0, table1=table1(nine))]}), "number task: Table 1") == "partial"


def test_fast_positional_and_slow_symbolic_ids_must_hold_at_every_seed():
    kinds = scores(["positional"] * 2 + ["symbolic"] * 10)
    fast = table1([1, 2] + [38] * 10)
    slowish = table1([14, 2] + [38] * 10)  # a positional ID above 12: only the weaker form holds
    ev = Evidence({"number": [te(s, scores=kinds, table1=fast) for s in range(2)]})
    assert verdict(ev, "fastest rotations") == "match"
    ev = Evidence({"number": [te(0, scores=kinds, table1=fast), te(1, scores=kinds, table1=slowish)]})
    assert verdict(ev, "fastest rotations") == "partial"
    reversed_ids = table1([38, 38] + [2] * 10)
    ev = Evidence({"number": [te(0, scores=kinds, table1=fast), te(1, scores=kinds, table1=reversed_ids)]})
    assert verdict(ev, "fastest rotations") == "differs"


@pytest.mark.parametrize(
    "failed,want",
    [({"max": 0, "min": 0}, "verified"), ({"max": 3, "min": 0}, "partial"), ({"max": 3, "min": 1}, "differs")],
)
def test_bound_claims_read_the_definition_that_holds(failed, want):
    bounds = [BoundCheckRecord("index", d, "tasks", 0.8, "2..100", "2..100", 99, n, None, "", None, None, 0)
              for d, n in failed.items()]
    assert verdict(Evidence({}, bounds=bounds), "Δ_Index") == want


def test_every_claim_is_a_record_with_its_rule_a_known_verdict_and_every_seed():
    rows = steps_of({500: PAPER_NUMBER, 1000: PAPER_NUMBER})
    runs = [te(s, scores=rows, metrics=metrics(IN_ORDER), best_step=1000, lengthgen=curve({100: 0.7, 800: 0.2}),
               table1=table1([1] * 12)) for s in (0, 1, 2)]
    claims = check_claims(Evidence({"number": runs, "letter": runs}))
    assert claims and all(isinstance(c, ClaimRecord) and c.rule and c.verdict in VERDICTS for c in claims)
    assert all(c.seeds == "0,1,2" for c in claims if c.per_seed)


def test_evidence_refuses_a_seed_twice():
    assert Evidence({"number": [te(3)]}).tasks["number"] == (te(3),)
    with pytest.raises(ValueError, match="repeat"):
        Evidence({"number": [te(0), te(0)]})


def test_kept_seeds_of_a_sweep_grade_the_length_claim_and_the_curves_give_the_hop_mix_readings():
    """Eight seeds kept by their pooled accuracy alone (LengthSeedRecord) replace the three with curves in the
    graded reading; the hop-mix readings stay on the curves' seeds and say so."""
    from possym.records import LengthSeedRecord

    curves = [te(s, lengthgen=curve({100: 0.74}, 0.02)) for s in range(3)]
    kept = [LengthSeedRecord("number", s, 100, "best", a, a - 0.02, a + 0.02, "a sweep (bf16)")
            for s, a in enumerate((0.33, 0.34, 0.35, 0.36, 0.33, 0.34, 0.35, 0.36))]
    c = claim(check_claims(Evidence({"number": curves}, length_seeds=kept)), "number task: accuracy at +100")
    assert c.verdict == "differs" and c.seeds == "0,1,2,3,4,5,6,7" and "seeds: a sweep" in c.paper_uncertainty
    assert "uniform hop mix, best checkpoint (3 seeds with per-hop curves): match" in c.readings
    assert c.robustness == "reading-dependent"


def test_the_protocols_other_readings_grade_the_length_claims_and_the_ordering():
    """Seeds near the paper's 0.74 under the pre-registered reading; the protocol's values for other extra tokens
    and the total-length x-axis are graded as readings: far values differ, the pre-registered one is not repeated,
    and the ordering claim takes its readings from the shares."""
    from possym.records import ProtocolValueRecord

    runs = [te(s, lengthgen=curve({100: 0.74}, 0.02)) for s in range(3)]
    letter = [te(s, lengthgen=curve({100: 1.0}, 0.0)) for s in range(3)]

    def rows(kind, axis, claim_name, values):
        return [ProtocolValueRecord(kind, "uniform", "best", axis, claim_name, s, v, v, v)
                for s, v in enumerate(values)]

    name = "number task: accuracy at +100 tokens"
    order = "the letter model extrapolates much further than the number model"
    protocol = (rows("targets", "extra", name, (0.1, 0.12, 0.11)) + rows("mixed", "seq_len", name, (0.2, 0.22, 0.21))
                + rows("windows", "extra", name, (0.72, 0.75, 0.74)) + rows("mixed", "extra", order, (1.0, 1.0, 0.5)))
    claims = check_claims(Evidence({"number": runs, "letter": letter}, protocol=protocol))
    c = claim(claims, name)
    readings = dict(r.split(": ") for r in c.readings.split("; "))
    assert c.verdict == "match" and c.robustness == "reading-dependent"
    tail = "uniform hop mix, best checkpoint (3 seeds, length_protocol)"
    assert readings[f"extra tokens mixed, x = total length, {tail}"] == "differs"
    assert readings[f"extra tokens windows, x = K extra tokens, {tail}"] == "match"
    assert not any(r.startswith("extra tokens targets, x = K") for r in readings)  # graded on its own seeds
    o = claim(claims, order)
    assert o.verdict == "match" and o.robustness == "reading-dependent" and "partial" in o.readings


def test_remark_3_1_is_verified_only_when_no_pure_head_is_right_twice_and_the_constructions_are():
    from possym.records import WitnessRecord

    def row(function, head, diff, both):
        return WitnessRecord(function, "a", "b", "x", "y", head, diff, "", both, both, both)

    good = [row("index", "20 random one-layer NoPE GPT-J blocks (symbolic)", 1e-14, 0),
            row("index", "T_Index (positional)", None, 1),
            row("retrieval", "20 random positional heads (keys equal)", 1e-16, 0),
            row("retrieval", "T_Retrieval (symbolic)", None, 1),
            dataclasses.replace(row("retrieval (scope)", "a positional head + F", 0.15, 1), right_on_a=9, right_on_b=9)]
    claims = check_claims(Evidence(witnesses=good))
    remark = [c for c in claims if c.claim.startswith("Remark 3.1")]
    assert [c.verdict for c in remark] == ["verified"] * 3 and {c.kind for c in remark} == {"verification"}
    # A symbolic head whose outputs differ on the pair, a positional head right twice, a scope head wrong once.
    for i, bad in ((0, dataclasses.replace(good[0], max_difference=0.3)),
                   (2, dataclasses.replace(good[2], right_on_both=1)), (4, dataclasses.replace(good[4], right_on_a=8))):
        rows = [bad if j == i else r for j, r in enumerate(good)]
        verdicts = [c.verdict for c in check_claims(Evidence(witnesses=rows)) if c.claim.startswith("Remark 3.1")]
        assert verdicts.count("differs") == 1, (i, verdicts)
