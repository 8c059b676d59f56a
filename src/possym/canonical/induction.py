"""Partial induction (f_MIX): the attribute bound to the queried symbol's last occurrence.

The registry module of the task (see possym.canonical.adapter); the generator and a worked
example are in possym.canonical.tasks, the oracle in possym.canonical.solve.
"""

from possym.canonical.adapter import members

PREFIX_PER_HOP, combinations, sample, draw_prefix, sample_after = members("induction")
