"""The metric paper's canonical tasks and toy heads (arXiv 2511.11579; docs/canonical.md).

The grid is an experiment file (``possym/configs/sweeps/canonical.yaml``) run by the one executor; the
analysis of a cell and its records are :mod:`possym.canonical.grid`, the two stages :mod:`possym.stages.canonical`.

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

