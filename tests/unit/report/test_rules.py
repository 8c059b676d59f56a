"""Each rule kind on both sides of each threshold, against an independent implementation where there is one."""

from __future__ import annotations

import math
from itertools import combinations

import numpy as np
import pytest
from scipy import integrate, stats

from possym.report.rules import (
    ALPHA,
    DIGITISATION,
    GRADING_N,
    ODDS_FLOOR,
    Estimate,
    PaperValue,
    SeedVerdict,
    compare_groups,
    count_seed,
    floor_ceiling,
    grade_one_seed,
    grade_seeds,
    grade_value,
    jaccard,
    per_seed_verdicts,
    set_seed,
    summarise_seeds,
    value_core,
    wilson,
)

EPS = 1e-6


def steps(*values: float, half: float = 50) -> list[Estimate]:
    return [Estimate(v, v - half, v + half) for v in values]


def test_the_papers_interval_is_wilson_at_n_widened_by_the_reading_tolerance():
    """Wilson's interval against its closed form at a known point (0.5 on 100 trials: 0.5 ± 0.0966)."""
    lo, hi = wilson(0.5, 100)
    assert (lo, hi) == pytest.approx((0.40383, 0.59617), abs=1e-5)
    assert PaperValue(0.5, DIGITISATION, 100).interval() == pytest.approx((lo - 0.01, hi + 0.01))
    assert PaperValue(0.5).interval() == (0.5, 0.5)
    assert PaperValue(1.0, DIGITISATION, 2400).interval()[1] == 1.0


def test_without_the_papers_own_error_the_prediction_is_students_t_on_the_rules_scale():
    """A second implementation: scipy's t test of a new draw, (P − x̄) / (s √(1 + 1/n)) with n − 1 degrees of
    freedom, on arcsin √p for an accuracy."""
    x = np.array([0.33, 0.54, 0.37, 0.50])
    out = value_core(x[None, :], np.array([0.74]), scale="accuracy", margin=0.1, paper_sd=np.zeros(1),
                     paper_sd_natural=np.zeros(1), own_sd=np.zeros(1))
    t = np.arcsin(np.sqrt(x))
    z = (np.arcsin(np.sqrt(0.74)) - t.mean()) / (t.std(ddof=1) * math.sqrt(1 + 1 / 4))
    assert out["p"][0] == pytest.approx(2 * stats.t.sf(abs(z), 3), rel=0.02)
    assert out["percentile"][0] == pytest.approx(stats.t.cdf(z, 3))


def test_with_the_papers_own_error_the_p_value_integrates_the_chi_square_mixture():
    """An independent integration (scipy.integrate.quad over σ² ~ (n − 1)s²/χ²(n − 1)) of the two-sided tail of a
    normal with variance σ²(1 + 1/n) + σ_P²."""
    x = np.array([2600.0, 2650.0, 2700.0])
    paper, paper_sd = 3000.0, 120.0
    out = value_core(x[None, :], np.array([paper]), scale="linear", margin=500, paper_sd=np.array([paper_sd]),
                     paper_sd_natural=np.array([paper_sd]), own_sd=np.zeros(1))
    n, s2, d = 3, x.var(ddof=1), abs(paper - x.mean())

    def tail(q: float) -> float:
        var = (n - 1) * s2 / q * (1 + 1 / n) + paper_sd ** 2
        return 2 * stats.norm.sf(d / math.sqrt(var)) * stats.chi2.pdf(q, n - 1)

    want = integrate.quad(tail, 0, np.inf)[0]
    assert out["p"][0] == pytest.approx(want, rel=0.03)


def test_the_gaps_interval_without_the_papers_error_is_the_t_interval_of_the_mean():
    x = np.array([1700.0, 1850.0, 1800.0, 1760.0])
    out = value_core(x[None, :], np.array([1750.0]), scale="linear", margin=500, paper_sd=np.zeros(1),
                     paper_sd_natural=np.zeros(1), own_sd=np.zeros(1))
    half = stats.t.ppf(0.95, 3) * x.std(ddof=1) / 2
    assert out["gap_high"][0] - out["gap"][0] == pytest.approx(half, rel=0.02)


