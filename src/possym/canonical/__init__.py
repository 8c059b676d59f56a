"""The metric paper's canonical tasks and toy heads (arXiv 2511.11579; docs/canonical.md).

Light on import: the task registry imports this package's task modules, so the grid (training,
analysis, figures) is loaded only when asked for: ``possym.canonical.run_grid`` and
``possym.canonical.GridConfig`` resolve to :mod:`possym.canonical.grid` on first use.

Example:
    >>> import numpy as np
    >>> from possym.canonical.tasks import CanonicalSpec, generate
    >>> from possym.canonical.solve import solve
    >>> spec = CanonicalSpec("index", length=4, n_symbols=4)
    >>> s = generate(spec, 2, np.random.default_rng(0))
    >>> solve("index", spec.vocab.decode(s.tokens[0])).answer == spec.vocab.tokens[s.answer[0]]
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
