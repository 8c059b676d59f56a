"""A claim is data: one entry of ``possym/data/claims.yaml``, read and validated into a :class:`ClaimSpec`.

As lm-evaluation-harness declares a task in YAML that names registered functions, an entry names its *measure*
(a function of the evidence registered in :mod:`possym.report.measures`, with its arguments) and its *rule kind*
(:mod:`possym.report.rules`: ``value``, ``seeds`` or ``check``), with everything the rule needs written before
the claim is graded: the paper's value and its uncertainty, the margin of a ``match`` and why, the nuisance the
paper leaves open, the quantities of the paper's setting its value depends on (``preset``: a run of another
preset grades the claim ``n/a``), the seed population it reads, and how the calibration feeds it.

Fields (``claims.yaml``'s header says the same):

- ``id``, ``claim`` (its name in ``claims.csv``), ``section``, ``paper`` (the paper's words or number);
- ``measure``: ``{name: ..., <arguments>}``; ``rule``: ``value`` | ``seeds`` | ``check``; ``rule_text``: what the
  measure checks at a seed, in words;
- ``value`` (rule ``value``): ``{value, tolerance, n, read}``; ``scale``: ``accuracy`` | ``linear``; ``units``;
  ``margin`` and ``margin_why``;
- ``nuisance``: ``hop_mix`` (its admissible values each graded; a verdict that depends on it is ``unresolved``);
- ``preset``: any of ``steps``, ``depth``, ``width``; ``population``: ``main`` | ``hop_queries``;
- ``kind``: ``empirical`` | ``finding`` (ours, beyond the paper's text, in the tally) | ``verification``;
- ``calibration``: ``derived`` (the measure is computed from the paper's raw data: curves, onsets, tables) |
  ``identity`` (the paper's number is fed back as its own evidence) | ``none`` (the paper has no data for it;
  ``data`` says why); ``data``: which of the paper's data feeds it; ``negative``: ``other_task`` where the paper
  states the claim of one task only, so that the other task's evidence must not grade ``match``.

Example:
    >>> specs = load_claims()
    >>> spec = next(s for s in specs if s.id == "number-length-800")
    >>> spec.rule, spec.scale, spec.margin, spec.nuisance, spec.preset
    ('value', 'accuracy', 0.1, 'hop_mix', ('depth', 'width', 'steps'))
"""

from __future__ import annotations

import importlib.resources
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from possym.errors import PossymError
from possym.report.rules import SCALES, PaperValue

RULES = ("value", "seeds", "check")
KINDS = ("empirical", "finding", "verification")
CALIBRATION = ("derived", "identity", "none")
PRESET_QUANTITIES = ("steps", "depth", "width")
POPULATIONS = ("main", "hop_queries")
NUISANCES = ("", "hop_mix")
NEGATIVES = ("", "other_task")
FIELDS = ("id", "claim", "section", "paper", "measure", "rule", "rule_text", "value", "scale", "units", "margin",
          "margin_why", "nuisance", "preset", "population", "kind", "calibration", "data", "negative", "task")
REQUIRED = ("id", "claim", "section", "paper", "measure", "rule", "rule_text", "kind", "calibration")


@dataclass(frozen=True)
class ClaimSpec:
    """One claim as data (module docstring). ``args``: the measure's arguments; ``value``: the paper's number with
    its uncertainty (rule ``value``); ``read``: how that uncertainty was read."""

    id: str
    claim: str
    section: str
    paper: str
    measure: str
    rule: str
    rule_text: str
    kind: str
    calibration: str
    args: Mapping[str, Any] = field(default_factory=dict)
    value: PaperValue | None = None
    read: str = ""
    scale: str = "linear"
    units: str = ""
    margin: float | None = None
    margin_why: str = ""
    nuisance: str = ""
    preset: tuple[str, ...] = ()
    population: str = "main"
    data: str = ""
    negative: str = ""
    task: str = ""

    def arg(self, name: str, default: Any = None) -> Any:
        return self.args.get(name, default)


def _bad(where: str, what: str) -> PossymError:
    return PossymError(f"{where}: {what}")


def _choice(where: str, key: str, value: Any, allowed: Sequence[str]) -> str:
    if value not in allowed:
        raise _bad(where, f"{key}={value!r}; allowed: {', '.join(repr(a) for a in allowed)}")
    return str(value)


