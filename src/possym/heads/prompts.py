"""Prompts for scoring a pretrained LM's heads, and where their swap blocks lie.

Three sources, each a list of :class:`HeadPrompt` (text, the character spans that may be swapped,
and the answer if there is one):

* the metric paper's **binding task** (paper B §5; docs/heads.md): P entity–attribute pairs, then a
  question about one entity. With P = 3::

      Each person likes one color. Alice likes red. Bob likes blue. Carol likes red.
      What color does Bob like? Answer: Bob likes                           answer " blue"

  Every pair is one natural block (" Bob likes blue."), so a swap exchanges two whole bindings.
  Entities are distinct; attributes are drawn with replacement, as colours in a long list must be.
* the **1-hop number and letter prompts** of the LLM experiment (:mod:`possym.one_hop`); the
  swappable span is the target window inside the quotes;
* a **text file**, one prompt per line; the swappable span is the whole line (the query, its last
  token, is never swapped).

:func:`encode` tokenizes a prompt and places the blocks on tokens (:class:`BlockSpec`): natural blocks
(binding pairs), blocks of m tokens, or the span split evenly into M blocks. The exact engine needs
blocks of equal length, so natural blocks must tokenize to the same number of tokens:
:func:`single_token_words` keeps the names and colours that are one token after a space, which
makes every pair " Name likes colour." the same length.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from possym.errors import PossymError
from possym.heads.layout import BlockLayout, EncodedPrompt
from possym.one_hop import load_templates, make_cell

BUILTIN = ("binding", "number1", "letter1")

NAMES = (
    "Alice Bob Carol Dave Eve Frank Grace Heidi Ivan Judy Oscar Peggy Victor Walter Anna Ben Chris Dan Emma Fred "
    "George Harry Jack Jane John Kate Laura Mark Mary Mike Nick Paul Peter Rose Sam Sarah Tom Tim Lucy Max Leo Mia "
    "Noah Liam Olivia Sophia James Lily Ella Jake Adam Alex Amy Andy Carl Chloe David Diana Eric Ethan Helen Henry "
    "Ian Isaac Jacob Jason Jeff Jenny Jim Joe Josh Julia Karen Kevin Kim Lisa Luke Maria Matt Nancy Nina Owen Pam "
    "Rachel Ray Rick Rob Roger Ruth Ryan Sean Simon Steve Sue Ted Tony Zoe"
).split()
COLORS = "red blue green yellow black white pink orange purple brown gray gold silver".split()


@dataclass(frozen=True)
class HeadPrompt:
    """One prompt: its text, the character span whose tokens may be swapped, natural blocks, and answer."""

    text: str
    task: str
    span: tuple[int, int]  # [start, end) characters whose tokens may be swapped
    blocks: tuple[tuple[int, int], ...] = ()  # natural blocks (binding pairs) as character spans
    answer: str | None = None  # the expected continuation, leading space included

    def __post_init__(self) -> None:
        if not 0 <= self.span[0] < self.span[1] <= len(self.text):
            raise PossymError(f"span {self.span} does not lie inside a text of {len(self.text)} characters")


@dataclass(frozen=True)
class BindingConfig:
    """The binding task: ``n_pairs`` entity–attribute pairs from ``names`` × ``colors``."""

    n_pairs: int = 16
    names: tuple[str, ...] = tuple(NAMES)
    colors: tuple[str, ...] = tuple(COLORS)

    def __post_init__(self) -> None:
        if self.n_pairs < 2:
            raise PossymError(f"n_pairs={self.n_pairs} must be >= 2 (a swap needs two pairs)")
        if self.n_pairs > len(set(self.names)):
            raise PossymError(f"n_pairs={self.n_pairs} needs as many distinct names; there are {len(set(self.names))}")
        if not self.colors:
            raise PossymError("colors is empty")


def binding_prompt(cfg: BindingConfig, rng: np.random.Generator) -> HeadPrompt:
    """One binding prompt: distinct entities, colours with replacement, a question about one entity."""
    names = [cfg.names[i] for i in rng.choice(len(cfg.names), size=cfg.n_pairs, replace=False)]
    colors = [cfg.colors[i] for i in rng.integers(0, len(cfg.colors), size=cfg.n_pairs)]
    asked = int(rng.integers(0, cfg.n_pairs))
    text, blocks = "Each person likes one color.", []
    for name, color in zip(names, colors, strict=True):
        pair = f" {name} likes {color}."
        blocks.append((len(text), len(text) + len(pair)))
        text += pair
    # the answer is the next token after "<name> likes", so the query token is the one that must retrieve it
    text += f"\nWhat color does {names[asked]} like? Answer: {names[asked]} likes"
    return HeadPrompt(text, "binding", (blocks[0][0], blocks[-1][1]), tuple(blocks), f" {colors[asked]}")


def binding_answer(text: str) -> str:
    """The oracle: the colour the text binds to the entity it asks about, read from the text alone."""
    facts, question = text.rsplit("\n", 1)
    asked = question.removeprefix("What color does ").split(" like?")[0]
    bound: dict[str, list[str]] = {}
    for sentence in facts.split(".")[1:]:
        words = sentence.split()
        if len(words) == 3 and words[1] == "likes":
            bound.setdefault(words[0], []).append(words[2])
    if len(bound.get(asked, [])) != 1:
        raise PossymError(f"{asked!r} is bound {len(bound.get(asked, []))} times; the task needs exactly one")
    return " " + bound[asked][0]


def one_hop_prompts(task: str, length: int, n: int, run: int = 0) -> list[HeadPrompt]:
    """The first ``n`` 1-hop prompts of the LLM experiment's (task, length, run) cell, in the paper's templates."""
    templates = load_templates()
    out = []
    for inst in make_cell(task, length, run, n):
        text = templates.render(inst)
        start = text.index(inst.sequence)
        window = " ".join(inst.window)
        out.append(HeadPrompt(text, f"{task}1", (start, start + len(window)), answer=" " + inst.target))
    return out


def file_prompts(path: str | Path, n: int | None = None) -> list[HeadPrompt]:
    """Prompts from a UTF-8 text file, one per non-blank line (``\\n`` inside a line is not unescaped)."""
    lines = [line.rstrip("\r\n") for line in Path(path).read_text("utf-8").splitlines()]
    lines = [line for line in lines if line.strip()]
    if not lines:
        raise PossymError(f"prompt file {path} has no non-blank line")
    return [HeadPrompt(line, "file", (0, len(line))) for line in lines[:n]]


def single_token_words(tokenizer: Any, words: tuple[str, ...]) -> tuple[str, ...]:
    """The words that are a single token after a space (so every binding pair has the same length)."""
    return tuple(w for w in words if len(tokenizer(" " + w, add_special_tokens=False).input_ids) == 1)


@dataclass(frozen=True)
class BlockSpec:
    """How to cut a prompt's span into swap blocks: natural blocks (None, None), m tokens, or M equal blocks."""

    block_size: int | None = None
    n_blocks: int | None = None

    def __post_init__(self) -> None:
        if self.block_size is not None and self.n_blocks is not None:
            raise PossymError("give a block size or a number of blocks, not both")
        if self.block_size is not None and self.block_size < 1:
            raise PossymError(f"block_size={self.block_size} must be >= 1")
        if self.n_blocks is not None and self.n_blocks < 2:
            raise PossymError(f"n_blocks={self.n_blocks} must be >= 2 (a swap needs two blocks)")


