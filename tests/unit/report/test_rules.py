"""Each verdict rule on both sides of its threshold: a result just past it flips the verdict."""

from __future__ import annotations

import math
from itertools import combinations

import numpy as np
import pytest
from scipy import stats

from possym.report.rules import (
    ALPHA,
    DIGITISATION,
    GRADING_N,
    ODDS_FLOOR,
    ODDS_PARTIAL,
    STEP_PARTIAL,
    Estimate,
    PaperValue,
    compare_groups,
    expit,
    floor_ceiling,
    grade_accuracy,
    grade_count,
    grade_holds,
    grade_set,
    grade_step,
    logit,
    per_seed_verdicts,
    prediction_interval,
    summarise,
    wilson,
)

EPS = 1e-6
SEEDS = [Estimate(0.33, 0.30, 0.36), Estimate(0.54, 0.50, 0.58), Estimate(0.37, 0.34, 0.40)]


def test_the_prediction_interval_is_the_t_interval_for_a_new_seed_on_the_log_odds():
    """A second implementation: scipy's t quantile, by hand, on logit(x_s)."""
    pred = prediction_interval(SEEDS, log_odds=True)
    x = np.array([logit(e.value) for e in SEEDS])
    half = stats.t.ppf(0.975, 2) * x.std(ddof=1) * math.sqrt(1 + 1 / 3)
    assert pred.low == pytest.approx(expit(x.mean() - half)) and pred.high == pytest.approx(expit(x.mean() + half))
    flat = prediction_interval([Estimate(0.5, 0.45, 0.55)] * 3, log_odds=True)
    assert (flat.low, flat.high) == (0.45, 0.55) and "own intervals" in flat.how  # no spread: the seeds' own


def test_the_papers_interval_is_wilson_at_n_widened_by_the_reading_tolerance():
    """Wilson's interval against its closed form at a known point (0.5 on 100 trials: 0.5 ± 0.0966)."""
    lo, hi = wilson(0.5, 100)
    assert (lo, hi) == pytest.approx((0.40383, 0.59617), abs=1e-5)
    assert PaperValue(0.5, DIGITISATION, 100).interval() == pytest.approx((lo - 0.01, hi + 0.01))
    assert PaperValue(0.5).interval() == (0.5, 0.5)
    assert PaperValue(1.0, DIGITISATION, 2400).interval()[1] == 1.0


def test_an_accuracy_matches_when_the_paper_is_not_significantly_unlike_a_new_seed():
    """Match iff p >= ALPHA: found by moving the paper's value until p crosses 0.05, on both sides of it."""
    def p_at(v):
        return grade_accuracy(SEEDS, PaperValue(v, DIGITISATION, GRADING_N)).p_value

    lo, hi = 0.45, 0.99  # p(0.45) > 0.05 > p(0.99): bisect for the crossing
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if p_at(mid) >= ALPHA else (lo, mid)
    assert grade_accuracy(SEEDS, PaperValue(lo, DIGITISATION, GRADING_N)).verdict == "match"
    assert grade_accuracy(SEEDS, PaperValue(hi + 1e-9, DIGITISATION, GRADING_N)).verdict != "match"


def test_an_accuracy_is_partial_within_a_factor_two_in_odds_beyond_our_interval_and_differs_past_it():
    tight = [Estimate(0.33, 0.32, 0.34), Estimate(0.34, 0.33, 0.35), Estimate(0.35, 0.34, 0.36),
             Estimate(0.36, 0.35, 0.37)]
    pred = prediction_interval(tight, log_odds=True)
    top = expit(logit(pred.high) + math.log(ODDS_PARTIAL))  # the partial band's edge, which the paper's interval meets
    # A paper value whose interval's low end sits just inside / outside the edge (no tolerance, no sample size).
    assert grade_accuracy(tight, top - EPS).verdict == "partial"
    assert grade_accuracy(tight, top + EPS).verdict == "differs"
    assert grade_accuracy(tight, 0.74).verdict == "differs"  # the paper's +100 against four tight seeds at 0.35


