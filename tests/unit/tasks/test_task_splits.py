"""Balance, sizes, disjointness and determinism of the splits (paper App. B)."""

import numpy as np
import pytest

from possym.tasks import TASKS, balanced_combinations, generate, make_splits, task_config

N_COMBOS = {"number": 8 * 120 * 4, "letter": 8 * 8 * 8 * 4}


def classes(samples):
    """(batch, 3) rows (n_hops, answer id, answer position in the target window)."""
    rows = np.arange(len(samples))
    answer_pos = samples.path[rows, samples.n_hops] - samples.extra
    return np.stack([samples.n_hops, samples.answer, answer_pos], axis=1)


@pytest.mark.parametrize("name", ["number", "letter"])
def test_a_split_of_twice_the_combinations_holds_each_hop_answer_and_position_exactly_twice(name):
    n = 2 * N_COMBOS[name]
    cfg = task_config(name, n_train=n, n_val=0, n_test=0)
    train = make_splits(cfg, seed=3)["train"]
    unique, counts = np.unique(classes(train), axis=0, return_counts=True)
    assert len(unique) == N_COMBOS[name]
    assert (counts == 2).all()
    assert set(unique[:, 0]) == {1, 2, 3, 4} and set(unique[:, 2]) == set(range(8))


@pytest.mark.parametrize("name", ["number", "letter"])
def test_a_remainder_keeps_hop_counts_equal_and_answer_positions_within_one(name):
    n = N_COMBOS[name] + 1000
    samples = generate(task_config(name), n, np.random.default_rng(8))
    unique, counts = np.unique(classes(samples), axis=0, return_counts=True)
    assert len(unique) == N_COMBOS[name] and set(counts) == {1, 2} and counts.sum() == n
    assert np.bincount(samples.n_hops).tolist() == [0] + [n // 4] * 4
    for hop in range(1, 5):
        per_position = np.bincount(classes(samples)[samples.n_hops == hop, 2])
        assert per_position.max() - per_position.min() <= 1


@pytest.mark.parametrize("name", ["number", "letter"])
def test_the_paper_split_sizes_have_exactly_equal_hop_proportions(name):
    cfg = task_config(name)
    combos = TASKS[name].combinations(cfg)
    assert len(combos) == N_COMBOS[name]
    for size in (cfg.n_train, cfg.n_val, cfg.n_test):
        picked = balanced_combinations(combos, size, np.random.default_rng(size))
        assert np.bincount(picked[:, -1]).tolist() == [0] + [size // 4] * 4


def test_balanced_combinations_are_shuffled():
    combos = TASKS["number"].combinations(task_config("number"))
    picked = balanced_combinations(combos, 2 * len(combos), np.random.default_rng(0))
    assert not (picked[: len(combos)] == combos).all()
    assert len(np.unique(picked[:100, -1])) == 4


@pytest.mark.parametrize("name", ["number", "letter"])
def test_split_sizes_follow_the_config(name):
    cfg = task_config(name, n_train=1000, n_val=30, n_test=70)
    splits = make_splits(cfg, seed=0)
    assert list(splits) == ["train", "val", "test"]
    assert {k: len(v) for k, v in splits.items()} == {"train": 1000, "val": 30, "test": 70}
    for split in splits.values():
        assert split.tokens.shape[1] == cfg.seq_len and split.extra == 0
        assert split.tokens.dtype == split.answer.dtype == split.n_hops.dtype == split.path.dtype == np.int64


# A task with about 300 distinct sequences, so that independent draws of the splits overlap.
TINY = task_config("number", n_target=2, n_pretarget=2, n_letters=3, max_hops=2, n_train=240, n_val=24, n_test=24)


def test_splits_share_no_token_sequence_even_when_independent_draws_would():
    splits = make_splits(TINY, seed=0)
    rows = {k: {r.tobytes() for r in v.tokens} for k, v in splits.items()}
    independent = generate(TINY, TINY.n_val, np.random.default_rng(1))
    assert any(r.tobytes() in rows["train"] for r in independent.tokens)  # the test can bite
    assert not rows["train"] & rows["val"]
    assert not rows["train"] & rows["test"]
    assert not rows["val"] & rows["test"]


def test_redrawn_rows_keep_the_split_balanced_and_well_formed():
    splits = make_splits(TINY, seed=0)
    for split in splits.values():
        unique, counts = np.unique(classes(split), axis=0, return_counts=True)
        assert len(unique) == 12 and (counts == len(split) // 12).all()
        rows = np.arange(len(split))
        assert (split.tokens[rows, split.path[rows, split.n_hops]] == split.answer).all()


def test_a_task_too_small_for_disjoint_splits_is_an_error():
    cfg = task_config("number", n_target=1, n_pretarget=1, n_letters=1, max_hops=1, n_train=1, n_val=1, n_test=0)
    with pytest.raises(ValueError, match="cannot make val disjoint"):
        make_splits(cfg, seed=0)


@pytest.mark.parametrize("name", ["number", "letter"])
def test_the_same_seed_gives_identical_splits_and_another_seed_different_ones(name):
    cfg = task_config(name, n_train=500, n_val=50, n_test=50)
    first, again, other = make_splits(cfg, seed=11), make_splits(cfg, seed=11), make_splits(cfg, seed=12)
    for split in ("train", "val", "test"):
        for array in ("tokens", "answer", "n_hops", "path"):
            np.testing.assert_array_equal(getattr(first[split], array), getattr(again[split], array))
        assert not np.array_equal(first[split].tokens, other[split].tokens)
    assert not np.array_equal(first["train"].tokens[:50], first["val"].tokens)


@pytest.mark.parametrize("seed", range(5))
def test_a_ragged_grid_is_dealt_cell_by_cell(seed):
    # Answer positions 3 and 7 only (5 and 2 combinations), two hop counts: cells empty and unequal.
    # Any remainder must take rank 0 of every non-empty cell before rank 1 of any, so it stays
    # within one of even over positions and hop counts; ranking by a common cell size (here 0) did not.
    combos = np.array([[3, i, h] for h in (1, 2) for i in range(5)] + [[7, i, h] for h in (1, 2) for i in range(2)])
    for n in (2, 4, 6, 8):
        picked = balanced_combinations(combos, n, np.random.default_rng(seed))
        cells = np.unique(picked[:, [0, 2]], axis=0, return_counts=True)[1]
        assert len(cells) == min(n, 4) and cells.max() - cells.min() <= 1
