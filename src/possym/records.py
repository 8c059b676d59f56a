"""Rows that cross a file boundary: one frozen dataclass per CSV artifact, which owns its columns and
its parsing (STYLE.md principle 14).

Every record type inherits :meth:`Record.from_csv` and :meth:`Record.to_csv`, which read the field
types from the class itself: ``int``, ``float``, ``str``, ``bool`` and ``X | None`` (an empty cell).
A field added with a default is all it takes to carry a new column; CSVs written before it read the
default. A row with a column the record does not know is refused, so a new column cannot be dropped
silently on a round trip. An empty cell reads as None in an ``X | None`` field and as NaN in a ``float`` one
(pandas writes NaN so).

A library that computes a table returns a DataFrame (its API; notebooks use it). Where it crosses a file,
:func:`records_of` turns it into records of the table's type, refusing a column the record lacks or needs and
a value not of its field's type, and :func:`table_csv` writes them as pandas writes a frame (an empty cell
for NaN and None, an int column with blanks as floats): the mechanism stages' tables (the cliff, dilution,
L0, dilution controls and length protocol's, under ``docs/reproduce_paper/mechanisms/``) were committed in
that format, and it is kept byte for byte. :func:`frame` is the way back to a DataFrame.

The metrics log (``metrics.jsonl``) is a JSON line per event, not a CSV: :class:`MetricsRecord` is one
line, :class:`MetricsLog` the whole log, both read and written here alone.

Thresholds defined once: :data:`GAMMA` (the purity threshold of the paper's Fig. 2C), :data:`GAMMAS`
(the two of Fig. 7) and :data:`SOLVED` (an accuracy "reaches 0.9", :func:`first_step_at`); the swap
temperature is :data:`possym.scores.metric.TAU`.

Example:
    >>> row = ScoreRecord(step=50, query="last", layer=0, head=0, s_pos=0.9, s_sym=0.1, entropy=1.5, n_inputs=100)
    >>> row.to_csv()["s_pos"], ScoreRecord.from_csv(row.to_csv()) == row
    ('0.9', True)
    >>> text = records_csv([row]); read_records_text(text, ScoreRecord) == [row]
    True
"""

from __future__ import annotations

import csv
import dataclasses
import io
import math
import types
import typing
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Self, TypeVar

from possym.errors import RecordError

if TYPE_CHECKING:
    import pandas as pd

GAMMAS: tuple[float, ...] = (0.1, 0.05)  # the purity thresholds of the paper's Fig. 7
GAMMA: float = GAMMAS[0]  # the one of Fig. 2C and of every "pure" claim
# An accuracy at or above this is learned: "reaches 0.9" (the hop order and learning speed of Sec. 3.2-3.3,
# a canonical cell solved, a sweep's steps_to_90).
SOLVED: float = 0.9

R = TypeVar("R", bound="Record")


def _parser(annotation: Any) -> tuple[type, bool]:
    """(the scalar type, whether an empty cell means None) of a field annotation."""
    args = typing.get_args(annotation)
    if typing.get_origin(annotation) in (types.UnionType, typing.Union):
        scalars = [a for a in args if a is not type(None)]
        if len(scalars) != 1:
            raise TypeError(f"record fields take X or X | None, not {annotation}")
        return scalars[0], type(None) in args
    return annotation, False


def _parse(text: str, kind: type, optional: bool, where: str) -> Any:
    if optional and text in ("", "None"):
        return None
    try:
        if kind is bool:
            if text not in ("True", "False"):
                raise ValueError(text)
            return text == "True"
        if kind is int:
            return int(float(text)) if text.endswith(".0") else int(text)
        if kind is float and text == "":
            return math.nan  # pandas writes NaN as an empty cell
        return kind(text)
    except ValueError:
        raise RecordError(f"{where}: {text!r} is not {'an' if kind is int else 'a'} {kind.__name__}") from None


