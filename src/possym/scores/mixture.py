"""Is a layer's mixed score a mixture of inputs? The tables behind that question (Sec. 3.3, Fig. 6: the layer
that never turns pure in our runs and ends mixed in the paper's), for any possym model and its checkpoints:

- scores split by hop count and by query position (the last token and every hop position, as the authors'
  ``query_type="hops"``): :func:`possym.scores.split.split_scores` at each of ``steps``;
- Silverman's unimodality test (:func:`possym.scores.modality.unimodality_test`) on a layer's per-input
  s_POS and s_SYM: a mixed mean that is a mix of positional and non-positional inputs is bimodal;
- an "ever pure" tally that one noisy excursion cannot make: pure at ``min_run`` consecutive checkpoints in
  a share ``level`` of input resamples (:func:`possym.scores.sustained.sustained_purity`).

The ``l0`` stage (:mod:`possym.stages.l0`) loads a run's checkpoints, calls :func:`mixture_tables` and
writes its tables.

Example:
    >>> tables = mixture_tables(model, run.load_state_dict, samples, steps=(500,),     # doctest: +SKIP
    ...                         scored=(100, 500), layers=(0,), rng=np.random.default_rng(0))
    >>> tables.modality.query("layer == 0 and query == 'last'")                        # doctest: +SKIP
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from possym.model.gptj import GPTJ
from possym.records import GAMMA
from possym.scores.metric import TAU
from possym.scores.modality import unimodality_test
from possym.scores.split import per_input_scores, split_scores
from possym.scores.sustained import LEVEL, MIN_RUN, sustained_purity
from possym.tasks import TaskSamples

__all__ = ["MixtureTables", "mixture_tables"]


@dataclass(frozen=True)
class MixtureTables:
    """What :func:`mixture_tables` measured; each frame is one file of the ``l0`` stage."""

    per_input: pd.DataFrame  # every input's scores per (step, query, layer, head)
    split: pd.DataFrame  # per (step, query, n_hops, layer, head); n_hops 0 pools the hop counts
    split_position: pd.DataFrame  # the hop queries per (step, query_pos, layer, head)
    modality: pd.DataFrame  # per (step, layer, query, score): Silverman's test; ``mixture`` at α = 0.05
    sustained: pd.DataFrame  # per (layer, head, kind): ever pure by the mean, and by the sustained rule
    tally: pd.DataFrame  # per kind: heads ever pure by the mean (the plain tally) and by the sustained rule


def mixture_tables(model: GPTJ, state_at: Callable[[int], Mapping[str, Any]], samples: TaskSamples,
                   steps: Sequence[int], scored: Sequence[int], layers: Sequence[int], rng: np.random.Generator, *,
                   tau: float = TAU, gamma: float = GAMMA, min_run: int = MIN_RUN, level: float = LEVEL,
                   n_boot: int = 1000, modality_boot: int = 500) -> MixtureTables:
    """The split, modality and sustained-purity tables (module docstring) of ``model`` with the weights
    ``state_at(step)``: the split and the modality test at each of ``steps`` (for ``layers``), the sustained
    tally over the checkpoints ``scored`` (every layer), all on ``samples``; ``rng`` draws every resample."""
    n_layers = model.cfg.n_layers
    per_input, split, by_position, modality = [], [], [], []
    for step in steps:
        model.load_state_dict(state_at(step))
        rows = per_input_scores(model, samples, tau=tau).assign(step=step)
        per_input.append(rows)
        split.append(pd.concat([split_scores(rows, rng, by=("query", "n_hops"), gamma=gamma),
                                split_scores(rows, rng, by=("query",), gamma=gamma).assign(n_hops=0)],
                               ignore_index=True).assign(step=step))
        hops = rows[rows["query"] != "last"]
        if not hops.empty:  # the hop queries by where they sit in the window
            by_position.append(split_scores(hops, rng, by=("query_pos",), gamma=gamma).assign(step=step))
        for (layer, query), g in rows[rows["layer"].isin(layers)].groupby(["layer", "query"], sort=True):
            for score in ("s_pos", "s_sym"):
                t = unimodality_test(g[score].to_numpy(), rng, n_boot=modality_boot)
                modality.append({"step": step, "layer": layer, "head": int(g["head"].iloc[0]), "query": query,
                                 "score": score, **dataclasses.asdict(t), "mixture": t.is_mixture()})

    pos, sym = [], []
    for step in scored:  # per-input last-token scores at every scored checkpoint, the same inputs each time
        model.load_state_dict(state_at(step))
        rows = per_input_scores(model, samples, hops=False, tau=tau)
        shape = (len(samples), n_layers, model.cfg.n_heads)
        pos.append(rows.sort_values(["input", "layer", "head"])["s_pos"].to_numpy().reshape(shape))
        sym.append(rows.sort_values(["input", "layer", "head"])["s_sym"].to_numpy().reshape(shape))
    sustained = sustained_purity(np.stack(pos), np.stack(sym), tuple(scored), rng, gamma=gamma, min_run=min_run,
                                 level=level, n_boot=n_boot)

    positions = _first(pd.concat(by_position), "step") if by_position else pd.DataFrame()
    tally = pd.DataFrame([{
        "kind": kind, "gamma": gamma, "min_run": min_run, "level": level,
        "ever_point": int(g["ever_point"].sum()), "counted": int(g["counted"].sum()),
        "layers_ever_point": " ".join(str(v) for v in g.loc[g["ever_point"], "layer"]),
        "layers_counted": " ".join(str(v) for v in g.loc[g["counted"], "layer"]),
    } for kind, g in sustained.groupby("kind", sort=True)])
    return MixtureTables(pd.concat(per_input, ignore_index=True), _first(pd.concat(split), "step"), positions,
                         pd.DataFrame(modality), sustained, tally)


def _first(df: pd.DataFrame, column: str) -> pd.DataFrame:
    return df[[column, *[c for c in df.columns if c != column]]].reset_index(drop=True)
