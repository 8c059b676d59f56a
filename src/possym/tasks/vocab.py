"""Token vocabularies of the two tasks, laid out as the paper's tokenizer (paper App. B).

Number task: ``PAD`` = 0, the offsets ``"1"..str(N)`` -> 1..N (N = n_target + n_pretarget, the
longest possible backward jump), then the letters. At defaults that is "1".."16" -> 1..16 and the
120 letters a..z, aa..dp -> 17..136: 137 ids.

Letter task: ``PAD`` = 0, every (letter, int) token letter-major (a1..a8, b1, .., h8 -> 1..64), then
every (letter, letter) token (aa, ab, .., hh -> 65..128): 129 ids at defaults. Each pair is one
atomic token.

Example:
    >>> vocab = task_vocab(TaskConfig(name="number"))
    >>> len(vocab), vocab.encode(["c", "b", "a", "1", "16", "dp"]).tolist()
    (137, [19, 18, 17, 1, 16, 136])
    >>> vocab.decode([19, 4])
    ['c', '4']
    >>> letter = task_vocab(TaskConfig(name="letter"))
    >>> len(letter), letter.encode(["a1", "h8", "aa", "ca", "hh"]).tolist()
    (129, [1, 64, 65, 81, 128])
"""

from __future__ import annotations

import functools
import string
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from possym.config import CANONICAL_TASKS, TaskConfig

PAD = "<pad>"

_SINGLE_LETTERS = tuple(string.ascii_lowercase)
_ALL_LETTERS = _SINGLE_LETTERS + tuple(a + b for a in _SINGLE_LETTERS for b in _SINGLE_LETTERS)


@dataclass(frozen=True)
class Vocab:
    """An ordered token list; a token's id is its index, and ``tokens[0]`` is ``PAD``."""

    tokens: tuple[str, ...]
    _index: dict[str, int] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        tokens = tuple(self.tokens)
        if not tokens or tokens[0] != PAD:
            raise ValueError(f"a vocabulary must start with {PAD!r} at id 0, got {tokens[:1]}")
        index = {token: i for i, token in enumerate(tokens)}
        if len(index) != len(tokens):
            repeated = sorted({t for t in tokens if tokens.count(t) > 1})
            raise ValueError(f"a vocabulary must not repeat tokens; repeated: {repeated}")
        object.__setattr__(self, "tokens", tokens)
        object.__setattr__(self, "_index", index)

    def __len__(self) -> int:
        return len(self.tokens)

    def id(self, token: str) -> int:
        """The id of ``token``; an unknown token is a ValueError that names it."""
        try:
            return self._index[token]
        except KeyError:
            raise ValueError(f"unknown token {token!r}: not one of the {len(self)} tokens of this vocabulary") from None

    def encode(self, tokens: Sequence[str]) -> np.ndarray:
        """Token strings (pos,) -> ids (pos,) int64."""
        return np.array([self.id(t) for t in tokens], dtype=np.int64)

    def decode(self, ids: Sequence[int] | np.ndarray) -> list[str]:
        """Ids (pos,) -> token strings; an id outside 0..len-1 is a ValueError."""
        ids = np.asarray(ids, dtype=np.int64)
        if ids.ndim != 1:
            raise ValueError(f"decode takes one sequence of ids (pos,), got shape {ids.shape}")
        bad = ids[(ids < 0) | (ids >= len(self))]
        if bad.size:
            raise ValueError(f"ids {bad[:5].tolist()} lie outside this vocabulary's 0..{len(self) - 1}")
        return [self.tokens[i] for i in ids.tolist()]


def number_alphabet(n_letters: int) -> tuple[str, ...]:
    """The first ``n_letters`` letter tokens: a..z, then the bigrams aa, ab, .. in lexicographic order.

    The paper's 120-letter alphabet is ``number_alphabet(120)``, ending at ``"dp"``; the letter task
    uses the single letters ``number_alphabet(8)`` = a..h.
    """
    if not 1 <= n_letters <= len(_ALL_LETTERS):
        raise ValueError(f"n_letters={n_letters} must lie in 1..{len(_ALL_LETTERS)} (a..z then aa..zz)")
    return _ALL_LETTERS[:n_letters]


def number_ints(cfg: TaskConfig) -> tuple[str, ...]:
    """The number task's offset tokens ``"1"..str(n_target + n_pretarget)``."""
    return tuple(str(d) for d in range(1, cfg.n_target + cfg.n_pretarget + 1))


def letter_int_tokens(cfg: TaskConfig) -> tuple[str, ...]:
    """The letter task's (letter, int) tokens, letter-major: a1..a{n_ints}, b1, ..."""
    return tuple(f"{s}{w}" for s in number_alphabet(cfg.letters) for w in range(1, cfg.n_ints + 1))


def letter_pair_tokens(cfg: TaskConfig) -> tuple[str, ...]:
    """The letter task's (letter, letter) tokens, left-letter-major: aa, ab, .., ba, ..."""
    letters = number_alphabet(cfg.letters)
    return tuple(x + y for x in letters for y in letters)


@functools.lru_cache(maxsize=64)
def task_vocab(cfg: TaskConfig) -> Vocab:
    """The vocabulary of ``cfg``'s task, ids as the paper's tokenizer (see the module docstring)."""
    if cfg.name == "number":
        return Vocab((PAD, *number_ints(cfg), *number_alphabet(cfg.letters)))
    if cfg.name in CANONICAL_TASKS:
        from possym.canonical.adapter import spec_of  # the canonical package imports this module

        return spec_of(cfg).vocab
    return Vocab((PAD, *letter_int_tokens(cfg), *letter_pair_tokens(cfg)))
