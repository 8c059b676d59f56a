"""Letter task (symbolic multi-hop; paper App. B.2): a letter names the next token.

A window holds ``n_target`` (letter, int) tokens, ``n_pretarget`` (letter, letter) tokens and one
(letter, letter) query, each pair one atomic token. From the query, the right letter y of the current
pair names the unique token whose *left* letter is y; the hops stop on a (letter, int) target, the answer.
What matters is *what* a token is, not where: a symbolic task. Worked example (paper Fig. 3B)::

    position  0  1  2  3  4  5  6  7 |  8  9 10  11 12  13 14  15 | 16
    token    e1 b2 e1 g6 a2 b2 e1 g6 | be db ca  ge eb  hc dg  fh | eh
    eh -h-> hc (13) -c-> ca (10) -a-> a2 (4)     answer a2 (id 2), 3 hops, path (16, 13, 10, 4)

(The figure's distractor ``fh`` has the chain letter h on its right; this generator never does that.)

Generation (the authors' recipe): chain letters c_1..c_{h-1}, distinct and not the answer letter s*, then s*;
the pre-target at the k-th chain position is (c_k, c_{k+1}); every other letter (the query's left one, other
targets and pre-targets, extra tokens) is drawn from the letters off the chain, so the path is unique. Chains
move leftwards, as the number task's; target ints are uniform in 1..n_ints. Shared prefixes for length
generalisation (``draw_prefix``, ``sample_after``, ``prefix_plan``: a prefix for h hops leaves h letters free,
dealt so that answer letters stay balanced): docs/choices.md, "Tasks" and "Length generalisation"."""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from possym.errors import require
from possym.tasks.base import Solution, Task
from possym.tasks.samples import TaskSamples
from possym.tasks.vocab import PAD, Vocab, number_alphabet
from possym.tasks.window import WindowTaskConfig, leftward_paths


@dataclass(frozen=True)
class LetterTaskConfig(WindowTaskConfig):
    """The letter task: ``n_letters`` single letters (the paper: 8, a..h) and target ints 1..n_ints
    (the paper: 8)."""

    name: str = "letter"
    n_letters: int = 8
    n_ints: int = 8

    def __post_init__(self) -> None:
        super().__post_init__()
        require(1 <= self.n_letters <= 26, f"task.n_letters={self.n_letters} must lie in 1..26 (a..z)")
        # Chain letters are unique as left letters, so a max_hops chain uses max_hops distinct
        # letters and at least one more letter is needed for every token off the chain.
        require(
            self.n_letters >= self.max_hops + 1,
            f"task.n_letters={self.n_letters} is too few for unique chains of max_hops={self.max_hops}: "
            f"the letter task needs n_letters >= max_hops + 1 = {self.max_hops + 1}",
        )
        require(1 <= self.n_ints <= 9, f"task.n_ints={self.n_ints} must lie in 1..9 (single digits)")


def target_tokens(cfg: LetterTaskConfig) -> tuple[str, ...]:
    """The (letter, int) tokens, letter-major: a1..a{n_ints}, b1, ..."""
    return tuple(f"{s}{w}" for s in number_alphabet(cfg.n_letters) for w in range(1, cfg.n_ints + 1))


def pair_tokens(cfg: LetterTaskConfig) -> tuple[str, ...]:
    """The (letter, letter) tokens, left-letter-major: aa, ab, .., ba, ..."""
    letters = number_alphabet(cfg.n_letters)
    return tuple(x + y for x in letters for y in letters)


@functools.lru_cache(maxsize=32)
def vocab(cfg: LetterTaskConfig) -> Vocab:
    """``PAD`` = 0, every (letter, int) token letter-major (a1..a8, b1, .., h8 -> 1..64), then every
    (letter, letter) token (aa, ab, .., hh -> 65..128): 129 ids at defaults; each pair one atomic token."""
    return Vocab((PAD, *target_tokens(cfg), *pair_tokens(cfg)))


