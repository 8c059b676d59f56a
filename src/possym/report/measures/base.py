"""What a measure returns, and the registry that claims name measures by.

A measure is a function ``(evidence, spec) -> Measured``: per reading of the claim (the graded one first), each
seed's value with its own interval (rule kind ``value``) or each seed's verdict with the best and worst its
intervals allow (rule kind ``seeds``), and the words that say what each seed shows.

Example:
    >>> @measure("toy_count")
    ... def toy(ev, spec):
    ...     return Measured((Reading("as measured", (SeedReading(0, "3", Estimate.of(3.0)),)),))
    >>> MEASURES["toy_count"](None, None).graded.seeds[0].estimate.value
    3.0
    >>> del MEASURES["toy_count"]
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from possym.report.rules import Estimate, SeedVerdict

__all__ = ["MEASURES", "Measured", "Reading", "SeedReading", "measure"]


@dataclass(frozen=True)
class SeedReading:
    """One seed under one reading: its value and own interval (``estimate``) or its verdict (``verdict``), in words."""

    seed: int
    text: str
    estimate: Estimate | None = None
    verdict: SeedVerdict | None = None


@dataclass(frozen=True)
class Reading:
    """The seeds under one reading of the claim. ``nuisance``: a value of the claim's nuisance the paper's text
    admits (each is graded; a verdict that moves with them is ``unresolved``); ``graded``: False for a reading shown
    but never graded (one fitted after the fact)."""

    name: str
    seeds: tuple[SeedReading, ...]
    nuisance: bool = False
    graded: bool = True


@dataclass(frozen=True)
class Measured:
    """A claim's evidence: its readings (``readings[0]`` grades), the checkpoint its values come from (``step``),
    words beside the verdict (``extra``: a supplementary test), what the seeds' histories rest on (``source``),
    and ``na``: why the evidence cannot judge the claim ("" where it can)."""

    readings: tuple[Reading, ...] = ()
    step: str = ""
    extra: str = ""
    source: str = ""
    na: str = ""

    @property
    def graded(self) -> Reading:
        return self.readings[0]


Measure = Callable[..., Measured]
MEASURES: dict[str, Measure] = {}


def measure(name: str) -> Callable[[Measure], Measure]:
    """Register a measure under ``name``, the name claims.yaml gives it."""
    def register(fn: Measure) -> Measure:
        if name in MEASURES:
            raise ValueError(f"measure {name!r} is registered twice")
        MEASURES[name] = fn
        return fn

    return register


def not_measured(why: str) -> Measured:
    return Measured(na=why)
