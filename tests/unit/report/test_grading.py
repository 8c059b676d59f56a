"""The claims graded on hand-made evidence over seeds: each verdict can come out either way, a result on the wrong
side of its rule's threshold flips it, and an interval that straddles a threshold leaves a seed undecided."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from possym.records import BoundCheckRecord, ClaimRecord, LengthRecord, ScoreRecord, Table1Record
from possym.report.evidence import Evidence, TaskEvidence, history_from_scores
from possym.report.grading import applies, check_claims, spec_of
from possym.report.rules import VERDICTS

DOCS = Path(__file__).resolve().parents[3] / "docs" / "reproduce_paper"
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


def over(kinds: list[str], steps=(950, 1000)) -> list[ScoreRecord]:
    """The same purity at consecutive checkpoints: persistent, so surely pure."""
    return [r for s in steps for r in scores(kinds, s)]


def te(seed: int, rows: list[ScoreRecord] | None = None, **kw) -> TaskEvidence:
    """A seed whose history is read from ``rows`` (every checkpoint's scores), as from a run."""
    if rows is not None:
        last = max(r.step for r in rows)
        kw |= dict(history=history_from_scores(rows), final_scores=[r for r in rows if r.step == last])
        hops = {r.query for r in rows} - {"last"}
        if hops:
            kw["hop_history"] = history_from_scores(rows, hops)
    return TaskEvidence(n_layers=kw.pop("n_layers", 12), seed=seed, **kw)


def graded(ev: Evidence, text: str) -> ClaimRecord:
    return claim(check_claims(ev, power=False), text)


def verdict(ev: Evidence, text: str) -> str:
    return graded(ev, text).verdict


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
    assert c.id == "number-hop-order" and "fails at" in c.power


def test_layer_sets_match_only_when_every_seed_surely_gives_the_papers_set():
    shifted = ["symbolic"] + ["positional"] * 4 + ["symbolic"] * 7  # L1-L4: J = 3/5
    far = ["symbolic"] * 2 + ["positional"] * 4 + ["symbolic"] * 6  # L2-L5: J = 2/6
    cases = [([PAPER_NUMBER] * 3, "match"), ([PAPER_NUMBER, shifted, shifted], "partial"),
             ([PAPER_NUMBER, far, far], "differs"), ([PAPER_NUMBER, shifted, far, far], "consistent")]
    for kinds, want in cases:
        ev = Evidence({"number": [te(s, over(k)) for s, k in enumerate(kinds)]})
        assert verdict(ev, "become pure positional (") == want, kinds


def test_a_layer_pure_at_one_checkpoint_only_is_possibly_never_surely_pure():
    """Persistence: L0 pure positional at one checkpoint and mixed at the next is possible, not sure, so the set is
    {L1-L3} surely and {L0-L3} possibly: undecided between partial and match, and the claim is consistent."""
    blip = scores(PAPER_NUMBER, 950) + scores([""] + PAPER_NUMBER[1:], 1000) + scores([""] + PAPER_NUMBER[1:], 1050)
    c = graded(Evidence({"number": [te(0, blip)]}), "become pure positional (")
    assert c.verdict == "consistent" and c.per_seed == "s0 {L1, L2, L3} (+ L0 undecided)"
    assert c.seed_verdicts == "s0 partial or match" and "persistence" in c.evidence


def test_a_layer_that_straddles_gamma_is_undecided_never_counted_either_way():
    """L0 at (0.88, 0.06) ± 0.04: mixed by its point estimate, positional within its interval: undecided. A
    straddler the paper does not list (L5) is undecided too, so it can break a match."""
    noisy = with_interval(over(PAPER_NUMBER), 0, 0.88, 0.06, 0.04)
    c = graded(Evidence({"number": [te(0, noisy)]}), "become pure positional (")
    assert c.verdict == "consistent" and c.per_seed == "s0 {L1, L2, L3} (+ L0 undecided)"
    assert "input intervals" in c.evidence
    extra = with_interval(over(PAPER_NUMBER), 5, 0.88, 0.06, 0.04)
    c = graded(Evidence({"number": [te(0, extra)]}), "become pure positional (")
    assert c.verdict == "consistent" and "+ L5 undecided" in c.per_seed


def test_positional_layers_in_the_number_task_only_with_intervals():
    number = over(["", "positional"] + ["symbolic"] * 10)
    clean = over(["symbolic"] * 12)
    dirty = over(["positional"] + ["symbolic"] * 11)
    maybe = with_interval(clean, 0, 0.88, 0.06, 0.04)  # might be pure positional: undecided
    for letter, want in ((clean, "match"), (maybe, "consistent"), (dirty, "differs")):
        ev = Evidence({"number": [te(0, number)], "letter": [te(0, letter)]})
        assert verdict(ev, "number task only") == want
    two = Evidence({"number": [te(0, number), te(1, number)], "letter": [te(0, clean), te(1, dirty)]})
    assert verdict(two, "number task only") == "consistent"  # 1 of 2: neither most nor every


@pytest.mark.parametrize("n_pure,want", [(11, "match"), (10, "match"), (9, "partial"), (8, "partial"), (7, "differs")])
def test_the_count_of_pure_heads_at_the_end_flips_past_one_and_three(n_pure, want):
    kinds = [""] * (12 - n_pure) + ["symbolic"] * n_pure
    ev = Evidence({"letter": [te(s, over(kinds)) for s in range(2)]})
    assert verdict(ev, "letter task: pure heads at the end") == want


def curve(values: dict[int, float], half: float = 0.01, step: int | None = None, n_hops: int = 0
          ) -> list[LengthRecord]:
    return [LengthRecord(extra=k, n_hops=n_hops, seq_len=k + 40, accuracy=v, n=100, correct=round(100 * v),
                         ci_low=v - half, ci_high=v + half, n_prefixes=8, prefix_sd=0.0, cluster_low=v - half,
                         cluster_high=v + half, mode="cached", step=step)
            for k, v in values.items()]


def test_an_accuracy_matches_when_equivalent_within_its_margin_and_differs_outside_our_prediction():
    """The paper's +100 is 0.74 (±0.01, binomial at 500), margin 0.10: seeds near 0.35 differ; near 0.62 the gap's
    interval crosses the margin (consistent); around 0.74 it lies inside (match)."""
    def runs(*acc):
        return [te(s, lengthgen=curve({100: a}, 0.03)) for s, a in enumerate(acc)]

    c = graded(Evidence({"number": runs(0.33, 0.34, 0.35, 0.36)}), "number task: accuracy at +100")
    assert c.verdict == "differs" and c.paper_value == 0.74 and (c.seed_min, c.seed_max) == (0.33, 0.36)
    assert c.p_value is not None and c.p_value < 0.05 and c.seed_verdict_counts == "differs at 4 seeds"
    assert c.margin == 0.1 and c.gap == pytest.approx(0.395) and c.percentile > 0.99
    assert "n = 50" in c.paper_uncertainty and "n = 2400" in c.paper_uncertainty
    assert verdict(Evidence({"number": runs(0.58, 0.62, 0.66, 0.70)}), "number task: accuracy at +100") \
        == "consistent"
    c = graded(Evidence({"number": runs(0.71, 0.73, 0.75, 0.77)}), "number task: accuracy at +100")
    assert c.verdict == "match" and c.gap_low > -0.1 and c.gap_high < 0.1


def per_hop(acc_by_hop: dict[int, float], extra: int = 100, step: int = 100) -> list[LengthRecord]:
    pooled = sum(acc_by_hop.values()) / 4
    return [p for h, a in acc_by_hop.items() for p in curve({extra: a}, 0.02, step, h)] + curve({extra: pooled},
                                                                                                  0.02, step)


def test_a_length_claim_is_unresolved_when_the_hop_mix_the_paper_leaves_open_decides_it():
    """Per-hop points: 1-hop windows at 0.98, the rest at 0.66. The uniform mix (0.74) and 1-2 hops (0.82)
    disagree with 1 hop alone (0.98): the claim says unresolved and which mixes give what; the fitted mix is shown,
    never graded."""
    runs = [te(s, lengthgen=per_hop({1: 0.98 - 0.01 * s, 2: 0.66, 3: 0.66, 4: 0.66})) for s in range(4)]
    c = graded(Evidence({"number": runs}), "number task: accuracy at +100")
    assert c.verdict == "unresolved" and c.robustness == "unresolved"
    assert "the hop mix decides" in c.ours and "1 hop only" in c.ours
    assert "uniform hop mix: match" in c.readings and "(shown, not graded)" in c.readings
    agree = [te(s, lengthgen=per_hop({h: 0.74 + 0.01 * s for h in range(1, 5)})) for s in range(4)]
    c = graded(Evidence({"number": agree}), "number task: accuracy at +100")
    assert c.verdict == "match" and c.robustness == "robust"


def test_an_accuracy_at_the_floor_for_us_and_the_paper_is_uninformative():
    """The paper's +5000 is 0.04 on the number task, chance 1/120: at the floor, so 0.02 says nothing."""
    low = [te(s, chance=1 / 120, lengthgen=curve({5000: 0.02})) for s in range(2)]
    c = graded(Evidence({"number": low}), "number task: accuracy at +5000")
    assert c.verdict == "uninformative" and "chance 0.0083" in c.ours
    high = [te(s, chance=1 / 120, lengthgen=curve({5000: a})) for s, a in enumerate((0.30, 0.31, 0.33, 0.35))]
    assert verdict(Evidence({"number": high}), "number task: accuracy at +5000") == "differs"


def test_an_accuracy_at_the_ceiling_for_us_and_the_paper_is_its_own_verdict():
    top = [te(s, lengthgen=curve({100: 0.995}, 0.005)) for s in range(3)]
    assert verdict(Evidence({"letter": top}), "letter task: accuracy at +100") == "ceiling"
    low = [te(s, lengthgen=curve({100: a}, 0.01)) for s, a in enumerate((0.80, 0.81, 0.82, 0.83))]
    assert verdict(Evidence({"letter": low}), "letter task: accuracy at +100") == "differs"


def test_a_run_of_another_preset_grades_the_paper_s_absolute_numbers_n_a_and_says_why():
    """The quick preset's 6 layers and 4,000 steps: the step and layer claims are n/a, with the reason; a claim
    that holds whatever the depth (the hop order) is still graded."""
    short = [te(s, n_layers=6, best_step=3000, eval_every=50, trained_steps=4000, metrics=metrics(IN_ORDER, 4000),
                rows=over(["", "positional"] + ["symbolic"] * 4)) for s in range(1)]
    ev = Evidence({"number": short})
    step = graded(ev, "number task: step of maximum")
    assert step.verdict == "n/a" and "6,750 training steps; these seeds have 4,000" in step.ours
    assert graded(ev, "become pure positional (").verdict == "n/a"
    assert "12 layers" in applies(spec_of("number-positional-layers"), ev)
    assert graded(ev, "learned in order").verdict != "n/a"


def test_the_letter_task_before_the_number_task_pairs_seeds_and_reports_a_two_group_test():
    early = [metrics({"accuracy": 200 + 50 * s}) for s in range(3)]
    late = [metrics({"accuracy": 400 + 50 * s}) for s in range(3)]
    ev = Evidence({"number": [te(s, metrics=late[s]) for s in range(3)],
                   "letter": [te(s, metrics=early[s]) for s in range(3)]})
    c = graded(ev, "letter task is learned before")
    assert c.verdict == "match" and "exact permutation p = 0.1" in c.ours
    ev = Evidence({"number": [te(s, metrics=late[s] if s else early[s]) for s in range(3)],
                   "letter": [te(s, metrics=early[s] if s else late[s]) for s in range(3)]})
    c = graded(ev, "letter task is learned before")
    assert c.verdict == "partial" and c.seed_verdict_counts == "match at 2 seeds, differs at 1"


def test_the_step_of_maximum_accuracy_is_a_number_with_the_evaluation_spacing_as_its_interval():
    log = [{"event": "eval", "step": 6750, "accuracy": 1.0}]

    def runs(*best):
        return [te(s, best_step=b, eval_every=50, metrics=log) for s, b in enumerate(best)]

    assert verdict(Evidence({"number": runs(4700, 4750, 4750, 4800, 4850)}), "number task: step of maximum") \
        == "match"
    assert verdict(Evidence({"number": runs(4300, 4350, 4350, 4400, 4300)}), "number task: step of maximum") \
        == "differs"


def test_accuracy_converging_before_a_head_turns_pure_differs_and_after_matches():
    """Sec. 3.1: every layer turns pure at step 200 and stays. The best checkpoint at 300 comes after (holds); at
    100, before (fails). A seed that never reaches 0.9 cannot judge the claim."""
    rows = [r for s, k in ((100, [""] * 12), (200, ["symbolic"] * 12), (250, ["symbolic"] * 12),
                           (300, ["symbolic"] * 12)) for r in scores(k, s)]
    acc = metrics({"accuracy": 100})
    after = [te(s, rows, metrics=acc, best_step=300, eval_every=50) for s in range(2)]
    assert verdict(Evidence({"letter": after}), "letter task: accuracy converges only once") == "match"
    before = [te(s, rows, metrics=acc, best_step=100, eval_every=50) for s in range(2)]
    c = graded(Evidence({"letter": before}), "letter task: accuracy converges only once")
    assert c.verdict == "differs" and "not surely pure by then" in c.per_seed
    unlearned = [*after, te(2, rows, metrics=metrics({"accuracy": 5000}), best_step=300, eval_every=50)]
    c = graded(Evidence({"letter": unlearned}), "letter task: accuracy converges only once")
    assert c.verdict == "match" and c.seeds == "0,1"


def at_query(rows: list[ScoreRecord], query: str) -> list[ScoreRecord]:
    return [dataclasses.replace(r, query=query) for r in rows]


def test_the_hop_claim_is_graded_at_the_hop_queries_with_k_minus_one_layers():
    """Sec. 3.3 where the mechanism works: 4 hops solved at 1000 with one layer pure positional at the last token
    but four at some hop query (L0-L1 at hop1, L2-L3 at hop2): holds at the hop queries, which grade; the last
    token and k layers are readings. A seed with one layer by then at the hop queries refutes it."""
    solved = [{"event": "eval", "step": 1000, "accuracy": 1.0, **{f"acc_hop{k}": 1.0 for k in range(1, 5)}}]
    one = over(["", "positional"] + ["symbolic"] * 10)
    hop1 = at_query(over(["positional"] * 2 + ["symbolic"] * 10), "hop1")
    hop2 = at_query(over(["symbolic"] * 2 + ["positional"] * 2 + ["symbolic"] * 8), "hop2")
    runs = [te(s, one + hop1 + hop2, metrics=solved, eval_every=50) for s in range(2)]
    c = graded(Evidence({"number": runs}), "n hops need n")
    assert c.verdict == "match" and c.reading == "k − 1 layers at the hop queries"
    assert "k − 1 layers at the last token: differs" in c.readings and c.robustness == "reading-dependent"
    bad = [te(s, one + at_query(one, "hop1"), metrics=solved, eval_every=50) for s in range(2)]
    assert verdict(Evidence({"number": bad}), "n hops need n") == "differs"


def table1(ids: list[float], step: int = 1000) -> list[Table1Record]:
    return [Table1Record(step, layer, 0, i, 1, 1.0, 1) for layer, i in enumerate(ids)]


def test_table1_counts_only_valid_ids_within_three_of_the_papers():
    paper = [1, 2, 2, 2, 10, 39, 38, 38, 38, 37, 37, 38]
    assert verdict(Evidence({"number": [te(0, table1=table1(paper))]}), "number task: Table 1") == "match"
    invalid = [0.5, -1.0, 0.0, 2.0, *paper[4:]]  # within 3 of 1, 2, 2 but outside the plane range
    c = graded(Evidence({"number": [te(0, table1=table1(invalid))]}), "number task: Table 1")
    assert c.verdict == "partial" and "invalid" in c.per_seed and "(9 within 3)" in c.per_seed
    ten = [*paper[:10], 30.0, 30.0]  # 10 agree: match; 9: partial
    assert verdict(Evidence({"number": [te(0, table1=table1(ten))]}), "number task: Table 1") == "match"


@pytest.mark.parametrize("failed,want", [({"max": 0, "min": 0}, "match"), ({"max": 3, "min": 0}, "differs")])
def test_theorem_3_2_as_literally_stated_is_a_finding_read_on_its_own_definition(failed, want):
    bounds = [BoundCheckRecord("index", d, "tasks", 0.8, "2..100", "2..100", 99, n, None, "", None, None, 0)
              for d, n in failed.items()]
    c = graded(Evidence({}, bounds=bounds), "Δ_Index")
    assert c.verdict == want and c.kind == "finding"
    assert "Definition 3.1 with the min over inputs: match" in c.readings


def test_every_claim_is_a_record_with_its_id_rule_a_known_verdict_and_every_seed():
    rows = over(PAPER_NUMBER, (500, 550, 1000))
    runs = [te(s, rows, metrics=metrics(IN_ORDER), best_step=1000, lengthgen=curve({100: 0.7, 800: 0.2}),
               table1=table1([1] * 12)) for s in (0, 1, 2)]
    claims = check_claims(Evidence({"number": runs, "letter": runs}), power=False)
    assert claims and all(isinstance(c, ClaimRecord) and c.rule and c.id and c.verdict in VERDICTS for c in claims)
    assert all(c.seeds == "0,1,2" for c in claims if c.per_seed and c.kind == "empirical")
    assert len({c.id for c in claims}) == len(claims)


def test_evidence_refuses_a_seed_twice():
    assert Evidence({"number": [te(3)]}).tasks["number"] == (te(3),)
    with pytest.raises(ValueError, match="repeat"):
        Evidence({"number": [te(0), te(0)]})


def test_the_committed_letter_tables_straddlers_are_found_on_every_evidence_path():
    """The purity tables flag the layers whose last interval box straddles γ (final_straddles). Graded from the
    committed tables, each is possibly, not surely, pure at the end, whether the seed's history comes from its
    purity table (seeds 0-2) or from its every-checkpoint scores at the hop queries (seeds 3-7, the same runs)."""
    from possym.records import PurityRecord, read_records
    from possym.report.replication import evidence

    ev = evidence([DOCS, DOCS / "seeds_letter", DOCS / "hop_queries"])
    found = 0
    for te_ in ev.seeds("letter"):
        where = DOCS if te_.seed < 3 else DOCS / "seeds_letter"
        rows = read_records(where / f"letter_s{te_.seed}_purity.csv", PurityRecord)
        for r in rows:
            if r.gamma == 0.1 and r.final_straddles and r.final_kind:
                lp = te_.history.layer(r.layer, r.final_kind)
                assert lp.end_possible and not lp.end_sure, (te_.seed, r.layer)
                found += 1
    assert found >= 4
    c = graded(ev, "letter task: accuracy converges only once")
    assert c.verdict == "consistent" and "undecided" in c.ours
