"""The 1-hop tasks of the paper's LLM experiment (Section 3.7, Appendix H, Table 2): samplers, prompts, oracle.

Below both of their users: :mod:`possym.llm` puts these prompts to LLMs, and :mod:`possym.heads`
scores the heads of a pretrained model on them.

A 1-hop instance is a *target window* of ``length`` tokens followed by one *query* token; the answer
is one token of the window.

Number task (positional). The window is random single letters a..z (repeats allowed); the query is
an integer n in 1..length, and the answer is the token n positions to the left of the query::

    window  v t k g n k o h m p      query 4      answer o      (p=1, m=2, h=3, o=4)

Letter task (symbolic). The window is letter+digit tokens; the query is two letters Q1 Q2, and the
answer is the one window token that starts with Q2. Q1 plays no part (it is the previous hop's
letter in the multi-hop task) and is drawn uniformly from a..z::

    window  w9 t7 l5 g1 n4 l6 u9 k7 m5 p8      query gk      answer k7

Sampling choices the paper does not state, and which we therefore name:
  * number: n is uniform on 1..length, so every position of the window is asked about equally;
  * letter: exactly one window token starts with Q2; the other first letters are uniform on the
    other 25 letters (repeats allowed, as in the paper's examples); digits are uniform on 0..9;
  * each (run, task, length) cell has its own generator, seeded by ``(run, task, length)``, so a cell's
    prompts do not depend on which other lengths are in the grid ("a fresh dataset seeded by the run
    number", with the cell as a further key).

``one_hop_answer`` is the oracle: it reads only the sequence text and knows nothing of the samplers. It
reproduces the six worked examples of Table 2, and every sampled instance is checked against it.
"""

from __future__ import annotations

import importlib.resources
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import yaml

from possym.errors import PossymError

# The 1-hop versions of the paper's two tasks that have prompt templates (paper Sec. 6, Table 3).
PROMPT_TASKS = ("number", "letter")
PAPER_LENGTHS = (12, 16, 24, 32, 48, 64, 80, 100, 150, 200, 300)
LETTERS = "abcdefghijklmnopqrstuvwxyz"
DIGITS = "0123456789"
PLACEHOLDER = "{sequence}"
_TASK_SEED_ID = {"number": 0, "letter": 1}


@dataclass(frozen=True)
class OneHopInstance:
    """One prompt of the grid: where it sits (task, length, run, index), its tokens and its answer."""

    task: str
    length: int
    run: int
    index: int
    window: tuple[str, ...]
    query: str
    target: str

    @property
    def sequence(self) -> str:
        """The text that fills ``{sequence}``: the window and the query, separated by single spaces."""
        return " ".join((*self.window, self.query))


@dataclass(frozen=True)
class Templates:
    """One prompt template per task; each holds ``{sequence}`` exactly once."""

    number: str
    letter: str
    source: str = ""

    def __post_init__(self) -> None:
        for task in PROMPT_TASKS:
            count = getattr(self, task).count(PLACEHOLDER)
            if count != 1:
                raise PossymError(f"the {task} template must contain {PLACEHOLDER} exactly once, found {count}")

    def render(self, instance: OneHopInstance) -> str:
        """The full prompt for one instance (plain replacement: the templates' other braces stay)."""
        return getattr(self, instance.task).replace(PLACEHOLDER, instance.sequence)


def load_templates(path: str | Path | None = None) -> Templates:
    """Templates from a YAML file with keys ``number`` and ``letter``; None gives the paper's Table 2."""
    if path is None:
        text = importlib.resources.files("possym").joinpath("data/llm_prompts.yaml").read_text("utf-8")
    else:
        text = Path(path).read_text("utf-8")
    data = yaml.safe_load(text)
    missing = [task for task in PROMPT_TASKS if not isinstance(data, dict) or not isinstance(data.get(task), str)]
    if missing:
        raise PossymError(
            f"template file {path or 'llm_prompts.yaml'} lacks string keys {missing}; needs {PROMPT_TASKS}"
        )
    return Templates(number=data["number"], letter=data["letter"], source=str(data.get("source", "")))


def sample_number(length: int, rng: np.random.Generator) -> tuple[tuple[str, ...], str, str]:
    """(window, query, target) of the 1-hop number task: letters a..z and an offset n in 1..length."""
    if length < 1:
        raise PossymError(f"length={length} must be >= 1")
    window = tuple(LETTERS[i] for i in rng.integers(0, len(LETTERS), size=length))
    n = int(rng.integers(1, length + 1))
    return window, str(n), window[length - n]


