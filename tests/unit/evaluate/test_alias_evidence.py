"""The aliasing rule on both sides of each threshold: landing share and ratio, and a gate that must raise
accuracy where the alias exists (a gate that breaks the layer does not count)."""

from __future__ import annotations

import pandas as pd
import pytest

from possym.errors import PossymError
from possym.evaluate.alias_evidence import GATE_GAIN, LANDING_RATIO, LANDING_SHARE, alias_evidence


def summary(fail: float, ok: float) -> pd.DataFrame:
    return pd.DataFrame({"layer": 1, "plane": 1, "alias": 44, "query": 0, "alias_exists": [True, True, False],
                         "correct": [False, True, False], "n": [100, 300, 50], "share_alias": [fail, ok, 0.9]})


def gated(above_gated: float, above: float = 0.4) -> pd.DataFrame:
    # baseline and plane 1 gated in layer 1, at K = 25 (no alias) and K = 50 (an alias for every key)
    return pd.DataFrame({"layer": [-1, -1, 1, 1], "plane": [0, 0, 1, 1], "extra": [25, 50, 25, 50], "n_hops": 1,
                         "n": 1000, "correct": [950, round(above * 1000), 900, round(above_gated * 1000)]})


@pytest.mark.parametrize("fail, ok, lands", [
    (LANDING_SHARE + 0.01, 0.0, True),
    (LANDING_SHARE - 0.01, 0.0, False),  # too few failures land on the alias
    (0.6, 0.6 / LANDING_RATIO - 0.01, True),
    (0.6, 0.6 / LANDING_RATIO + 0.01, False),  # the successes land there nearly as often
])
def test_the_landing_part_flips_at_its_thresholds(fail, ok, lands):
    row = alias_evidence(summary(fail, ok), gated(0.8)).iloc[0]
    assert bool(row.landing_supports) is lands and bool(row.supported) is lands
    assert row.share_alias_fail == pytest.approx(fail)  # the rows without an alias key do not count


@pytest.mark.parametrize("gain, helps", [(GATE_GAIN + 0.01, True), (GATE_GAIN - 0.01, False), (-0.3, False)])
def test_the_gate_part_needs_accuracy_gained_where_the_alias_exists(gain, helps):
    row = alias_evidence(summary(0.5, 0.0), gated(0.4 + gain)).iloc[0]
    assert bool(row.gate_supports) is helps and bool(row.supported) is helps
    assert (row.acc_below, row.acc_above) == (0.95, 0.4)


def test_missing_inputs_say_what_is_wrong():
    with pytest.raises(PossymError, match="baseline"):
        alias_evidence(summary(0.5, 0.0), gated(0.8).query("layer == 1"))
    with pytest.raises(PossymError, match="columns"):
        alias_evidence(summary(0.5, 0.0).drop(columns="alias"), gated(0.8))
