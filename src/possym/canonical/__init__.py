"""The metric paper's canonical tasks and toy heads (arXiv 2511.11579; docs/canonical.md).

The grid's config, the analysis of a cell and the grid's report are :mod:`possym.canonical.grid`; the
grid runs as an experiment (:func:`possym.experiment.run_canonical_grid`).

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

