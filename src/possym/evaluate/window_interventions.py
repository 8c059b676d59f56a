"""Length accuracy by hop count under an attention edit: the extra window knocked out one layer at a time,
or the logits of chosen layers sharpened by β (Sec. 3.6: a logit-scale effect, or a missing mechanism?).

:func:`knockout_accuracy` gives the K extra keys logit −∞ for the window's queries in one layer l at a time (and
``None``, no edit): if the loss at K is dilution in l, that restores the K = 0 accuracy (in every layer at once it
does so exactly, RoPE being relative). :func:`sharpened_accuracy` multiplies every logit of ``layers`` by β
(prefix included): dilution at a fixed gap Δ is undone once β Δ ≥ Δ + log(K / K_0), so a modest β (1.3–1.5)
suffices when Δ is large. The inputs are the length protocol's (:mod:`possym.evaluate.lengthgen`), so unedited
rows equal the length curve's per-hop points; one row per (edit, K, hop count) with ``accuracy``, ``correct``,
``n`` and the Wilson interval. See docs/interventions.md.

Example (a random 2-layer model: knocking out a 0-token window is no edit at all):
    >>> import torch
    >>> from possym.config import ModelConfig
    >>> from possym.model.gptj import GPTJ
    >>> from possym.tasks import task_config, task_vocab
    >>> task = task_config("letter")
    >>> model = GPTJ(ModelConfig(n_layers=2, d_model=16, d_mlp=32, d_vocab=len(task_vocab(task))))
    >>> cfg = LengthGenConfig(grid=(0, 20), n=4, n_prefixes=2)
    >>> frame = knockout_accuracy(model, task, cfg, hops=(3, 4))
    >>> sorted(set(frame.knocked_out))
    ['L0', 'L1', 'none']
    >>> at0 = frame[frame.extra == 0].groupby("n_hops").accuracy.nunique()   # the same at K = 0
    >>> at0.tolist()
    [1, 1]"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager

import pandas as pd

from possym.config import ConfigError, TaskConfig
from possym.evaluate.interventions import KnockOut, Sharpen, intervene
from possym.evaluate.lengthgen import (
    LengthGenConfig,
    correct_answers,
    point_samples,
    prefix_cache,
    slice_cache,
    wilson_interval,
)
from possym.evaluate.window_attention import check_hops, protocol_points
from possym.model.gptj import GPTJ

# An edit of the model for one pass: its context manager over the prefix's own computation (None: none)
# and one for the windows at K.
PrefixEdit = Callable[[], AbstractContextManager[object]]
WindowEdit = Callable[[int], AbstractContextManager[object]]


def _nothing() -> AbstractContextManager[object]:
    return contextlib.nullcontext()


def edited_accuracy(model: GPTJ, task: TaskConfig, cfg: LengthGenConfig, hops: Sequence[int] | None,
                    prefix_edit: PrefixEdit, window_edit: WindowEdit) -> list[dict[str, object]]:
    """Accuracy per (K, hop count) with the prefix cache computed under ``prefix_edit()`` and the windows at
    K run under ``window_edit(K)``: the length curve's per-hop rows (``extra``, ``seq_len``, ``n_hops``,
    ``accuracy``, ``correct``, ``n``, ``ci_low``, ``ci_high``) for an edited model."""
    hops = check_hops(task, hops)
    model = model.eval()
    tally: dict[tuple[int, int], list[int]] = {}
    for n_hops, j, long in protocol_points(task, cfg, hops):
        with prefix_edit():
            cache = prefix_cache(model, long)
        for extra in cfg.grid:
            samples = point_samples(task, cfg, n_hops, j, extra, long)
            with window_edit(extra):
                correct = correct_answers(model, samples, cfg, slice_cache(cache, extra))
            got = tally.setdefault((extra, n_hops), [0, 0])
            got[0] += int(correct.sum())
            got[1] += len(correct)
    rows: list[dict[str, object]] = []
    for (extra, n_hops), (k, n) in sorted(tally.items()):
        low, high = wilson_interval(k, n)
        rows.append({"extra": extra, "seq_len": extra + task.seq_len, "n_hops": n_hops, "accuracy": k / n,
                     "correct": k, "n": n, "ci_low": low, "ci_high": high})
    return rows


def _layers(model: GPTJ, layers: Iterable[int] | None) -> list[int]:
    out = list(range(model.cfg.n_layers)) if layers is None else sorted({int(x) for x in layers})
    if not out or not all(0 <= x < model.cfg.n_layers for x in out):
        raise ConfigError(f"layers {out}: each must lie in 0..{model.cfg.n_layers - 1}")
    return out


def knockout_accuracy(model: GPTJ, task: TaskConfig, cfg: LengthGenConfig, hops: Sequence[int] | None = None,
                      layers: Iterable[int] | None = None, together: bool = False) -> pd.DataFrame:
    """Accuracy by (K, hop count) with the extra window knocked out in one layer at a time (module docstring):
    a ``knocked_out`` column "none" (unedited), "L<l>" for each of ``layers`` (default: all), and "all"
    (every layer at once) when ``together``. ``cfg.mode`` must be "cached" (the prefix is the cache)."""
    chosen = _layers(model, layers)
    if cfg.mode != "cached":
        raise ConfigError(f"knockout_accuracy runs on the cached prefix; got lengthgen mode={cfg.mode!r}")
    variants: list[tuple[str, list[int] | None]] = [("none", None), *[(f"L{x}", [x]) for x in chosen]]
    if together:
        variants.append(("all", list(range(model.cfg.n_layers))))
    frames = []
    for name, which in variants:

        @contextlib.contextmanager
        def window_edit(extra: int, which: list[int] | None = which) -> Iterator[object]:
            if which is None or extra == 0:  # no extra window to knock out
                yield model
                return
            # The window's queries are the cache's continuation: absolute positions K, K+1, ...
            with intervene(model, KnockOut(tuple(which), keys=tuple(range(extra)))):
                yield model

        rows = edited_accuracy(model, task, cfg, hops, _nothing, window_edit)
        frames.append(pd.DataFrame(rows).assign(knocked_out=name))
    return _ordered(pd.concat(frames, ignore_index=True), "knocked_out")


def sharpened_accuracy(model: GPTJ, task: TaskConfig, cfg: LengthGenConfig, betas: Sequence[float],
                       hops: Sequence[int] | None = None, layers: Iterable[int] | None = None) -> pd.DataFrame:
    """Accuracy by (K, hop count) with every attention logit of ``layers`` (default: all) times β, for each β
    of ``betas`` (1.0: unedited), prefix and windows alike; columns ``beta`` and ``layers`` ("0,2,3")."""
    chosen = _layers(model, layers)
    betas = [float(b) for b in betas]
    if not betas or not all(b > 0 for b in betas):
        raise ConfigError(f"betas={betas}: give at least one β, each > 0 (1.0 leaves the model as it is)")
    label = ",".join(str(x) for x in chosen)
    frames = []
    for beta in betas:

        def edit(beta: float = beta) -> AbstractContextManager[object]:
            return intervene(model, Sharpen(tuple(chosen), beta))

        def window_edit(_extra: int, beta: float = beta) -> AbstractContextManager[object]:
            return intervene(model, Sharpen(tuple(chosen), beta))  # the same at every K

        rows = edited_accuracy(model, task, cfg, hops, edit, window_edit)
        frames.append(pd.DataFrame(rows).assign(beta=beta, layers=label))
    return _ordered(pd.concat(frames, ignore_index=True), "beta", "layers")


def _ordered(frame: pd.DataFrame, *first: str) -> pd.DataFrame:
    return frame[[*first, *[c for c in frame.columns if c not in first]]]


def accuracy_table(frame: pd.DataFrame, by: str) -> pd.DataFrame:
    """A wide view: one row per (``by``, hop count), one column per K, holding the accuracy."""
    table = frame.pivot_table(index=[by, "n_hops"], columns="extra", values="accuracy", sort=False)
    return table.reindex(columns=sorted(table.columns))


__all__ = ["accuracy_table", "edited_accuracy", "knockout_accuracy", "sharpened_accuracy"]