def combinations(cfg: LetterTaskConfig) -> np.ndarray:
    """Every balanced class: (n_combos, 4) int64 rows (answer position, s*, w*, n_hops).

    s* is a letter index, w* an int in 1..n_ints. At defaults 8 x 8 x 8 x 4 = 2048 rows.
    """
    grid = np.meshgrid(
        np.arange(cfg.n_target),
        np.arange(cfg.n_letters),
        np.arange(1, cfg.n_ints + 1),
        np.array(cfg.hops),
        indexing="ij",
    )
    return np.stack([g.ravel() for g in grid], axis=1).astype(np.int64)


def sample(
    cfg: LetterTaskConfig,
    combos: np.ndarray,
    rng: np.random.Generator,
    extra: int = 0,
    off_chain: np.ndarray | None = None,
) -> TaskSamples:
    """One instance per row of ``combos`` (batch, 4), as ``combinations`` lays them out.

    ``off_chain``: an optional (n_letters,) bool mask of letters that must stay off every chain (so
    that tokens using them, e.g. a shared prefix, never match a hop); s* must not be one of them.
    """
    ids = vocab(cfg)
    n_letters = cfg.n_letters
    target_ids = ids.encode(target_tokens(cfg)).reshape(n_letters, cfg.n_ints)  # [letter, int - 1]
    pair_ids = ids.encode(pair_tokens(cfg)).reshape(n_letters, n_letters)  # [left, right]
    answer_pos, s_star, w_star, n_hops = (np.asarray(c, dtype=np.int64) for c in np.asarray(combos).T)
    batch, rows = len(n_hops), np.arange(len(n_hops))

    # A per-row letter permutation with s* first: columns 1..h-1 are c_1..c_{h-1}, columns h.. are
    # the letters off the chain.
    keys = rng.random((batch, n_letters))
    if off_chain is not None:
        if off_chain[s_star].any() or (~off_chain).sum() < n_hops.max():
            raise ValueError(
                f"off_chain letters {np.flatnonzero(off_chain).tolist()} leave too few letters for the chain, "
                "or contain an answer letter"
            )
        keys[:, off_chain] += 2.0  # sorted after every free letter, so never c_1..c_{h-1}
    keys[rows, s_star] = -1.0
    order = keys.argsort(axis=1)
    chain = order[:, : cfg.max_hops + 1].copy()  # chain[:, k] is c_k for 1 <= k < h ...
    chain[rows, n_hops] = s_star  # ... and s* at k = h

    def off_chain(size: int) -> np.ndarray:
        """(batch, size) letters drawn uniformly from each row's letters off the chain."""
        cols = rng.integers(n_hops[:, None], n_letters, size=(batch, size))
        return np.take_along_axis(order, cols, axis=1)

    target_letter = off_chain(cfg.n_target)
    target_int = rng.integers(1, cfg.n_ints + 1, size=(batch, cfg.n_target))
    target_letter[rows, answer_pos] = s_star
    target_int[rows, answer_pos] = w_star
    left, right = off_chain(cfg.n_pretarget), off_chain(cfg.n_pretarget)
    query_left = off_chain(1)[:, 0]

    path = leftward_paths(cfg, answer_pos, n_hops, rng)
    for k in range(1, cfg.max_hops):  # one pass per hop index; every sample is handled at once
        on_chain = n_hops > k
        at = path[on_chain, k] - cfg.n_target
        left[rows[on_chain], at] = chain[on_chain, k]
        right[rows[on_chain], at] = chain[on_chain, k + 1]

    window = np.concatenate(
        [target_ids[target_letter, target_int - 1], pair_ids[left, right], pair_ids[query_left, chain[:, 1]][:, None]],
        axis=1,
    )
    before = target_ids[off_chain(extra), rng.integers(0, cfg.n_ints, size=(batch, extra))]
    return TaskSamples(
        tokens=np.concatenate([before, window], axis=1),
        answer=target_ids[s_star, w_star - 1],
        n_hops=n_hops,
        path=np.where(path >= 0, path + extra, -1),
        extra=extra,
    )


