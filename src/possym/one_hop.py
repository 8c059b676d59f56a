"""The 1-hop tasks of the paper's LLM experiment (Section 3.7, Appendix H, Table 2): prompts, drawn and solved by
the paper's own tasks.

Below both of their users: :mod:`possym.llm` puts these prompts to LLMs, and :mod:`possym.heads` scores the
heads of a pretrained model on them. An instance is a window of ``length`` tokens then one query; it is the
training task (:mod:`possym.tasks.number`, :mod:`possym.tasks.letter`) with one hop and no pre-target
(:func:`one_hop_config`), drawn by the task's ``sample`` (one balanced class at a time) and answered by its
``solve`` (:func:`one_hop_answer`, which reproduces Table 2's six worked examples); the prompts change only data
(:data:`ONE_HOP_FIELDS`: letters a..z, digits 1..9)::

    number  v t k g n k o h m p      query 4      answer o      (p=1, m=2, h=3, o=4)
    letter  w9 t7 l5 g1 n4 l6 u9 k7 m5 p8      query gk      answer k7

The sampling choices the paper does not state (n uniform, Q1 never Q2, one generator per (run, task,
length) cell): docs/llm.md, "What exactly is run"."""

from __future__ import annotations

import importlib.resources
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from possym.errors import PossymError
from possym.tasks import TaskConfig, get_task, task_config, task_vocab

# The 1-hop versions of the paper's two tasks that have prompt templates (paper Sec. 6, Table 3), and the fields
# of each task's config that the prompts set beyond one hop and no pre-target: all of a..z, and digits 1..9.
ONE_HOP_FIELDS: dict[str, dict[str, Any]] = {"number": {"n_letters": 26}, "letter": {"n_letters": 26, "n_ints": 9}}
PROMPT_TASKS = tuple(ONE_HOP_FIELDS)
PAPER_LENGTHS = (12, 16, 24, 32, 48, 64, 80, 100, 150, 200, 300)
PLACEHOLDER = "{sequence}"


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


def _prompt_task(task: str) -> None:
    if task not in PROMPT_TASKS:
        raise PossymError(f"task={task!r} is not a 1-hop task; allowed: {PROMPT_TASKS}")


def one_hop_config(task: str, length: int) -> TaskConfig:
    """The config of ``task`` whose inputs are the 1-hop prompts' sequences: ``length`` targets, no pre-target,
    one hop, and :data:`ONE_HOP_FIELDS`.

    >>> cfg = one_hop_config("letter", 12)
    >>> cfg.seq_len, cfg.hops, cfg.n_letters, cfg.n_ints
    (13, (1,), 26, 9)
    """
    _prompt_task(task)
    if length < 1:
        raise PossymError(f"length={length} must be >= 1")
    return task_config(task, n_target=length, n_pretarget=0, min_hops=1, max_hops=1, **ONE_HOP_FIELDS[task])


def sample_one_hop(task: str, length: int, rng: np.random.Generator) -> tuple[tuple[str, ...], str, str]:
    """(window, query, target) of one 1-hop instance: a balanced class of :func:`one_hop_config` drawn uniformly,
    filled in by the task's own ``sample``, and read back as token strings.

    >>> window, query, target = sample_one_hop("number", 10, np.random.default_rng(0))
    >>> len(window), window[-int(query)] == target
    (10, True)
    """
    return _sampler(task, length)(rng)


def _sampler(task: str, length: int) -> Callable[[np.random.Generator], tuple[tuple[str, ...], str, str]]:
    """:func:`sample_one_hop` for one cell, with the classes and the vocabulary laid out once for all its draws."""
    cfg = one_hop_config(task, length)
    spec = get_task(task)
    combos, vocab = spec.combinations(cfg), task_vocab(cfg)

    def draw(rng: np.random.Generator) -> tuple[tuple[str, ...], str, str]:
        samples = spec.sample(cfg, combos[int(rng.integers(len(combos)))][None], rng)
        *window, query = vocab.decode(samples.tokens[0])
        return tuple(window), query, vocab.tokens[int(samples.answer[0])]

    return draw


def cell_rng(run: int, task: str, length: int) -> np.random.Generator:
    """The generator of one grid cell, seeded by the run number, the task and the length."""
    _prompt_task(task)
    return np.random.default_rng([run, PROMPT_TASKS.index(task), length])


def make_cell(task: str, length: int, run: int, n: int) -> list[OneHopInstance]:
    """The first ``n`` instances of one cell; a larger ``n`` extends the same list (prefix-stable: each instance
    takes its own draws from the cell's generator, whatever ``n`` is)."""
    rng, draw = cell_rng(run, task, length), _sampler(task, length)
    out = []
    for index in range(n):
        window, query, target = draw(rng)
        out.append(OneHopInstance(task, length, run, index, window, query, target))
    return out


def make_grid(tasks: Sequence[str], lengths: Sequence[int], runs: Sequence[int], n: int) -> list[OneHopInstance]:
    """All instances of the grid, ordered run, task, length, index."""
    return [inst for run in runs for task in tasks for length in lengths for inst in make_cell(task, length, run, n)]


def one_hop_answer(task: str, sequence: str) -> str:
    """The answer to a 1-hop sequence, read from the text alone by the task's own solver (the oracle).

    >>> one_hop_answer("number", "a z b y c x d w 5"), one_hop_answer("letter", "w9 t7 l5 g1 n4 l6 u9 k7 m5 p8 gk")
    ('y', 'k7')

    Raises a PossymError (a ValueError) when the sequence has no unique answer or takes more than one hop.
    """
    _prompt_task(task)
    tokens = sequence.split()
    if len(tokens) < 2:
        raise PossymError(f"a 1-hop sequence needs a window and a query: {sequence!r}")
    try:
        solution = get_task(task).solve(tokens)
    except ValueError as exc:
        raise PossymError(f"{sequence!r} has no 1-hop answer: {exc}") from None
    if solution.n_hops != 1:
        raise PossymError(f"{sequence!r} takes {solution.n_hops} hops (path {solution.path}), not 1")
    return solution.answer


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
