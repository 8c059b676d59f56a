"""Scores of a training run: its fixed test inputs, every checkpoint scored, and the derived purity tables.

This is the library half of ``possym score RUN`` (the CLI writes the files): it reads checkpoints
through :class:`possym.runs.RunDir` and returns records.

Inputs (paper A App. D: "100 test inputs"): ``n`` rows of the run's own test split (the split made
from the run's data seed), drawn without replacement by ``np.random.default_rng(seed)``; the same
rows score every checkpoint, so the curves differ only by the weights.

Queries: ``"last"`` is the last token (every figure of the paper); ``"hop{h}"`` (with ``hops=True``)
is the h-th position of each input's hop path after the query, for the inputs with more than h hops
(the authors' second script scores every hop position; docs/choices.md).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np
import torch

from possym.config import TaskConfig
from possym.model.gptj import GPTJ
from possym.records import GAMMAS, PurityRecord, ScoreRecord, TallyRecord
from possym.runs import RunDir
from possym.scores.dynamics import first_pure_steps, purity_tally
from possym.scores.metric import TAU, Cosine
from possym.scores.swaps import head_scores_over_tau, rotated_qk
from possym.tasks import TaskSamples, make_splits


def score_inputs(task: TaskConfig, data_seed: int, n: int = 100, seed: int = 0) -> TaskSamples:
    """``n`` rows of the test split of ``make_splits(task, data_seed)``, chosen by ``seed`` (all if fewer)."""
    test = make_splits(task, data_seed)["test"]
    if n >= len(test):
        return test
    return test.take(np.sort(np.random.default_rng(seed).choice(len(test), n, replace=False)))


def hop_queries(samples: TaskSamples, hop: int) -> torch.Tensor:
    """Query positions for ``hop{hop}``: the path's ``hop``-th position where the input has more hops, else −1."""
    path = torch.as_tensor(samples.path[:, hop])
    return torch.where(torch.as_tensor(samples.n_hops) > hop, path, torch.full_like(path, -1))


def score_model(
    model: GPTJ,
    samples: TaskSamples,
    *,
    step: int,
    tau: float = TAU,
    block_size: int = 1,
    hops: bool = False,
    cosine: Cosine = "exact",
) -> list[dict[str, Any]]:
    """Records ``{step, query, layer, head, s_pos, s_sym, entropy, n_inputs}`` of one model, each score
    with its spread over the inputs (``s_pos_sd``, ``s_pos_low``, ``s_pos_high``, the same for s_sym)."""
    return score_model_over_tau(model, samples, (tau,), step=step, block_size=block_size, hops=hops,
                                cosine=cosine)[tau]


def score_model_over_tau(
    model: GPTJ,
    samples: TaskSamples,
    taus: Sequence[float],
    *,
    step: int,
    block_size: int = 1,
    hops: bool = False,
    cosine: Cosine = "exact",
) -> dict[float, list[dict[str, Any]]]:
    """:func:`score_model`'s records at each swap temperature in ``taus``, from one swap-and-rerun."""
    tokens = torch.as_tensor(samples.tokens, device=next(model.parameters()).device)
    acts = rotated_qk(model, tokens, list(range(model.cfg.n_layers)))  # one forward pass for every query set
    kw: dict[str, Any] = dict(block_size=block_size, acts=acts, cosine=cosine)
    queries: list[tuple[str, torch.Tensor | None]] = [("last", None)]
    if hops:
        queries += [(f"hop{h}", hop_queries(samples, h)) for h in range(1, samples.path.shape[1] - 1)]
    out: dict[float, list[dict[str, Any]]] = {float(t): [] for t in taus}
    for name, query in queries:
        if query is not None and not (query >= 0).any():
            continue
        for t, s in head_scores_over_tau(model, tokens, taus, query=query, **kw).items():
            out[t] += s.records(step=step, query=name)
    return out


def score_checkpoints(
    run: RunDir,
    steps: Iterable[int],
    samples: TaskSamples,
    *,
    tau: float = TAU,
    block_size: int = 1,
    hops: bool = False,
    progress: Callable[[int], None] | None = None,
    cosine: Cosine = "exact",
    device: torch.device | str | None = None,
) -> list[dict[str, Any]]:
    """Score every checkpoint in ``steps`` on ``device`` (default: the CPU); ``progress(step)`` is called
    after each (for a progress bar)."""
    steps = list(steps)
    out: list[dict[str, Any]] = []
    if not steps:
        return out
    model = run.load_model(steps[0], device=device)  # built once; later checkpoints only load weights
    for step in steps:
        model.load_state_dict(run.load_state_dict(step))
        out += score_model(model, samples, step=step, tau=tau, block_size=block_size, hops=hops, cosine=cosine)
        if progress is not None:
            progress(step)
    return out


def purity_tables(scores: Sequence[ScoreRecord], best: int | None, gammas: Iterable[float] = GAMMAS
                  ) -> tuple[list[PurityRecord], list[TallyRecord]]:
    """(first-pure records for every γ, with the run's best step ``best`` (:meth:`possym.runs.RunDir.best`,
    the paper's dashed line); the tally per γ and step)."""
    steps = sorted({r.step for r in scores})
    first: list[PurityRecord] = []
    tally: list[TallyRecord] = []
    for gamma in gammas:
        f = first_pure_steps(scores, gamma, best_step=best)
        first += f
        tally += purity_tally(f, steps, gamma)
    return first, tally
