"""The two multi-hop tasks of the paper (App. B): vocabularies and an independent oracle."""

from possym.tasks.solve import Solution, solve
from possym.tasks.vocab import PAD, Vocab, number_alphabet, task_vocab

__all__ = ["PAD", "Solution", "Vocab", "number_alphabet", "solve", "task_vocab"]
