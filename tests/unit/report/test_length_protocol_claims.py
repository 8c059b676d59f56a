"""How each reading of the length protocol moves the length claims: values read at the right K, verdicts that flip."""

import pandas as pd
import pytest

from possym.errors import PossymError
from possym.report.length_protocol import (
    ORDER_CLAIM,
    accuracy_claim,
    claims_by_reading,
    length_claim_table,
    length_claim_values,
)


def curves(acc, extra_tokens="targets", seeds=(0, 1, 2), half=0.02):
    """Pooled rows: ``acc[task][K]`` is each seed's accuracy (seed s adds 0.01 s), a ±half interval."""
    return pd.DataFrame([
        dict(task=task, seed=s, extra_tokens=extra_tokens, hop_mix="uniform", checkpoint="best", extra=k,
             seq_len=k + 17, n_hops=0, accuracy=a + 0.01 * s, cluster_low=a + 0.01 * s - half,
             cluster_high=a + 0.01 * s + half)
        for task, points in acc.items() for k, a in points.items() for s in seeds])


def test_values_are_read_at_k_or_at_total_length_minus_the_window():
    frame = curves({"number": {83: 0.6, 100: 0.5, 783: 0.2, 800: 0.1}, "letter": {83: 0.9, 100: 0.8}})
    values = length_claim_values(frame)
    got = values[(values.claim == accuracy_claim("number", 100)) & (values.seed == 0)]
    assert got.set_index("x_axis").value.to_dict() == {"extra": 0.5, "seq_len": 0.6}
    assert got.set_index("x_axis").at_extra.to_dict() == {"extra": 100, "seq_len": 83}
    assert values[values.claim == accuracy_claim("number", 100)].paper.iloc[0] == 0.74
    assert accuracy_claim("letter", 800) not in set(values.claim)  # not measured: no row


def test_a_reading_that_moves_the_accuracy_flips_the_verdict():
    frame = pd.concat([curves({"number": {100: 0.73}, "letter": {100: 0.99}}, "targets"),
                       curves({"number": {100: 0.40}, "letter": {100: 0.99}}, "mixed")])
    table = length_claim_table(frame, x_axes=("extra",))
    row = table[table.claim == accuracy_claim("number", 100)].set_index("extra_tokens")
    assert row.loc["targets", "verdict"] == "match" and row.loc["mixed", "verdict"] == "differs"
    assert row.loc["mixed", "cell"] == "0.41 (0.40–0.42) differs"
    wide = claims_by_reading(table)
    assert wide.shape == (len(set(table.claim)), 2)


def test_the_floor_is_uninformative_with_the_chance_level():
    frame = curves({"number": {5000: 0.01}, "letter": {5000: 0.47}}, half=0.005)
    table = length_claim_table(frame, chance={"number": 1 / 120, "letter": 1 / 64}, x_axes=("extra",))
    assert table.set_index("claim").loc[accuracy_claim("number", 5000), "verdict"] == "uninformative"
    assert table.set_index("claim").loc[accuracy_claim("letter", 5000), "verdict"] == "match"  # paper 0.48


@pytest.mark.parametrize("letter_at_60, verdict", [(0.9, "match"), (0.1, "differs")])
def test_the_ordering_holds_only_where_letter_is_at_or_above_number_at_every_length_from_50(letter_at_60, verdict):
    # At K = 40 the letter curve may fall below: the claim starts at 50.
    frame = curves({"number": {40: 0.9, 50: 0.5, 60: 0.5, 100: 0.3}, "letter": {40: 0.1, 50: 0.9, 60: letter_at_60,
                                                                                   100: 0.9}})
    table = length_claim_table(frame, x_axes=("extra",))
    order = table[table.claim == ORDER_CLAIM].iloc[0]
    assert order.verdict == verdict
    values = length_claim_values(frame, ("extra",))
    assert set(values[values.claim == ORDER_CLAIM].value) == {1.0 if verdict == "match" else 2 / 3}


def test_missing_columns_and_bad_axes_are_refused():
    with pytest.raises(PossymError, match="lack the columns"):
        length_claim_values(pd.DataFrame({"task": ["number"]}))
    with pytest.raises(PossymError, match="allowed"):
        length_claim_values(curves({"number": {0: 1.0}}), x_axes=("tokens",))
