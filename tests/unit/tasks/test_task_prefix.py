"""Windows that share one prefix (the length-generalisation protocol), against the independent solver."""

import hashlib

import numpy as np
import pytest

from possym.tasks import draw_prefix, generate, generate_after, solve, task_config, task_vocab

CONFIGS = {
    "number": task_config("number"),
    "letter": task_config("letter"),
    "letter-small": task_config("letter", n_letters=4, n_ints=3, n_target=4, n_pretarget=6, max_hops=3),
}


@pytest.mark.parametrize("length", [0, 1, 40, 600])
@pytest.mark.parametrize("key", list(CONFIGS))
def test_every_window_after_a_shared_prefix_solves_to_its_answer(key, length):
    # The solver raises on a second match, so this also checks that no prefix token matches a hop.
    cfg = CONFIGS[key]
    rng = np.random.default_rng(length)
    for n_hops in cfg.hops:
        prefix = draw_prefix(cfg, length, n_hops, rng)
        samples = generate_after(cfg, prefix, 60, n_hops, rng)
        assert samples.extra == length and (samples.tokens[:, :length] == prefix).all()
        assert (samples.n_hops == n_hops).all()
        for record in samples.records(task_vocab(cfg)):
            solution = solve(cfg.name, record["tokens"])
            assert (solution.answer, solution.n_hops, list(solution.path)) == (
                record["answer"],
                n_hops,
                record["path"],
            )


def test_letter_prefixes_leave_exactly_the_chain_letters_free():
    cfg = task_config("letter")
    vocab, rng = task_vocab(cfg), np.random.default_rng(0)
    for n_hops in cfg.hops:
        prefix = draw_prefix(cfg, 2000, n_hops, rng)
        letters = {t[0] for t in vocab.decode(prefix)}
        assert len(letters) == cfg.n_letters - n_hops  # 2,000 draws use every letter allowed
        samples = generate_after(cfg, prefix, 200, n_hops, rng)
        answers = {vocab.tokens[a][0] for a in samples.answer}
        assert not answers & letters and len(answers) == n_hops


def test_answers_of_windows_after_a_prefix_stay_balanced_over_position():
    cfg = task_config("number")
    rng = np.random.default_rng(1)
    samples = generate_after(cfg, draw_prefix(cfg, 10, 2, rng), 800, 2, rng)
    answer_pos = samples.path[np.arange(800), samples.n_hops] - 10
    assert np.bincount(answer_pos, minlength=8).tolist() == [100] * 8


def test_a_prefix_that_uses_too_many_letters_or_a_bad_hop_count_is_refused():
    cfg = task_config("letter")
    rng = np.random.default_rng(2)
    everything = draw_prefix(cfg, 3000, 1, rng)  # 7 letters used: only one is free
    with pytest.raises(ValueError, match="too few for 3-hop chains"):
        generate_after(cfg, everything, 10, 3, rng)
    with pytest.raises(ValueError, match=r"n_hops=5 is not a hop count of this task; allowed: \[1, 2, 3, 4\]"):
        draw_prefix(cfg, 10, 5, rng)
    with pytest.raises(ValueError, match=r"holds only letter-task tokens; got token id 0"):
        generate_after(cfg, np.array([5, 0, 7]), 10, 1, rng)  # PAD is no token a prefix may hold


@pytest.mark.parametrize("name,digest", [("number", "6cf1f48557fdc628"), ("letter", "b66db4016fb3826e")])
def test_plain_generation_is_unchanged_by_the_prefix_machinery(name, digest):
    # Training data must stay bit-identical to the runs already made: these digests were computed with
    # the generator as it was before shared prefixes existed (commit 01f24a9).
    s = generate(task_config(name), 500, np.random.default_rng(7), extra=3)
    assert hashlib.sha256(s.tokens.tobytes()).hexdigest()[:16] == digest


def test_windows_after_any_cut_of_a_letter_prefix_keep_the_whole_prefix_letters_off_the_chain():
    # Nested prefixes: the K = 10 windows must use the same chain letters as the K = 5,000 ones.
    cfg = task_config("letter")
    vocab, rng = task_vocab(cfg), np.random.default_rng(5)
    prefix = draw_prefix(cfg, 3000, 2, rng)
    letters = {t[0] for t in vocab.decode(prefix)}
    for length in (0, 3, 3000):
        samples = generate_after(cfg, prefix, 100, 2, rng, length=length)
        assert samples.extra == length and (samples.tokens[:, :length] == prefix[:length]).all()
        assert not {vocab.tokens[a][0] for a in samples.answer} & letters
        for record in samples.records(vocab):
            assert solve("letter", record["tokens"]).answer == record["answer"]


@pytest.mark.parametrize("n_prefixes", [3, 8, 11])
def test_a_letter_prefix_plan_frees_every_letter_equally_often_and_its_prefixes_avoid_their_free_letters(n_prefixes):
    from possym.tasks import prefix_plan

    cfg = task_config("letter")
    vocab, rng = task_vocab(cfg), np.random.default_rng(n_prefixes)
    for n_hops in cfg.hops:
        plan = prefix_plan(cfg, n_hops, n_prefixes, rng)
        counts = np.bincount(np.concatenate([p["free"] for p in plan]), minlength=cfg.n_letters)
        assert counts.max() - counts.min() <= 1 and counts.sum() == n_hops * n_prefixes
        for entry in plan[:2]:
            prefix = draw_prefix(cfg, 500, n_hops, rng, **entry)
            assert not {t[0] for t in vocab.decode(prefix)} & set("abcdefgh"[i] for i in entry["free"])
            answers = generate_after(cfg, prefix, 40, n_hops, rng).answer
            letters = np.bincount((answers - 1) // cfg.n_ints, minlength=cfg.n_letters)[entry["free"]]
            assert letters.max() - letters.min() <= 1  # s* dealt evenly over the free letters
    assert prefix_plan(task_config("number"), 2, 3, rng) == [{}, {}, {}]  # any number window follows any prefix
    with pytest.raises(ValueError, match="must be 2 distinct letter indices"):
        draw_prefix(cfg, 10, 2, rng, free=np.array([1, 1]))
    with pytest.raises(ValueError, match="tokens='ints'; allowed"):
        draw_prefix(cfg, 10, 2, rng, tokens="ints")