@dataclass(frozen=True)
class Record:
    """Base of every row type; subclasses are frozen dataclasses whose fields are the CSV's columns."""

    _types: ClassVar[dict[str, tuple[type, bool]]]
    # field -> its column's name, where the name is no identifier (learning.csv's first_step_0.9)
    _column_names: ClassVar[dict[str, str]] = {}

    @classmethod
    def columns(cls) -> tuple[str, ...]:
        return tuple(cls._column_names.get(f.name, f.name) for f in dataclasses.fields(cls))

    @classmethod
    def _field_types(cls) -> dict[str, tuple[type, bool]]:
        if "_types" not in cls.__dict__:  # per class, resolved once: the annotations are strings here
            hints = typing.get_type_hints(cls)
            cls._types = {f.name: _parser(hints[f.name]) for f in dataclasses.fields(cls)}
        return cls._types

    @classmethod
    def from_csv(cls, row: Mapping[str, str]) -> Self:
        """Parse one CSV row (all strings); a missing column takes the field's default, or is an error."""
        unknown = sorted(set(row) - set(cls.columns()))
        row = {field: row[column] for field, column in zip(cls._field_types(), cls.columns(), strict=True)
               if column in row}
        if unknown:
            raise RecordError(f"{cls.__name__}: unknown column(s) {unknown}; known: {list(cls.columns())}")
        values = {}
        for name, (kind, optional) in cls._field_types().items():
            if name in row:
                values[name] = _parse(row[name], kind, optional, f"{cls.__name__}.{name}")
        try:
            return cls(**values)
        except TypeError as exc:
            raise RecordError(f"{cls.__name__}: {exc}; columns are {list(cls.columns())}") from None

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        """From a record the library computed (a dict with these keys; unknown keys are an error)."""
        unknown = sorted(set(data) - set(cls.columns()))
        if unknown:
            raise RecordError(f"{cls.__name__}: unknown field(s) {unknown}; known: {list(cls.columns())}")
        return cls(**data)

    def to_csv(self) -> dict[str, str]:
        """One CSV row: None as an empty cell, floats as repr (they read back bit for bit)."""
        return {k: "" if v is None else repr(v) if isinstance(v, float) else str(v)
                for k, v in zip(self.columns(), self.to_dict().values(), strict=True)}

    def named(self) -> dict[str, Any]:
        """The row by its columns' names, typed, a blank cell as "" (a table on a page)."""
        return {k: "" if v is None else v for k, v in zip(self.columns(), self.to_dict().values(), strict=True)}

    def to_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}


def records_csv(rows: Sequence[Record]) -> str:
    """The CSV text of ``rows`` (all of one type): a header of its columns, then one line per row."""
    buf = io.StringIO()
    if rows:
        writer = csv.DictWriter(buf, fieldnames=list(type(rows[0]).columns()), lineterminator="\n")
        writer.writeheader()
        writer.writerows(r.to_csv() for r in rows)
    return buf.getvalue()


def read_records_text(text: str, kind: type[R]) -> list[R]:
    return [kind.from_csv(r) for r in csv.DictReader(io.StringIO(text))]


def read_records(path: Path, kind: type[R]) -> list[R]:
    """Every row of ``path`` as ``kind``; a missing file reads as no rows."""
    path = Path(path)
    if not path.is_file():
        return []
    try:
        return read_records_text(path.read_text(), kind)
    except RecordError as exc:
        raise RecordError(f"{path}: {exc}") from None


def frame(rows: Iterable[Record], kind: type[Record] | None = None) -> pd.DataFrame:
    """A DataFrame of ``rows`` with the record's columns (also when there are none)."""
    import pandas as pd

    rows = list(rows)
    columns = list((kind or (type(rows[0]) if rows else Record)).columns())
    return pd.DataFrame([r.to_dict() for r in rows], columns=columns)


def _value(value: Any, kind: type, optional: bool, where: str) -> Any:
    """One DataFrame cell as its field's type: a numpy scalar as Python's, NaN as None where the field allows it."""
    value = value.item() if hasattr(value, "item") else value
    if value is None or (isinstance(value, float) and math.isnan(value)):
        if optional or kind is float:
            return None if optional else math.nan
        raise RecordError(f"{where}: a blank cell, and the field is not optional")
    if optional and kind is int and isinstance(value, float) and value.is_integer():
        return int(value)  # pandas holds an int column with blanks as floats
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
        raise RecordError(f"{where}: {value!r} is not {'an' if kind is int else 'a'} {kind.__name__}")
    return value


