"""Every generated instance against the independent solver, and the structure App. B prescribes."""

import numpy as np
import pytest

from possym.tasks import generate, solve, task_config, task_vocab

SMALL = dict(n_target=4, n_pretarget=6, min_hops=1, max_hops=3)
CONFIGS = {
    "number-default": task_config("number"),
    "number-small": task_config("number", n_letters=5, **SMALL),
    "number-2to4": task_config("number", min_hops=2, max_hops=4),
    "number-1hop": task_config("number", min_hops=1, max_hops=1),
    "number-9hops": task_config("number", min_hops=9, max_hops=9),
    "letter-default": task_config("letter"),
    "letter-small": task_config("letter", n_letters=4, n_ints=3, **SMALL),
    "letter-3to4": task_config("letter", min_hops=3, max_hops=4),
    "letter-7hops": task_config("letter", n_letters=12, min_hops=7, max_hops=7),
}


@pytest.mark.parametrize("extra", [0, 5, 300])
@pytest.mark.parametrize("key", list(CONFIGS))
def test_the_solver_agrees_with_every_generated_sample(key, extra):
    cfg = CONFIGS[key]
    samples = generate(cfg, 400, np.random.default_rng(1), extra=extra)
    assert samples.tokens.shape == (400, extra + cfg.seq_len) and samples.extra == extra
    for record in samples.records(task_vocab(cfg)):
        solution = solve(cfg.name, record["tokens"])
        assert (solution.answer, solution.n_hops, list(solution.path)) == (
            record["answer"],
            record["n_hops"],
            record["path"],
        )


@pytest.mark.parametrize("extra", [0, 7])
@pytest.mark.parametrize("name", ["number", "letter"])
def test_chains_move_leftwards_from_the_query_to_the_target_window(name, extra):
    cfg = task_config(name)
    samples = generate(cfg, 2000, np.random.default_rng(2), extra=extra)
    rows = np.arange(len(samples))
    path, n_hops = samples.path - extra, samples.n_hops
    padded = np.arange(cfg.max_hops + 1) > n_hops[:, None]
    assert (samples.path[padded] == -1).all() and (samples.path[~padded] >= extra).all()
    assert (path[:, 0] == cfg.seq_len - 1).all()
    answer_pos = path[rows, n_hops]
    assert ((0 <= answer_pos) & (answer_pos < cfg.n_target)).all()
    inner = ~padded & (np.arange(cfg.max_hops + 1) > 0) & (np.arange(cfg.max_hops + 1) < n_hops[:, None])
    assert (path[inner] >= cfg.n_target).all()
    steps = np.diff(np.where(padded, -(10**6), path), axis=1)[:, : cfg.max_hops]
    assert (steps[~padded[:, 1:]] < 0).all()
    assert (samples.tokens[rows, samples.path[rows, n_hops]] == samples.answer).all()


def test_number_windows_hold_letters_then_offsets_that_stay_inside_the_window():
    cfg = task_config("number")
    extra = 3
    samples = generate(cfg, 1000, np.random.default_rng(3), extra=extra)
    first_offset = task_vocab(cfg).id("1")
    n_offsets = cfg.n_target + cfg.n_pretarget
    is_offset = (samples.tokens >= first_offset) & (samples.tokens < first_offset + n_offsets)
    assert not is_offset[:, : extra + cfg.n_target].any()
    assert is_offset[:, extra + cfg.n_target :].all()
    window_pos = np.arange(cfg.n_target, cfg.seq_len)
    offsets = samples.tokens[:, extra + cfg.n_target :] - first_offset + 1
    assert (offsets <= window_pos).all()


def test_number_distractors_point_to_every_earlier_position():
    cfg = task_config("number", min_hops=1, max_hops=1)
    samples = generate(cfg, 3000, np.random.default_rng(4))
    offsets = samples.tokens[:, cfg.n_target : -1] - task_vocab(cfg).id("1") + 1  # all distractors at 1 hop
    for column, p in enumerate(range(cfg.n_target, cfg.seq_len - 1)):
        counts = np.bincount(p - offsets[:, column], minlength=p)
        assert len(counts) == p and counts.min() > 0.5 * len(samples) / p


@pytest.mark.parametrize("extra", [0, 6])
def test_letter_chain_letters_appear_nowhere_off_the_chain(extra):
    cfg = task_config("letter")
    samples = generate(cfg, 500, np.random.default_rng(5), extra=extra)
    for record in samples.records(task_vocab(cfg)):
        tokens, path = record["tokens"], record["path"]
        chain = {tokens[p][-1] for p in path[:-1]}
        assert len(chain) == record["n_hops"] and tokens[path[-1]][0] in chain
        on_path = set(path)
        for pos, token in enumerate(tokens):
            letters = {c for c in token if c.isalpha()}
            if pos == path[0]:
                letters = {token[0]}
            elif pos in on_path:
                continue
            assert not letters & chain, (record, pos)


def test_letter_windows_hold_letter_int_targets_then_letter_pairs():
    cfg = task_config("letter")
    extra = 4
    samples = generate(cfg, 500, np.random.default_rng(6), extra=extra)
    for record in samples.records(task_vocab(cfg)):
        kinds = ["target" if t[1].isdigit() else "pair" for t in record["tokens"]]
        assert kinds == ["target"] * (extra + cfg.n_target) + ["pair"] * (cfg.n_pretarget + 1)


def test_take_subsets_every_array_together():
    samples = generate(task_config("letter"), 50, np.random.default_rng(7), extra=2)
    idx = np.array([4, 0, 49])
    part = samples.take(idx)
    assert len(part) == 3 and part.extra == 2
    for name in ("tokens", "answer", "n_hops", "path"):
        np.testing.assert_array_equal(getattr(part, name), getattr(samples, name)[idx])
    assert len(samples.take(slice(10, 20))) == 10
    assert samples.take(3).tokens.shape == (1, 2 + 17)


def test_generating_a_negative_number_of_samples_or_extras_is_an_error():
    with pytest.raises(ValueError, match="n=-1"):
        generate(task_config("number"), -1, np.random.default_rng(0))
    with pytest.raises(ValueError, match="extra=-2"):
        generate(task_config("number"), 3, np.random.default_rng(0), extra=-2)
