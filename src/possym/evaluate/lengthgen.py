"""Length generalisation (paper Sec. 3.6, Fig. 5B; K as docs/choices.md reads it): accuracy with K extra tokens
before the window.

The protocol: K random tokens are inserted before the 8-token target window, which still holds the
answer, so the task is as hard as before and the model never needs the added tokens. Number task:
the extra tokens are random letters; letter task: random (letter, int) tokens that never create a
second match (:func:`possym.tasks.draw_prefix`). The paper's grid is K = 0, 10, ..., 100, 200, ...,
1000, 1500, ..., 5000 (``PAPER_GRID``).

Shared prefixes. A plain forward pass at K = 5,000 costs about a second per sample on a laptop CPU.
But in a causal model a prefix's keys and values do not depend on what follows it, and only the
last 17 tokens differ between samples. So for each hop count h and each of ``n_prefixes`` prefixes
j, one random sequence of max(grid) tokens is drawn and run once, keeping its KV cache; at every K
the windows of that (h, j) continue the cache's first K positions (``GPTJ.forward(window,
past=...)``). Prefixes are therefore *nested* across K (the K = 100 prefix is the start of the
K = 5,000 one): each point is still a sample of the protocol, and neighbouring points share their
randomness, which makes the curve smoother, not biased. ``mode="plain"`` runs the same inputs
through the full forward pass; a test checks that both give the same logits.

The number task's windows may follow any prefix of letters, so its prefix j serves every hop count;
a letter prefix leaves exactly h letters free for the chain, so it has one per (h, j), and the
prefixes' free letters are dealt by :func:`possym.tasks.prefix_plan` so that, together, the windows
take every answer letter evenly (after one letter prefix only its h free letters can be answers).

Per point (K, h): ``n`` windows, split as evenly as possible over the prefixes, balanced over answer
position and value (for the letter task: as evenly as ``n_prefixes`` x h free letters allow; every
letter when n_prefixes * h >= n_letters). ``n_hops = 0`` rows pool the hop counts, weighted as
``hop_mix`` says. ``seq_len`` is K plus the window, for an x-axis in total length.

Protocol readings (the paper says only that extra symbols go before the window; docs/choices.md):
``extra_tokens`` says what they are ("targets": the target window's kind, letters for the number
task and (letter, int) tokens for the letter task, the default; "pretargets"; "mixed", either kind
with probability 1/2, i.e. letters and integers; "windows", blocks laid out as the window is), and
``hop_mix`` how the pooled row weights the hop counts ("uniform", the default, or "test": the test
split's own hop mix, which at the paper's split sizes is uniform too). Two 95% intervals: ``ci_low/ci_high``,
Wilson's (scipy), which treats the windows as independent; and ``cluster_low/cluster_high``, a t
interval over the per-prefix accuracies, which does not, since windows sharing a prefix are only
exchangeable. When accuracy depends on the prefix (``prefix_sd`` large) the second is the honest one.

Example:
    >>> import torch
    >>> from possym.config import ModelConfig
    >>> from possym.tasks import task_config
    >>> from possym.model.gptj import GPTJ
    >>> from possym.tasks import task_vocab
    >>> task = task_config("number")
    >>> model = GPTJ(ModelConfig(n_layers=2, d_model=16, d_mlp=32, d_vocab=len(task_vocab(task))))
    >>> rows = measure_length_curve(model, task, LengthGenConfig(grid=(0, 50), n=8, n_prefixes=2))
    >>> [(r["extra"], r["n_hops"], r["n"]) for r in rows][:3]
    [(0, 0, 32), (0, 1, 8), (0, 2, 8)]
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import pandas as pd
import torch
from scipy.stats import binomtest
from scipy.stats import t as t_dist
from torch import Tensor

from possym.config import ConfigError, ModelConfig, TaskConfig
from possym.devices import available_memory, batch_size_on, model_device
from possym.model.gptj import GPTJ, KV
from possym.tasks import TaskSamples, balanced_combinations, draw_prefix, generate_after, prefix_per_hop, prefix_plan
from possym.tasks.registry import get_task

PAPER_GRID: tuple[int, ...] = (*range(0, 100, 10), *range(100, 1000, 100), *range(1000, 5001, 500))


@dataclass(frozen=True)
class LengthGenConfig:
    """How to measure a length curve.

    grid: the K values (extra tokens), distinct, >= 0.
    n: windows per (K, hop count) point (500 on the paper's curve gives intervals of about ±0.04).
    n_prefixes: distinct prefixes per (K, hop count) point, each shared by ~n / n_prefixes windows.
    mode: "cached" (a prefix's KV cache is computed once) or "plain" (full forward per input).
    token_budget: a batch holds at most this many tokens (inputs x (K + window)) on the CPU; bounds memory.
        An accelerator takes :data:`~possym.devices.ACCELERATOR_BATCH_FACTOR` times as many.
    seed: the seed of every prefix and window.
    extra_tokens: what the K extra tokens are (:data:`EXTRA_TOKENS`; module docstring).
    hop_mix: how the pooled (``n_hops = 0``) row weights the hop counts (:data:`HOP_MIXES`).
    """

    grid: tuple[int, ...] = PAPER_GRID
    n: int = 500
    n_prefixes: int = 8
    mode: Literal["cached", "plain"] = "cached"
    token_budget: int = 2**18
    seed: int = 0
    extra_tokens: Literal["targets", "pretargets", "mixed", "windows"] = "targets"
    hop_mix: Literal["uniform", "test"] = "uniform"

    def __post_init__(self) -> None:
        object.__setattr__(self, "grid", tuple(sorted({int(k) for k in self.grid})))
        if not self.grid:
            raise ConfigError("lengthgen grid=[] must hold at least one K >= 0")
        if self.grid[0] < 0:
            raise ConfigError(f"lengthgen grid={list(self.grid)}: K = {self.grid[0]} is negative; every K must be >= 0")
        if self.n < 1 or not 1 <= self.n_prefixes <= self.n:
            raise ConfigError(f"lengthgen n={self.n} and n_prefixes={self.n_prefixes}: need 1 <= n_prefixes <= n")
        if self.mode not in ("cached", "plain"):
            raise ConfigError(f"lengthgen mode={self.mode!r}; allowed: 'cached', 'plain'")
        if self.token_budget < 1024:
            raise ConfigError(f"lengthgen token_budget={self.token_budget} must be >= 1024")
        if self.extra_tokens not in EXTRA_TOKENS:
            raise ConfigError(f"lengthgen extra_tokens={self.extra_tokens!r}; allowed: {EXTRA_TOKENS}")
        if self.hop_mix not in HOP_MIXES:
            raise ConfigError(f"lengthgen hop_mix={self.hop_mix!r}; allowed: {HOP_MIXES}")

    def windows(self, task: TaskConfig) -> int:
        """The windows one curve measures on ``task``: ``n`` per K and hop count (a progress bar's total).

        >>> from possym.tasks import task_config
        >>> LengthGenConfig().windows(task_config("letter"))   # 500 x 28 K x 4 hop counts
        56000
        """
        return self.n * len(self.grid) * len(task.hops)


EXTRA_TOKENS = ("targets", "pretargets", "mixed", "windows")
HOP_MIXES = ("uniform", "test")


@dataclass
class _Tally:
    """Correct and total counts per (K, hop count, prefix index)."""

    correct: dict[tuple[int, int, int], int] = field(default_factory=dict)
    total: dict[tuple[int, int, int], int] = field(default_factory=dict)

    def add(self, extra: int, n_hops: int, prefix: int, correct: int, total: int) -> None:
        self.correct[extra, n_hops, prefix] = correct
        self.total[extra, n_hops, prefix] = total


def window_counts(n: int, n_prefixes: int) -> list[int]:
    """``n`` windows split over ``n_prefixes`` prefixes as evenly as possible: (10, 4) -> [3, 3, 2, 2]."""
    return [n // n_prefixes + (j < n % n_prefixes) for j in range(n_prefixes)]


def point_rng(seed: int, n_hops: int, prefix: int, extra: int | None = None) -> np.random.Generator:
    """The stream of one prefix (``extra=None``; ``n_hops=0`` for one that serves every hop count) or
    of the windows that follow it at one K."""
    key = [seed, n_hops, prefix] + ([] if extra is None else [extra + 1])
    return np.random.default_rng(key)


def plan_rng(seed: int, n_hops: int) -> np.random.Generator:
    """The stream of the prefix plan of one hop count (a key no prefix or window stream uses)."""
    return np.random.default_rng([seed, n_hops, 0, 0])


def hop_weights(task: TaskConfig, hop_mix: str, seed: int = 0) -> dict[int, float]:
    """The weight of each hop count in a pooled accuracy: equal ("uniform"), or the share of each hop count
    among the rows of a test split of ``task.n_test`` balanced rows ("test"; the balanced draw of
    :func:`possym.tasks.balanced_combinations`, which is how the split is made).

    >>> from possym.tasks import task_config
    >>> sorted(hop_weights(task_config("letter", n_test=10), "test").values())   # 10 rows, 4 hop counts
    [0.2, 0.2, 0.3, 0.3]
    >>> hop_weights(task_config("letter"), "test") == hop_weights(task_config("letter"), "uniform")  # 45,600
    True
    """
    if hop_mix not in HOP_MIXES:
        raise ConfigError(f"hop_mix={hop_mix!r}; allowed: {HOP_MIXES}")
    if hop_mix == "uniform" or task.n_test == 0:
        return {h: 1.0 / len(task.hops) for h in task.hops}
    combos = get_task(task.name).combinations(task)
    hops = balanced_combinations(combos, task.n_test, np.random.default_rng(seed))[:, -1]
    return {h: float((hops == h).mean()) for h in task.hops}


@torch.inference_mode()
def last_logits_after(model: GPTJ, windows: Tensor, past: list[KV] | None, token_budget: int) -> Tensor:
    """Last-position logits of ``windows`` [batch, w] continuing ``past`` (one cached prefix), in batches."""
    n_past = 0 if past is None else past[0][0].shape[-2]
    step = max(1, token_budget // (n_past + windows.shape[1]))
    return torch.cat([model(windows[i : i + step], past=past, last=True)[:, -1] for i in range(0, len(windows), step)])


def last_logits_plain(model: GPTJ, tokens: Tensor, token_budget: int) -> Tensor:
    """Last-position logits of ``tokens`` [batch, pos] by the plain full-sequence forward pass."""
    return last_logits_after(model, tokens, None, token_budget)


def prefix_cache(model: GPTJ, prefix: np.ndarray) -> list[KV] | None:
    """The KV cache of one prefix (batch 1) on the model's device, or None for an empty one."""
    if len(prefix) == 0:
        return None
    with torch.inference_mode():
        # last=True: the cache needs every layer's keys and values, not the last block's outputs.
        return model.forward_kv(torch.as_tensor(prefix, device=model_device(model))[None], last=True)[1]


def slice_cache(cache: list[KV] | None, length: int) -> list[KV] | None:
    """The cache of the first ``length`` prefix positions (a view; no copy)."""
    if cache is None or length == 0:
        return None
    return [(k[:, :, :length], v[:, :, :length]) for k, v in cache]


def point_prefix(task: TaskConfig, cfg: LengthGenConfig, n_hops: int, prefix: int) -> np.ndarray:
    """Prefix ``prefix`` of the ``n_hops``-hop windows, max(grid) tokens long (a deterministic function of
    the config; the number task's serves every hop count and ignores ``n_hops``)."""
    per_hop = prefix_per_hop(task)
    plan = prefix_plan(task, n_hops, cfg.n_prefixes, plan_rng(cfg.seed, n_hops))[prefix] if per_hop else {}
    rng = point_rng(cfg.seed, n_hops if per_hop else 0, prefix)
    if cfg.extra_tokens != "targets":  # a task's draw_prefix takes ``tokens`` only if it offers other readings
        plan = {**plan, "tokens": cfg.extra_tokens}
    return draw_prefix(task, cfg.grid[-1], n_hops if per_hop else task.hops[0], rng, **plan)


def point_samples(task: TaskConfig, cfg: LengthGenConfig, n_hops: int, prefix: int, extra: int, long: np.ndarray):
    """The windows of prefix ``prefix`` at K = ``extra`` (a deterministic function of the config)."""
    count = window_counts(cfg.n, cfg.n_prefixes)[prefix]
    return generate_after(task, long, count, n_hops, point_rng(cfg.seed, n_hops, prefix, extra), length=extra)


def curve_memory(cfg: LengthGenConfig, task: TaskConfig, model: ModelConfig, extra: int | None = None) -> int:
    """Bytes that :func:`measure_length_curve` needs at its largest K (``extra``: at that K instead), estimated
    before anything is allocated: the prefix and one point's windows as int64 token ids (each window row holds
    its prefix), and the model's pass over the prefix (``cached``: its float32 keys and values in every layer
    and one layer's attention scores, K x K per head, three times over for the softmax's temporaries; ``plain``:
    one batch's, at least one row of K + window tokens).

    >>> from possym.tasks import task_config
    >>> curve_memory(LengthGenConfig(), task_config("number"), ModelConfig()) < 2**30   # the paper grid, < 1 GiB
    True
    """
    k = cfg.grid[-1] if extra is None else extra
    rows = -(-cfg.n // cfg.n_prefixes)
    length = k + task.seq_len
    tokens = 8 * (k + rows * length)
    attention = 3 * 4 * model.n_heads * length * length
    cache = 2 * 4 * model.n_layers * model.d_model * k if cfg.mode == "cached" else 0
    return tokens + attention + cache


def check_curve_memory(cfg: LengthGenConfig, task: TaskConfig, model: ModelConfig, device: torch.device) -> None:
    """Refuse (:class:`~possym.errors.ConfigError`) a grid whose largest K needs more memory than ``device`` has
    available (:func:`curve_memory`), naming the largest K that fits, before anything is allocated."""
    free = available_memory(device)
    need = curve_memory(cfg, task, model)
    if free is None or need <= free:
        return
    low, high = 0, cfg.grid[-1]
    while low < high:  # the largest K whose estimate fits
        mid = (low + high + 1) // 2
        low, high = (mid, high) if curve_memory(cfg, task, model, mid) <= free else (low, mid - 1)
    raise ConfigError(f"lengthgen grid: K={cfg.grid[-1]} needs about {_gib(need)} (the prefix, its pass through the "
                      f"model and the windows), and {device} has {_gib(free)} available; the largest K that fits is "
                      f"about {low}: lower lengthgen.grid")


def _gib(n: int) -> str:
    return f"{n / 2**30:.3g} GiB" if n < 2**40 else f"{n / 2**40:,.0f} TiB"


def measure_length_curve(
    model: GPTJ,
    task: TaskConfig,
    cfg: LengthGenConfig,
    on_batch: Callable[[int], None] | None = None,
) -> list[dict[str, Any]]:
    """Accuracy per (K, hop count) and pooled over hops (``n_hops = 0``), as records sorted by (K, n_hops).

    ``on_batch(n)`` is called after each group of n inputs is evaluated (for a progress bar). A grid whose
    largest K would not fit in the model's device's memory is refused first (:func:`check_curve_memory`).
    """
    if isinstance(getattr(model, "cfg", None), ModelConfig):  # a stand-in model (a test's oracle) has no config
        check_curve_memory(cfg, task, model.cfg, model_device(model))
    model = model.eval()
    tally = _Tally()
    per_hop = prefix_per_hop(task)
    for j in range(cfg.n_prefixes):
        for n_hops in task.hops:
            if per_hop or n_hops == task.hops[0]:  # the number task's prefix j serves every hop count
                long = point_prefix(task, cfg, n_hops, j)
                cache = prefix_cache(model, long) if cfg.mode == "cached" else None
            for extra in cfg.grid:
                samples = point_samples(task, cfg, n_hops, j, extra, long)
                correct = correct_answers(model, samples, cfg, slice_cache(cache, extra))
                tally.add(extra, n_hops, j, int(correct.sum()), len(samples))
                if on_batch is not None:
                    on_batch(len(samples))
    return _records(tally, cfg, task)

def reweighted(rows: pd.DataFrame, weights: dict[int, float]) -> pd.DataFrame:
    """``rows`` (one curve, uniform mix) with each pooled (``n_hops = 0``) accuracy replaced by Σ_h w_h acc_h;
    the pooled intervals are kept (at the paper's split sizes the test mix is uniform, so nothing moves)."""
    out = rows.copy()
    per_hop = rows[rows.n_hops > 0].pivot_table(index="extra", columns="n_hops", values="accuracy")
    mixed = sum(weights[h] * per_hop[h] for h in weights)
    pooled = out.n_hops == 0
    out.loc[pooled, "accuracy"] = out.loc[pooled, "extra"].map(mixed).to_numpy()
    return out


def protocol_readings(model: GPTJ, task: TaskConfig, curves: Mapping[str, LengthGenConfig],
                      hop_mixes: Sequence[str]) -> pd.DataFrame:
    """The length curve under every reading of the protocol that Sec. 3.6 leaves open: for each extra-token
    reading (``curves`` maps it to its :class:`LengthGenConfig`) the curve measured once, and for each hop mix
    of ``hop_mixes`` its pooled rows reweighted by :func:`hop_weights` (:func:`reweighted`; "uniform" is the
    curve as measured). The curve's rows with ``extra_tokens`` and ``hop_mix`` columns."""
    frames = []
    for extra_tokens, cfg in curves.items():
        rows = pd.DataFrame(measure_length_curve(model, task, cfg))
        for hop_mix in hop_mixes:
            mixed = rows if hop_mix == "uniform" else reweighted(rows, hop_weights(task, hop_mix, cfg.seed))
            frames.append(mixed.assign(extra_tokens=extra_tokens, hop_mix=hop_mix))
    return pd.concat(frames, ignore_index=True)


def correct_answers(model: GPTJ, samples: TaskSamples, cfg: LengthGenConfig, past: list[KV] | None) -> np.ndarray:
    """(batch,) bool: whether the model's last-position argmax is each sample's answer; in "cached" mode the
    windows continue ``past``, the cache of ``samples``' shared prefix (its first ``samples.extra`` positions)."""
    device = model_device(model)
    tokens = torch.as_tensor(samples.tokens, device=device)
    budget = batch_size_on(device, cfg.token_budget)  # cfg.token_budget is the CPU's
    if cfg.mode == "plain":
        logits = last_logits_plain(model, tokens, budget)
    else:
        logits = last_logits_after(model, tokens[:, samples.extra :], past, budget)
    return _to_host(logits.argmax(-1)) == samples.answer


def _to_host(predictions: Tensor) -> np.ndarray:
    # The one place the loop leaves the model's device (the meta-device test stands in for it).
    return predictions.cpu().numpy()


def wilson_interval(correct: int, n: int) -> tuple[float, float]:
    """95% Wilson score interval of a binomial proportion (scipy's)."""
    ci = binomtest(correct, n).proportion_ci(confidence_level=0.95, method="wilson")
    return float(ci.low), float(ci.high)


def cluster_interval(per_prefix: np.ndarray) -> tuple[float, float]:
    """95% interval of the mean of per-prefix accuracies (t with P - 1 df), clipped to [0, 1].

    Windows sharing a prefix are correlated; treating each prefix as one observation gives an
    interval that stays honest when accuracy depends on the prefix (NaN for a single prefix).
    """
    if len(per_prefix) < 2:
        return float("nan"), float("nan")
    half = t_dist.ppf(0.975, len(per_prefix) - 1) * per_prefix.std(ddof=1) / np.sqrt(len(per_prefix))
    mean = per_prefix.mean()
    return float(max(0.0, mean - half)), float(min(1.0, mean + half))


def _records(tally: _Tally, cfg: LengthGenConfig, task: TaskConfig) -> list[dict[str, Any]]:
    rows = []
    weights = hop_weights(task, cfg.hop_mix, cfg.seed)
    for extra in cfg.grid:
        for n_hops in (0, *task.hops):
            hops = task.hops if n_hops == 0 else (n_hops,)
            correct = np.array([sum(tally.correct[extra, h, j] for h in hops) for j in range(cfg.n_prefixes)])
            total = np.array([sum(tally.total[extra, h, j] for h in hops) for j in range(cfg.n_prefixes)])
            k, n = int(correct.sum()), int(total.sum())
            per_prefix = correct[total > 0] / total[total > 0]
            low, high = wilson_interval(k, n)
            c_low, c_high = cluster_interval(per_prefix)
            accuracy = k / n
            if n_hops == 0 and cfg.hop_mix != "uniform":
                # Each hop count's accuracy weighted by its share; the intervals stay those of the equal mix.
                accuracy = sum(weights[h] * sum(tally.correct[extra, h, j] for j in range(cfg.n_prefixes))
                               / sum(tally.total[extra, h, j] for j in range(cfg.n_prefixes)) for h in task.hops)
            rows.append(
                {
                    "extra": extra,
                    "n_hops": n_hops,
                    "seq_len": extra + task.seq_len,
                    "accuracy": accuracy,
                    "n": n,
                    "correct": k,
                    "ci_low": low,
                    "ci_high": high,
                    "n_prefixes": len(per_prefix) * (len(hops) if prefix_per_hop(task) else 1),
                    "prefix_sd": float(per_prefix.std(ddof=1)) if len(per_prefix) > 1 else float("nan"),
                    "cluster_low": c_low,
                    "cluster_high": c_high,
                    "mode": cfg.mode,
                }
            )
    return rows