def test_one_seed_near_one_is_read_on_the_side_that_faces_the_paper():
    """0.98 [0.96, 1.0] against 0.74: the interval's lower half decides (its upper half is wide on the log-odds)."""
    assert grade_accuracy([Estimate(0.98, 0.96, 1.0)], PaperValue(0.74, DIGITISATION, GRADING_N)).verdict == "differs"


def test_the_ceiling_is_the_floors_counterpart_at_one():
    paper = PaperValue(1.0, DIGITISATION, GRADING_N)
    assert grade_accuracy([Estimate(0.99, 0.98, 1.0)] * 2, paper).verdict == "ceiling"
    assert grade_accuracy([Estimate(0.99 - EPS, 0.98, 1.0)] * 2, paper).verdict != "ceiling"
    assert grade_accuracy([Estimate(0.99, 0.98, 1.0)], PaperValue(0.99 - EPS, DIGITISATION, GRADING_N)).verdict \
        != "ceiling"


def test_near_one_the_band_is_narrower_in_accuracy_than_near_one_half():
    """A factor 2 in odds: 0.92 -> 0.958, but 0.52 -> 0.684. So 0.97 against a seed at [0.88, 0.92] differs,
    while a gap of 0.07 in the middle is partial."""
    assert grade_accuracy([Estimate(0.90, 0.88, 0.92)], 0.97).verdict == "differs"
    assert grade_accuracy([Estimate(0.50, 0.48, 0.52)], 0.59).verdict == "partial"


def test_the_floor_makes_a_claim_uninformative_only_when_the_paper_and_every_seed_are_at_it():
    chance = 1 / 120
    ceiling = floor_ceiling(chance)
    assert math.isclose(ceiling / (1 - ceiling), ODDS_FLOOR * chance / (1 - chance))
    low = [Estimate(0.02, 0.01, 0.03), Estimate(0.03, 0.02, 0.04)]
    assert grade_accuracy(low, 0.04, chance).verdict == "uninformative"
    assert grade_accuracy(low, ceiling + EPS, chance).verdict != "uninformative"  # the paper above the floor
    above = [*low, Estimate(ceiling + EPS, ceiling, ceiling + 0.01)]
    assert grade_accuracy(above, 0.04, chance).verdict != "uninformative"  # one seed above the floor
    assert grade_accuracy(low, 0.04).verdict == "match"  # without a chance level, graded as a number


def test_a_seed_without_an_interval_counts_by_its_point():
    e = Estimate.of(0.5, float("nan"), None)
    assert (e.low, e.high) == (0.5, 0.5)
    assert grade_accuracy([e], 0.5).verdict == "match" and grade_accuracy([e], 0.5 + EPS).verdict == "partial"


def test_accuracies_of_exactly_zero_or_one_have_no_infinite_trouble():
    assert grade_accuracy([Estimate(1.0, 1.0, 1.0)], 1.0).verdict == "match"
    assert grade_accuracy([Estimate(1.0, 1.0, 1.0)], 0.99).verdict == "differs"  # odds 99 vs 10^4 (clipped)
    assert grade_accuracy([Estimate(0.0, 0.0, 0.01)], 0.0).verdict == "match"
    assert math.isfinite(grade_accuracy([Estimate(1.0, 0.99, 1.0)] * 3, PaperValue(1.0, 0, 100)).p_value)


def test_a_step_matches_when_not_significantly_unlike_a_new_seed_and_is_partial_within_ten_percent():
    seeds = [Estimate(2600, 2550, 2650), Estimate(2650, 2600, 2700), Estimate(2650, 2600, 2700),
             Estimate(2700, 2650, 2750)]
    pred = prediction_interval(seeds, log_odds=False)
    assert grade_step(seeds, 2650).verdict == "match"
    edge = pred.high / (1 - STEP_PARTIAL)  # p = high + 0.1 p
    assert grade_step(seeds, edge - 1).verdict == "partial" and grade_step(seeds, edge + 1).verdict == "differs"
    assert grade_step(seeds, PaperValue(edge + 1, 2)).verdict == "partial"  # the paper's reading tolerance counts
    assert grade_step(seeds, 3400).verdict == "differs"  # the paper's letter max-accuracy step


