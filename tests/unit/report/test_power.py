"""Each rule kind's size and power by simulation: the rule calls a paper of our own distribution different at
most at its stated rate, and the committed table says what the rules can detect."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from possym.report.power import seeds_power, value_power, value_size
from possym.report.rules import ALPHA, value_core

TABLE = Path(__file__).resolve().parents[3] / "docs" / "reproduce_paper" / "rule_power.csv"
SIMS = 6000
# A size is "off" beyond three Monte-Carlo standard errors of the stated rate.
TOLERANCE = 3 * math.sqrt(ALPHA * (1 - ALPHA) / SIMS)


@pytest.mark.parametrize("n", [2, 3, 5, 8])
@pytest.mark.parametrize("paper_sd", [0.0, 0.25, 1.0])
def test_the_value_rules_size_is_at_most_its_stated_rate(n, paper_sd):
    size = value_size(n, sd=1.0, paper_sd=paper_sd, margin=1.0, scale="linear", rng=np.random.default_rng(n),
                      sims=SIMS)
    assert size <= ALPHA + TOLERANCE


@pytest.mark.parametrize("n", [2, 3, 8])
def test_the_prediction_alone_excludes_a_paper_of_our_own_distribution_at_exactly_the_stated_rate(n):
    """With the paper's value exact the predictive is Student's t: its p-value is uniform, so it excludes 5% (the
    verdict "differs" is rarer still: an equivalence, shown within the margin, comes first)."""
    rng = np.random.default_rng(n)
    x, paper = rng.normal(0, 1, (SIMS, n)), rng.normal(0, 1, SIMS)
    zeros = np.zeros(SIMS)
    out = value_core(x, paper, scale="linear", margin=1.0, paper_sd=zeros, paper_sd_natural=zeros, own_sd=zeros)
    assert abs(out["excluded"].mean() - ALPHA) <= TOLERANCE


def test_the_value_rules_size_holds_on_the_accuracy_scale_near_the_ceiling():
    size = value_size(8, sd=0.05, paper_sd=0.01, margin=0.1, scale="accuracy", centre=0.95,
                      rng=np.random.default_rng(3), sims=SIMS)
    assert size <= ALPHA + TOLERANCE


def test_with_one_seed_the_size_is_not_controlled_and_the_table_says_so():
    assert value_size(1, sd=1.0, paper_sd=0.25, margin=1.0, scale="linear", rng=np.random.default_rng(0),
                      sims=2000) > 0.2


def test_a_match_beyond_the_margin_is_rare_as_the_equivalence_tests_size_says():
    """Two one-sided tests at 0.05: a paper 1.2 margins from our mean is graded match at most 5% of the time."""
    p = value_power(5, sd=1.0, paper_sd=0.25, margin=2.0, scale="linear", rng=np.random.default_rng(1), sims=3000,
                    gaps=[0.0, 2.4])
    assert p.match_05 < 2.4 and p.match_at_0 > 0.3


def test_the_seeds_rules_power_in_closed_form_equals_its_simulation():
    for n in (3, 5, 8):
        exact, simulated = seeds_power(n), seeds_power(n, sims=4000, rng=np.random.default_rng(n))
        assert simulated.match_05 == pytest.approx(exact.match_05, abs=0.02)
        assert simulated.differs_80 == pytest.approx(exact.differs_80, abs=0.02)
        assert exact.size == 0.0


def test_the_committed_power_table_states_each_rule_kinds_size_and_power():
    table = pd.read_csv(TABLE)
    assert set(table.rule) == {"value (linear)", "value (accuracy)", "seeds"}
    several = table[(table.seeds >= 2) & table.rule.str.startswith("value")]
    assert (several["size"] <= ALPHA + 3 * math.sqrt(ALPHA * (1 - ALPHA) / 2000)).all()
    assert (table[(table.seeds == 1) & table.rule.str.startswith("value")]["size"] > 0.2).all()
    seeds = table[table.rule == "seeds"].set_index("seeds")
    assert seeds.loc[3, "match_05"] == pytest.approx(1 - 0.05 ** (1 / 3), abs=0.01)
