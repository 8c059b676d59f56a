"""The oracle on the paper's own examples, on long chains, and on ill-posed inputs."""

import pytest

from possym.tasks import Solution, solve


@pytest.mark.parametrize(
    ("text", "task", "expected"),
    [
        ("c b a 1 4 1 3 2 1", "number", Solution("c", 4, (8, 7, 5, 4, 0))),  # Fig. 1, left
        ("n h n v h y r s 6 3 2 7 7 8 4 7 2", "number", Solution("n", 4, (16, 14, 10, 8, 2))),  # Fig. 3A
        ("c2 b1 a3 fa ec de hf gd ig", "letter", Solution("c2", 4, (8, 7, 5, 4, 0))),  # Fig. 1, right
        (
            "e1 b2 e1 g6 a2 b2 e1 g6 be db ca ge eb hc dg fh eh",
            "letter",
            Solution("a2", 3, (16, 13, 10, 4)),
        ),  # Fig. 3B
    ],
    ids=["fig1-number", "fig3a-number", "fig1-letter", "fig3b-letter"],
)
def test_the_solver_gives_the_paper_answers_to_the_paper_examples(text, task, expected):
    assert solve(task, text.split()) == expected


def test_the_solver_follows_a_number_chain_of_any_length():
    tokens = ["zz", "q"] + ["1"] * 30
    assert solve("number", tokens) == Solution("q", 30, tuple(range(31, 0, -1)))


def test_the_solver_follows_a_letter_chain_of_any_length_in_either_direction():
    # z -> y -> ... -> b -> a1, with the pairs placed right to left and left to right alternately.
    letters = "abcdefghijklmnopqrstuvwxyz"
    pairs = [letters[i] + letters[i - 1] for i in range(25, 0, -1)]
    tokens = ["a1"] + pairs[1::2] + pairs[0::2][::-1] + ["Az"]
    solution = solve("letter", tokens)
    assert solution.answer == "a1" and solution.n_hops == 26
    assert [tokens[p][0] for p in solution.path[1:]] == list(letters[::-1])


@pytest.mark.parametrize(
    ("text", "task", "reason"),
    [
        ("a b 3", "number", "points before the start"),
        ("a 2 1 4", "number", "points before the start"),
        ("a 1 0", "number", "cycle"),
        ("a 1 b", "number", "not an offset"),
        ("a1 bc", "letter", "no match"),
        ("c1 c2 bc", "letter", "ambiguous"),
        ("c1 ca bc", "letter", "ambiguous"),
        ("ab ba xa", "letter", "cycle"),
        ("ab ba", "letter", "cycle"),
        ("a1 b2", "letter", "not a letter pair"),
        ("a1 abc ba", "letter", "neither"),
    ],
)
def test_the_solver_rejects_an_ill_posed_input_saying_why(text, task, reason):
    with pytest.raises(ValueError, match=reason):
        solve(task, text.split())


def test_the_solver_rejects_an_empty_input_and_an_unknown_task():
    with pytest.raises(ValueError, match="empty"):
        solve("number", [])
    with pytest.raises(ValueError, match="'word'"):
        solve("word", ["a", "1"])
