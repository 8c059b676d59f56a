"""Random extra tokens during training: a data-side scheme against position-bound solutions.

The paper's number model learns positional heads that look a fixed distance back and fails once
extra tokens come before the target window (paper A §3.6). ``train.random_extra=K`` trains on what
length generalisation tests: each optimiser step draws one count k ~ U{0..K} and puts k uniform
letters before every window of its batch, exactly the extra tokens of the number task (its offsets
are relative, so no answer changes). Every batch still holds equal-length rows; the count varies
from step to step. K = 0 (the default) leaves training as it was.

Only for a task that declares ``random_prefix`` (the number task): the letter task's extra tokens
must avoid each instance's chain letters (:func:`possym.tasks.draw_prefix`), so they cannot be put
before windows already drawn.

Example:
    >>> from possym.tasks import task_config
    >>> cfg = task_config("number")
    >>> batch = np.full((2, 17), 5)
    >>> out = with_random_extra(batch, cfg, 3, np.random.default_rng(0))
    >>> out.shape[1] - 17 in range(4), bool((out[:, -17:] == 5).all())
    (True, True)
"""

from __future__ import annotations

import numpy as np

from possym.tasks import TaskConfig, get_task


def with_random_extra(tokens: np.ndarray, cfg: TaskConfig, max_extra: int, rng: np.random.Generator) -> np.ndarray:
    """tokens [batch, pos] -> [batch, k + pos] with k ~ U{0..max_extra} random prefix tokens before each window."""
    draw = get_task(cfg.name).random_prefix
    if draw is None:
        raise ValueError(f"the task {cfg.name!r} declares no random_prefix: its extra tokens depend on each instance")
    k = int(rng.integers(0, max_extra + 1))
    return np.concatenate([draw(cfg, len(tokens), k, rng), tokens], axis=1)
