"""The measures claims name (``possym/data/claims.yaml``): functions from the evidence to per-seed values or
verdicts, registered by name (:data:`MEASURES`). A new claim about a new quantity adds one measure here and one
entry there; :mod:`possym.report.grading` does the rest.

Example:
    >>> "length_accuracy" in MEASURES and "hops_in_order" in MEASURES
    True
"""

from possym.report.measures import heads, learning, length, mechanisms, theory  # noqa: F401  (they register)
from possym.report.measures.base import MEASURES, Measured, Reading, SeedReading, measure

__all__ = ["MEASURES", "Measured", "Reading", "SeedReading", "measure"]
