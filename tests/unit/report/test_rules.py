"""Each verdict rule on both sides of its threshold: a result just past it flips the verdict."""

from __future__ import annotations

import math
from itertools import combinations

import numpy as np
import pytest
from scipy import stats

from possym.report.rules import (
    ODDS_FLOOR,
    ODDS_PARTIAL,
    STEP_PARTIAL,
    Estimate,
    compare_groups,
    expit,
    floor_ceiling,
    grade_accuracy,
    grade_count,
    grade_holds,
    grade_set,
    grade_step,
    logit,
    summarise,
)

EPS = 1e-6
SEEDS = [Estimate(0.33, 0.30, 0.36), Estimate(0.54, 0.50, 0.58), Estimate(0.37, 0.34, 0.40)]


def test_an_accuracy_matches_inside_the_seed_range_widened_by_each_seeds_interval():
    assert grade_accuracy(SEEDS, 0.30).verdict == "match"  # seed 0's own low end
    assert grade_accuracy(SEEDS, 0.58).verdict == "match"  # seed 1's own high end
    assert grade_accuracy(SEEDS, 0.58 + EPS).verdict == "partial"
    assert grade_accuracy(SEEDS, 0.30 - EPS).verdict == "partial"


def test_an_accuracy_is_partial_within_a_factor_two_in_odds_beyond_the_range_and_differs_past_it():
    top = expit(logit(0.58) + math.log(ODDS_PARTIAL))
    bottom = expit(logit(0.30) - math.log(ODDS_PARTIAL))
    assert grade_accuracy(SEEDS, top - EPS).verdict == "partial"
    assert grade_accuracy(SEEDS, top + EPS).verdict == "differs"
    assert grade_accuracy(SEEDS, bottom + EPS).verdict == "partial"
    assert grade_accuracy(SEEDS, bottom - EPS).verdict == "differs"
    assert grade_accuracy(SEEDS, 0.74).verdict == "differs"  # the paper's +100 against 0.33 / 0.54 / 0.37


def test_near_one_the_band_is_narrower_in_accuracy_than_near_one_half():
    """A factor 2 in odds: 0.90 -> 0.947, but 0.50 -> 0.667. So 0.96 against a seed at [0.88, 0.92] differs,
    while the same gap of 0.04 in the middle would be partial."""
    assert grade_accuracy([Estimate(0.90, 0.88, 0.92)], 0.96).verdict == "differs"
    assert grade_accuracy([Estimate(0.50, 0.48, 0.52)], 0.56).verdict == "partial"


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
    assert grade_accuracy([Estimate(1.0, 1.0, 1.0)], 0.99).verdict == "differs"  # odds 99 vs infinite
    assert grade_accuracy([Estimate(0.0, 0.0, 0.01)], 0.0).verdict == "match"


def test_a_step_matches_in_the_widened_range_and_is_partial_within_ten_percent_of_the_papers_value():
    seeds = [Estimate(2633, 2583, 2683), Estimate(2550, 2500, 2600)]
    assert grade_step(seeds, 2683).verdict == "match" and grade_step(seeds, 2684).verdict == "partial"
    edge = 2683 / (1 - STEP_PARTIAL)  # p = 2683 + 0.1 p
    assert grade_step(seeds, edge - 1).verdict == "partial" and grade_step(seeds, edge + 1).verdict == "differs"
    assert grade_step(seeds, 3400).verdict == "differs"  # the paper's letter max-accuracy step


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
