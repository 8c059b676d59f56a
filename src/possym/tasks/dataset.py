"""Balanced samples and disjoint train/val/test splits for either task (paper App. B).

Balance: every combination of (answer position in the target window, answer value, hop count) --
3840 for the number task, 2048 for the letter task at defaults -- is used ⌊n / C⌋ times, a remainder
of ``n mod C`` distinct combinations fills the rest, and the order is shuffled. The remainder is
random but stratified: hop counts in it differ by at most one, and within each hop count so do the
answer positions. At the paper's sizes (432,000 / 2,400 / 45,600, each a multiple of 4) every hop
count therefore has exactly a quarter of each split, as the paper states.

Example:
    >>> from possym.tasks import task_config
    >>> cfg = task_config("number", n_train=3840, n_val=960, n_test=960)
    >>> splits = make_splits(cfg, seed=0)
    >>> {name: len(s) for name, s in splits.items()}
    {'train': 3840, 'val': 960, 'test': 960}
    >>> np.bincount(splits["val"].n_hops).tolist()
    [0, 240, 240, 240, 240]
"""

from __future__ import annotations

from typing import Any

import numpy as np

from possym.tasks.base import Task, TaskConfig
from possym.tasks.registry import get_task
from possym.tasks.samples import TaskSamples

SPLITS = ("train", "val", "test")

# Re-drawing a clashing val/test row is almost always enough at once; this many failed rounds
# means the task is too small to hold three disjoint splits of the asked sizes.
_MAX_REDRAWS = 100


def generate(cfg: TaskConfig, n: int, rng: np.random.Generator, extra: int = 0) -> TaskSamples:
    """``n`` balanced instances of ``cfg``'s task, with ``extra`` random tokens before each window."""
    if n < 0 or extra < 0:
        raise ValueError(f"n={n} and extra={extra} must be >= 0")
    task = get_task(cfg.name)
    return task.sample(cfg, balanced_combinations(task.combinations(cfg), n, rng), rng, extra)


def draw_prefix(cfg: TaskConfig, length: int, n_hops: int, rng: np.random.Generator, **plan: Any) -> np.ndarray:
    """(length,) random token ids that any ``n_hops``-hop window of ``generate_after`` may follow.

    By default they are the extra tokens of ``generate(..., extra=length)``, as the task draws them (letters
    for the number task; (letter, int) tokens that never create a second match for the letter task). ``plan``:
    keywords of the task's ``draw_prefix``: one entry of :func:`prefix_plan`, and ``tokens`` (which kind of
    token the prefix holds: "targets", the default, "pretargets", "mixed" or "windows"). A task whose longer
    inputs are longer content (the canonical tasks) has none: a ValueError says so.
    """
    _check_hops(cfg, n_hops)
    if length < 0:
        raise ValueError(f"prefix length={length} must be >= 0")
    return _prefix_task(cfg).draw_prefix(cfg, length, n_hops, rng, **plan)  # type: ignore[misc]


def prefix_plan(cfg: TaskConfig, n_hops: int, n_prefixes: int, rng: np.random.Generator) -> list[dict[str, Any]]:
    """The ``draw_prefix`` keywords of ``n_prefixes`` prefixes for ``n_hops``-hop windows that together take
    every answer value evenly: the task's ``prefix_plan``, or no keywords where any window may follow any
    prefix (the number task)."""
    _check_hops(cfg, n_hops)
    task = _prefix_task(cfg)
    if task.prefix_plan is None:
        return [{} for _ in range(n_prefixes)]
    return task.prefix_plan(cfg, n_hops, n_prefixes, rng)


def _prefix_task(cfg: TaskConfig) -> Task:
    task = get_task(cfg.name)
    if not task.extends_by_prefix:
        raise ValueError(f"the task {cfg.name!r} has no prefix windows: its longer inputs are longer content "
                         f"(possym.tasks.get_task({cfg.name!r}).at_length)")
    return task


def prefix_per_hop(cfg: TaskConfig) -> bool:
    """Whether ``draw_prefix`` needs the hop count (letter task) or one prefix serves them all (number task)."""
    return _prefix_task(cfg).prefix_per_hop


def generate_after(
    cfg: TaskConfig,
    prefix: np.ndarray,
    n: int,
    n_hops: int,
    rng: np.random.Generator,
    length: int | None = None,
) -> TaskSamples:
    """``n`` ``n_hops``-hop instances, balanced over answer position and value, all after ``prefix[:length]``.

    ``length`` (default: all of it) cuts a prefix drawn once for several lengths; the windows do not
    depend on it. Each row is distributed as a row of ``generate(cfg, ., rng, extra=length)`` with that
    hop count (the letter task conditions on a chain that avoids the prefix's letters; see its module).

    Example:
        >>> from possym.tasks import task_config
        >>> cfg = task_config("letter")
        >>> rng = np.random.default_rng(0)
        >>> s = generate_after(cfg, draw_prefix(cfg, 100, 3, rng), 8, 3, rng)
        >>> s.tokens.shape, bool((s.tokens[:, :100] == s.tokens[0, :100]).all()), s.extra
        ((8, 117), True, 100)
    """
    _check_hops(cfg, n_hops)
    length = len(prefix) if length is None else length
    if n < 0 or not 0 <= length <= len(prefix):
        raise ValueError(f"n={n} must be >= 0 and length={length} must lie in 0..{len(prefix)}")
    task = _prefix_task(cfg)
    combos = task.combinations(cfg)
    combos = balanced_combinations(combos[combos[:, -1] == n_hops], n, rng)
    return task.sample_after(cfg, combos, rng, np.asarray(prefix, dtype=np.int64), length)  # type: ignore[misc]