PREFIX_PER_HOP = True  # a prefix leaves exactly n_hops letters free for the chain


def prefix_plan(cfg: LetterTaskConfig, n_hops: int, n_prefixes: int, rng: np.random.Generator) -> list[dict[str, Any]]:
    """The ``draw_prefix`` keywords of ``n_prefixes`` prefixes whose windows together cover every answer
    letter evenly: prefix j leaves free the letters at cycle positions jh, .., jh + h - 1 (mod n_letters)
    of one random cycle (module docstring, "Balance over answer letters").

    >>> plan = prefix_plan(LetterTaskConfig(), 1, 8, np.random.default_rng(0))
    >>> sorted(int(p["free"][0]) for p in plan)        # 1-hop: each letter is the free one once
    [0, 1, 2, 3, 4, 5, 6, 7]
    """
    if not 1 <= n_hops <= cfg.n_letters - 1 or n_prefixes < 1:
        raise ValueError(f"n_hops={n_hops} must lie in 1..{cfg.n_letters - 1} and n_prefixes={n_prefixes} be >= 1")
    cycle = rng.permutation(cfg.n_letters)
    return [{"free": cycle[(j * n_hops + np.arange(n_hops)) % cfg.n_letters]} for j in range(n_prefixes)]


def draw_prefix(
    cfg: LetterTaskConfig,
    length: int,
    n_hops: int,
    rng: np.random.Generator,
    free: np.ndarray | None = None,
    tokens: str = "targets",
) -> np.ndarray:
    """(length,) uniform tokens over the ``n_letters - n_hops`` letters other than ``free`` (the chain's;
    default: ``n_hops`` letters at random).

    ``tokens``: "targets" (uniform (letter, int) tokens, ``sample``'s extra tokens), "pretargets" ((letter,
    letter) tokens; only the left letter avoids the chain, since only a left letter can match a hop), "mixed"
    (each token either kind with probability 1/2) or "windows" (blocks laid out as a window's
    n_target targets then n_pretarget pre-targets, repeated and cut at ``length``).
    """
    if tokens not in PREFIX_TOKENS:
        raise ValueError(f"tokens={tokens!r}; allowed: {PREFIX_TOKENS}")
    ids = vocab(cfg)
    target_ids = ids.encode(target_tokens(cfg)).reshape(cfg.n_letters, cfg.n_ints)
    if free is None:
        letters = rng.permutation(cfg.n_letters)[: cfg.n_letters - n_hops]
    else:
        free = np.unique(np.asarray(free, dtype=np.int64))
        if len(free) != n_hops or free.min() < 0 or free.max() >= cfg.n_letters:
            raise ValueError(f"free={free.tolist()} must be {n_hops} distinct letter indices in 0..{cfg.n_letters - 1}")
        letters = np.setdiff1d(np.arange(cfg.n_letters), free)
    left = letters[rng.integers(0, len(letters), size=length)]
    out = target_ids[left, rng.integers(0, cfg.n_ints, size=length)]
    if tokens == "targets":
        return out
    pair_ids = ids.encode(pair_tokens(cfg)).reshape(cfg.n_letters, cfg.n_letters)
    pairs = pair_ids[left, rng.integers(0, cfg.n_letters, size=length)]
    is_pair = _pretarget_positions(cfg, length, tokens, rng)
    return np.where(is_pair, pairs, out)


PREFIX_TOKENS = ("targets", "pretargets", "mixed", "windows")


def _pretarget_positions(cfg: WindowTaskConfig, length: int, tokens: str, rng: np.random.Generator) -> np.ndarray:
    """Which of ``length`` prefix positions hold a pre-target-kind token, for a ``tokens`` reading."""
    if tokens == "pretargets":
        return np.ones(length, dtype=bool)
    if tokens == "mixed":
        return rng.random(length) < 0.5
    block = cfg.n_target + cfg.n_pretarget  # "windows": targets then pre-targets, ending where the window starts
    return ((np.arange(length) - length) % block) >= cfg.n_target


