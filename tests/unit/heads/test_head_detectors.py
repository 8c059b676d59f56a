"""TransformerLens's head detectors (possym.heads.detectors) on heads whose answer is known by construction,
and against a loop that transcribes the definitions one query-key pair at a time."""

from __future__ import annotations

import pytest
import torch

from possym.heads.detectors import HEAD_NAMES, detector_scores

PREVIOUS, DUPLICATE, INDUCTION = range(3)


def repeated(length: int, seed: int = 0) -> torch.Tensor:
    """``length`` distinct tokens, then the same tokens again: [2 * length]."""
    first = torch.randperm(50, generator=torch.Generator().manual_seed(seed))[:length] + 1
    return torch.cat((first, first))


def head_attending_to(targets: list[int]) -> torch.Tensor:
    """The pattern [pos, pos] of a head whose query i puts all its attention on key targets[i]."""
    n = len(targets)
    pattern = torch.zeros(n, n)
    pattern[torch.arange(n), torch.tensor(targets)] = 1.0
    return pattern


def test_a_head_attending_to_the_previous_token_scores_one_once_the_first_key_is_excluded():
    n = 9
    pattern = head_attending_to([0] + list(range(n - 1)))  # query 0 has only itself
    tokens = torch.arange(n)  # distinct: no duplicate and no induction target
    scores = detector_scores(pattern, tokens)
    # TransformerLens's definition counts query 0, which has no previous token, in the denominator
    assert scores.tolist() == pytest.approx([(n - 1) / n, 0.0, 0.0])
    assert detector_scores(pattern, tokens, exclude_bos=True)[PREVIOUS] == pytest.approx(1.0)


def test_a_head_attending_to_the_earlier_copy_is_a_duplicate_token_head():
    length = 6
    tokens = repeated(length)
    # first half: nothing earlier to copy, so attend to key 0 (as a BOS sink would); second half: the copy
    pattern = head_attending_to([0] * length + list(range(length)))
    scores = detector_scores(pattern, tokens)
    assert scores[DUPLICATE] == pytest.approx(0.5)
    assert detector_scores(pattern, tokens, exclude_bos=True)[DUPLICATE] == pytest.approx(1.0)
    assert scores[INDUCTION] == pytest.approx(0.0)


def test_a_head_attending_to_the_token_after_the_earlier_copy_is_an_induction_head():
    length = 6
    tokens = repeated(length, seed=1)
    pattern = head_attending_to([0] * length + list(range(1, length + 1)))
    scores = detector_scores(pattern, tokens)
    assert scores[INDUCTION] == pytest.approx(0.5)
    assert detector_scores(pattern, tokens, exclude_bos=True)[INDUCTION] == pytest.approx(1.0)
    assert scores[DUPLICATE] == pytest.approx(0.0)


def test_a_head_that_attends_to_itself_scores_zero_everywhere_and_nan_once_the_diagonal_is_excluded():
    tokens = repeated(5)
    pattern = torch.eye(10)
    assert detector_scores(pattern, tokens).tolist() == [0.0, 0.0, 0.0]
    assert detector_scores(pattern, tokens, exclude_current_token=True).isnan().all()  # 0/0, as TransformerLens


def loop_scores(pattern: torch.Tensor, tokens: list[int], exclude_bos: bool, exclude_current: bool) -> list[float]:
    """The definitions, one (query i, key j) at a time."""
    hit = {name: 0.0 for name in HEAD_NAMES}
    total = 0.0
    for i in range(len(tokens)):
        for j in range(i + 1):
            a = float(pattern[i, j])
            if (exclude_bos and j == 0) or (exclude_current and j == i):
                continue
            total += a
            hit["previous_token_head"] += a * (j == i - 1)
            hit["duplicate_token_head"] += a * (j < i and tokens[j] == tokens[i])
            hit["induction_head"] += a * (1 <= j and j - 1 < i and tokens[j - 1] == tokens[i])
    return [hit[name] / total for name in HEAD_NAMES]


@pytest.mark.parametrize("exclude_bos", [False, True])
@pytest.mark.parametrize("exclude_current", [False, True])
def test_batched_scores_equal_the_definitions_read_pair_by_pair(exclude_bos, exclude_current):
    g = torch.Generator().manual_seed(2)
    tokens = torch.randint(0, 4, (3, 11), generator=g)  # 4 symbols in 11 places: many repeats
    logits = torch.randn(3, 2, 11, 11, generator=g) * 3
    pattern = logits.masked_fill(torch.ones(11, 11, dtype=torch.bool).triu(1), -torch.inf).softmax(-1)
    ours = detector_scores(pattern, tokens[:, None], exclude_bos=exclude_bos, exclude_current_token=exclude_current)
    assert ours.shape == (3, 2, 3)
    for b in range(3):
        for h in range(2):
            expected = loop_scores(pattern[b, h], tokens[b].tolist(), exclude_bos, exclude_current)
            assert ours[b, h].tolist() == pytest.approx(expected, abs=1e-12)
