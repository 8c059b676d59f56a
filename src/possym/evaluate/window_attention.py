"""Where each hop's attention goes once K extra tokens precede the window: the key the hop should read,
against the extra window (Sec. 3.6, Fig. 5B: is the letter model's multi-hop loss softmax dilution?).

For an h-hop input with path p_0 (the query), ..., p_h (the answer; the solver's path), per layer, head and
hop k, with A the pattern of query p_k: ``next_hop`` = A[p_{k+1}]; ``chain`` = Σ_{m>k} A[p_m] (``answer`` =
A[p_h]); ``extra_mass`` = Σ_{j<K} A[j] (``extra`` is K) and ``extra_max`` its largest key; ``rest`` = 1 − chain
− extra_mass; ``next_is_max``: the share of inputs whose largest key is p_{k+1}. Dilution predicts
``next_hop`` = 1 / (1 + W + K e^{−Δ}) at a fixed gap Δ; a distractor or a lost hop shows instead as
``extra_max`` near ``extra_mass`` or a falling ``next_is_max``. The inputs are the length protocol's
(:mod:`possym.evaluate.lengthgen`, same seeds), each prefix's key-value cache reused. See
docs/interventions.md.

Example (a model whose attention is uniform: every key gets 1 / (position + 1)):
    >>> import torch
    >>> from possym.config import ModelConfig
    >>> from possym.model.gptj import GPTJ
    >>> from possym.tasks import task_config, task_vocab
    >>> task = task_config("letter")
    >>> model = GPTJ(ModelConfig(n_layers=1, d_model=16, d_mlp=32, d_vocab=len(task_vocab(task))))
    >>> _ = model.blocks[0].attn.qkv.weight.data[:16].zero_()        # W_Q = 0: every logit is 0
    >>> frame = hop_attention(model, task, LengthGenConfig(grid=(0, 83), n=4, n_prefixes=2), hops=(3,))
    >>> row = frame[(frame.extra == 83) & (frame.query_hop == 0)].iloc[0]
    >>> print(round(row.next_hop * 100, 6), round(row.extra_mass, 6))   # 1/100 and 83/100
    1.0 0.83
    >>> attention_table(frame, "extra_mass").round(2).values.tolist()   # K = 0, 83 at the final query
    [[0.0, 0.83]]"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager

import numpy as np
import pandas as pd
import torch
from torch import Tensor

from possym.config import ConfigError, TaskConfig
from possym.devices import batch_size_on, model_device
from possym.evaluate.lengthgen import LengthGenConfig, point_prefix, point_samples, prefix_cache, slice_cache
from possym.model.gptj import GPTJ, KV
from possym.model.hooks import HookPoint
from possym.tasks import TaskSamples, prefix_per_hop

COLUMNS = ("extra", "seq_len", "n_hops", "layer", "head", "query_hop", "n", "next_hop", "next_hop_sd", "chain",
           "answer", "extra_mass", "extra_mass_sd", "extra_max", "rest", "next_is_max")


def check_hops(task: TaskConfig, hops: Sequence[int] | None) -> tuple[int, ...]:
    """The hop counts asked for (default: all of the task's), each one the task has."""
    out = tuple(task.hops) if hops is None else tuple(sorted({int(h) for h in hops}))
    bad = [h for h in out if h not in task.hops]
    if not out or bad:
        raise ConfigError(f"hops={list(out)}: each must be a hop count of the task; allowed: {list(task.hops)}")
    return out


def protocol_points(
    task: TaskConfig, cfg: LengthGenConfig, hops: Sequence[int]
) -> Iterator[tuple[int, int, np.ndarray]]:
    """(n_hops, prefix index, the prefix of max(grid) tokens) of the length protocol, the number task's
    one prefix per index serving every hop count (yielded once per hop count, the same array)."""
    per_hop = prefix_per_hop(task)
    for n_hops in hops:
        for j in range(cfg.n_prefixes):
            yield n_hops, j, point_prefix(task, cfg, n_hops if per_hop else task.hops[0], j)


@torch.inference_mode()
def _window_patterns(model: GPTJ, samples: TaskSamples, past: list[KV] | None, budget: int) -> list[Tensor]:
    """Per layer, the window queries' patterns [batch, head, window, key] (CPU float64)."""
    n_layers = model.cfg.n_layers
    out: list[list[Tensor]] = [[] for _ in range(n_layers)]

    def keep(pattern: Tensor, hook: HookPoint) -> None:
        out[hook.layer()].append(pattern[:, :, -window:].double().cpu())

    tokens = torch.as_tensor(samples.tokens[:, samples.extra:], device=model_device(model))
    window = tokens.shape[1]
    step = max(1, budget // (samples.extra + window))
    with model.hooks([(f"blocks.{layer}.attn.hook_pattern", keep) for layer in range(n_layers)]):
        for i in range(0, len(tokens), step):
            model(tokens[i:i + step], past=past)
    return [torch.cat(parts) for parts in out]


def hop_attention(model: GPTJ, task: TaskConfig, cfg: LengthGenConfig, hops: Sequence[int] | None = None,
                  edit: Callable[[], AbstractContextManager[object]] | None = None) -> pd.DataFrame:
    """The attention mass of each hop's query on the key it should read, on the later chain and on the extra
    window (module docstring), per (K, hop count, layer, head, hop index): one row each, means over the
    ``cfg.n`` windows of each (K, hop count), as :data:`COLUMNS` lists them.

    ``cfg``'s grid, sample sizes, seeds and extra-token reading are the length protocol's; ``mode`` is
    ignored (the patterns always come from the cached prefix, which gives the plain pass's logits).
    ``edit``: a context manager factory applied to the prefix and the windows alike, e.g.
    ``lambda: intervene(model, Sharpen((2, 3), 1.4))`` (:mod:`possym.evaluate.interventions`) to see where a
    sharpened head's mass goes.
    """
    hops = check_hops(task, hops)
    model = model.eval()
    edit = edit or contextlib.nullcontext
    budget = batch_size_on(model_device(model), cfg.token_budget)
    sums: dict[tuple[int, int, int, int, int], list[np.ndarray]] = {}
    for n_hops, j, long in protocol_points(task, cfg, hops):
        with edit():
            cache = prefix_cache(model, long)
        for extra in cfg.grid:
            samples = point_samples(task, cfg, n_hops, j, extra, long)
            with edit():
                patterns = _window_patterns(model, samples, slice_cache(cache, extra), budget)
            for layer, pattern in enumerate(patterns):
                for k in range(n_hops):
                    for head in range(pattern.shape[1]):
                        stats = _hop_stats(pattern[:, head], samples, k, n_hops)
                        sums.setdefault((extra, n_hops, layer, head, k), []).append(stats)
    rows = []
    for (extra, n_hops, layer, head, k), parts in sorted(sums.items()):
        s = np.concatenate(parts, axis=0)  # [input, stat]
        rows.append({
            "extra": extra, "seq_len": extra + task.seq_len, "n_hops": n_hops, "layer": layer, "head": head,
            "query_hop": k, "n": len(s), "next_hop": s[:, 0].mean(), "next_hop_sd": s[:, 0].std(ddof=1) if len(s) > 1
            else float("nan"), "chain": s[:, 1].mean(), "answer": s[:, 2].mean(),
            "extra_mass_sd": s[:, 3].std(ddof=1) if len(s) > 1 else float("nan"), "extra_max": s[:, 4].mean(),
            "rest": 1.0 - s[:, 1].mean() - s[:, 3].mean(), "next_is_max": s[:, 5].mean(), "extra_mass": s[:, 3].mean(),
        })
    return pd.DataFrame(rows, columns=list(COLUMNS))


def _hop_stats(pattern: Tensor, samples: TaskSamples, k: int, n_hops: int) -> np.ndarray:
    """[input, 6]: next hop, chain, answer, extra, largest extra key, next-is-max, for hop index k.

    ``pattern`` [batch, window query, key]; positions in ``samples.path`` are absolute (they include K).
    """
    extra = samples.extra
    window = pattern.shape[1]
    first = pattern.shape[2] - window  # absolute position of the first window query (= K)
    rows = torch.arange(len(pattern))
    path = torch.as_tensor(samples.path)
    query = pattern[rows, path[:, k] - first]  # [batch, key]
    later = path[:, k + 1:n_hops + 1]
    next_hop = query[rows, later[:, 0]]
    chain = query.gather(1, later).sum(1)
    answer = query[rows, path[:, n_hops]]
    on_extra = query[:, :extra]
    extra_mass = on_extra.sum(1)
    extra_max = on_extra.max(1).values if extra else torch.zeros(len(query), dtype=query.dtype)
    is_max = (query.argmax(1) == later[:, 0]).to(query.dtype)
    return torch.stack([next_hop, chain, answer, extra_mass, extra_max, is_max], dim=1).numpy()


def attention_table(frame: pd.DataFrame, column: str = "next_hop", query_hop: int = 0, head: int = 0) -> pd.DataFrame:
    """A wide view of :func:`hop_attention`'s ``column`` for one hop index and head: a row per (hop count,
    layer), a column per K. ``query_hop = 0`` is the final query, the one the answer is read from."""
    if column not in COLUMNS[7:]:
        raise ConfigError(f"column={column!r}; allowed: {list(COLUMNS[7:])}")
    rows = frame[(frame.query_hop == query_hop) & (frame["head"] == head)]
    table = rows.pivot_table(index=["n_hops", "layer"], columns="extra", values=column)
    return table.reindex(columns=sorted(table.columns))
