"""Which purity verdicts depend on the cosine: the paper's exact one against the authors' ``F.cosine_similarity``.

The authors' metric code took the cosine of the swap 2-vectors with ``torch.nn.functional.cosine_similarity``
(float32, eps = 1e-8 on each norm; :mod:`possym.scores.metric`). Where both swapped positions carry
almost no attention the two cosines differ, and with them the scores. :func:`cosine_verdicts` scores
one model on one set of inputs both ways, from one forward pass, and lists every head's scores and
purity verdicts (γ ∈ :data:`~possym.records.GAMMAS`) under each, with whether they differ.

Example:
    >>> import torch
    >>> from possym.config import ModelConfig
    >>> from possym.model.gptj import GPTJ
    >>> model = GPTJ(ModelConfig(n_layers=2, d_model=16, d_mlp=32, d_vocab=10)).eval()
    >>> table = cosine_verdicts(model, torch.randint(0, 10, (8, 7), generator=torch.Generator().manual_seed(0)))
    >>> list(table.columns[:6]), bool(table["changed"].any())
    (['layer', 'head', 's_pos_exact', 's_sym_exact', 's_pos_torch', 's_sym_torch'], False)
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd
from torch import Tensor

from possym.model.gptj import GPTJ
from possym.records import GAMMAS
from possym.scores.dynamics import purity
from possym.scores.swaps import head_scores, rotated_qk


def cosine_verdicts(model: GPTJ, tokens: Tensor, gammas: Sequence[float] = GAMMAS) -> pd.DataFrame:
    """One row per (layer, head): mean s_POS, s_SYM under each cosine (last-token query), the purity
    verdict under each at every γ (``kind_exact_0.1``, ``kind_torch_0.1``, ...), and ``changed``:
    whether any γ's verdict differs between the two."""
    layers = list(range(model.cfg.n_layers))
    acts = rotated_qk(model, tokens, layers)
    exact = head_scores(model, tokens, acts=acts).records()
    authors = head_scores(model, tokens, acts=acts, cosine="torch").records()
    rows = []
    for e, t in zip(exact, authors, strict=True):
        row = {"layer": e["layer"], "head": e["head"], "s_pos_exact": e["s_pos"], "s_sym_exact": e["s_sym"],
               "s_pos_torch": t["s_pos"], "s_sym_torch": t["s_sym"]}
        changed = False
        for gamma in gammas:
            a, b = purity(e["s_pos"], e["s_sym"], gamma), purity(t["s_pos"], t["s_sym"], gamma)
            row[f"kind_exact_{gamma}"], row[f"kind_torch_{gamma}"] = a or "mixed", b or "mixed"
            changed |= a != b
        row["changed"] = changed
        rows.append(row)
    return pd.DataFrame(rows)
