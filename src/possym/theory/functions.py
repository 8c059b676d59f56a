"""The paper's basic functions as oracles (App. F.1, Listing 1), their input domains, and input samplers.

Two symbol sets with their own ids, one one-hot coordinate per symbol as in the constructions:
:class:`IndexSymbols` (Sigma = ALPH u INT: ids ``0..A-1`` the letters, ``A+i-1`` the integer i) and
:class:`RetrievalSymbols` (bigrams, id ``(phi(L)-1)*(A+m) + phi(R)-1``, App. F.2.2). **Selective Index**
(Definition F.1): an integer i at j outputs the token at j - i if a letter, else stays; an input is *valid* when
every integer points inside it (Listing 1's ``seq[n - i]`` would wrap around; we do not copy that).
**Retrieval** (Definition F.2): a (letter, letter) token xy outputs the token at some k <= j whose left letter is
y (``aa`` matches itself); an input is *proper* when that token exists and is unique, and on letter-task
instances the output is checked only where :func:`retrieval_defined` says it is defined. See docs/theory.md,
section 1.

Example:
    >>> sym = IndexSymbols(n_letters=3, n_ints=3)
    >>> ids = sym.encode(["a", "b", "c", "2", "1", "3"])[None]
    >>> sym.decode(selective_index(ids, sym)[0])      # "2" at 3 -> "b"; "1" at 4 -> the int "2" stays "1"
    ['a', 'b', 'c', 'b', '1', 'c']
    >>> rs = RetrievalSymbols(n_letters=3, n_ints=2)
    >>> ids = rs.encode(["b1", "c2", "ab", "bc"])[None]
    >>> rs.decode(retrieval(ids, rs)[0]), bool(is_proper(ids, rs)[0])
    (['b1', 'c2', 'b1', 'c2'], True)"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from functools import cached_property
from typing import overload

import numpy as np

from possym.tasks.vocab import number_alphabet


class _NamedSymbols:
    """Names <-> ids for a symbol set that lists its names in ``tokens``."""

    @property
    def tokens(self) -> tuple[str, ...]:  # each subclass lists its names (a cached property there)
        raise NotImplementedError

    def encode(self, names: list[str]) -> np.ndarray:
        index = {t: i for i, t in enumerate(self.tokens)}
        try:
            return np.array([index[t] for t in names], dtype=np.int64)
        except KeyError as exc:
            raise ValueError(f"unknown symbol {exc.args[0]!r}; symbols are {self.tokens[:5]}..") from None

    def decode(self, ids: np.ndarray) -> list[str]:
        return [self.tokens[i] for i in np.asarray(ids).tolist()]


@dataclass(frozen=True)
class IndexSymbols(_NamedSymbols):
    """Sigma = ALPH u {1..n_ints}; letters are named as the number task names them (a..z, aa, ..)."""

    n_letters: int
    n_ints: int

    def __post_init__(self) -> None:
        if self.n_letters < 1 or self.n_ints < 1:
            raise ValueError(f"n_letters={self.n_letters} and n_ints={self.n_ints} must both be >= 1")

    @property
    def size(self) -> int:
        return self.n_letters + self.n_ints

    @cached_property
    def tokens(self) -> tuple[str, ...]:
        return (*number_alphabet(self.n_letters), *(str(i) for i in range(1, self.n_ints + 1)))

    def is_letter(self, ids: np.ndarray) -> np.ndarray:
        return np.asarray(ids) < self.n_letters

    def offset(self, ids: np.ndarray) -> np.ndarray:
        """The integer an id stands for (0 for letters)."""
        ids = np.asarray(ids)
        return np.where(ids >= self.n_letters, ids - self.n_letters + 1, 0)


@dataclass(frozen=True)
class RetrievalSymbols(_NamedSymbols):
    """Sigma = ALPH x (ALPH u {1..n_ints}); tokens are named as the letter task names them (``ab``, ``c3``)."""

    n_letters: int
    n_ints: int

    def __post_init__(self) -> None:
        if not 1 <= self.n_letters <= 26 or not 1 <= self.n_ints <= 9:
            raise ValueError(f"n_letters={self.n_letters} must lie in 1..26 and n_ints={self.n_ints} in 1..9")

    @property
    def n_right(self) -> int:
        return self.n_letters + self.n_ints

    @property
    def size(self) -> int:
        return self.n_letters * self.n_right

    @cached_property
    def tokens(self) -> tuple[str, ...]:
        letters = number_alphabet(self.n_letters)
        right = (*letters, *(str(i) for i in range(1, self.n_ints + 1)))
        return tuple(x + y for x in letters for y in right)

    @overload
    def token(self, left: int, right: int) -> int: ...
    @overload
    def token(self, left: np.ndarray, right: np.ndarray | int) -> np.ndarray: ...
    def token(self, left: int | np.ndarray, right: int | np.ndarray) -> int | np.ndarray:
        """Id of the bigram (letter ``left``, right symbol ``right``), both 0-based phi - 1; elementwise on arrays."""
        return left * self.n_right + right

    def left(self, ids: np.ndarray) -> np.ndarray:
        """phi(sigma^L) - 1, in 0..A-1."""
        return np.asarray(ids) // self.n_right

    def right(self, ids: np.ndarray) -> np.ndarray:
        """phi(sigma^R) - 1: a letter in 0..A-1, the integer i as A+i-1."""
        return np.asarray(ids) % self.n_right

    def is_pair(self, ids: np.ndarray) -> np.ndarray:
        """True for (letter, letter) tokens."""
        return self.right(ids) < self.n_letters


# ---- Selective Index (Definition F.1) ------------------------------------------------------------


def is_valid_index_input(ids: np.ndarray, sym: IndexSymbols) -> np.ndarray:
    """[batch, pos] -> [batch]: every integer i at (0-based) position j points inside, i <= j."""
    ids = np.asarray(ids)
    return np.asarray((sym.offset(ids) <= np.arange(ids.shape[-1])).all(axis=-1))


def selective_index(ids: np.ndarray, sym: IndexSymbols) -> np.ndarray:
    """Index(sigma) at every position, Definition F.1: [batch, pos] -> [batch, pos]; inputs must be valid."""
    ids = np.asarray(ids)
    if not is_valid_index_input(ids, sym).all():
        raise ValueError("Selective Index is undefined where an integer points before the start of the input")
    out = ids.copy()
    rows = np.arange(ids.shape[0])
    for j in range(ids.shape[1]):
        i = sym.offset(ids[:, j])
        is_int = i > 0
        pointed = ids[rows, np.where(is_int, j - i, j)]
        out[:, j] = np.where(is_int & sym.is_letter(pointed), pointed, ids[:, j])
    return out


# ---- Retrieval (Definition F.2) -------------------------------------------------------------------


def _matches(ids: np.ndarray, sym: RetrievalSymbols, j: int) -> np.ndarray:
    """[batch, j+1] mask of positions k <= j whose left letter equals the right letter of position j."""
    return sym.left(ids[:, : j + 1]) == sym.right(ids[:, j])[:, None]


def retrieval_defined(ids: np.ndarray, sym: RetrievalSymbols) -> np.ndarray:
    """[batch, pos] -> [batch, pos]: where Definition F.2 defines the output.

    A (letter, int) position always; a (letter, letter) position when some k <= j has the matching left
    letter and every such k holds the same token.
    """
    ids = np.asarray(ids)
    out = np.ones(ids.shape, dtype=bool)
    for j in range(ids.shape[1]):
        pair = sym.is_pair(ids[:, j])
        match = _matches(ids, sym, j)
        first = ids[np.arange(len(ids)), match.argmax(axis=1)]
        same = np.where(match, ids[:, : j + 1] == first[:, None], True).all(axis=1)
        out[:, j] = ~pair | (match.any(axis=1) & same)
    return out


def is_proper(ids: np.ndarray, sym: RetrievalSymbols) -> np.ndarray:
    """[batch, pos] -> [batch]: the input is proper (Definition F.2), so Retrieval is defined everywhere."""
    return np.asarray(retrieval_defined(ids, sym).all(axis=-1))


def retrieval(ids: np.ndarray, sym: RetrievalSymbols) -> np.ndarray:
    """Retrieval(sigma) at every position, Definition F.2: [batch, pos] -> [batch, pos].

    Where the output is undefined (see :func:`retrieval_defined`) the token is kept; callers mask those.
    """
    ids = np.asarray(ids)
    out = ids.copy()
    rows = np.arange(len(ids))
    for j in range(ids.shape[1]):
        match = _matches(ids, sym, j)
        found = sym.is_pair(ids[:, j]) & match.any(axis=1)
        out[:, j] = np.where(found, ids[rows, match.argmax(axis=1)], ids[:, j])
    return out


# ---- inputs --------------------------------------------------------------------------------------


def all_sequences(size: int, n: int) -> np.ndarray:
    """Every sequence of length n over ``size`` symbols: [size**n, n] int64, lexicographic."""
    if size**n > 20_000_000:
        raise ValueError(f"{size}**{n} sequences is too many to enumerate; sample instead")
    return np.array(list(itertools.product(range(size), repeat=n)), dtype=np.int64).reshape(-1, n)


def all_index_inputs(sym: IndexSymbols, n: int) -> np.ndarray:
    """Every valid input of length n (each integer points inside): [batch, n]."""
    seqs = all_sequences(sym.size, n)
    return seqs[is_valid_index_input(seqs, sym)]


def all_proper_inputs(sym: RetrievalSymbols, n: int) -> np.ndarray:
    """Every proper input of length n: [batch, n]."""
    seqs = all_sequences(sym.size, n)
    return seqs[is_proper(seqs, sym)]


def sample_index_inputs(sym: IndexSymbols, n: int, batch: int, rng: np.random.Generator) -> np.ndarray:
    """``batch`` valid inputs of length n: each position is a letter or an in-range integer, half-half.

    [batch, n] int64. Integers are uniform over 1..min(n_ints, j) at 0-based position j.
    """
    ids = np.empty((batch, n), dtype=np.int64)
    for j in range(n):
        letters = rng.integers(0, sym.n_letters, size=batch)
        top = min(sym.n_ints, j)
        if top == 0:
            ids[:, j] = letters
            continue
        ints = sym.n_letters + rng.integers(0, top, size=batch)
        ids[:, j] = np.where(rng.random(batch) < 0.5, letters, ints)
    return ids


def sample_proper_inputs(sym: RetrievalSymbols, n: int, batch: int, rng: np.random.Generator) -> np.ndarray:
    """``batch`` proper inputs of length n, built left to right: [batch, n] int64.

    At each position a (letter, int) token or, with probability 1/2 when one is allowed, a (letter, letter)
    token whose right letter y starts exactly one distinct token so far (or y is its own left letter and no
    other y-token exists). Left letters are uniform, but a letter that already starts a token repeats that
    very token half the time, so repeated matches (the hard case for softmax) are common.
    """
    a = sym.n_letters
    ids = np.empty((batch, n), dtype=np.int64)
    seen = np.full((batch, a), -1, dtype=np.int64)  # the one token that each left letter starts, or -1
    rows = np.arange(batch)
    for j in range(n):
        left = rng.integers(0, a, size=batch)
        token = sym.token(left, a + rng.integers(0, sym.n_ints, size=batch))
        # a pair xy: y must start exactly one distinct token (``seen``), or y = x starting nothing yet
        want_pair = rng.random(batch) < 0.5
        y = rng.integers(0, a, size=batch)
        own = seen[rows, left]
        pair = sym.token(left, y)
        pair_ok = ((seen[rows, y] >= 0) & (y != left)) | ((y == left) & ((own == -1) | (own == pair)))
        token = np.where(want_pair & pair_ok, pair, token)
        # repeating a seen token is proper unless it is a pair whose right letter has since become ambiguous
        own_right = sym.right(np.maximum(own, 0))
        own_ok = ~sym.is_pair(np.maximum(own, 0)) | (seen[rows, np.minimum(own_right, a - 1)] >= 0)
        repeat = (own >= 0) & own_ok & (rng.random(batch) < 0.5)
        token = np.where(repeat, own, token)
        # a new token with an already-used left letter is fine for (letter, int) tokens, but it would make
        # later pairs pointing at that letter improper; record it as ``-2`` (no pair may point there)
        fresh = own == -1
        conflict = (own >= 0) & (token != own)
        seen[rows, left] = np.where(fresh, token, np.where(conflict, -2, own))
        ids[:, j] = token
    if not is_proper(ids, sym).all():  # pragma: no cover - the construction above guarantees it
        raise AssertionError("sample_proper_inputs produced an improper input")
    return ids


def omega(n_letters: int) -> float:
    """omega = 2 pi / |ALPH|, the angle between consecutive letters in T_Retrieval (Theorem 3.2)."""
    return 2.0 * math.pi / n_letters
