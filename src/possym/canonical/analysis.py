"""What a trained toy head does: accuracy by answer position and length, scores, frequency use, plane geometry.

Everything reads the model through the existing engines: accuracy through the model's own forward
(greedy answer at the query), scores through :func:`~possym.scores.swaps.head_scores` and
:func:`~possym.scores.frequency.plane_scores` (the exact engine), frequency use and the plane
geometry (Fig. 4B) through :mod:`possym.scores.frequency`.

Geometry of a positional head (claim 6), on the dominant plane, angle θ. With pre-RoPE keys k_j and
query q, the logit of key j is (R_δ q)·k_j with δ = q − j, so a head that reads offset δ* points
R_{δ*} q at the keys. Two statistics, each a mean resultant length in [0, 1]:

    key_collapse    = mean over inputs of | mean_j k_j/|k_j| |            (1: every key on one ray)
    query_alignment = | mean over inputs of exp(i (angle(R_{δ*} q) − angle(k̄))) |

with k̄ the input's mean key; query_alignment is 1 when the query angle encodes the target offset
exactly; the same statistic with δ* shuffled across inputs is its chance level. A head that uses no
position (θ = 0) has R_δ q = q for all δ, so its alignment cannot depend on δ*: alignment and its
shuffled twin then agree.

Example:
    >>> import torch
    >>> from possym.config import ModelConfig
    >>> from possym.model.gptj import GPTJ
    >>> from possym.tasks import task_config, task_vocab
    >>> spec = task_config("index", length=4, n_symbols=4)
    >>> cfg = ModelConfig(n_layers=1, d_model=8, mlp=False, dropout=0.0, d_vocab=len(task_vocab(spec)))
    >>> model = GPTJ(cfg, torch.Generator().manual_seed(0)).eval()
    >>> rows = accuracy_by_position(model, spec, 4, 5, np.random.default_rng(0))
    >>> [(r["position"], r["total"]) for r in rows]
    [(0, 5), (1, 5), (2, 5), (3, 5)]
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from possym.model.gptj import GPTJ
from possym.scores.frequency import dominant_frequency_id, frequency_use, plane_geometry, plane_scores
from possym.scores.swaps import head_scores
from possym.tasks import get_task
from possym.tasks.canonical import CanonicalTaskConfig


def accuracy_by_position(
    model: GPTJ, spec: CanonicalTaskConfig, length: int, n_per_position: int, rng: np.random.Generator
) -> list[dict[str, int]]:
    """Correct/total per answer position at ``length``: n_per_position inputs at each position."""
    samples = get_task(spec.name).at_length(spec, n_per_position * spec.n_slots(length), rng, length)  # type: ignore[misc]
    with torch.no_grad():
        pred = torch.cat([model(t)[:, -1].argmax(-1) for t in torch.as_tensor(samples.tokens).split(512)]).numpy()
    ok = pred == samples.answer
    pos = samples.path[:, 1]
    return [
        {"position": int(p), "correct": int(ok[pos == p].sum()), "total": int((pos == p).sum())} for p in np.unique(pos)
    ]


@dataclass(frozen=True)
class HeadAnalysis:
    """Scores, frequency use and geometry of every head of layer 0 (one entry per head)."""

    s_pos: list[float]
    s_sym: list[float]
    entropy: list[float]
    dominant_id: list[int]
    dominant_s_pos: list[float]
    dominant_s_sym: list[float]
    key_collapse: list[float]
    query_alignment: list[float]
    query_alignment_shuffled: list[float]


def _resultant(angles: np.ndarray) -> float:
    return float(np.abs(np.exp(1j * angles).mean())) if angles.size else math.nan


def plane_alignment(
    model: GPTJ, tokens: torch.Tensor, target: np.ndarray, *, head: int, frequency_id: int, rng: np.random.Generator
) -> tuple[float, float, float]:
    """(key_collapse, query_alignment, shuffled alignment) of one head on one plane; see the module docstring.

    tokens: [batch, pos] with the query last; target: (batch,) answer positions.
    """
    collapse, resid, resid_shuffled = [], [], []
    offsets = tokens.shape[1] - 1 - np.asarray(target)
    shuffled = rng.permutation(offsets)
    for b in range(tokens.shape[0]):
        g = plane_geometry(model, tokens[b], layer=0, head=head, frequency_id=frequency_id)
        keys = g.keys[:-1].numpy()  # content keys only (not the query's own)
        norm = np.linalg.norm(keys, axis=1, keepdims=True)
        unit = keys / np.where(norm > 0, norm, 1.0)
        collapse.append(float(np.linalg.norm(unit.mean(0))))
        mean_key = math.atan2(unit.mean(0)[1], unit.mean(0)[0])
        q = g.queries.numpy()  # R_δ q for δ = 0..q
        resid.append(math.atan2(q[offsets[b], 1], q[offsets[b], 0]) - mean_key)
        resid_shuffled.append(math.atan2(q[shuffled[b], 1], q[shuffled[b], 0]) - mean_key)
    return float(np.mean(collapse)), _resultant(np.array(resid)), _resultant(np.array(resid_shuffled))


def analyse_heads(
    model: GPTJ, spec: CanonicalTaskConfig, n_inputs: int, n_geometry: int, rng: np.random.Generator
) -> HeadAnalysis:
    """Scores (last-token query) on ``n_inputs`` fresh inputs at the training length, geometry on "
    "``n_geometry`` of them."""
    samples = get_task(spec.name).at_length(spec, n_inputs, rng, None)  # type: ignore[misc]
    tokens = torch.as_tensor(samples.tokens)
    hs = head_scores(model, tokens, layers=[0])
    ps = plane_scores(model, tokens, layers=[0])
    use = frequency_use(model, tokens, layers=[0])[0]  # [head, plane]
    dom = dominant_frequency_id(use)  # [head]
    out: dict[str, list[Any]] = {k: [] for k in HeadAnalysis.__dataclass_fields__}
    for h in range(model.cfg.n_heads):
        k = int(dom[h])
        out["s_pos"].append(float(hs.s_pos[:, 0, h].nanmean()))
        out["s_sym"].append(float(hs.s_sym[:, 0, h].nanmean()))
        out["entropy"].append(float(hs.entropy[:, 0, h].nanmean()))
        out["dominant_id"].append(k)
        out["dominant_s_pos"].append(float(ps.s_pos[:, 0, h, k - 1].nanmean()))
        out["dominant_s_sym"].append(float(ps.s_sym[:, 0, h, k - 1].nanmean()))
        geo = plane_alignment(model, tokens[:n_geometry], samples.path[:n_geometry, 1], head=h, frequency_id=k, rng=rng)
        out["key_collapse"].append(geo[0])
        out["query_alignment"].append(geo[1])
        out["query_alignment_shuffled"].append(geo[2])
    return HeadAnalysis(**out)