def _tokens_inside(offsets: list[tuple[int, int]], start: int, end: int, stop: int) -> list[int]:
    """Token indices < ``stop`` whose (non-empty) character span lies inside [start, end)."""
    return [i for i, (a, b) in enumerate(offsets[:stop]) if b > a and start <= a and b <= end]


def encode(prompt: HeadPrompt, tokenizer: Any, spec: BlockSpec = BlockSpec()) -> EncodedPrompt:
    """Tokenize ``prompt`` and lay its blocks on tokens; the query is the last token and is never swapped.

    Natural blocks (binding pairs) must all be the same number of contiguous tokens; other prompts
    default to one-token blocks. Raises ValueError, saying why, when fewer than two blocks fit.
    """
    enc = tokenizer(prompt.text, return_offsets_mapping=True)
    ids, offsets = list(enc.input_ids), [tuple(o) for o in enc.offset_mapping]
    query = len(ids) - 1
    if prompt.blocks and spec.block_size is None and spec.n_blocks is None:
        spans = [_tokens_inside(offsets, a, b, query) for a, b in prompt.blocks]
        sizes = sorted({len(s) for s in spans})
        if len(sizes) != 1 or sizes[0] == 0:
            raise PossymError(
                f"natural blocks tokenize to {sizes} tokens; the engine needs one length "
                "(keep single-token names and colours, or pass a block size)"
            )
        flat = [i for s in spans for i in s]
        if flat != list(range(flat[0], flat[0] + len(flat))):
            raise PossymError("natural blocks are not contiguous in tokens")
        layout = BlockLayout(flat[0], sizes[0], len(spans))
    else:
        inside = _tokens_inside(offsets, *prompt.span, query)
        if not inside:
            raise PossymError(f"no token of the prompt lies inside its swappable span: {prompt.text[:60]!r}")
        n_tokens = inside[-1] - inside[0] + 1
        size = (spec.block_size or 1) if spec.n_blocks is None else n_tokens // spec.n_blocks
        count = n_tokens // size if spec.n_blocks is None else spec.n_blocks
        if size < 1 or count < 2:
            raise PossymError(
                f"a span of {n_tokens} tokens holds {count} blocks of {size}; at least two blocks are needed"
            )
        layout = BlockLayout(inside[0], size, count)
    answer_id = None
    if prompt.answer is not None:
        answer_id = tokenizer(prompt.answer, add_special_tokens=False).input_ids[0]
    return EncodedPrompt(tuple(ids), layout, answer_id, prompt.task)
