"""Discrepancy of trained heads (Definition 3.1 applied to a trained GPT-J) against extra input length.

For every layer and head, the query is the last token (the one that predicts the answer); its discrepancy
on one input is ``top - second`` of its pre-softmax attention scores over all keys, read from the hook point
``blocks.{l}.attn.hook_attn_scores`` (the scores the softmax sees: q . k / sqrt(d_head), RoPE applied). The
inputs are task instances with K extra tokens inserted before the target window (the paper's Fig. 5B
protocol, :func:`possym.tasks.generate` with ``extra=K``); the same forward pass gives the model's answer,
so accuracy comes for free and is computed on the very same inputs.

Only the last query row of each score matrix is kept (a hook slices it), so memory stays at one layer's
[batch, head, pos, pos] at a time; batches shrink with length so that batch * pos^2 stays under a budget.
The paper lists this analysis as future work (§4): does the collapse of the positional layers' discrepancy
predict where the number task's accuracy breaks? :func:`collapse_summary` puts the two side by side.

Example:
    >>> import numpy as np, torch
    >>> from possym.config import ModelConfig
    >>> from possym.tasks import task_config
    >>> from possym.model.gptj import GPTJ
    >>> from possym.tasks import task_vocab
    >>> task = task_config("number")
    >>> cfg = ModelConfig(n_layers=2, d_model=16, d_mlp=32, d_vocab=len(task_vocab(task)))
    >>> model = GPTJ(cfg, torch.Generator().manual_seed(0)).double().eval()
    >>> disc, acc = trained_discrepancy(model, task, extras=[0, 8], n_samples=4, rng=np.random.default_rng(0))
    >>> len(disc), sorted(disc[0])[:3], acc[0]["extra"]
    (4, ['extra', 'head', 'layer'], 0)
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import torch
from torch import Tensor

from possym.config import TaskConfig
from possym.devices import batch_size_on
from possym.model.gptj import GPTJ
from possym.tasks import generate

DEFAULT_EXTRAS = (0, 10, 20, 30, 40, 50, 100, 200, 500, 1000, 2000, 5000)


def last_query_scores(model: GPTJ, tokens: Tensor) -> tuple[Tensor, Tensor]:
    """Pre-softmax scores of the last query at every layer, and the last position's output logits.

    tokens: [batch, pos] -> scores [batch, layer, head, key_pos], logits [batch, d_vocab].
    """
    rows: dict[int, Tensor] = {}

    def keep(layer: int):
        def fn(scores: Tensor, hook: object) -> None:
            rows[layer] = scores[:, :, -1, :].detach()

        return fn

    hooks = {f"blocks.{layer}.attn.hook_attn_scores": keep(layer) for layer in range(model.cfg.n_layers)}
    with torch.no_grad(), model.hooks(hooks):
        logits = model(tokens)[:, -1, :]
    return torch.stack([rows[layer] for layer in range(model.cfg.n_layers)], dim=1), logits


def top_gap(scores: Tensor) -> Tensor:
    """Largest minus second-largest along the last axis (0 when the top is attained twice)."""
    top2 = scores.topk(2, dim=-1).values
    return top2[..., 0] - top2[..., 1]


def trained_discrepancy(
    model: GPTJ,
    task: TaskConfig,
    extras: Sequence[int],
    n_samples: int,
    rng: np.random.Generator,
    max_batch_elements: int = 30_000_000,
) -> tuple[list[dict], list[dict]]:
    """Discrepancy records (layer, head, extra: mean, median, q10, q90, min, max over inputs) and accuracy
    records (extra: n_samples, accuracy) on ``n_samples`` task instances per extra length."""
    dtype, device = model.embed.weight.dtype, model.embed.weight.device
    max_batch_elements = batch_size_on(device, max_batch_elements)  # the default is the CPU's
    disc_rows, acc_rows = [], []
    for extra in extras:
        samples = generate(task, n_samples, rng, extra=int(extra))
        pos = samples.tokens.shape[1]
        batch = max(1, max_batch_elements // (pos * pos * model.cfg.n_heads))
        gaps, correct = [], []
        for start in range(0, n_samples, batch):
            tokens = torch.as_tensor(samples.tokens[start : start + batch], device=device)
            scores, logits = last_query_scores(model, tokens)
            gaps.append(top_gap(scores.to(dtype)).cpu().double().numpy())  # [batch, layer, head]; MPS has no float64
            correct.append(logits.argmax(-1).cpu().numpy() == samples.answer[start : start + batch])
        gap = np.concatenate(gaps)
        acc_rows.append(
            {"extra": int(extra), "n_samples": n_samples, "accuracy": float(np.concatenate(correct).mean())}
        )
        for layer in range(model.cfg.n_layers):
            for head in range(model.cfg.n_heads):
                g = gap[:, layer, head]
                disc_rows.append(
                    {
                        "layer": layer,
                        "head": head,
                        "extra": int(extra),
                        "n_samples": n_samples,
                        "mean": float(g.mean()),
                        "median": float(np.median(g)),
                        "q10": float(np.quantile(g, 0.1)),
                        "q90": float(np.quantile(g, 0.9)),
                        "min": float(g.min()),
                        "max": float(g.max()),
                    }
                )
    return disc_rows, acc_rows


def _ranks(x: np.ndarray) -> np.ndarray:
    """Ranks 1..n, ties given their average rank."""
    values, inverse = np.unique(x, return_inverse=True)
    counts = np.bincount(inverse)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    return (starts + (counts + 1) / 2.0)[inverse]


def spearman(x: np.ndarray, y: np.ndarray) -> float:
    """Spearman's rank correlation: Pearson's correlation of the (tie-averaged) ranks."""
    return float(np.corrcoef(_ranks(np.asarray(x)), _ranks(np.asarray(y)))[0, 1])


def collapse_summary(disc_rows: list[dict], acc_rows: list[dict], fraction: float = 0.5) -> list[dict]:
    """Per layer: when its median discrepancy collapses, beside when accuracy breaks.

    ``collapse_extra``: the first extra length at which the layer's median discrepancy (head 0) falls below
    ``fraction`` of its value at the smallest extra. ``accuracy_break_extra``: the first extra at which
    accuracy falls below 90% of its value at the smallest extra. ``spearman``: rank correlation, over the
    extra grid, between the layer's median discrepancy and accuracy (NaN if either is constant).
    """
    acc = sorted(acc_rows, key=lambda r: r["extra"])
    extras = [r["extra"] for r in acc]
    accuracy = np.array([r["accuracy"] for r in acc])
    broken = [e for e, a in zip(extras, accuracy, strict=True) if a < 0.9 * accuracy[0]]
    out = []
    for layer in sorted({r["layer"] for r in disc_rows}):
        by_extra = {r["extra"]: r["median"] for r in disc_rows if r["layer"] == layer and r["head"] == 0}
        med = np.array([by_extra[e] for e in extras])
        collapsed = [e for e, m in zip(extras, med, strict=True) if m < fraction * med[0]]
        if np.ptp(med) > 0 and np.ptp(accuracy) > 0:
            rho = spearman(med, accuracy)
        else:
            rho = math.nan
        out.append(
            {
                "layer": layer,
                "median_at_first_extra": float(med[0]),
                "median_at_last_extra": float(med[-1]),
                "collapse_extra": collapsed[0] if collapsed else None,
                "accuracy_break_extra": broken[0] if broken else None,
                "spearman": rho,
            }
        )
    return out
