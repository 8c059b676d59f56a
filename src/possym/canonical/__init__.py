"""The metric paper's canonical tasks and toy heads (arXiv 2511.11579; docs/canonical.md).

Light on import: the grid (training, analysis, figures) is loaded only when asked for: ``possym.canonical.run_grid`` and
``possym.canonical.GridConfig`` resolve to :mod:`possym.canonical.grid` on first use.

The tasks themselves are task modules like any other (:mod:`possym.tasks.index`,
:mod:`possym.tasks.retrieval`, :mod:`possym.tasks.induction`).

Example:
    >>> import numpy as np
    >>> from possym.tasks import get_task, solve, task_config, task_vocab
    >>> spec = task_config("index", length=4, n_symbols=4)
    >>> s = get_task("index").at_length(spec, 2, np.random.default_rng(0))
    >>> vocab = task_vocab(spec)
    >>> solve("index", vocab.decode(s.tokens[0])).answer == vocab.tokens[s.answer[0]]
    True
"""

from __future__ import annotations

from typing import Any

_LAZY = {"run_grid", "GridConfig", "GridResults"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        from possym.canonical import grid

        return getattr(grid, name)
    raise AttributeError(f"module 'possym.canonical' has no attribute {name!r}")