def sample_after(
    cfg: LetterTaskConfig, combos: np.ndarray, rng: np.random.Generator, prefix: np.ndarray, length: int
) -> TaskSamples:
    """One instance per row of ``combos``, every one after ``prefix[:length]``.

    The left letters of the *whole* prefix are kept off every chain, so no prefix token ever matches a
    hop and the windows after every cut of one nested prefix use the same chain letters; the answer letter
    s* (column 1 of ``combos``) is re-dealt evenly over the letters the prefix leaves free, in random order
    (counts differ by at most one), since only those can end a chain.
    """
    ids = vocab(cfg)
    prefix = np.asarray(prefix, dtype=np.int64)
    left_of = {tok: i // cfg.n_ints for i, tok in enumerate(ids.encode(target_tokens(cfg)))}
    left_of |= {tok: i // cfg.n_letters for i, tok in enumerate(ids.encode(pair_tokens(cfg)))}
    used = np.zeros(cfg.n_letters, dtype=bool)
    try:
        used[[left_of[t] for t in np.unique(prefix).tolist()]] = True
    except KeyError as exc:
        raise ValueError(f"a letter-task prefix holds only letter-task tokens; got token id {exc.args[0]}") from None
    free = np.flatnonzero(~used)
    combos = np.array(combos, dtype=np.int64)
    if len(free) < combos[:, 3].max(initial=0):
        raise ValueError(
            f"the prefix uses {int(used.sum())} of {cfg.n_letters} letters, leaving {len(free)}: too few for "
            f"{combos[:, 3].max()}-hop chains; draw it with draw_prefix(cfg, length, n_hops, rng)"
        )
    combos[:, 1] = free[rng.permutation(np.arange(len(combos)) % len(free))]
    return sample(cfg, combos, rng, off_chain=used).prepend(prefix[:length])


_TARGET = re.compile(r"([A-Za-z])([0-9]+)")
_PAIR = re.compile(r"([A-Za-z])([A-Za-z])")


def _parse(token: str, pos: int) -> tuple[str, str | None]:
    """(left letter, right letter) of a pair, (letter, None) of a target."""
    if m := _PAIR.fullmatch(token):
        return m.group(1), m.group(2)
    if m := _TARGET.fullmatch(token):
        return m.group(1), None
    raise ValueError(
        f"ill-posed letter input: token {token!r} at position {pos} is neither (letter, letter) nor (letter, int)"
    )


def solve(tokens: Sequence[str]) -> Solution:
    """The independent oracle: follow the letters from the last token, on token strings alone.

    A two-letter token ``xy`` points to the one token whose *left* letter is ``y`` (searched over the
    whole input, query included, in either direction); a letter followed by digits (``c2``) is a
    target, and the hops stop there. ValueError if a hop has no match, more than one, or returns to
    a position already visited.

    >>> solve("c2 b1 a3 fa ec de hf gd ig".split())       # paper Fig. 1
    Solution(answer='c2', n_hops=4, path=(8, 7, 5, 4, 0))
    """
    tokens = list(tokens)
    if not tokens:
        raise ValueError("cannot solve an empty input: there is no query")
    parsed = [_parse(t, i) for i, t in enumerate(tokens)]
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


def chance(cfg: LetterTaskConfig) -> float:
    """A uniform guess among the (letter, int) targets: 1 / (n_letters * n_ints) (1/64 in the paper).

    A model that has learnt the format but not the hops still faces every target token: the answer
    letter is any of the n_letters, its int any of the n_ints."""
    return 1.0 / (cfg.n_letters * cfg.n_ints)


TASK = Task(
    name="letter",
    config=LetterTaskConfig,
    vocab=vocab,
    combinations=combinations,
    sample=sample,
    solve=solve,
    chance=chance,
    draw_prefix=draw_prefix,
    sample_after=sample_after,
    prefix_per_hop=PREFIX_PER_HOP,
    prefix_plan=prefix_plan,
    mechanism="symbolic",
    summary="symbolic multi-hop: a letter names the next token (paper App. B.2)",
)