def test_a_number_matches_exactly_when_its_gaps_90_percent_interval_lies_inside_the_margin():
    """The equivalence side: move the paper until the gap's interval touches the margin; just inside matches, just
    outside does not (and is then consistent, not different: the paper stays inside our prediction)."""
    seeds = steps(2600, 2650, 2650, 2700, 2620, 2680)
    g = grade_value(seeds, PaperValue(2650), margin=80, scale="linear")
    half = g.gap_high - g.gap
    edge = 2650 + 80 - half
    assert grade_value(seeds, PaperValue(edge - 1), margin=80, scale="linear").verdict == "match"
    assert grade_value(seeds, PaperValue(edge + 1), margin=80, scale="linear").verdict == "consistent"


def test_a_number_differs_exactly_when_its_p_value_falls_below_alpha_outside_the_margin():
    seeds = steps(2600, 2650, 2650, 2700, 2620, 2680)

    def p_at(v: float) -> float:
        return grade_value(seeds, PaperValue(v), margin=50, scale="linear").p

    lo, hi = 2700.0, 4000.0
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if p_at(mid) >= ALPHA else (lo, mid)
    assert grade_value(seeds, PaperValue(lo), margin=50, scale="linear").verdict == "consistent"
    assert grade_value(seeds, PaperValue(hi + 1e-6), margin=50, scale="linear").verdict == "differs"


def test_a_gap_inside_the_margin_is_a_match_even_where_a_tight_spread_detects_it():
    """The margin says what is immaterial: seeds at 0.95 ± 0.005 against the paper's 0.97 differ by prediction
    (p < 0.05) but are equivalent within 0.10."""
    seeds = [Estimate(v, v - 0.01, v + 0.01) for v in (0.945, 0.95, 0.955, 0.95, 0.948, 0.952)]
    g = grade_value(seeds, PaperValue(0.97), margin=0.10, scale="accuracy")
    assert g.p < ALPHA and g.verdict == "match"
    assert grade_value(seeds, PaperValue(0.97), margin=0.015, scale="accuracy").verdict == "differs"


def test_near_zero_a_wide_spread_of_seeds_cannot_stretch_the_prediction_to_the_paper():
    """The reviewer's case: letter +800 at 4 hops, seeds 0.00-0.31, against the paper's 0.89 differs (the
    log-odds made it match), and seeds all at 1.00 differ too, from the other side."""
    low = [Estimate.of(v) for v in (0.0, 0.02, 0.05, 0.10, 0.20, 0.31)]
    assert grade_value(low, PaperValue(0.89, DIGITISATION, GRADING_N), margin=0.1, scale="accuracy").verdict \
        == "differs"
    top = [Estimate(1.0, 0.99, 1.0)] * 6
    assert grade_value(top, PaperValue(0.89, DIGITISATION, GRADING_N), margin=0.1, scale="accuracy").verdict \
        == "differs"


def test_moving_our_seeds_toward_the_paper_never_makes_the_verdict_worse():
    """Monotone on both ends: random seeds (some at 0 or 1) moved halfway to the paper on the rule's scale, their
    spread kept, never lower the p-value nor turn a verdict worse. (On the log-odds, clipped at 1e-4, the same move
    could widen the spread of seeds at 0 and turn a difference into a match.)"""
    rng = np.random.default_rng(0)
    order = {"differs": 2, "consistent": 1, "match": 0}
    for _ in range(300):
        n = int(rng.integers(2, 9))
        x = np.clip(rng.beta(0.6, 0.6, n) + rng.choice([0, 0.4, -0.4]), 0, 1)
        paper = float(rng.uniform(0, 1))
        t = np.arcsin(np.sqrt(x))
        shifted = t + (np.arcsin(np.sqrt(paper)) - t.mean()) / 2
        if shifted.min() < 0 or shifted.max() > np.pi / 2:
            continue  # the move would carry a seed past 0 or 1
        moved = np.sin(shifted) ** 2
        before, after = (grade_value([Estimate.of(v) for v in values], PaperValue(paper, 0.01, 500), margin=0.1,
                                     scale="accuracy") for values in (x, moved))
        assert after.p >= before.p - 1e-9
        if before.verdict in order and after.verdict in order:
            assert order[after.verdict] <= order[before.verdict], (x, paper, before, after)


