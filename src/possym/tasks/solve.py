"""An independent oracle: follow the hops of either task on token strings alone.

The solver knows nothing of windows, alphabets, hop limits or the generator (it never imports
``number`` or ``letter``); it only knows how a token points, so it checks every generated instance
and solves the paper's own examples at any length.

- number: a token of decimal digits is a backward offset, pointing ``offset`` positions to its left;
  any other token is a symbol, and the hops stop there. The query is the last token.
- letter: a two-letter token ``xy`` points to the one token whose *left* letter is ``y`` (searched
  over the whole input, query included, in either direction); a letter followed by digits (``c2``)
  is a target, and the hops stop there. The query is the last token.

An input is ill-posed, and ``solve`` raises ValueError saying why, when a hop has no match (an
offset reaching before the start; a letter that starts no token), more than one match (a letter
that starts two tokens), or comes back to a position already visited (offset 0; a cycle of letters).

Example (paper Fig. 1):
    >>> solve("c b a 1 4 1 3 2 1".split(), "number")
    Solution(answer='c', n_hops=4, path=(8, 7, 5, 4, 0))
    >>> solve("c2 b1 a3 fa ec de hf gd ig".split(), "letter")
    Solution(answer='c2', n_hops=4, path=(8, 7, 5, 4, 0))
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

_OFFSET = re.compile(r"[0-9]+")
_TARGET = re.compile(r"([A-Za-z])([0-9]+)")
_PAIR = re.compile(r"([A-Za-z])([A-Za-z])")


@dataclass(frozen=True)
class Solution:
    """The answer token, the number of hops, and the positions visited from the query to the answer."""

    answer: str
    n_hops: int
    path: tuple[int, ...]


def solve(tokens: Sequence[str], task: str) -> Solution:
    """Follow ``task``'s hops from the last of ``tokens``; ValueError if the input is ill-posed."""
    tokens = list(tokens)
    if not tokens:
        raise ValueError("cannot solve an empty input: there is no query")
    if task == "number":
        return _solve_number(tokens)
    if task == "letter":
        return _solve_letter(tokens)
    raise ValueError(f"task={task!r} is not a task; allowed: ('number', 'letter')")


def _solve_number(tokens: list[str]) -> Solution:
    pos = len(tokens) - 1
    if not _OFFSET.fullmatch(tokens[pos]):
        raise ValueError(f"ill-posed number input: the query {tokens[pos]!r} at position {pos} is not an offset")
    path = [pos]
    while _OFFSET.fullmatch(tokens[pos]):
        offset = int(tokens[pos])
        if offset == 0:
            raise ValueError(f"ill-posed number input: cycle, offset 0 at position {pos} points to itself")
        if offset > pos:
            raise ValueError(
                f"ill-posed number input: no match, offset {offset} at position {pos} points before the start "
                f"(path so far {path})"
            )
        pos -= offset
        path.append(pos)
    return Solution(answer=tokens[pos], n_hops=len(path) - 1, path=tuple(path))


def _parse_letter_token(token: str, pos: int) -> tuple[str, str | None]:
    """(left letter, right letter) of a pair, (letter, None) of a target."""
    if m := _PAIR.fullmatch(token):
        return m.group(1), m.group(2)
    if m := _TARGET.fullmatch(token):
        return m.group(1), None
    raise ValueError(
        f"ill-posed letter input: token {token!r} at position {pos} is neither (letter, letter) nor (letter, int)"
    )


def _solve_letter(tokens: list[str]) -> Solution:
    parsed = [_parse_letter_token(t, i) for i, t in enumerate(tokens)]
    starts: dict[str, list[int]] = {}
    for pos, (left, _) in enumerate(parsed):
        starts.setdefault(left, []).append(pos)

    pos = len(tokens) - 1
    letter = parsed[pos][1]
    if letter is None:
        raise ValueError(f"ill-posed letter input: the query {tokens[pos]!r} at position {pos} is not a letter pair")
    path = [pos]
    while letter is not None:
        matches = starts.get(letter, [])
        if not matches:
            raise ValueError(
                f"ill-posed letter input: no match, no token starts with {letter!r} "
                f"(named at position {pos}; path so far {path})"
            )
        if len(matches) > 1:
            raise ValueError(
                f"ill-posed letter input: ambiguous match, {letter!r} (named at position {pos}) starts the "
                f"tokens at positions {matches}"
            )
        pos = matches[0]
        if pos in path:
            raise ValueError(f"ill-posed letter input: cycle, the hops return to position {pos} (path {path})")
        path.append(pos)
        letter = parsed[pos][1]
    return Solution(answer=tokens[pos], n_hops=len(path) - 1, path=tuple(path))
