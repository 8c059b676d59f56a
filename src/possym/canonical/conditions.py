"""Frequency control of the toy heads: which RoPE planes a one-layer head may use, through the existing options.

A toy head has d_head = d_model (one head) and rot_dim = d_head, so P = d_head/2 planes with
θ_k = base^{−2(k−1)/rot_dim}, k = 1 (fastest) .. P (slowest). Every condition lets exactly ``width``
planes (2·width dimensions) into the attention logits, so conditions differ in *which* frequencies
the head sees, never in how many dimensions:

- ``band{b}`` (b = 1..P/width): ``model.freq_gate = "0@lo-hi"``, the b-th group of ``width``
  consecutive plane IDs, from the fastest (band1) to the slowest;
- ``nope``: ``model.p_rope = 0`` (every plane static, θ = 0) and the slowest ``width`` planes
  gated in, i.e. the same number of dimensions with no position at all;
- ``two_angle`` (the metric paper's Theorem 6, θ₁ = 0 plus one moderate θ₂): ``width/2`` moderate
  planes and ``width/2`` NoPE planes. The NoPE planes are the slowest ``width/2``, made static by
  ``model.p_rope = (P − width/2)/P`` (p-RoPE keeps the fastest planes rotating); the moderate planes
  are those whose θ_k · L is nearest 1 radian (a recency ramp that stays monotone across the training
  window, since L·θ₂ < π);
- ``fast_slow`` (the metric paper's "both bands"): the fastest ``width/2`` and the slowest ``width/2`` planes,
  all rotating (the slowest turn by ~1e-4 rad per position: nearly, but not exactly, NoPE);
- ``all``: plain RoPE, every plane (2·P dimensions; a reference, not width-matched).

Example (d_head 32, so 16 planes; width 2; L = 8):
    >>> [(c.name, c.freq_gate, c.p_rope) for c in frequency_conditions(32, 8)][:2]
    [('band1', '0@1-2', 1.0), ('band2', '0@3-4', 1.0)]
    >>> c = condition("two_angle", 32, 8)
    >>> c.freq_gate, c.p_rope, c.planes
    ('0@5,16', 0.9375, (5, 16))
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from possym.config import ModelConfig

SPECIAL = ("nope", "two_angle", "fast_slow", "all")


@dataclass(frozen=True)
class Condition:
    """One frequency condition: its name, the model options that make it, the planes it lets in and their angles."""

    name: str
    freq_gate: str | None
    p_rope: float
    planes: tuple[int, ...]  # 1-based plane IDs that reach the logits
    thetas: tuple[float, ...]  # the angle per position each of them turns by (0 for a NoPE plane)

    @property
    def overrides(self) -> list[str]:
        """``model.*`` overrides for :func:`possym.config.load_config`."""
        out = [f"model.p_rope={self.p_rope}"]
        if self.freq_gate is not None:
            out.append(f"model.freq_gate={self.freq_gate}")
        return out

    @property
    def kind(self) -> str:
        return "band" if self.name.startswith("band") else self.name


def plane_thetas(d_head: int, base: float = 10_000.0) -> np.ndarray:
    """θ_k for k = 1..d_head/2 (GPT-J's RoPE over the whole head): (P,) float64."""
    return base ** (-2.0 * np.arange(d_head // 2) / d_head)


def _gate(ids: list[int]) -> str:
    parts, start = [], ids[0]
    for a, b in zip(ids, [*ids[1:], ids[-1] + 2], strict=True):  # the sentinel ids[-1] + 2 ends the last run
        if b != a + 1:
            parts.append(f"{start}" if start == a else f"{start}-{a}")
            start = b
    return "0@" + ",".join(parts)


def condition(name: str, d_head: int, length: int, width: int = 2, base: float = 10_000.0) -> Condition:
    """The condition called ``name`` (``band1``.., or one of :data:`SPECIAL`) for a head of ``d_head``."""
    n_planes = d_head // 2
    if width < 2 or width % 2 or n_planes % width:
        raise ValueError(f"width={width} must be even, >= 2 and divide the {n_planes} planes of d_head={d_head}")
    thetas = plane_thetas(d_head, base)
    half = width // 2
    slow = list(range(n_planes - half + 1, n_planes + 1))
    if name.startswith("band"):
        b = int(name[4:]) if name[4:].isdigit() else 0
        if not 1 <= b <= n_planes // width:
            raise ValueError(
                f"condition {name!r}: bands are band1..band{n_planes // width} for d_head={d_head}, width={width}"
            )
        ids = list(range((b - 1) * width + 1, b * width + 1))
        return Condition(name, _gate(ids), 1.0, tuple(ids), tuple(float(thetas[i - 1]) for i in ids))
    if name == "nope":
        ids = list(range(n_planes - width + 1, n_planes + 1))
        return Condition(name, _gate(ids), 0.0, tuple(ids), (0.0,) * width)
    if name == "two_angle":
        kept = n_planes - half  # p-RoPE keeps the fastest `kept` planes rotating
        score = np.abs(np.log(thetas[:kept] * length))  # |log(θ L)|: nearest 1 rad across the window
        moderate = sorted(int(i) + 1 for i in np.argsort(score, kind="stable")[:half])
        ids = moderate + slow
        p_rope = kept / n_planes
        return Condition(
            name, _gate(ids), p_rope, tuple(ids), tuple(float(thetas[i - 1]) for i in moderate) + (0.0,) * half
        )
    if name == "fast_slow":
        ids = list(range(1, half + 1)) + slow
        return Condition(name, _gate(ids), 1.0, tuple(ids), tuple(float(thetas[i - 1]) for i in ids))
    if name == "all":
        ids = list(range(1, n_planes + 1))
        return Condition(name, None, 1.0, tuple(ids), tuple(float(t) for t in thetas))
    raise ValueError(f"unknown condition {name!r}; allowed: band1..band{n_planes // width}, {', '.join(SPECIAL)}")


def frequency_conditions(d_head: int, length: int, width: int = 2, base: float = 10_000.0) -> list[Condition]:
    """Every band from the fastest to the slowest, then :data:`SPECIAL`."""
    names = [f"band{b}" for b in range(1, d_head // 2 // width + 1)] + list(SPECIAL)
    return [condition(n, d_head, length, width, base) for n in names]


def run_condition(name: str, model: ModelConfig, length: int) -> Condition:
    """The condition ``name`` of a toy head trained with ``model`` at ``length``, checked against the planes that
    ``model`` lets into the logits and turns: a variant is named after its condition, and a name that does not
    say what the head was allowed is an error, not a mislabelled row. The width is the number of planes let in.

    >>> from possym.config import ModelConfig
    >>> head = ModelConfig(n_layers=1, n_heads=1, d_model=32, p_rope=0.9375, freq_gate="0@5,16")
    >>> run_condition("two_angle", head, 8).planes
    (5, 16)
    >>> run_condition("band1", head, 8)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: a head named band1 lets in planes (5, 16) (turning 0.1, 0 rad per position); band1 is planes (1, 2)...
    """
    allowed, rotates = model.plane_allowed(0), model.plane_rotates(0)
    thetas = plane_thetas(model.rot_dim, model.rope_base)
    planes = tuple(k + 1 for k in range(model.n_planes) if allowed[k])
    turns = tuple(float(thetas[k - 1]) if rotates[k - 1] else 0.0 for k in planes)
    width = 2 if name == "all" else len(planes)
    want = condition(name, model.rot_dim, length, width, model.rope_base)
    if (want.planes, want.thetas) != (planes, turns):
        raise ValueError(f"a head named {name} lets in planes {planes} (turning "
                         f"{', '.join(f'{t:.2g}' for t in turns)} rad per position); {name} is planes {want.planes} "
                         f"({', '.join(f'{t:.2g}' for t in want.thetas)})")
    return want


def band_centre_theta(c: Condition) -> float:
    """The geometric mean angle of a condition's rotating planes (0 if none rotates): the x-axis of the band figure."""
    rot = [t for t in c.thetas if t > 0]
    return math.exp(sum(math.log(t) for t in rot) / len(rot)) if rot else 0.0
