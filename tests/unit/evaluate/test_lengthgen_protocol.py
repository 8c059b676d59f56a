"""The length protocol: windows balanced over answer values, and each reading of the extra tokens and the hop mix."""

import numpy as np
import pytest
from scipy.stats import chisquare
from test_lengthgen import WindowOracle

from possym.config import ConfigError
from possym.evaluate.lengthgen import (
    EXTRA_TOKENS,
    LengthGenConfig,
    hop_weights,
    measure_length_curve,
    point_prefix,
    point_samples,
)
from possym.tasks import solve, task_config, task_vocab


def answer_values(task, cfg, n_hops, extra):
    """Every answer id of the protocol's windows at one (K, hop count), over all prefixes."""
    return np.concatenate([
        point_samples(task, cfg, n_hops, j, extra, point_prefix(task, cfg, n_hops, j)).answer
        for j in range(cfg.n_prefixes)
    ])


@pytest.mark.parametrize("extra", [0, 100, 800])
def test_letter_windows_are_balanced_over_answer_letters_at_every_hop_count(extra):
    # Before the fix each prefix left its chain letters at random and 1-hop windows after it all had the
    # one free letter as answer: at seed 0, two of the eight letters were never a 1-hop answer.
    task = task_config("letter")
    cfg = LengthGenConfig(grid=(0, 100, 800), n=400, n_prefixes=8)
    for n_hops in task.hops:
        letters = (answer_values(task, cfg, n_hops, extra) - 1) // task.n_ints
        counts = np.bincount(letters, minlength=task.n_letters)
        expected = cfg.n / task.n_letters
        assert np.abs(counts - expected).max() <= 0.1 * expected, (n_hops, counts.tolist())
        # A uniform multinomial would give p ~ U(0, 1); a stratified deal sits far below its chi-square.
        assert chisquare(counts).pvalue > 0.5, (n_hops, counts.tolist())


def test_every_window_of_the_balanced_protocol_still_solves():
    task = task_config("letter")
    vocab = task_vocab(task)
    cfg = LengthGenConfig(grid=(0, 60), n=256, n_prefixes=8)
    for n_hops in task.hops:
        samples = point_samples(task, cfg, n_hops, 3, 60, point_prefix(task, cfg, n_hops, 3))
        for record in samples.records(vocab):
            assert solve("letter", record["tokens"]).answer == record["answer"]


@pytest.mark.parametrize("name", ["number", "letter"])
@pytest.mark.parametrize("tokens", EXTRA_TOKENS)
def test_every_reading_of_the_extra_tokens_keeps_every_answer(name, tokens):
    # The oracle answers from the whole input, so a prefix token that made a second match (letter task) or
    # moved an answer would cost accuracy.
    task = task_config(name)
    vocab = task_vocab(task)
    cfg = LengthGenConfig(grid=(0, 40), n=16, n_prefixes=2, extra_tokens=tokens, mode="plain")
    for n_hops in task.hops:
        long = point_prefix(task, cfg, n_hops, 1)
        samples = point_samples(task, cfg, n_hops, 1, 40, long)
        for record in samples.records(vocab):
            solution = solve(name, record["tokens"])
            assert (solution.answer, solution.n_hops) == (record["answer"], n_hops)
        kinds = {"digit" if tok[-1].isdigit() else "letter" for tok in vocab.decode(long)}
        is_target = {"number": "letter", "letter": "digit"}[name]
        other = ({"letter", "digit"} - {is_target}).pop()
        want = {"targets": {is_target}, "pretargets": {other}}.get(tokens, {is_target, other})
        assert kinds == want, (tokens, kinds)


def test_windows_reading_lays_the_prefix_out_as_windows_ending_at_the_real_one():
    task = task_config("number")
    cfg = LengthGenConfig(grid=(0, 40), n=2, n_prefixes=1, extra_tokens="windows")
    long = task_vocab(task).decode(point_prefix(task, cfg, 1, 0))
    is_offset = [tok.isdigit() for tok in long]
    # The last 8 before the window are offsets, the 8 before those letters, and so on.
    assert is_offset == [((p - 40) % 16) >= 8 for p in range(40)]


def test_the_default_reading_is_todays_draw():
    # Committed number curves must not move: the default prefix is the draw the number task always made.
    from possym.tasks import draw_prefix

    task = task_config("number")
    cfg = LengthGenConfig(grid=(0, 30))
    from possym.evaluate.lengthgen import point_rng

    assert (point_prefix(task, cfg, 2, 1) == draw_prefix(task, 30, 1, point_rng(0, 0, 1))).all()


def test_hop_mix_test_weights_the_pooled_row_by_the_test_split_share():
    task = task_config("number", n_test=10)  # balanced rows over 4 hop counts: 3, 3, 2, 2 (as ranked)
    weights = hop_weights(task, "test")
    assert sorted(weights.values()) == [0.2, 0.2, 0.3, 0.3]
    assert hop_weights(task_config("number"), "test") == {h: 0.25 for h in (1, 2, 3, 4)}  # the paper's 45,600
    cfg = LengthGenConfig(grid=(0,), n=8, n_prefixes=2, hop_mix="test")
    oracle_rows = measure_length_curve(WindowOracle(task, fixed="a"), task, cfg)
    per_hop = {r["n_hops"]: r["accuracy"] for r in oracle_rows}
    assert per_hop[0] == pytest.approx(sum(weights[h] * per_hop[h] for h in task.hops))


@pytest.mark.parametrize("kw,match", [(dict(extra_tokens="ints"), "allowed: \\('targets'"),
                                       (dict(hop_mix="train"), "allowed: \\('uniform', 'test'\\)")])
def test_bad_protocol_readings_are_refused(kw, match):
    with pytest.raises(ConfigError, match=match):
        LengthGenConfig(**kw)