def _check_hops(cfg: TaskConfig, n_hops: int) -> None:
    if n_hops not in cfg.hops:
        raise ValueError(f"n_hops={n_hops} is not a hop count of this task; allowed: {list(cfg.hops)}")


def balanced_combinations(combos: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` rows of ``combos`` (n_combos, k), balanced as the module docstring says, shuffled: (n, k).

    ``combos``: every combination, a row each, whose first column is the answer position and last the hop
    count; its (hop, position) cells may be empty or unequal.
    """
    n_combos = len(combos)
    answer_pos, hops = combos[:, 0], combos[:, -1]
    hop_values, hop_index = np.unique(hops, return_inverse=True)
    n_pos = int(answer_pos.max()) + 1
    # Stratified remainder: rank each combination at random within its (hop, position) cell, then
    # order by (rank, shuffled position, shuffled hop); any prefix of that order then deals rank 0 of
    # every cell before rank 1 of any, position by position and hop by hop. A rank counts from its own
    # cell's start, so a grid with empty or unequal cells (a task whose answer sits at one position)
    # is dealt as evenly as a full one.
    by_cell = np.lexsort((rng.random(n_combos), answer_pos, hop_index))
    cell = (hop_index * n_pos + answer_pos)[by_cell]
    starts = np.flatnonzero(np.r_[True, cell[1:] != cell[:-1]])
    rank = np.empty(n_combos, dtype=np.int64)
    rank[by_cell] = np.arange(n_combos) - np.repeat(starts, np.diff(np.r_[starts, n_combos]))
    pos_turn = rng.permutation(n_pos)[answer_pos]
    hop_turn = rng.permutation(len(hop_values))[hop_index]
    key = (rank * n_pos + pos_turn) * len(hop_values) + hop_turn
    remainder = np.argsort(key)[: n % n_combos]
    picked = np.concatenate([np.tile(np.arange(n_combos), n // n_combos), remainder])
    return combos[rng.permutation(picked)]


def make_splits(cfg: TaskConfig, seed: int) -> dict[str, TaskSamples]:
    """Balanced ``train``/``val``/``test`` splits of sizes ``cfg.n_train/n_val/n_test``, disjoint as token rows.

    Deterministic in ``seed``: each split draws from its own stream of ``SeedSequence(seed).spawn(3)``.
    A val row equal to a train row, or a test row equal to a train or val row, is re-drawn with the
    same balanced combination until none is; a task too small for that is a ValueError.
    """
    task = get_task(cfg.name)
    streams = [np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(len(SPLITS))]
    sizes = (cfg.n_train, cfg.n_val, cfg.n_test)
    seen = np.empty(0, dtype=np.uint64)
    splits: dict[str, TaskSamples] = {}
    for name, size, rng in zip(SPLITS, sizes, streams, strict=True):
        combos = balanced_combinations(task.combinations(cfg), size, rng)
        samples = task.sample(cfg, combos, rng)
        clash = np.flatnonzero(np.isin(row_hashes(samples.tokens), seen))
        for _ in range(_MAX_REDRAWS):
            if not clash.size:
                break
            fresh = task.sample(cfg, combos[clash], rng)
            # The same combinations, so answer and n_hops stay; samples is ours until returned.
            samples.tokens[clash], samples.path[clash] = fresh.tokens, fresh.path
            clash = clash[np.isin(row_hashes(fresh.tokens), seen)]
        if clash.size:
            raise ValueError(
                f"cannot make {name} disjoint from the earlier splits: {clash.size} rows still repeat after "
                f"{_MAX_REDRAWS} re-draws; the task {cfg} is too small for splits of sizes {sizes}"
            )
        seen = np.concatenate([seen, row_hashes(samples.tokens)])
        splits[name] = samples
    return splits


def row_hashes(tokens: np.ndarray) -> np.ndarray:
    """A 64-bit FNV-1a hash per row of ``tokens`` (batch, pos) -> (batch,) uint64.

    Equal rows always hash equal; a rare collision only costs a needless re-draw.
    """
    h = np.full(len(tokens), 0xCBF29CE484222325, dtype=np.uint64)
    for column in tokens.T.astype(np.uint64):  # one pass per position; every row at once
        h = (h ^ column) * np.uint64(0x100000001B3)
    return h
