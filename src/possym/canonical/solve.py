"""An independent oracle for the canonical tasks: brute force on the decoded token strings.

It shares nothing with the generator but the token names: it parses every token, scans the whole
input, and checks that the instance is well formed (one query, last; Retrieval's symbol bound
exactly once; induction's symbol present) before answering.

Example:
    >>> solve("index", ["s2", "s0", "s3", "s3", "@3"])
    CanonicalSolution(answer='s0', position=1)
    >>> solve("induction", ["s1:a2", "s3:a1", "s1:a0", "s2:a1", "s1?"])
    CanonicalSolution(answer='a0', position=2)
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

_SYMBOL = re.compile(r"s(\d+)")
_OFFSET = re.compile(r"@(\d+)")
_PAIR = re.compile(r"s(\d+):a(\d+)")
_QUERY = re.compile(r"s(\d+)\?")


@dataclass(frozen=True)
class CanonicalSolution:
    answer: str  # the answer token
    position: int  # where it was read in the input


def _full(pattern: re.Pattern[str], token: str, what: str) -> re.Match[str]:
    m = pattern.fullmatch(token)
    if m is None:
        raise ValueError(f"{token!r} is not {what}")
    return m


def solve(task: str, tokens: Sequence[str]) -> CanonicalSolution:
    """The answer of one input (content tokens then the query), by brute force."""
    *content, query = list(tokens)
    if task == "index":
        for t in content:
            _full(_SYMBOL, t, "a symbol s<i>")
        k = int(_full(_OFFSET, query, "an offset query @<k>").group(1))
        pos = len(content) - k
        if not 1 <= k <= len(content):
            raise ValueError(f"offset @{k} points outside the {len(content)} content tokens")
        return CanonicalSolution(content[pos], pos)
    if task not in ("retrieval", "induction"):
        raise ValueError(f"task={task!r}; allowed: index, retrieval, induction")
    wanted = _full(_QUERY, query, "a query s<i>?").group(1)
    matches = []
    for pos, t in enumerate(content):
        symbol, attribute = _full(_PAIR, t, "a binding s<i>:a<k>").groups()
        if symbol == wanted:
            matches.append((pos, f"a{attribute}"))
    if not matches:
        raise ValueError(f"symbol s{wanted} is bound nowhere in the input")
    if task == "retrieval" and len(matches) != 1:
        raise ValueError(f"retrieval needs symbol s{wanted} bound once; it is bound {len(matches)} times")
    pos, answer = max(matches)  # the last occurrence
    return CanonicalSolution(answer, pos)