def test_the_floor_makes_a_claim_uninformative_only_when_the_paper_and_every_seed_are_at_it():
    chance = 1 / 120
    ceiling = floor_ceiling(chance)
    assert math.isclose(ceiling / (1 - ceiling), ODDS_FLOOR * chance / (1 - chance))
    low = [Estimate(0.02, 0.01, 0.03), Estimate(0.03, 0.02, 0.04)]
    paper = PaperValue(0.04, 0.01, 500)
    assert grade_value(low, paper, margin=0.1, scale="accuracy", chance=chance).verdict == "uninformative"
    above = [*low, Estimate(ceiling + EPS, ceiling, ceiling + 0.01)]
    assert grade_value(above, paper, margin=0.1, scale="accuracy", chance=chance).verdict != "uninformative"
    assert grade_value(low, paper, margin=0.1, scale="accuracy").verdict != "uninformative"  # no chance level given


def test_the_ceiling_is_the_floors_counterpart_at_one():
    paper = PaperValue(1.0, DIGITISATION, GRADING_N)
    assert grade_value([Estimate(0.99, 0.98, 1.0)] * 2, paper, margin=0.1, scale="accuracy").verdict == "ceiling"
    assert grade_value([Estimate(0.99 - EPS, 0.98, 1.0)] * 2, paper, margin=0.1, scale="accuracy").verdict \
        != "ceiling"


def test_one_seed_can_never_match_and_differs_only_by_its_own_interval():
    one = [Estimate(0.50, 0.48, 0.52)]
    assert grade_value(one, PaperValue(0.50), margin=0.1, scale="accuracy").verdict == "consistent"
    assert grade_value(one, PaperValue(0.60), margin=0.1, scale="accuracy").verdict == "differs"
    # Alone, by its own interval, the seed is equivalent: a seed's own verdict, not the claim's.
    assert grade_one_seed(one[0], PaperValue(0.51), margin=0.1, scale="accuracy") == "match"


def test_a_bad_scale_or_margin_is_refused():
    with pytest.raises(ValueError, match="scale"):
        grade_value(steps(1, 2), PaperValue(1), margin=1, scale="log")
    with pytest.raises(ValueError, match="margin"):
        grade_value(steps(1, 2), PaperValue(1), margin=0, scale="linear")


@pytest.mark.parametrize("holds,want", [
    ([True, True, True], "match"),
    ([True, True, False], "partial"),
    ([True, False, False], "differs"),
    ([True, False], "consistent"),  # one of two: neither most nor every
    ([False, False], "differs"),
])
def test_a_statement_must_hold_surely_at_every_seed_to_match_and_fail_at_most_to_differ(holds, want):
    assert grade_seeds([SeedVerdict.holds(h) for h in holds]).verdict == want


def test_a_seed_its_intervals_leave_undecided_keeps_a_statement_from_matching_or_differing():
    sure, open_ = SeedVerdict.holds(True), SeedVerdict.holds(False, True)
    assert open_.worst == "differs" and open_.best == "match" and not open_.decided
    assert grade_seeds([sure, sure, open_]).verdict == "consistent"  # could be every seed: not shown
    assert grade_seeds([SeedVerdict.holds(False)] * 2 + [open_]).verdict == "differs"  # 2 of 3 surely fail
    assert grade_seeds([sure, SeedVerdict.holds(False), SeedVerdict.holds(False)]).verdict == "differs"
    g = grade_seeds([sure, sure, sure, SeedVerdict.holds(False), open_])
    assert g.verdict == "partial" and (g.surely_match, g.surely_differs, g.undecided) == (3, 1, 1)


