"""Fig. 3 and Fig. 4B over many inputs: where each hop query's attention lands, and layer 1's plane geometry.

The paper shows one input of each (Sec. 3.2, 3.4). These read the same quantities on every correctly solved
input with the most hops, as records a rule can grade (the measures :func:`possym.report.measures.mechanisms.hop_flow`,
:func:`possym.report.measures.mechanisms.plane_geometry`):

- :func:`hop_flow_records`: at the hop query ``depth`` hops from the answer (1: the hop that lands on it; the
  most: the last token), per layer, the share of inputs whose attention maximum (head 0) lies on the next
  position of the hop path, and the mean attention there;
- :func:`geometry_records`: per input, layer 1's keys and last-token query on the input's dominant RoPE plane
  (:func:`possym.scores.frequency.plane_geometry`): how aligned the pre-RoPE keys are, and which offset the
  plane's partial logit and the head's attention favour, beside the offset the last token's number asks for.

Example:
    >>> import numpy as np, torch
    >>> from possym.config import ModelConfig
    >>> from possym.model.gptj import GPTJ
    >>> from possym.tasks import generate, task_config, task_vocab
    >>> task = task_config("number")
    >>> model = GPTJ(ModelConfig(n_layers=2, d_model=16, d_mlp=32, d_vocab=len(task_vocab(task)))).eval()
    >>> samples = generate(task, 8, np.random.default_rng(0))
    >>> rows = hop_flow_records(model, samples, task="number", seed=0, step=0, correct_only=False)
    >>> sorted({(r.depth, r.layer) for r in rows})[:3]
    [(1, 0), (1, 1), (2, 0)]
"""

from __future__ import annotations

import numpy as np
import torch

from possym.model.gptj import GPTJ
from possym.records import HopFlowRecord, PlaneGeometryRecord
from possym.scores.frequency import plane_geometry
from possym.scores.swaps import _check_eval
from possym.tasks.samples import TaskSamples


def solved_most_hops(model: GPTJ, samples: TaskSamples, correct_only: bool = True) -> np.ndarray:
    """Indices of the inputs with the most hops in ``samples`` that the model answers right (all of them, if not
    ``correct_only``): the inputs the paper inspected ("trained models on correctly solved inputs", Sec. 3.2)."""
    _check_eval(model)
    most = samples.n_hops == samples.n_hops.max()
    if not correct_only:
        return np.flatnonzero(most)
    with torch.no_grad():
        logits = model(torch.as_tensor(samples.tokens))[:, -1, :]
    right = logits.argmax(-1).numpy() == samples.answer
    return np.flatnonzero(most & right)


def hop_flow_records(model: GPTJ, samples: TaskSamples, *, task: str, seed: int, step: int, head: int = 0,
                     correct_only: bool = True) -> list[HopFlowRecord]:
    """Per (hop query's depth from the answer, layer), where its attention lands (:class:`HopFlowRecord`), over
    the correctly solved inputs with the most hops."""
    idx = solved_most_hops(model, samples, correct_only)
    if not len(idx):
        return []
    tokens = torch.as_tensor(samples.tokens[idx])
    paths = samples.path[idx]
    hops = int(samples.n_hops[idx[0]])
    names = [f"blocks.{layer}.attn.hook_pattern" for layer in range(model.cfg.n_layers)]
    with torch.no_grad():
        _, cache = model.run_with_cache(tokens, names)
    rows = torch.arange(len(idx))
    out = []
    for depth in range(1, hops + 1):
        h = hops - depth  # the hop's index from the last token (0: the last token's own hop)
        query, nxt = torch.as_tensor(paths[:, h]), torch.as_tensor(paths[:, h + 1])
        for layer, name in enumerate(names):
            att = cache[name][rows, head, query]  # [input, key_pos]
            out.append(HopFlowRecord(task, seed, step, hops, depth, layer, len(idx),
                                     float((att.argmax(-1) == nxt).double().mean()),
                                     float(att[rows, nxt].double().mean())))
    return out


def geometry_records(model: GPTJ, samples: TaskSamples, *, task: str, seed: int, step: int, layer: int = 1,
                     head: int = 0, correct_only: bool = True) -> list[PlaneGeometryRecord]:
    """Per correctly solved input with the most hops, ``layer``'s keys and last-token query on the input's dominant
    plane (:class:`PlaneGeometryRecord`)."""
    out: list[PlaneGeometryRecord] = []
    idx = solved_most_hops(model, samples, correct_only)
    if not len(idx):
        return out
    name = f"blocks.{layer}.attn.hook_pattern"
    with torch.no_grad():  # every selected input's attention in one batched pass, not one pass per input
        _, cache = model.run_with_cache(torch.as_tensor(samples.tokens[idx]), [name])
    for row, i in enumerate(idx):
        geo = plane_geometry(model, torch.as_tensor(samples.tokens[i]), layer=layer, head=head)
        keys = geo.keys / geo.keys.norm(dim=-1, keepdim=True).clamp_min(1e-12)
        q = geo.query
        logit = (geo.queries * geo.keys.flip(0)[: len(geo.offsets)]).sum(-1)  # (R_δ q)·k_{q−δ}, δ = 0..q
        pattern = cache[name][row, head, q]
        path = samples.path[i]
        pointed = int(path[0] - path[1])
        direction, aimed = keys.mean(0), geo.queries[int((geo.offsets == pointed).nonzero()[0, 0])]
        turn = torch.atan2(aimed[1], aimed[0]) - torch.atan2(direction[1], direction[0])
        aim_error = abs(float(torch.atan2(turn.sin(), turn.cos())))
        out.append(PlaneGeometryRecord(task, seed, step, layer, int(i), geo.frequency_id, geo.theta,
                                       float(direction.norm()), pointed, int(geo.offsets[int(logit.argmax())]),
                                       int(q - int(pattern.argmax())), aim_error))
    return out
