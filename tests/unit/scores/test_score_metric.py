"""The metric on attention rows: degenerate cases, ranges, the swap set (paper A App. D)."""

from __future__ import annotations

import math

import pytest
import torch

from possym.scores.metric import (
    attention_entropy,
    block_mean,
    block_swaps,
    pair_cosine,
    pair_scores,
    positional_score,
    swap_pairs,
    swap_weights,
    symbolic_score,
)


def test_uniform_attention_scores_one_one():
    n = 9
    blocks, positions, contents = block_swaps(n - 1)
    row = torch.full((n,), 1 / n, dtype=torch.float64)
    swapped = row.expand(len(blocks), n)  # a uniform row stays uniform under any swap
    s_pos, s_sym = pair_scores(*swap_pairs(row, swapped, blocks))
    assert s_pos.item() == pytest.approx(1.0, abs=1e-15)
    assert s_sym.item() == pytest.approx(1.0, abs=1e-15)


def test_one_hot_positional_and_symbolic_rows_give_the_expected_pairs():
    n, i = 7, 2
    blocks, positions, contents = block_swaps(n - 1)
    row = torch.zeros(n, dtype=torch.float64)
    row[i] = 1.0
    # Positional: attention stays on position i whatever moved there.
    stay = row.expand(len(blocks), n)
    # Symbolic: attention follows the content of position i to wherever the swap put it.
    follow = torch.zeros(len(blocks), n, dtype=torch.float64)
    for s, (a, b) in enumerate(blocks.tolist()):
        follow[s, b if a == i else a if b == i else i] = 1.0
    assert [x.item() for x in pair_scores(*swap_pairs(row, stay, blocks))] == pytest.approx([1.0, 0.0], abs=1e-12)
    assert [x.item() for x in pair_scores(*swap_pairs(row, follow, blocks))] == pytest.approx([0.0, 1.0], abs=1e-12)


def test_swap_weights_split_ties_equally_and_pick_the_largest_moved_mass():
    clean = torch.tensor([[0.5, 0.1], [0.1, 0.5], [0.2, 0.2]], dtype=torch.float64)
    alpha = swap_weights(clean, tau=1e-4)
    assert alpha.tolist() == pytest.approx([0.5, 0.5, 0.0])
    assert swap_weights(clean, tau=1e6).tolist() == pytest.approx([1 / 3] * 3, rel=1e-5)
    with pytest.raises(ValueError, match="tau"):
        swap_weights(clean, tau=0.0)


def test_pair_cosine_is_scale_free_and_zero_for_massless_pairs():
    a = torch.tensor([3e-200, 4e-200], dtype=torch.float64)
    assert pair_cosine(a, torch.tensor([3.0, 4.0], dtype=torch.float64)).item() == pytest.approx(1.0)
    assert pair_cosine(torch.zeros(2, dtype=torch.float64), a).item() == 0.0
    tiny = torch.tensor([1e-30, 3e-31])  # float32: the product of norms would underflow
    assert pair_cosine(tiny, tiny).item() == pytest.approx(1.0, abs=1e-6)


def test_scores_lie_in_the_unit_interval_on_random_rows():
    gen = torch.Generator().manual_seed(0)
    clean = torch.rand(200, 15, 2, generator=gen, dtype=torch.float64)
    swapped = torch.rand(200, 15, 2, generator=gen, dtype=torch.float64)
    for tau in (1e-4, 1e-1, 10.0):
        for s in (positional_score(clean, swapped, tau), symbolic_score(clean, swapped, tau)):
            assert (s >= 0).all() and (s <= 1 + 1e-12).all()


def test_swap_set_of_blocks_leaves_the_remainder_near_the_query_alone():
    blocks, positions, contents = block_swaps(7, block_size=2)  # blocks {0,1} {2,3} {4,5}; key 6 unswapped
    assert blocks.tolist() == [[0, 1], [0, 2], [1, 2]]
    assert positions.tolist()[1] == [0, 1, 4, 5] and contents.tolist()[1] == [4, 5, 0, 1]
    assert block_swaps(16)[0].shape == (120, 2)  # the paper's C(16, 2) swaps
    assert block_swaps(1)[0].shape == (0, 2)
    with pytest.raises(ValueError, match="block_size"):
        block_swaps(4, block_size=0)


def test_no_swap_gives_nan_scores():
    s_pos, s_sym = pair_scores(torch.zeros(3, 0, 2), torch.zeros(3, 0, 2))
    assert s_pos.isnan().all() and s_sym.isnan().all() and s_pos.shape == (3,)


def test_block_mean_and_entropy():
    row = torch.tensor([0.1, 0.3, 0.2, 0.2, 0.2], dtype=torch.float64)
    assert block_mean(row, 2, 2).tolist() == pytest.approx([0.2, 0.2])
    assert attention_entropy(torch.full((8,), 1 / 8)).item() == pytest.approx(math.log(8), rel=1e-6)
    assert attention_entropy(torch.tensor([0.0, 1.0, 0.0])).item() == 0.0