def test_a_weaker_form_holding_everywhere_is_partial():
    weak = [SeedVerdict.holds(False, weak=True)] * 3
    assert grade_seeds(weak).verdict == "partial"
    assert grade_seeds([SeedVerdict.holds(False, weak=True)] + [SeedVerdict.holds(False)] * 2).verdict == "differs"


def test_a_seeds_set_range_is_graded_over_every_set_between_its_sure_and_possible_layers():
    """Brute force over every subset between sure and possible, against set_seed's best and worst."""
    paper = frozenset({0, 1, 2, 3})
    sure, possible = frozenset({1, 2}), frozenset({0, 1, 2, 3, 5})
    got = set_seed(sure, possible, paper)
    extra = sorted(possible - sure)
    js = [jaccard(sure | frozenset(c), paper) for k in range(len(extra) + 1) for c in combinations(extra, k)]
    assert (max(js), min(js)) == (1.0, pytest.approx(2 / 5))
    assert (got.best, got.worst) == ("match", "differs")
    assert set_seed(paper, paper, paper).label == "match"
    with pytest.raises(ValueError, match="among the possible"):
        set_seed(frozenset({7}), frozenset({1}), paper)


def test_a_count_range_matches_within_one_and_is_partial_within_three():
    assert count_seed(10, 10, 11).label == "match" and count_seed(8, 8, 11).label == "partial"
    assert count_seed(7, 7, 11).label == "differs" and count_seed(7, 10, 11).label == "differs or match"


def test_per_seed_verdicts_are_counted_most_first():
    assert per_seed_verdicts(["match", "differs", "differs"]) == "differs at 2 seeds, match at 1"
    assert per_seed_verdicts(["match"]) == "match at 1 seed"


def test_the_seed_summary_is_mean_sample_sd_and_range():
    s = summarise_seeds([0.33, 0.54, 0.37])
    assert math.isclose(s.mean, np.mean([0.33, 0.54, 0.37])) and math.isclose(s.sd, np.std([0.33, 0.54, 0.37], ddof=1))
    assert (s.min, s.max, s.n) == (0.33, 0.54, 3) and summarise_seeds([0.5]).sd is None


def _brute_permutation_p(a, b):
    """The exact test by brute force over group labels (an independent enumeration)."""
    pooled = list(a) + list(b)
    observed = abs(np.mean(b) - np.mean(a))
    hits = total = 0
    for idx in combinations(range(len(pooled)), len(a)):
        ga = [pooled[i] for i in idx]
        gb = [pooled[i] for i in range(len(pooled)) if i not in idx]
        hits += abs(np.mean(gb) - np.mean(ga)) >= observed - 1e-12
        total += 1
    return hits / total


@pytest.mark.parametrize("b", [[4.0, 5.0, 6.0], [2.5, 3.5, 0.5], [1.0, 2.0, 3.1], [10.0, 0.0, 2.0, 9.0]])
def test_the_exact_permutation_test_against_brute_force_and_welch_against_scipy(b):
    a = [1.0, 2.0, 3.0]
    c = compare_groups(a, b)
    assert math.isclose(c.p_permutation, _brute_permutation_p(a, b))
    assert math.isclose(c.p_welch, stats.ttest_ind(a, b, equal_var=False).pvalue)


def test_complete_separation_of_three_against_three_gives_p_one_tenth_and_no_better():
    c = compare_groups([0.02, 0.03, 0.05], [0.10, 0.15, 0.19])
    assert c.separated and math.isclose(c.p_permutation, 0.1) and math.isclose(c.p_min, 0.1)
    overlap = compare_groups([0.02, 0.03, 0.12], [0.10, 0.15, 0.19])
    assert not overlap.separated and overlap.p_permutation > 0.1


def test_a_paired_comparison_flips_signs_of_the_differences():
    c = compare_groups([0.53, 0.49, 0.58], [0.64, 0.65, 0.74], paired=True)
    assert c.separated and math.isclose(c.p_permutation, 0.25) and math.isclose(c.p_min, 0.25)
    with pytest.raises(ValueError, match="equal sizes"):
        compare_groups([1, 2], [1, 2, 3], paired=True)
