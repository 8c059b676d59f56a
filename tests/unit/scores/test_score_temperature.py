"""Scores at several swap temperatures from one pass, against swap-and-rerun at each τ; the verdict table."""

from __future__ import annotations

import pytest
import torch
from score_fixtures import random_model, random_tokens

from possym.records import ScoreRecord
from possym.scores.metric import TAU
from possym.scores.swap_and_rerun import reference_head_scores
from possym.scores.swaps import head_scores_over_tau
from possym.scores.temperature import moved_verdicts, tau_verdicts


def test_one_pass_at_several_taus_equals_swap_and_rerun_at_each():
    model, tokens = random_model(n_heads=2), random_tokens()
    taus = (0.5 * TAU, TAU, 1e-2, 1.0)
    fast = head_scores_over_tau(model, tokens, taus, layers=[0, 1])
    for tau in taus:
        slow = reference_head_scores(model, tokens, layers=[0, 1], tau=tau)
        assert (fast[tau].s_pos - slow.s_pos.double()).abs().max() <= 1e-6
        assert (fast[tau].s_sym - slow.s_sym.double()).abs().max() <= 1e-6
    # τ changes the weights, so the scores are not all equal across τ (the test can fail)
    assert (fast[TAU].s_pos - fast[1.0].s_pos).abs().max() > 1e-3


def test_taus_are_validated():
    model, tokens = random_model(), random_tokens()
    with pytest.raises(ValueError, match="each > 0"):
        head_scores_over_tau(model, tokens, (TAU, 0.0))
    with pytest.raises(ValueError, match="at least one"):
        head_scores_over_tau(model, tokens, ())


def rows(step: int, values: dict[int, tuple[float, float]]) -> list[ScoreRecord]:
    return [ScoreRecord(step, "last", layer, 0, p, s, 1.0, 9) for layer, (p, s) in values.items()]


def test_a_verdict_moves_only_where_a_head_crosses_gamma():
    """L0 pure symbolic at every τ (never moves); L1 pure positional at step 200 at the paper's τ but only at
    step 300 at 2τ (its first step moves); L2 impure everywhere."""
    at_tau = (rows(100, {0: (0.0, 1.0), 1: (0.5, 0.5), 2: (0.5, 0.5)})
              + rows(200, {0: (0.0, 1.0), 1: (0.95, 0.02), 2: (0.6, 0.4)})
              + rows(300, {0: (0.0, 1.0), 1: (0.97, 0.01), 2: (0.5, 0.5)}))
    at_2tau = (rows(100, {0: (0.01, 0.99), 1: (0.5, 0.5), 2: (0.5, 0.5)})
               + rows(200, {0: (0.0, 1.0), 1: (0.85, 0.05), 2: (0.6, 0.4)})
               + rows(300, {0: (0.0, 1.0), 1: (0.96, 0.02), 2: (0.5, 0.5)}))
    frame = tau_verdicts({TAU: at_tau, 2 * TAU: at_2tau})
    moved = moved_verdicts(frame)
    assert moved[["factor", "layer", "first_step"]].values.tolist() == [[2.0, 1, 300]]
    assert not frame[frame.factor == 1.0].moves.any()  # the reference never moves against itself
    with pytest.raises(ValueError, match="reference"):
        tau_verdicts({2 * TAU: at_2tau})


def test_a_one_hot_head_scores_the_same_at_every_tau_much_below_the_mass_it_moves():
    """A sharp positional head (one-hot on key 0 of 3): the swaps that touch key 0 move mass 1, the third moves
    none and has no direction (cosine 0). At τ ≪ 1 the first two carry all the weight, (1, 0) at every factor
    shown; at τ = 1 the third swap gets weight and s_POS drops, so the invariance is the small τ's."""
    from possym.scores.metric import pair_scores

    clean = torch.tensor([[1.0, 0.0], [1.0, 0.0], [0.0, 0.0]], dtype=torch.float64)
    for tau in (0.5 * TAU, TAU, 2 * TAU, 10 * TAU):
        pos, sym = pair_scores(clean, clean.clone(), tau)
        assert float(pos) == pytest.approx(1.0) and float(sym) == pytest.approx(0.0)
    assert float(pair_scores(clean, clean.clone(), 1.0)[0]) < 0.9
