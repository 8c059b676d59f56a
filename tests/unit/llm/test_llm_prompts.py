"""The 1-hop prompts and templates: drawn by the paper tasks' samplers, checked against the tasks' solvers, against
what each prompt's rule says in the test itself, and against the paper's own worked examples."""

from __future__ import annotations

import re
import string

import numpy as np
import pytest

from possym.one_hop import (
    PAPER_LENGTHS,
    PROMPT_TASKS,
    Templates,
    is_correct,
    is_single_token,
    load_templates,
    make_cell,
    make_grid,
    normalise_reply,
    one_hop_answer,
    one_hop_config,
    sample_one_hop,
)
from possym.tasks import get_task, task_vocab

LETTERS = string.ascii_lowercase

EXAMPLE = re.compile(r'Input: "([^"{}]+)"\nOutput: (\S+)')


def test_the_paper_templates_hold_table_2_verbatim():
    t = load_templates()
    assert "2605.31558" in t.source
    assert t.number.startswith("You will be given a sequence of space-separated tokens.")
    assert "Move `n` positions to the left from that final token." in t.number
    assert "there is only one token that fulfills this condition." in t.letter
    for template in (t.number, t.letter):
        assert template.endswith('Task:\nInput: "{sequence}"\nOutput:')
        assert "Output just the target token and absolutely nothing else." in template


@pytest.mark.parametrize("task", PROMPT_TASKS)
def test_the_oracle_reproduces_every_worked_example_in_table_2(task):
    examples = EXAMPLE.findall(getattr(load_templates(), task))
    assert len(examples) == 3
    for sequence, answer in examples:
        assert one_hop_answer(task, sequence) == answer


def test_every_sampled_instance_is_solved_by_the_oracle_with_its_target():
    for inst in make_grid(PROMPT_TASKS, PAPER_LENGTHS, (1, 2), 20):
        assert len(inst.window) == inst.length
        assert one_hop_answer(inst.task, inst.sequence) == inst.target


def test_number_task_uses_single_letters_and_an_offset_inside_the_window():
    rng = np.random.default_rng(0)
    offsets = []
    for _ in range(500):
        window, query, target = sample_one_hop("number", 12, rng)
        assert all(len(tok) == 1 and tok in LETTERS for tok in window)
        offsets.append(int(query))
        assert window[-int(query)] == target
    assert min(offsets) == 1 and max(offsets) == 12  # the whole window is asked about


def test_letter_task_has_exactly_one_token_starting_with_the_second_query_letter():
    rng = np.random.default_rng(1)
    for length in (1, 12, 300):
        for _ in range(50):
            window, query, target = sample_one_hop("letter", length, rng)
            assert len(query) == 2 and all(c in LETTERS for c in query) and query[0] != query[1]
            assert all(len(tok) == 2 and tok[0] in LETTERS and tok[1] in "123456789" for tok in window)
            assert [tok for tok in window if tok[0] == query[1]] == [target]


def test_a_one_hop_window_is_the_training_tasks_window_with_one_hop_and_no_pretarget():
    for task in PROMPT_TASKS:
        cfg = one_hop_config(task, 24)
        assert type(cfg) is get_task(task).config and cfg.n_pretarget == 0 and cfg.hops == (1,)
        for inst in make_cell(task, 24, 1, 20):
            tokens = [*inst.window, inst.query]
            task_vocab(cfg).encode(tokens)  # every token is one of the task's own
            query, answer = get_task(task).solve(tokens).path
            assert query == 24 and inst.window[answer] == inst.target
    with pytest.raises(ValueError, match="not a 1-hop task"):
        one_hop_config("index", 12)


def test_answers_and_query_offsets_cover_the_window_and_the_alphabet():
    # Drawn as balanced classes: every answer position and (nearly) every letter turn up in a cell of 400.
    cell = make_cell("letter", 12, 1, 400)
    assert {i.window.index(i.target) for i in cell} == set(range(12))
    assert len({i.target[0] for i in cell}) >= 24


def test_cells_are_seeded_by_run_and_independent_of_the_rest_of_the_grid():
    a = make_cell("letter", 24, 3, 10)
    b = [
        i
        for i in make_grid(PROMPT_TASKS, (12, 24, 300), (1, 3), 10)
        if i.task == "letter" and i.length == 24 and i.run == 3
    ]
    assert a == b
    assert make_cell("letter", 24, 3, 4) == a[:4]  # a larger n extends the same list
    assert make_cell("letter", 24, 4, 10) != a  # another run is a fresh dataset


def test_render_fills_the_placeholder_and_keeps_other_braces():
    t = Templates(number="N {x} [{sequence}]", letter="L {sequence}")
    inst = make_cell("number", 12, 1, 1)[0]
    assert t.render(inst) == f"N {{x}} [{inst.sequence}]"


def test_a_template_without_exactly_one_placeholder_is_rejected(tmp_path):
    with pytest.raises(ValueError, match="exactly once"):
        Templates(number="no placeholder", letter="{sequence}")
    bad = tmp_path / "t.yaml"
    bad.write_text("number: '{sequence}'\n")
    with pytest.raises(ValueError, match="letter"):
        load_templates(bad)


def test_custom_templates_load_from_yaml(tmp_path):
    path = tmp_path / "t.yaml"
    path.write_text("number: 'count {sequence}'\nletter: 'find {sequence}'\n")
    assert load_templates(path).number == "count {sequence}"


@pytest.mark.parametrize(
    ("reply", "target", "correct", "single"),
    [
        ("k7", "k7", True, True),
        ('  "k7"\n', "k7", True, True),
        ("`y`", "y", True, True),
        ("\u201cy\u201d", "y", True, True),
        ("K7", "k7", False, True),
        ("k7.", "k7", False, True),
        ("The answer is k7", "k7", False, False),
        ("", "k7", False, False),
        ("  ", "y", False, False),
    ],
)
def test_scoring_strips_whitespace_and_quotes_then_matches_exactly(reply, target, correct, single):
    assert is_correct(reply, target) is correct
    assert is_single_token(reply) is single


def test_normalise_reply_strips_nested_quotes_and_spaces():
    assert normalise_reply(" \" 'y' \" ") == "y"


def test_the_oracle_rejects_ill_posed_sequences():
    with pytest.raises(ValueError, match="before the start"):
        one_hop_answer("number", "a b 3")
    with pytest.raises(ValueError, match="ambiguous"):
        one_hop_answer("letter", "a1 a2 xa")
    with pytest.raises(ValueError, match="takes 2 hops"):
        one_hop_answer("number", "a 1 1")
    with pytest.raises(ValueError, match="no match"):
        one_hop_answer("letter", "a1 b2 xc")
    with pytest.raises(ValueError, match="not a 1-hop task"):
        one_hop_answer("other", "a b")