def test_per_seed_verdicts_are_counted_most_first():
    assert per_seed_verdicts(["match", "differs", "differs"]) == "differs at 2 seeds, match at 1"
    assert per_seed_verdicts(["match"]) == "match at 1 seed"


def test_a_layer_set_is_graded_on_the_set_most_seeds_give():
    paper = frozenset({0, 1, 2, 3})
    g = grade_set([frozenset({1}), frozenset({1, 2, 3}), frozenset({1, 2, 3})], paper)
    assert g.chosen == frozenset({1, 2, 3}) and g.support == 2 and g.verdict == "partial" and not g.tied
    g = grade_set([frozenset({1}), frozenset({1}), frozenset({0, 1, 2, 3})], paper)
    assert g.verdict == "differs"  # J = 1/4 on two seeds; the third seed's match does not lift it


def test_a_tie_for_most_seeds_is_never_resolved_toward_the_paper():
    paper = frozenset({0, 1, 2, 3})
    g = grade_set([frozenset({0, 1, 2, 3}), frozenset({1}), frozenset({1, 2})], paper)
    assert g.tied and g.chosen == frozenset({1}) and g.verdict == "differs"
    g = grade_count([11, 8], 11)
    assert g.tied and g.chosen == 8 and g.verdict == "partial"


def test_a_count_matches_within_one_and_is_partial_within_three():
    assert grade_count([10, 10, 12], 11).verdict == "match"
    assert grade_count([8, 8, 11], 11).verdict == "partial"
    assert grade_count([7, 7, 11], 11).verdict == "differs"


def test_an_ordering_must_hold_at_every_seed_to_match_and_at_most_to_be_partial():
    assert grade_holds([True, True, True]) == "match"
    assert grade_holds([True, True, False]) == "partial"
    assert grade_holds([True, False, False]) == "differs"
    assert grade_holds([True, False]) == "differs"  # one of two is not "most"
    assert grade_holds([False, False], weak=[True, True]) == "partial"
    assert grade_holds([False, False], weak=[True, False]) == "differs"


def test_the_seed_summary_is_mean_sample_sd_and_range():
    s = summarise([0.33, 0.54, 0.37])
    assert math.isclose(s.mean, np.mean([0.33, 0.54, 0.37])) and math.isclose(s.sd, np.std([0.33, 0.54, 0.37], ddof=1))
    assert (s.min, s.max, s.n) == (0.33, 0.54, 3) and summarise([0.5]).sd is None


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
    six = compare_groups([1, 2, 3, 4, 5, 6], [2, 3, 4, 5, 6, 7.5], paired=True)
    assert math.isclose(six.p_permutation, 2 / 64)
    with pytest.raises(ValueError, match="equal sizes"):
        compare_groups([1, 2], [1, 2, 3], paired=True)


def test_rank_correlation_finds_a_monotone_tie_in_and_gives_no_evidence_for_a_shuffle():
    from possym.report.rules import rank_correlation

    up = rank_correlation([0.1, 0.3, 0.2, 0.5, 0.4, 0.6], [1, 3, 2, 5, 4, 6])
    assert up.rho == pytest.approx(1.0) and up.p_permutation == pytest.approx(2 / 720)
    down = rank_correlation([1, 2, 3, 4, 5, 6], [6, 5, 4, 3, 2, 1])
    assert down.rho == pytest.approx(-1.0) and down.p_permutation == pytest.approx(2 / 720)
    flat = rank_correlation([1, 2, 3, 4, 5, 6], [3, 1, 6, 2, 5, 4])
    assert abs(flat.rho) < 0.5 and flat.p_permutation > 0.3  # just past any threshold: no evidence
    with pytest.raises(ValueError, match="at least 3"):
        rank_correlation([1, 2], [2, 1])
