"""Row types: every record of every run artifact reads back what it wrote, bit for bit, and a row that
does not fit is refused with a message naming the columns."""

from __future__ import annotations

import dataclasses
import math
import typing

import pytest

from possym.errors import RecordError
from possym.records import (
    ClaimRecord,
    LengthRecord,
    Record,
    ScoreRecord,
    read_records_text,
    records_csv,
)
from possym.runs import ARTIFACTS

SAMPLES = {int: [0, -3, 6750], float: [0.1, 1 / 3, 1e-300, math.inf], str: ["last", "a, b", 'say "hi"'],
           bool: [True, False]}


def _rows(kind: type[Record]) -> list[Record]:
    """Three rows of ``kind``: every field a sample of its type, and each optional field None in the last."""
    hints = typing.get_type_hints(kind)
    rows = []
    for i in range(3):
        values = {}
        for f in dataclasses.fields(kind):
            args = [a for a in typing.get_args(hints[f.name]) if a is not type(None)] or [hints[f.name]]
            optional = type(None) in typing.get_args(hints[f.name])
            values[f.name] = None if optional and i == 2 else SAMPLES[args[0]][i % len(SAMPLES[args[0]])]
        rows.append(kind(**values))
    return rows


KINDS = sorted({a.record for a in ARTIFACTS.values() if a.record} | {ClaimRecord}, key=lambda k: k.__name__)


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.__name__)
def test_every_artifact_row_reads_back_what_it_wrote(kind):
    rows = _rows(kind)
    assert read_records_text(records_csv(rows), kind) == rows


def test_a_row_that_does_not_fit_is_refused_naming_the_columns():
    row = ScoreRecord(50, "last", 0, 0, 0.9, 0.1, 1.0, 100).to_csv()
    with pytest.raises(RecordError, match=r"unknown column\(s\) \['s_pos_typo'\]; known: \['step'"):
        ScoreRecord.from_csv({**row, "s_pos_typo": "1"})
    with pytest.raises(RecordError, match="ScoreRecord.step: 'fifty' is not an int"):
        ScoreRecord.from_csv({**row, "step": "fifty"})
    missing = {k: v for k, v in row.items() if k != "s_sym"}
    with pytest.raises(RecordError, match="s_sym"):
        ScoreRecord.from_csv(missing)


def test_a_file_written_before_a_column_existed_reads_its_default():
    old = "extra,n_hops,seq_len,accuracy,n,correct,ci_low,ci_high,n_prefixes,prefix_sd,cluster_low,cluster_high,mode\n"
    old += "0,0,40,0.5,8,4,0.2,0.8,2,nan,0.1,0.9,cached\n"
    (point,) = read_records_text(old, LengthRecord)
    assert point.step is None and math.isnan(point.prefix_sd) and point.correct == 4
