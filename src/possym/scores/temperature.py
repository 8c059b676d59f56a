"""How each layer's verdict depends on the swap temperature τ (paper A App. D fixes τ = 1e-4).

τ enters the scores only through the swap weights α(π) = softmax_π(|d_I − d_J| / τ)
(:mod:`possym.scores.metric`): a small τ scores a head by the swaps that move the most attention (a
hard max as τ → 0), a large τ by all swaps alike (the plain mean over swaps as τ → ∞). A verdict that
is a property of the head should not hang on a constant the paper chose; this module scores the same
checkpoints at τ × :data:`TAU_FACTORS` from one swap-and-rerun per checkpoint (the swapped rows do not
depend on τ) and lays the verdicts side by side:

- ``final_kind``: pure positional / symbolic / "" (neither) at the last scored step, at γ
  (:func:`possym.scores.dynamics.purity`, point estimates, as every claim counts them);
- ``ever_positional`` / ``ever_symbolic``: pure of that kind at some scored step (Figs. 2C, 7);
- ``first_kind``, ``first_step``: the first pure step and its kind (the first-passage tally);
- ``moves``: whether any of these differs from the verdict at the paper's τ.

Example (hand-made records: L1's s_POS is 0.92 at the paper's τ and 0.85 at 10 τ, so it moves):
    >>> from possym.records import ScoreRecord
    >>> def rows(p1):
    ...     return [ScoreRecord(100, "last", 0, 0, 0.02, 0.97, 1.0, 9),
    ...             ScoreRecord(100, "last", 1, 0, p1, 0.03, 1.0, 9)]
    >>> frame = tau_verdicts({TAU: rows(0.92), 10 * TAU: rows(0.85)})
    >>> frame[frame.moves][["tau", "layer", "final_kind"]].values.tolist()
    [[0.001, 1, '']]
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

import pandas as pd
import torch

from possym.records import GAMMA, ScoreRecord
from possym.runs import RunDir
from possym.scores.checkpoints import score_model_over_tau
from possym.scores.dynamics import purity
from possym.scores.metric import TAU, Cosine
from possym.tasks import TaskSamples

TAU_FACTORS: tuple[float, ...] = (0.5, 1.0, 2.0, 10.0)  # × the paper's τ: the factors the verdicts are shown at
TAUS: tuple[float, ...] = tuple(f * TAU for f in TAU_FACTORS)  # the swap temperatures themselves
COLUMNS = ("tau", "factor", "query", "layer", "head", "final_kind", "ever_positional", "ever_symbolic", "first_kind",
           "first_step", "moves")


def score_checkpoints_over_tau(
    run: RunDir,
    steps: Iterable[int],
    samples: TaskSamples,
    taus: Sequence[float] = TAUS,
    *,
    block_size: int = 1,
    hops: bool = False,
    cosine: Cosine = "exact",
    device: torch.device | str | None = None,
    progress: Callable[[int], None] | None = None,
) -> dict[float, list[ScoreRecord]]:
    """Every checkpoint in ``steps`` scored at every τ in ``taus`` (one swap-and-rerun per checkpoint), as
    :func:`possym.scores.checkpoints.score_checkpoints` scores one τ."""
    steps = list(steps)
    out: dict[float, list[ScoreRecord]] = {float(t): [] for t in taus}
    if not steps:
        return out
    model = run.load_model(steps[0], device=device)
    for step in steps:
        model.load_state_dict(run.load_state_dict(step))
        found = score_model_over_tau(model, samples, taus, step=step, block_size=block_size, hops=hops, cosine=cosine)
        for t, rows in found.items():
            out[t] += [ScoreRecord.from_dict(r) for r in rows]
        if progress is not None:
            progress(step)
    return out


def tau_verdicts(scores: Mapping[float, Sequence[ScoreRecord]], gamma: float = GAMMA,
                 reference: float = TAU) -> pd.DataFrame:
    """One row per (τ, query, layer, head) with the verdicts of the module docstring; ``moves`` compares each
    row with the same head's at ``reference`` (the paper's τ, which must be among the keys)."""
    if not any(abs(t - reference) <= 1e-12 * reference for t in scores):
        raise ValueError(f"the reference tau={reference:g} is not among the scored taus {sorted(scores)}")
    rows = []
    for tau, records in sorted(scores.items()):
        series: dict[tuple[str, int, int], list[ScoreRecord]] = {}
        for r in records:
            series.setdefault((r.query, r.layer, r.head), []).append(r)
        for (query, layer, head), points in sorted(series.items()):
            points.sort(key=lambda p: p.step)
            kinds = [purity(p.s_pos, p.s_sym, gamma) for p in points]
            first = next(((p.step, k) for p, k in zip(points, kinds, strict=True) if k), (None, ""))
            rows.append({"tau": tau, "factor": round(tau / reference, 6), "query": query, "layer": layer,
                         "head": head, "final_kind": kinds[-1], "ever_positional": "positional" in kinds,
                         "ever_symbolic": "symbolic" in kinds, "first_kind": first[1], "first_step": first[0]})
    frame = pd.DataFrame(rows, columns=list(COLUMNS[:-1]))
    verdict = ["final_kind", "ever_positional", "ever_symbolic", "first_kind", "first_step"]
    ref = frame[(frame.tau - reference).abs() <= 1e-12 * reference].set_index(["query", "layer", "head"])[verdict]
    keyed = frame.set_index(["query", "layer", "head"])[verdict]
    same = (keyed.fillna(-1) == ref.reindex(keyed.index).fillna(-1)).all(axis=1)
    frame["moves"] = ~same.to_numpy()
    return frame


def moved_verdicts(frame: pd.DataFrame) -> pd.DataFrame:
    """The rows of :func:`tau_verdicts` whose verdict differs from the paper's τ."""
    return frame[frame.moves].reset_index(drop=True)
