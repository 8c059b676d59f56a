"""A task's vocabulary: an ordered token list whose index is the token id, ``PAD`` first.

Each task module builds its own (``possym.tasks.number``, ``possym.tasks.letter``, ...);
:func:`possym.tasks.task_vocab` looks it up through the task registry and caches it per config.

Example:
    >>> from possym.tasks import task_config, task_vocab
    >>> vocab = task_vocab(task_config("number"))
    >>> len(vocab), vocab.encode(["c", "b", "a", "1", "16", "dp"]).tolist()
    (137, [19, 18, 17, 1, 16, 136])
    >>> vocab.decode([19, 4])
    ['c', '4']
    >>> letter = task_vocab(task_config("letter"))
    >>> len(letter), letter.encode(["a1", "h8", "aa", "ca", "hh"]).tolist()
    (129, [1, 64, 65, 81, 128])
"""

from __future__ import annotations

import string
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

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

    >>> number_alphabet(28)[-3:]
    ('z', 'aa', 'ab')
    """
    if not 1 <= n_letters <= len(_ALL_LETTERS):
        raise ValueError(f"n_letters={n_letters} must lie in 1..{len(_ALL_LETTERS)} (a..z then aa..zz)")
    return _ALL_LETTERS[:n_letters]