def records_of(table: pd.DataFrame, kind: type[R], name: str = "") -> list[R]:
    """The rows of ``table``, a DataFrame a library computed, as records of ``kind``; ``name`` (the file) names
    the table in errors.

    Its columns are the record's, in the record's order (one whose field has a default may be absent, as in
    :meth:`Record.from_csv`); a column the record does not know, one it needs, a column out of order and a value
    not of its field's type are each a RecordError naming the table and the column. An empty frame without
    columns (pandas's ``DataFrame()``) is no rows.

    >>> import pandas as pd
    >>> table = pd.DataFrame({"gamma": [0.1], "step": [50], "positional": [2], "symbolic": [1]})
    >>> rows = records_of(table, TallyRecord); rows
    [TallyRecord(gamma=0.1, step=50, positional=2, symbolic=1)]
    >>> frame(rows, TallyRecord).equals(table), table_csv(table, TallyRecord) == table.to_csv(index=False)
    (True, True)
    >>> records_of(table.assign(level=0.95), TallyRecord, "purity_tally.csv")
    Traceback (most recent call last):
    possym.errors.RecordError: purity_tally.csv: columns [...] are not TallyRecord's [...] (unknown: ['level'])
    """
    where, have, columns = name or kind.__name__, [str(c) for c in table.columns], kind.columns()
    if not have and table.empty:
        return []
    needed = [f.name for f in dataclasses.fields(kind)
              if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
    wrong = {"unknown": [c for c in have if c not in columns], "missing": [c for c in needed if c not in have],
             "out of order": [] if [c for c in have if c in columns] == [c for c in columns if c in have] else have}
    if any(wrong.values()):
        said = "; ".join(f"{k}: {v}" for k, v in wrong.items() if v)
        raise RecordError(f"{where}: columns {have} are not {kind.__name__}'s {list(columns)} ({said})")
    types = kind._field_types()
    return [kind(**{c: _value(v, *types[c], f"{where}.{c}") for c, v in zip(have, values, strict=True)})
            for values in table.itertuples(index=False, name=None)]


def table_csv(table: pd.DataFrame, kind: type[Record], name: str = "") -> str:
    """The CSV text of ``table`` through ``kind`` (:func:`records_of` checks it), as pandas writes the records'
    frame (module docstring): the mechanism stages' file format."""
    return frame(records_of(table, kind, name), kind).to_csv(index=False)


_SPEC_TYPES: dict[str, type] = {"int": int, "float": float, "str": str, "bool": bool}


def table_record(name: str, columns: str) -> type[Record]:
    """The row type of a table that code writes and never reads back by field, from its spec line, ``"column:type
    ..."`` (each type ``int``, ``float``, ``str`` or ``bool``; ``?`` after it: a blank cell is None): it owns the
    table's columns and parsing as a record class does (:func:`table_csv` checks a frame against it, :func:`frame`
    reads it back), with no class written out. ``name`` (the file) names it in errors.

    >>> Hops = table_record("cliff/accuracy_hops.csv", "extra:int n_hops:int accuracy:float first:int?")
    >>> Hops.__name__, Hops.columns()
    ('CliffAccuracyHops', ('extra', 'n_hops', 'accuracy', 'first'))
    >>> Hops(extra=5, n_hops=1, accuracy=0.5, first=None).to_csv()
    {'extra': '5', 'n_hops': '1', 'accuracy': '0.5', 'first': ''}
    >>> table_record("x.csv", "extra:integer")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    possym.errors.RecordError: x.csv: column extra:integer; a type is one of ['int', 'float', 'str', 'bool'], ...
    """
    fields: list[tuple[str, Any]] = []
    for item in columns.split():
        column, _, kind = item.partition(":")
        if kind.rstrip("?") not in _SPEC_TYPES or not column.isidentifier():
            raise RecordError(f"{name}: column {item}; a type is one of {list(_SPEC_TYPES)}, ? after it for a blank "
                              "cell")
        scalar = _SPEC_TYPES[kind.rstrip("?")]
        fields.append((column, scalar | None if kind.endswith("?") else scalar))
    words = name.removesuffix(".csv").replace("/", "_").split("_")
    return dataclasses.make_dataclass("".join(w.capitalize() for w in words), fields, bases=(Record,), frozen=True,
                                      namespace={"__doc__": f"A row of {name}: {columns}"})


# ---- the row types ------------------------------------------------------------------------------


@dataclass(frozen=True)
class ScoreRecord(Record):
    """One head's mean scores over the scored inputs at one checkpoint and query (``scores.csv``).

    ``entropy_norm`` is the entropy min–max normalised per (layer, head, query) across the run's steps
    (paper App. E), so it exists only once every step is scored.
    """

    step: int
    query: str
    layer: int
    head: int
    s_pos: float
    s_sym: float
    entropy: float
    n_inputs: int
    entropy_norm: float | None = None
    # The spread over the inputs (possym.scores.spread): sd of the per-input scores and the bootstrap
    # 95% interval of the mean. Blank in files scored before they were recorded.
    s_pos_sd: float | None = None
    s_pos_low: float | None = None
    s_pos_high: float | None = None
    s_sym_sd: float | None = None
    s_sym_low: float | None = None
    s_sym_high: float | None = None


@dataclass(frozen=True)
class LearningRecord(Record):
    """How one seed learned, per accuracy key (``all``, ``hop1``, ...; ``learning.csv``): the first evaluated step at
    which the accuracy reached :data:`SOLVED` (its column ``first_step_0.9``; blank: never), the final test accuracy
    (blank: no final record) and the training's wall-clock minutes from the run's own timestamps (blank: none)."""

    _column_names: ClassVar[dict[str, str]] = {"first_step": f"first_step_{SOLVED}"}

    task: str
    seed: int
    accuracy: str
    first_step: int | None
    final_test: float | None
    train_minutes: float | None


@dataclass(frozen=True)
class FinalScoreRecord(Record):
    """One seed's layer at its last scored step, as a reproduction commits it (``final_scores.csv``): the
    last-token scores of head ``head`` and its purity there (``pure``: the kind, "" if mixed)."""

    task: str
    seed: int
    step: int
    layer: int
    head: int
    s_pos: float
    s_sym: float
    pure: str = ""


@dataclass(frozen=True)
class PurityRecord(Record):
    """One head's first passage to purity at threshold γ (``purity.csv``); ``step`` None: never pure.

    ``final_kind`` is its purity at the last scored step and ``final_kind_step`` the first step pure of
    that kind; ``best_step`` is the run's best step (the paper's dashed line).
    """

    layer: int
    head: int
    query: str
    gamma: float
    kind: str
    step: int | None
    final_kind: str
    final_kind_step: int | None
    best_step: int | None = None
    # Whether the last step's interval box (possym.scores.dynamics.purity_kinds) admits another verdict
    # than final_kind; blank when the scores carry no intervals.
    final_straddles: bool | None = None


@dataclass(frozen=True)
class TallyRecord(Record):
    """The cumulative count of heads pure of each kind at ``step`` (``purity_tally.csv``; Fig. 2C, 7)."""

    gamma: float
    step: int
    positional: int
    symbolic: int


@dataclass(frozen=True)
class FrequencyUseRecord(Record):
    """How much one head uses RoPE plane ``frequency_id`` (1 = fastest) at ``step`` (``frequency_use.csv``; Fig. 8)."""

    step: int
    layer: int
    head: int
    frequency_id: int
    theta: float
    use: float


@dataclass(frozen=True)
class Table1Record(Record):
    """One head's weighted mean frequency ID, its frequency and the dominant ID (``table1.csv``; Table 1)."""

    step: int
    layer: int
    head: int
    weighted_id: float
    frequency_id: int
    frequency: float
    dominant_id: int


@dataclass(frozen=True)
class LengthRecord(Record):
    """Accuracy with ``extra`` tokens before the window, for ``n_hops`` (0: pooled) at checkpoint ``step``
    (``lengthgen.csv``; Fig. 5B). ``ci_*``: Wilson interval; ``cluster_*``: per-prefix t interval.

    ``step`` is the checkpoint measured.
    """

    extra: int
    n_hops: int
    seq_len: int
    accuracy: float
    n: int
    correct: int
    ci_low: float
    ci_high: float
    n_prefixes: int
    prefix_sd: float
    cluster_low: float
    cluster_high: float
    mode: str
    step: int | None = None


@dataclass(frozen=True)
class ClaimRecord(Record):
    """One of the paper's claims against ours (``claims.csv``), graded by its entry in ``possym/data/claims.yaml``
    (:mod:`possym.report.grading`).

    ``ours`` is what the rule graded, in words; ``per_seed`` our value at each seed, in seed order, and ``seeds``
    those seeds (``0,1,2``); ``step`` the checkpoint each seed's number comes from (e.g. ``best 4800``). A number
    also carries ``paper_value`` and the seeds' ``seed_mean``, ``seed_sd`` (blank for one seed), ``seed_min``,
    ``seed_max``; ``p_value``, the paper's value as one more draw of our seeds; ``percentile``, its place in our
    predictive distribution; ``gap`` = paper − our mean with its 90% interval ``gap_low``..``gap_high`` (the
    equivalence test's) and the claim's ``margin``. ``power``: what the evidence could have detected (the rule's
    simulated power at these seeds). ``seed_verdicts``: each seed graded alone by its own interval; ``reading``: the
    graded reading; ``readings``: the verdict under every reading; ``robustness``: ``robust`` when they agree,
    ``reading-dependent`` when not, ``unresolved`` when a nuisance decides; ``evidence``: what the seeds' purity
    rests on (intervals, persistence, point estimates). ``kind``: ``empirical``, ``finding`` (ours, beyond the
    paper's text, in the tally) or ``verification``. Verdicts: :data:`possym.report.rules.VERDICTS`.
    """

    claim: str
    section: str
    paper: str
    ours: str
    verdict: str
    rule: str
    step: str = ""
    per_seed: str = ""
    seeds: str = ""
    paper_value: float | None = None
    seed_mean: float | None = None
    seed_sd: float | None = None
    seed_min: float | None = None
    seed_max: float | None = None
    seed_verdicts: str = ""
    seed_verdict_counts: str = ""
    p_value: float | None = None
    paper_uncertainty: str = ""
    reading: str = ""
    readings: str = ""
    robustness: str = ""
    kind: str = "empirical"
    id: str = ""
    margin: float | None = None
    percentile: float | None = None
    gap: float | None = None
    gap_low: float | None = None
    gap_high: float | None = None
    power: str = ""
    evidence: str = ""


@dataclass(frozen=True)
class LengthSeedRecord(Record):
    """One seed's pooled accuracy at +``extra`` tokens at the ``best`` or ``final`` checkpoint, kept where the
    seed's whole curve is not (``length_seeds.csv``): its interval and where it was measured (``source``)."""

    task: str
    seed: int
    extra: int
    checkpoint: str
    accuracy: float
    low: float
    high: float
    source: str


@dataclass(frozen=True)
class ProtocolValueRecord(Record):
    """One seed's value of a length claim under one reading of the length protocol: what the extra tokens
    are, the hop mix, the checkpoint and the x-axis (``length_protocol/values.csv``, written by
    :func:`possym.report.length_protocol.length_claim_values`). ``value`` is an accuracy, or for the
    ordering claim the share of lengths it holds at; ``paper`` and ``at_extra`` are empty for the ordering.
    ``seed`` is empty, and ``source`` says why, where a value was recovered without its seed (three seeds'
    values follow exactly from a table's mean, minimum and maximum, but not which seed gave the middle one)."""

    extra_tokens: str
    hop_mix: str
    checkpoint: str
    x_axis: str
    claim: str
    seed: int | None
    value: float
    low: float
    high: float
    paper: float | None = None
    at_extra: int | None = None
    source: str = ""


@dataclass(frozen=True)
class WitnessRecord(Record):
    """Heads run on one swap pair of Remark 3.1 (``witnesses.csv``): two inputs that differ by a swap of two
    positions, the function's answers on each, and how the heads fared (``right_on_both``: how many were right on
    both inputs); ``max_difference`` is the largest difference between the head's outputs on the two inputs
    (empty for a construction, whose outputs are named in ``difference_of``). The ``retrieval (scope)`` row runs
    one head on every proper input instead (``right_on_a`` of ``right_on_b`` exact)."""

    function: str
    input_a: str
    input_b: str
    expected_a: str
    expected_b: str
    head: str
    max_difference: float | None
    difference_of: str
    right_on_a: int
    right_on_b: int
    right_on_both: int


@dataclass(frozen=True)
class VerificationRecord(Record):
    """One construction of Theorem 3.1 run through the model code against its oracle (``verification.csv``,
    and ``violations.csv`` for the settings that break the theorem's conditions). ``ok``: as expected."""

    function: str
    setting: str
    theta: float
    n_letters: int
    n_ints: int
    length: int
    inputs: str
    attention: str
    beta: float | None
    expect: str
    n_sequences: int
    n_positions: int
    n_failed: int
    first_failing_length: int | None
    min_gap: float | None
    example_failure: str
    ok: bool


@dataclass(frozen=True)
class BoundCheckRecord(Record):
    """Where one of Theorem 3.2's bounds holds, per (function, definition, domain) (``bounds.csv``)."""

    function: str
    definition: str
    domain: str
    theta: float
    n_range: str
    premise_range: str
    n_checked: int
    n_failed: int
    first_fail: int | None
    fail_ranges: str
    last_fail: int | None
    max_ratio: float | None
    n_failed_outside: int


@dataclass(frozen=True)
class Fig5aRecord(Record):
    """Theorem 3.2's bound for ``function`` at input length ``n`` (``fig5a.csv``; the paper's Fig. 5A)."""

    function: str
    theta: float
    n: int
    bound: float


@dataclass(frozen=True)
class HopFlowRecord(Record):
    """Fig. 3 over many inputs: at the hop query ``depth`` hops from the answer (1: the hop that lands on the answer;
    ``n_hops``: the last token), how often layer ``layer``'s attention (head 0) is largest on the next position of
    the hop path, over ``n_inputs`` correctly solved ``n_hops``-hop inputs, and its mean attention there
    (``hop_flow.csv``; checkpoint ``step``)."""

    task: str
    seed: int
    step: int
    n_hops: int
    depth: int
    layer: int
    n_inputs: int
    on_next: float
    attention: float


@dataclass(frozen=True)
class PlaneGeometryRecord(Record):
    """Fig. 4B for one input: layer ``layer``'s keys and last-token query on the input's dominant RoPE plane
    (``plane_geometry.csv``; checkpoint ``step``). ``key_alignment``: the length of the mean of the unit pre-RoPE
    keys k_0..k_q (1: all aligned, as in T_Index); ``pointed``: the offset the last token's number asks for;
    ``plane_argmax``: the offset δ whose key the plane's partial logit (R_δ q)·k_{q−δ} favours;
    ``head_argmax``: the offset of the head's attention maximum; ``aim_error``: the angle, wrapped to [0, π], between
    the query rotated by the asked-for offset, R_σ q, and the keys' mean direction (T_Index: 0). Where θ turns the
    plane through more than 2π over the input, an offset about 2π/θ away can face the keys as well (an alias), so
    that the plane's argmax can miss an offset the query is aimed at."""

    task: str
    seed: int
    step: int
    layer: int
    sample: int
    frequency_id: int
    theta: float
    key_alignment: float
    pointed: int
    plane_argmax: int
    head_argmax: int
    aim_error: float = float("nan")


@dataclass(frozen=True)
class DiscrepancyHeadRecord(Record):
    """The top-minus-second attention score of one trained head over ``n_samples`` inputs with ``extra``
    tokens, at checkpoint ``step`` (``theory/discrepancy_heads.csv``): its mean, median, deciles and range."""

    layer: int
    head: int
    extra: int
    n_samples: int
    mean: float
    median: float
    q10: float
    q90: float
    min: float
    max: float
    task: str
    step: int


@dataclass(frozen=True)
class DiscrepancyAccuracyRecord(Record):
    """The model's accuracy on the same inputs (``theory/discrepancy_accuracy.csv``)."""

    extra: int
    n_samples: int
    accuracy: float
    task: str
    step: int


@dataclass(frozen=True)
class DiscrepancySummaryRecord(Record):
    """Per layer (head 0): where its median gap collapses below half its first value, where accuracy
    breaks, and their Spearman correlation over the extras (``theory/discrepancy_summary.csv``)."""

    layer: int
    median_at_first_extra: float
    median_at_last_extra: float
    collapse_extra: int | None
    accuracy_break_extra: int | None
    spearman: float
    task: str
    step: int


@dataclass(frozen=True)
class HeadScoreRecord(Record):
    """One head of a pretrained LM on the prompts of ``task`` (``head_scores.csv`` of ``possym heads``): the row of
    :meth:`possym.scores.swaps.HeadScores.records`: means, sds and bootstrap 95% intervals over the prompts, and
    TransformerLens's head detectors (:data:`possym.heads.detectors.HEAD_NAMES`). A file written before the
    intervals were (its prompt count in a column ``n``) reads with blank intervals."""

    task: str
    layer: int
    head: int
    kv_head: int
    s_pos: float
    s_sym: float
    entropy: float
    n_inputs: int
    s_pos_sd: float
    s_pos_low: float | None
    s_pos_high: float | None
    s_sym_sd: float
    s_sym_low: float | None
    s_sym_high: float | None
    previous_token_head: float
    duplicate_token_head: float
    induction_head: float

    @classmethod
    def from_csv(cls, row: Mapping[str, str]) -> Self:
        if "n" in row and "n_inputs" not in row:  # the column's name before the intervals came
            row = {"n_inputs" if k == "n" else k: v for k, v in row.items()}
            row = {**row, **{f"{s}_{end}": "" for s in ("s_pos", "s_sym") for end in ("low", "high")}}
        return super().from_csv(row)


@dataclass(frozen=True)
class HeadFrequencyRecord(Record):
    """s_POS, s_SYM of one head's projection on RoPE plane ``frequency_id`` (``frequency_scores.csv``)."""

    layer: int
    head: int
    frequency_id: int
    theta: float
    s_pos: float
    s_sym: float


def points_at(points: Sequence[LengthRecord], step: int) -> list[LengthRecord]:
    """The length-curve points measured at checkpoint ``step``."""
    return [p for p in points if p.step == step]


def first_step_at(curve: Iterable[tuple[int, float | None]], threshold: float = SOLVED) -> int | None:
    """The first step of ``curve`` ((step, value) pairs in any order; a value of None: not measured there)
    whose value reaches ``threshold`` (value >= threshold), or None where none does.

    >>> first_step_at([(100, 0.97), (0, 0.1), (50, 0.95)]), first_step_at([(0, None), (50, 0.5)])
    (50, None)
    """
    return min((step for step, value in curve if value is not None and value >= threshold), default=None)


EVENTS = ("eval", "final")  # an evaluation during training; the final test
_HOP = "acc_hop"  # a line's per-hop accuracies are acc_hop1, acc_hop2, ...


@dataclass(frozen=True)
class MetricsRecord:
    """One line of a run's ``metrics.jsonl``: an evaluation during training (``event="eval"``, on
    validation rows) or the final test (``event="final"``), after optimiser step ``step``.

    ``accuracy`` is over every hop count and ``hops`` maps h to the accuracy on the h-hop inputs (the
    line's ``acc_hop{h}``); ``loss`` is the mean cross-entropy. ``time`` is the wall clock when it was
    logged (seconds since the epoch), ``eval_s`` and ``monitor_s`` the seconds the evaluation and the live
    score monitor took, ``scores`` the monitor's rows; ``precision`` and ``device`` say what the final
    test ran on; ``identity`` is the run's that wrote it (:func:`possym.runs.identity_of`; None in a log
    written before identities). A line with a key not named here is refused, so none is dropped on a round trip.

    >>> line = {"event": "eval", "step": 50, "split": "val", "accuracy": 0.5, "acc_hop1": 0.75, "loss": 1.2}
    >>> r = MetricsRecord.from_json(line); r.hops, r.accuracies(), r.to_json() == line
    ({1: 0.75}, {'acc_hop1': 0.75, 'accuracy': 0.5}, True)
    """

    event: str
    step: int
    accuracy: float
    hops: Mapping[int, float] = field(default_factory=dict)
    loss: float | None = None
    split: str | None = None
    time: float | None = None
    eval_s: float | None = None
    monitor_s: float | None = None
    scores: tuple[Mapping[str, Any], ...] | None = None
    precision: str | None = None
    device: str | None = None
    identity: str | None = None

    def __post_init__(self) -> None:
        if self.event not in EVENTS:
            raise RecordError(f"metrics record event={self.event!r}; allowed: {EVENTS}")

    @classmethod
    def from_json(cls, line: Mapping[str, Any]) -> MetricsRecord:
        """A record from one line of the log, parsed as JSON; a missing or mistyped key is a RecordError."""
        data = dict(line)
        hops = {int(k[len(_HOP):]): float(data.pop(k)) for k in list(data) if k.startswith(_HOP)}
        known = [f.name for f in dataclasses.fields(cls) if f.name != "hops"]
        unknown = sorted(set(data) - set(known))
        if unknown:
            raise RecordError(f"metrics record: unknown key(s) {unknown}; known: {known} and {_HOP}H")
        missing = [k for k in ("event", "step", "accuracy") if k not in data]
        if missing:
            raise RecordError(f"metrics record: no {', '.join(map(repr, missing))}; a line holds event, step and "
                              "accuracy")
        try:
            numbers: dict[str, float | None] = {k: None if data.get(k) is None else float(data[k])
                       for k in ("accuracy", "loss", "time", "eval_s", "monitor_s") if k in data}
            values: dict[str, Any] = {**data, **numbers, "step": int(data["step"]), "hops": hops,
                                      "scores": None if data.get("scores") is None else tuple(data["scores"])}
            return cls(**values)
        except (TypeError, ValueError) as exc:
            raise RecordError(f"metrics record: {exc}") from None

    def to_json(self) -> dict[str, Any]:
        """The line as written: the keys that are set, the hops as ``acc_hop{h}``."""
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name == "hops":
                out |= {f"{_HOP}{h}": a for h, a in sorted(value.items())}
            elif f.name == "scores" and value is not None:
                out["scores"] = [dict(row) for row in value]
            elif value is not None:
                out[f.name] = value
        return out

    def accuracies(self) -> dict[str, float]:
        """Every accuracy of the line by its key: ``acc_hop{h}`` per hop count, then ``accuracy`` (all hops)."""
        return {**{f"{_HOP}{h}": a for h, a in sorted(self.hops.items())}, "accuracy": self.accuracy}


@dataclass(frozen=True)
class MetricsLog:
    """A run's metrics log, in the order it was written: its evaluations, then the final test once
    training ended (:meth:`possym.runs.RunDir.metrics_log`).

    >>> log = MetricsLog.from_json([{"event": "eval", "step": s, "accuracy": a, "acc_hop1": a}
    ...                             for s, a in ((0, 0.1), (50, 0.9), (100, 0.9), (150, 0.8))])
    >>> log.first_step(), log.first_step("acc_hop1", 0.95), log.best_step([0, 50, 100, 150]), log.finished
    (50, None, 50, False)
    """

    records: tuple[MetricsRecord, ...] = ()

    @classmethod
    def from_json(cls, lines: Iterable[Mapping[str, Any]]) -> MetricsLog:
        return cls(tuple(MetricsRecord.from_json(line) for line in lines))

    def to_json(self) -> list[dict[str, Any]]:
        return [r.to_json() for r in self.records]

    def __iter__(self) -> Iterator[MetricsRecord]:
        return iter(self.records)

    def __len__(self) -> int:
        return len(self.records)

    @property
    def evals(self) -> tuple[MetricsRecord, ...]:
        """The evaluations during training, by step."""
        return tuple(sorted((r for r in self.records if r.event == "eval"), key=lambda r: r.step))

    @property
    def final(self) -> MetricsRecord | None:
        """The final test, or None while training has not ended."""
        return next((r for r in reversed(self.records) if r.event == "final"), None)

    @property
    def finished(self) -> bool:
        return self.final is not None

    def curve(self, key: str = "accuracy") -> list[tuple[int, float | None]]:
        """(step, accuracy ``key``) over the evaluations; ``key`` is ``accuracy`` or ``acc_hop{h}`` (None
        where an evaluation lacks that hop count)."""
        return [(r.step, r.accuracies().get(key)) for r in self.evals]

    def first_step(self, key: str = "accuracy", threshold: float = SOLVED) -> int | None:
        """The first evaluated step at which accuracy ``key`` reaches ``threshold`` (:func:`first_step_at`)."""
        return first_step_at(self.curve(key), threshold)

    def first_steps(self, threshold: float = SOLVED) -> dict[str, int | None]:
        """:meth:`first_step` of every accuracy key the evaluations carry: ``acc_hop{h}`` by h, then ``accuracy``."""
        keys = [f"{_HOP}{h}" for h in sorted({h for r in self.evals for h in r.hops})] + ["accuracy"]
        return {k: self.first_step(k, threshold) for k in keys}

    def best_step(self, steps: Iterable[int]) -> int | None:
        """The earliest step of ``steps`` (the checkpoints) at the maximum validation accuracy over all
        hops, as HF Trainer's ``load_best_model_at_end`` picks it (``metric_for_best_model="accuracy"``:
        ties go to the earliest, as Trainer keeps the first checkpoint that reached the best value);
        None where no evaluation has a checkpoint."""
        have = set(steps)
        evals = [(r.step, r.accuracy) for r in self.evals if r.step in have]
        top = max((a for _, a in evals), default=None)
        return min((s for s, a in evals if a == top), default=None)
