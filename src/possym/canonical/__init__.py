"""The metric paper's canonical tasks and toy heads (arXiv 2511.11579 §§ on Index, Retrieval, partial induction).

Light on import: the task registry imports the task modules of this package, so the heavy parts
(training grid, analysis, figures) are imported from their modules, ``possym.canonical.grid`` etc.

Example:
    >>> import numpy as np
    >>> from possym.canonical.tasks import CanonicalSpec, generate
    >>> from possym.canonical.solve import solve
    >>> spec = CanonicalSpec("index", length=4, n_symbols=4)
    >>> s = generate(spec, 2, np.random.default_rng(0))
    >>> solve("index", spec.vocab.decode(s.tokens[0])).answer == spec.vocab.tokens[s.answer[0]]
    True
"""