def sample_letter(length: int, rng: np.random.Generator) -> tuple[tuple[str, ...], str, str]:
    """(window, query, target) of the 1-hop letter task: letter+digit tokens, one starting with Q2."""
    if length < 1:
        raise PossymError(f"length={length} must be >= 1")
    q2 = LETTERS[int(rng.integers(0, len(LETTERS)))]
    q1 = LETTERS[int(rng.integers(0, len(LETTERS)))]
    others = [c for c in LETTERS if c != q2]
    firsts = [others[i] for i in rng.integers(0, len(others), size=length)]
    firsts[int(rng.integers(0, length))] = q2
    digits = rng.integers(0, len(DIGITS), size=length)
    window = tuple(f"{c}{DIGITS[d]}" for c, d in zip(firsts, digits, strict=True))
    target = next(tok for tok in window if tok[0] == q2)
    return window, q1 + q2, target


_SAMPLERS = {"number": sample_number, "letter": sample_letter}


def cell_rng(run: int, task: str, length: int) -> np.random.Generator:
    """The generator of one grid cell, seeded by the run number, the task and the length."""
    return np.random.default_rng([run, _TASK_SEED_ID[task], length])


def make_cell(task: str, length: int, run: int, n: int) -> list[OneHopInstance]:
    """The first ``n`` instances of one cell; a larger ``n`` extends the same list (prefix-stable)."""
    if task not in _SAMPLERS:
        raise PossymError(f"task={task!r} is not a 1-hop task; allowed: {PROMPT_TASKS}")
    rng = cell_rng(run, task, length)
    out = []
    for index in range(n):
        window, query, target = _SAMPLERS[task](length, rng)
        out.append(OneHopInstance(task, length, run, index, window, query, target))
    return out


def make_grid(tasks: Sequence[str], lengths: Sequence[int], runs: Sequence[int], n: int) -> list[OneHopInstance]:
    """All instances of the grid, ordered run, task, length, index."""
    return [inst for run in runs for task in tasks for length in lengths for inst in make_cell(task, length, run, n)]


def one_hop_answer(task: str, sequence: str) -> str:
    """The answer to a 1-hop sequence, read from the text alone (the oracle).

    Not :func:`possym.tasks.solve`: a 1-hop letter query's first letter plays no part and may repeat
    a window letter, which the multi-hop letter task's solver would call ambiguous.

    >>> one_hop_answer("number", "a z b y c x d w 5"), one_hop_answer("letter", "w9 t7 l5 g1 n4 l6 u9 k7 m5 p8 gk")
    ('y', 'k7')

    Raises ValueError when the sequence has no unique answer.
    """
    tokens = sequence.split()
    if len(tokens) < 2:
        raise PossymError(f"a 1-hop sequence needs a window and a query: {sequence!r}")
    *window, query = tokens
    if task == "number":
        n = int(query)
        if not 1 <= n <= len(window):
            raise PossymError(f"offset {n} is outside the window of {len(window)} tokens")
        return window[len(window) - n]
    if task == "letter":
        if len(query) != 2:
            raise PossymError(f"a letter-task query has two characters, got {query!r}")
        matches = [tok for tok in window if tok[0] == query[1]]
        if len(matches) != 1:
            raise PossymError(f"{len(matches)} window tokens start with {query[1]!r}; the task needs exactly one")
        return matches[0]
    raise PossymError(f"task={task!r} is not a 1-hop task; allowed: {PROMPT_TASKS}")


_QUOTES = "\"'`\u2018\u2019\u201c\u201d"


def normalise_reply(reply: str) -> str:
    """The reply as scored: surrounding whitespace and quote characters stripped (repeatedly)."""
    return reply.strip().strip(_QUOTES + " \t\r\n")


def is_correct(reply: str, target: str) -> bool:
    """The paper's scoring: the stripped reply equals the target token exactly (case-sensitive)."""
    return normalise_reply(reply) == target


def reply_is_decided(partial: str) -> bool:
    """Whether a reply that starts with ``partial`` is already scored, whatever follows: True once it holds
    two whitespace-separated words.

    Leading whitespace and quotes are stripped by ``normalise_reply`` and trailing ones cannot reach
    back past a word character, so "The t..." normalises to something with inner whitespace: not a
    single token, and not equal to any target (targets hold no whitespace). Greedy decoding may stop
    there without changing either score.
    """
    words = partial.lstrip(_QUOTES + " \t\r\n").split(None, 1)
    return len(words) == 2 and bool(words[1].strip(_QUOTES + " \t\r\n"))


def is_single_token(reply: str) -> bool:
    """Whether the stripped reply is one whitespace-free token; False flags explanations or empty replies."""
    text = normalise_reply(reply)
    return bool(text) and len(text.split()) == 1
