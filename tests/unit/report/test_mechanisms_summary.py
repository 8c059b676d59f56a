"""What each seed shows, read from constructed mechanism tables whose answers are known, on both sides of
each threshold the summary applies."""

from __future__ import annotations

import pandas as pd
import pytest

from possym.report.mechanisms import mechanism_summary


def value(summary: pd.DataFrame, measure: str, seed: int = 0) -> float:
    rows = summary[(summary.measure == measure) & (summary.seed == seed)]
    assert len(rows) == 1, f"{measure!r} at seed {seed}: {len(rows)} rows"
    return float(rows.value.item())


def hops_table(four_hop: dict[int, float], seed: int = 0) -> pd.DataFrame:
    rows = [{"task": "number", "seed": seed, "extra": k, "n_hops": 4, "accuracy": a} for k, a in four_hop.items()]
    rows += [{"task": "number", "seed": seed, "extra": k, "n_hops": 1, "accuracy": 1.0} for k in four_hop]
    return pd.DataFrame(rows)


def test_the_cliff_is_the_first_k_strictly_below_one_half_and_each_seed_has_its_own():
    table = pd.concat([hops_table({25: 0.9, 30: 0.5, 35: 0.49, 40: 0.2}, seed=0),
                       hops_table({25: 0.9, 30: 0.51, 35: 0.6, 40: 0.45}, seed=1),
                       hops_table({25: 0.9, 30: 0.8, 35: 0.7, 40: 0.6}, seed=2)])
    s = mechanism_summary({"cliff_accuracy_hops": table})
    measure = "cliff: first K with 4-hop accuracy < 0.5"
    assert value(s, measure, 0) == 35  # 0.5 itself is not below
    assert value(s, measure, 1) == 40
    assert s[(s.measure == measure) & (s.seed == 2)].empty  # never falls: no row, not a made-up K
    assert value(s, "cliff: 4-hop accuracy at K = 40", 2) == pytest.approx(0.6)
    assert value(s, "cliff: 1-hop accuracy at K = 25", 1) == 1.0


def landing_row(correct, alias_exists, query, share_alias, plane=1, alias=44, mode_offset=-50, mode_share=0.6):
    return {"task": "number", "seed": 0, "layer": 1, "head": 0, "query": query, "correct": correct,
            "alias_exists": alias_exists, "n": 100, "share_alias": share_alias, "mode_offset": mode_offset,
            "mode_share": mode_share, "top_offsets": f"{mode_offset}:{mode_share}", "alias": alias, "plane": plane}


def test_the_alias_share_is_the_failing_inputs_at_the_first_hop_query_where_the_alias_key_exists():
    rows = [landing_row(False, True, 0, 0.25), landing_row(True, True, 0, 0.9), landing_row(False, False, 0, 0.8),
            landing_row(False, True, 1, 0.7), landing_row(False, True, 0, 0.0, plane=2, alias=29)]
    s = mechanism_summary({"cliff_landing_summary": pd.DataFrame(rows)})
    assert value(s, "cliff: L1 failing maxima on the plane-1 alias (-44)") == pytest.approx(0.25)
    assert value(s, "cliff: L1 failing maxima on the plane-2 alias (-29)") == 0.0
    mode = s[s.measure == "cliff: L1 failing maxima at the commonest offset"]
    assert mode.value.item() == pytest.approx(0.6) and "offset -50" in mode.detail.item()


def test_dilution_reads_the_largest_k_up_to_800_and_the_every_layer_sharpening():
    knock = pd.DataFrame([{"task": "letter", "seed": 1, "knocked_out": arm, "extra": k, "n_hops": 4, "accuracy": a,
                           "n": 64} for arm, k, a in (("none", 300, 0.3), ("none", 700, 0.1), ("none", 2000, 0.0),
                                                      ("all", 700, 1.0), ("L2", 700, 0.5))])
    sharpen = pd.DataFrame([{"task": "letter", "seed": 1, "set": s, "beta": b, "extra": 700, "n_hops": 4,
                             "accuracy": a} for s, b, a in (("all", 1.3, 0.4), ("symbolic", 1.3, 0.2),
                                                            ("all", 1.2, 0.3))])
    s = mechanism_summary({"dilution_knockout": knock, "dilution_sharpen": sharpen})
    assert value(s, "dilution: 4-hop accuracy at K = 700, as trained", 1) == pytest.approx(0.1)
    assert value(s, "dilution: 4-hop accuracy at K = 700, extra window knocked out in every layer", 1) == 1.0
    assert value(s, "dilution: 4-hop accuracy at K = 700, every layer's logits x 1.3", 1) == pytest.approx(0.4)
    assert not s.measure.str.contains("x 1.2").any()  # only the betas the summary reports


def test_l0_reports_the_best_checkpoints_test_and_the_sustained_count():
    modality = pd.DataFrame([{"task": "number", "seed": 0, "step": st, "layer": 0, "head": 0, "query": "last",
                              "score": "s_sym", "p_value": p, "share_above": 0.2, "mixture": p < 0.05}
                             for st, p in ((4300, 0.02), (6750, 0.18))])
    tally = pd.DataFrame([{"task": "number", "seed": 0, "kind": "symbolic", "ever_point": 12, "counted": 11,
                           "layers_counted": "1 2"}])
    s = mechanism_summary({"l0_modality": modality, "l0_tally": tally})
    p = s[s.measure == "l0: last-token s_SYM unimodality p-value (best checkpoint)"]
    assert p.value.item() == pytest.approx(0.02) and "mixture at 0.05: True" in p.detail.item()
    count = s[s.measure == "l0: symbolic heads ever pure, sustained count"]
    assert count.value.item() == 11 and "point estimate 12" in count.detail.item()
