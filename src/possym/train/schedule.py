"""Learning-rate schedule of the paper (HF ``get_linear_schedule_with_warmup``).

lr(s) = lr_max * s / warmup for s < warmup, then lr_max * (total - s) / (total - warmup), floored at 0.

Example:
    >>> [round(lr_factor(s, warmup=2, total=6), 2) for s in range(7)]
    [0.0, 0.5, 1.0, 0.75, 0.5, 0.25, 0.0]
"""

from __future__ import annotations


def lr_factor(step: int, warmup: int, total: int) -> float:
    """Multiplier of the peak learning rate at optimiser step ``step`` (0-based)."""
    if step < warmup:
        return step / max(1, warmup)
    return max(0.0, (total - step) / max(1, total - warmup))
