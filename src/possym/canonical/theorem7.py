"""Theorem 7 of the metric paper: the maximal attention weight w_max(j) of the positional head H_POS is
U-shaped in the answer position j, that of a simplified symbolic head H_SYM inverted-U.

Both heads are real weights in a one-layer :class:`~possym.model.gptj.GPTJ` with one RoPE plane at angle θ,
run through the model's attention at inverse temperature β (as :mod:`possym.theory.constructions`); N content
tokens, the query at position N, whose own key takes part. Their closed forms, tested against the heads:

    w_max^POS(j) = 1 / Σ_{i=0}^{N} exp(β (cos((i − j)θ) − 1))                   (U while Nθ <= π)
    w_max^SYM(j) = e^{β cos((N − j − c)θ)} / (e^{β cos((N − j − c)θ)} + N)      (query pre-rotated to offset c)

H_SYM is computed under both readings of "simplified": ``H_SYM`` with c = (N + 1)/2 (inverted-U while
(N − 1)θ/2 < π/2; :func:`symbolic_wmax` refuses the regime beyond, where x* loses the ends) and ``H_SYM_c0``
with c = 0 (monotone while Nθ < π/2). Shapes are graded by :mod:`possym.canonical.ushape`. The proof sketch
and why both readings: docs/canonical.md, "Measurements" (Theorem 7).

Example:
    >>> w = positional_wmax(n_content=8, theta=0.2, beta=8.0)
    >>> bool(np.allclose(w, positional_wmax_closed(8, 0.2, 8.0))), curve_shape(w)
    (True, 'U')
    >>> curve_shape(symbolic_wmax(n_content=8, theta=0.3, beta=4.0))
    'inverted-U'"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from possym.canonical.ushape import curve_shape
from possym.theory.constructions import IndexConstruction, V, rotation, run_construction
from possym.theory.functions import IndexSymbols


def positional_wmax_closed(n_content: int, theta: float, beta: float) -> np.ndarray:
    """w_max^POS(j), j = 0..N-1, from the closed form of the module docstring: (N,) float64."""
    i = np.arange(n_content + 1)
    j = np.arange(n_content)[:, None]
    return 1.0 / np.exp(beta * (np.cos((i - j) * theta) - 1.0)).sum(-1)


def positional_wmax(n_content: int, theta: float, beta: float) -> np.ndarray:
    """w_max^POS(j), j = 0..N-1, from T_Index compiled into a GPTJ and run: (N,) float64.

    One input per target: N letters then the offset query σ = N − j; the weight is read at key j of
    the query's row and checked to be the row's maximum.
    """
    c = IndexConstruction(IndexSymbols(n_letters=1, n_ints=n_content), theta=theta)
    sigma = n_content - np.arange(n_content)  # target j = N − σ
    ids = np.concatenate(
        [np.zeros((n_content, n_content), dtype=np.int64), (c.symbols.n_letters - 1 + sigma)[:, None]], 1
    )
    row = run_construction(c, ids, beta=beta).pattern[:, n_content].numpy()  # [input, key]
    w = row[np.arange(n_content), np.arange(n_content)]
    if not np.allclose(w, row.max(-1), rtol=0, atol=1e-12):
        raise AssertionError("the target is not the maximal weight of H_POS's row")
    return w


@dataclass(frozen=True)
class _Names:
    size: int = 3
    tokens: tuple[str, ...] = field(default=("x*", "other", "query"))


@dataclass(frozen=True)
class SimplifiedSymbolicHead:
    """Tokens 0 = the bound symbol ``x*``, 1 = any other binding, 2 = the query; one plane at ``theta``.

    Duck-types :mod:`possym.theory.constructions`' construction interface, so ``run_construction``
    compiles and runs it like T_Index.
    """

    theta: float
    centre: float
    symbols: _Names = field(default_factory=_Names)

    @property
    def d_model(self) -> int:
        return 3

    keeps_residual = False

    def embedding(self) -> np.ndarray:
        return np.eye(3)

    def W_Q(self) -> np.ndarray:
        """[2, 3]: only the query has a query vector, ρ(θ)^{-c} v."""
        w = np.zeros((2, 3))
        w[:, 2] = rotation(-self.centre * self.theta) @ V
        return w

    def W_K(self) -> np.ndarray:
        """[2, 3]: only ``x*`` has a key, v."""
        w = np.zeros((2, 3))
        w[:, 0] = V
        return w

    def W_V(self) -> np.ndarray:
        return np.eye(3)

    def W_U(self) -> np.ndarray:
        return np.eye(3)


def default_centre(n_content: int) -> float:
    """c = (N + 1)/2: the query-to-key offset of the middle content position."""
    return (n_content + 1) / 2


def symbolic_wmax_closed(n_content: int, theta: float, beta: float, centre: float | None = None) -> np.ndarray:
    """w_max^SYM(j), j = 0..N-1, from the closed form of the module docstring: (N,) float64."""
    c = default_centre(n_content) if centre is None else centre
    top = np.exp(beta * np.cos((n_content - np.arange(n_content) - c) * theta))
    return top / (top + n_content)


def symbolic_wmax(n_content: int, theta: float, beta: float, centre: float | None = None) -> np.ndarray:
    """w_max^SYM(j) from the simplified symbolic head compiled into a GPTJ and run: (N,) float64."""
    head = SimplifiedSymbolicHead(theta, default_centre(n_content) if centre is None else centre)
    ids = np.ones((n_content, n_content + 1), dtype=np.int64)
    ids[np.arange(n_content), np.arange(n_content)] = 0  # x* at j
    ids[:, -1] = 2
    row = run_construction(head, ids, beta=beta).pattern[:, n_content].numpy()  # type: ignore[arg-type]
    w = row[np.arange(n_content), np.arange(n_content)]
    if not np.allclose(w, row.max(-1), rtol=0, atol=1e-12):
        raise AssertionError("x* is not the maximal weight of H_SYM's row")
    return w


@dataclass(frozen=True)
class WmaxCurve:
    """One w_max(j) curve as records for the table and the figure."""

    head: str  # "H_POS" or "H_SYM"
    theta: float
    beta: float
    n_content: int
    w: np.ndarray  # (N,)

    @property
    def shape(self) -> str:
        return curve_shape(self.w)

    def records(self) -> list[dict[str, float | int | str]]:
        return [
            {
                "head": self.head,
                "theta": self.theta,
                "beta": self.beta,
                "n_content": self.n_content,
                "j": j,
                "w_max": float(w),
            }
            for j, w in enumerate(self.w)
        ]


UNCENTRED = "H_SYM_c0"  # the simplified symbolic head with the query unrotated (c = 0)


def theorem7_curves(
    n_content: int = 16,
    pos_thetas: tuple[float, ...] = (0.05, 0.1, 0.19, 1.0),
    sym_thetas: tuple[float, ...] = (0.05, 0.1, 0.19),
    beta: float = 8.0,
    uncentred_thetas: tuple[float, ...] = (0.05, 0.09),
) -> list[WmaxCurve]:
    """H_POS's w_max(j) at each of ``pos_thetas``, H_SYM's at each of ``sym_thetas`` with the centred query
    c = (N + 1)/2, and H_SYM's at each of ``uncentred_thetas`` with c = 0 (head ``H_SYM_c0``), from the
    compiled heads.

    Defaults: N = 16; H_POS inside Nθ <= π (U) and at θ = 1 rad (outside it); centred H_SYM inside
    (N−1)θ/2 < π/2; uncentred H_SYM inside Nθ < π/2, where x* stays the row's maximum at every j.
    """
    with torch.no_grad():
        pos = [WmaxCurve("H_POS", t, beta, n_content, positional_wmax(n_content, t, beta)) for t in pos_thetas]
        sym = [WmaxCurve("H_SYM", t, beta, n_content, symbolic_wmax(n_content, t, beta)) for t in sym_thetas]
        flat = [WmaxCurve(UNCENTRED, t, beta, n_content, symbolic_wmax(n_content, t, beta, centre=0.0))
                for t in uncentred_thetas]
    return pos + sym + flat