def parse_claim(entry: Mapping[str, Any], measures: Sequence[str] | None = None) -> ClaimSpec:
    """One ``claims.yaml`` entry as a validated :class:`ClaimSpec`; ``measures``: the registered measure names (None:
    :data:`possym.report.measures.MEASURES`')."""
    if not isinstance(entry, Mapping):
        raise PossymError(f"a claim entry must be a mapping, got {type(entry).__name__}")
    where = f"claim {entry.get('id', '?')!r}"
    unknown = sorted(set(entry) - set(FIELDS))
    if unknown:
        raise _bad(where, f"unknown fields {unknown}; allowed: {list(FIELDS)}")
    missing = [k for k in REQUIRED if k not in entry]
    if missing:
        raise _bad(where, f"missing fields {missing}")
    measure = dict(entry["measure"]) if isinstance(entry["measure"], Mapping) else {"name": entry["measure"]}
    if measures is None:
        from possym.report.measures import MEASURES

        measures = list(MEASURES)
    name = _choice(where, "measure.name", measure.pop("name", None), list(measures))
    rule = _choice(where, "rule", entry["rule"], RULES)
    value, read = None, ""
    if rule == "value":
        v = entry.get("value")
        if not isinstance(v, Mapping) or "value" not in v:
            raise _bad(where, "rule 'value' needs value: {value, tolerance, n, read}")
        value = PaperValue(float(v["value"]), float(v.get("tolerance", 0.0)), v.get("n"))
        read = str(v.get("read", ""))
        margin = entry.get("margin")
        if not isinstance(margin, (int, float)) or margin <= 0:
            raise _bad(where, f"rule 'value' needs a positive margin, got {margin!r}")
        if not entry.get("margin_why"):
            raise _bad(where, "a margin needs margin_why: why that gap is immaterial, written before grading")
    elif "margin" in entry or "value" in entry:
        raise _bad(where, f"margin and value belong to rule 'value', not {rule!r}")
    preset = tuple(entry.get("preset") or ())
    for q in preset:
        _choice(where, "preset", q, PRESET_QUANTITIES)
    calibration = _choice(where, "calibration", entry["calibration"], CALIBRATION)
    if calibration == "none" and not entry.get("data"):
        raise _bad(where, "calibration 'none' needs data: why the paper's data cannot feed it")
    return ClaimSpec(
        id=str(entry["id"]), claim=str(entry["claim"]), section=str(entry["section"]), paper=str(entry["paper"]),
        measure=name, rule=rule, rule_text=str(entry["rule_text"]).strip(),
        kind=_choice(where, "kind", entry["kind"], KINDS), calibration=calibration, args=measure, value=value,
        read=read, scale=_choice(where, "scale", entry.get("scale", "linear"), SCALES),
        units=str(entry.get("units", "")), margin=None if entry.get("margin") is None else float(entry["margin"]),
        margin_why=str(entry.get("margin_why", "")).strip(),
        nuisance=_choice(where, "nuisance", entry.get("nuisance", ""), NUISANCES), preset=preset,
        population=_choice(where, "population", entry.get("population", "main"), POPULATIONS),
        data=str(entry.get("data", "")).strip(), negative=_choice(where, "negative", entry.get("negative", ""),
                                                                  NEGATIVES),
        task=str(entry.get("task", "")))


def load_claims(path: Path | str | None = None) -> list[ClaimSpec]:
    """The claims of ``path`` (default: the package's ``possym/data/claims.yaml``), in the paper's order; ids unique."""
    text = (Path(path).read_text("utf-8") if path is not None
            else importlib.resources.files("possym").joinpath("data/claims.yaml").read_text("utf-8"))
    entries = yaml.safe_load(text)
    if not isinstance(entries, list):
        raise PossymError(f"{path or 'claims.yaml'}: a list of claim entries expected")
    specs = [parse_claim(e) for e in entries]
    ids = [s.id for s in specs]
    dupes = sorted({i for i in ids if ids.count(i) > 1})
    if dupes:
        raise PossymError(f"{path or 'claims.yaml'}: claim ids {dupes} repeat")
    return specs
