"""Sustained, input-sure purity on both sides of its rule: a one-checkpoint spike is not counted, a run of
pure checkpoints is; a mean just past γ on noisy inputs is not counted, a tight one is; and the bootstrap
shares agree with a brute-force resampling loop."""

from __future__ import annotations

import numpy as np
import pytest

from possym.errors import PossymError
from possym.scores.dynamics import purity
from possym.scores.sustained import longest_runs, sustained_purity

STEPS = [0, 50, 100, 150, 200]


def scores(per_step: list[float], n: int = 40, sd: float = 0.0, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """One head, one layer: s_pos per step around ``per_step`` with input noise ``sd``; s_sym = 1 − s_pos."""
    rng = np.random.default_rng(seed)
    pos = np.clip(np.asarray(per_step)[:, None] + sd * rng.standard_normal((len(per_step), n)), 0, 1)
    return pos[:, :, None, None], 1 - pos[:, :, None, None]


def row(table, kind="positional"):
    return table[table.kind == kind].iloc[0]


def test_a_single_checkpoint_spike_is_not_counted_but_would_be_by_the_plain_tally():
    pos, sym = scores([0.5, 0.5, 0.97, 0.5, 0.5])
    r = row(sustained_purity(pos, sym, STEPS, np.random.default_rng(0), n_boot=200))
    assert r.ever_point and r.share_ever == 1.0  # sure over inputs at that one step
    assert r.longest_run == 1 and r.share_sustained == 0.0 and not r.counted and r.first_sustained is None


def test_sustained_purity_is_counted_from_its_first_run():
    pos, sym = scores([0.5, 0.97, 0.5, 0.97, 0.97], sd=0.01)
    r = row(sustained_purity(pos, sym, STEPS, np.random.default_rng(0), n_boot=200))
    assert r.counted and r.longest_run == 2 and r.first_sustained == 150
    assert not row(sustained_purity(pos, sym, STEPS, np.random.default_rng(0), n_boot=200), "symbolic").counted


def test_a_mean_just_past_gamma_on_noisy_inputs_is_not_counted():
    # Each input is 1 or 0.8: the mean, 0.905, is pure at gamma 0.1 on this sample, not on most others.
    pos = np.tile(np.r_[np.ones(21), np.full(19, 0.8)], (5, 1))[:, :, None, None]
    r = row(sustained_purity(pos, 1 - pos, STEPS, np.random.default_rng(0), n_boot=400))
    assert r.ever_point and r.longest_run == 5
    assert 0.2 < r.share_sustained < 0.95 and not r.counted


def test_bootstrap_shares_are_a_brute_force_resampling_loop():
    pos, sym = scores([0.5, 0.9, 0.92, 0.91, 0.6], sd=0.05, seed=3)
    table = sustained_purity(pos, sym, STEPS, np.random.default_rng(7), n_boot=100)
    rng = np.random.default_rng(7)
    counts = rng.multinomial(40, np.full(40, 1 / 40), size=100)
    runs = []
    for c in counts:
        idx = np.repeat(np.arange(40), c)
        pure = [purity(pos[s, idx, 0, 0].mean(), sym[s, idx, 0, 0].mean(), 0.1) == "positional" for s in range(5)]
        runs.append(int(longest_runs(np.array(pure))))
    assert row(table).share_sustained == pytest.approx(np.mean(np.array(runs) >= 2), abs=1e-12)
    assert row(table).share_ever == pytest.approx(np.mean(np.array(runs) >= 1), abs=1e-12)


def test_bad_requests_say_what_is_wrong():
    pos, sym = scores([0.5] * 5)
    with pytest.raises(PossymError, match="steps"):
        sustained_purity(pos, sym, [0, 50, 100], np.random.default_rng(0))
    with pytest.raises(PossymError, match="one shape"):
        sustained_purity(pos, sym[:, :3], STEPS, np.random.default_rng(0))
