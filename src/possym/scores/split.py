"""A head's scores split by the scoring inputs' hop count and by query position.

A layer's mean over inputs of every hop count, at the last token, may hide structure (the number model's L0 at
about (0.4, 0.6) may be positional on 1-hop inputs only, or at a hop position only). :func:`per_input_scores`
keeps every input's scores for query ``"last"`` and ``"hop{h}"`` (the h-th position of the hop path after the
query, as the authors' ``query_type="hops"``); :func:`split_scores` groups them (default by query and hop count)
with mean, sd, bootstrap 95% interval (:func:`possym.scores.spread.mean_spread`) and the shares of inputs pure
positional or symbolic at γ on their own (:func:`possym.scores.dynamics.purity`). Used by the ``l0`` stage:
docs/reproduce.md, "Stages".

Example (a random two-layer model; the split's columns):
    >>> import torch
    >>> from possym.config import ModelConfig
    >>> from possym.model.gptj import GPTJ
    >>> from possym.tasks import generate, task_config, task_vocab
    >>> task = task_config("number")
    >>> model = GPTJ(ModelConfig(n_layers=2, d_model=16, d_mlp=32, d_vocab=len(task_vocab(task))),
    ...              torch.Generator().manual_seed(0)).eval()
    >>> rows = per_input_scores(model, generate(task, 8, np.random.default_rng(0)))
    >>> sorted(rows["query"].unique())
    ['hop1', 'hop2', 'hop3', 'last']
    >>> split = split_scores(rows, np.random.default_rng(0))
    >>> split.columns[:8].tolist()
    ['query', 'n_hops', 'layer', 'head', 'n', 's_pos', 's_sym', 's_pos_sd']"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import torch

from possym.devices import model_device
from possym.errors import PossymError
from possym.model.gptj import GPTJ
from possym.records import GAMMA
from possym.scores.dynamics import purity
from possym.scores.metric import TAU
from possym.scores.spread import mean_spread
from possym.scores.swaps import HeadScores, head_scores, rotated_qk
from possym.tasks import TaskSamples

__all__ = ["PER_INPUT_COLUMNS", "per_input_scores", "split_scores"]

PER_INPUT_COLUMNS = ("input", "n_hops", "query", "query_pos", "layer", "head", "s_pos", "s_sym", "entropy")


def _frame(s: HeadScores, samples: TaskSamples, query: str) -> pd.DataFrame:
    batch, n_layers, n_heads = s.s_pos.shape
    shape = (batch, n_layers, n_heads)
    grid = np.broadcast_to
    out = pd.DataFrame({
        "input": grid(np.arange(batch)[:, None, None], shape).ravel(),
        "n_hops": grid(samples.n_hops[:, None, None], shape).ravel(),
        "query": query,
        "query_pos": grid(s.query.numpy()[:, None, None], shape).ravel(),
        "layer": grid(np.asarray(s.layers)[None, :, None], shape).ravel(),
        "head": grid(np.arange(n_heads)[None, None, :], shape).ravel(),
        "s_pos": s.s_pos.cpu().numpy().ravel(),
        "s_sym": s.s_sym.cpu().numpy().ravel(),
        "entropy": s.entropy.cpu().numpy().ravel(),
    }, columns=list(PER_INPUT_COLUMNS))
    return out[out["query_pos"] >= 0].reset_index(drop=True)


def per_input_scores(model: GPTJ, samples: TaskSamples, *, hops: bool = True, layers: Sequence[int] | None = None,
                     tau: float = TAU, block_size: int = 1) -> pd.DataFrame:
    """Every input's s_POS, s_SYM and entropy per (query set, layer, head): columns :data:`PER_INPUT_COLUMNS`.

    Query sets: ``"last"``, and with ``hops`` every ``"hop{h}"`` some input has (module docstring). The
    scores are the exact swap engine's (:func:`possym.scores.swaps.head_scores`), so the mean over the
    ``"last"`` rows is the score ``scores.csv`` records for the same inputs.
    """
    if len(samples) == 0:
        raise PossymError("per_input_scores: no inputs to score")
    model = model.eval()
    layers = list(range(model.cfg.n_layers)) if layers is None else sorted(set(layers))
    tokens = torch.as_tensor(samples.tokens, device=model_device(model))
    acts = rotated_qk(model, tokens, layers)  # one forward pass serves every query set
    kw = dict(layers=layers, tau=tau, block_size=block_size, acts=acts)
    frames = [_frame(head_scores(model, tokens, **kw), samples, "last")]  # type: ignore[arg-type]
    if hops:
        for h in range(1, samples.path.shape[1] - 1):
            on = samples.n_hops > h
            if on.any():
                query = torch.as_tensor(np.where(on, samples.path[:, h], -1))
                frames.append(_frame(head_scores(model, tokens, query=query, **kw), samples, f"hop{h}"))  # type: ignore[arg-type]
    return pd.concat(frames, ignore_index=True)


def split_scores(per_input: pd.DataFrame, rng: np.random.Generator,
                 by: Sequence[str] = ("query", "n_hops"), gamma: float = GAMMA) -> pd.DataFrame:
    """Per group of ``by`` (and layer, head): ``n`` inputs, the mean ``s_pos``, ``s_sym``, their sd over inputs
    and bootstrap 95% interval of the mean (``*_sd``, ``*_low``, ``*_high``), and the shares of inputs that
    are each pure positional (``share_positional``) or pure symbolic (``share_symbolic``) at ``gamma``.

    ``by`` takes any columns of :func:`per_input_scores` (``("query",)`` alone pools the hop counts).

    >>> rows = pd.DataFrame({"input": range(4), "n_hops": [1, 1, 2, 2], "query": "last", "query_pos": 16,
    ...                      "layer": 0, "head": 0, "s_pos": [1.0, 0.96, 0.3, 0.5], "s_sym": [0.0, 0.02, 0.7, 0.6],
    ...                      "entropy": 1.0})
    >>> split_scores(rows, np.random.default_rng(0))[["n_hops", "s_pos", "share_positional"]].values.tolist()
    [[1.0, 0.98, 1.0], [2.0, 0.4, 0.0]]
    """
    keys = [*by, "layer", "head"]
    missing = [c for c in [*keys, "s_pos", "s_sym"] if c not in per_input.columns]
    if missing:
        raise PossymError(f"split_scores: columns {missing} are missing; the rows have {list(per_input.columns)}")
    out = []
    for key, g in per_input.groupby(list(dict.fromkeys(keys)), sort=True):
        pos, sym = (torch.from_numpy(g[c].to_numpy(dtype=np.float64, copy=True))[:, None] for c in ("s_pos", "s_sym"))
        sp, ss = mean_spread(pos, rng), mean_spread(sym, rng)
        kinds = [purity(p, s, gamma) for p, s in zip(g["s_pos"], g["s_sym"], strict=True)]
        out.append({
            **dict(zip(dict.fromkeys(keys), key, strict=True)),
            "n": len(g),
            "s_pos": float(sp.mean[0]), "s_sym": float(ss.mean[0]),
            "s_pos_sd": float(sp.sd[0]), "s_pos_low": float(sp.low[0]), "s_pos_high": float(sp.high[0]),
            "s_sym_sd": float(ss.sd[0]), "s_sym_low": float(ss.low[0]), "s_sym_high": float(ss.high[0]),
            "share_positional": kinds.count("positional") / len(g),
            "share_symbolic": kinds.count("symbolic") / len(g),
        })
    return pd.DataFrame(out)
