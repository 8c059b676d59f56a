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
    records_of,
    table_csv,
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


def test_a_dataframe_crosses_into_records_checked_and_is_written_as_pandas_writes_it():
    import pandas as pd

    table = pd.DataFrame({"layer": [0, 1], "head": 0, "kind": "symbolic", "gamma": 0.1, "min_run": 2,
                          "ever_point": [True, False], "longest_run": [3, 0], "first_sustained": [40, None],
                          "share_ever": [1.0, math.nan], "share_sustained": [0.97, 0.0], "counted": [True, False]})
    SustainedRecord = ARTIFACTS["l0_sustained"].record  # a spec line's row type  # noqa: N806
    rows = records_of(table, SustainedRecord)
    assert type(rows[0].layer) is int and rows[1].first_sustained is None and math.isnan(rows[1].share_ever)
    text = table_csv(table, SustainedRecord)
    assert text == table.to_csv(index=False) and "40.0" in text  # an int column with a blank, as pandas writes it
    back = read_records_text(text, SustainedRecord)  # an empty float cell reads as NaN
    assert back[0] == rows[0] and back[1].first_sustained is None and math.isnan(back[1].share_ever)
    with pytest.raises(RecordError, match=r"out of order"):
        records_of(table[["head", "layer", *table.columns[2:]]], SustainedRecord)
    with pytest.raises(RecordError, match=r"l0/sustained.csv.kind: 3 is not a str"):
        records_of(table.assign(kind=3), SustainedRecord, "l0/sustained.csv")
    assert records_of(pd.DataFrame(), SustainedRecord) == []  # pandas's empty frame, no columns: no rows


EVAL_LINE = {"event": "eval", "step": 50, "split": "val", "accuracy": 0.5, "loss": 1.25, "acc_hop1": 0.75,
             "acc_hop2": 0.25, "eval_s": 0.5, "time": 1764790000.125, "monitor_s": 0.25,
             "scores": [{"query": "last", "layer": 0, "head": 0, "s_pos": 0.9, "s_sym": 0.2, "entropy": 1.5}]}
FINAL_LINE = {"event": "final", "step": 100, "split": "test", "accuracy": 1.0, "acc_hop1": 1.0, "loss": 0.01,
              "precision": "bf16", "device": "cpu", "time": 1764790100.0}


def test_a_metrics_line_reads_back_as_it_was_written_and_its_log_answers_the_learning_questions():
    from possym.records import MetricsLog, MetricsRecord

    for line in (EVAL_LINE, FINAL_LINE):
        assert MetricsRecord.from_json(line).to_json() == line
    log = MetricsLog.from_json([{**EVAL_LINE, "step": 0, "accuracy": 0.1, "acc_hop1": 0.1}, EVAL_LINE, FINAL_LINE])
    assert [r.step for r in log.evals] == [0, 50] and log.final is not None and log.final.precision == "bf16"
    assert log.finished and log.first_step() is None and log.first_step("acc_hop1", 0.75) == 50
    assert log.best_step([0, 50]) == 50 and log.best_step([0]) == 0 and log.best_step([100]) is None
    assert not MetricsLog.from_json([EVAL_LINE]).finished


@pytest.mark.parametrize(("line", "says"), [({**EVAL_LINE, "lr": 1e-3}, r"unknown key\(s\) \['lr'\]"),
                                            ({"event": "eval", "step": 5}, "no 'accuracy'"),
                                            ({**EVAL_LINE, "event": "train"}, "allowed: \\('eval', 'final'\\)"),
                                            ({**EVAL_LINE, "accuracy": "high"}, "could not convert")])
def test_a_metrics_line_that_is_no_record_is_refused_naming_what_is_wrong(line, says):
    from possym.records import MetricsRecord

    with pytest.raises(RecordError, match=says):
        MetricsRecord.from_json(line)


def test_a_run_logs_only_lines_it_can_read_back_and_names_the_line_it_cannot(tmp_path):
    from possym.config import load_config
    from possym.errors import RunError
    from possym.records import MetricsRecord
    from possym.runs import METRICS, RunDir
    from possym.train import tracking

    run = RunDir.create(tmp_path / "run", load_config("number", "quick"))
    run.log(MetricsRecord.from_json(EVAL_LINE))
    with pytest.raises(RecordError, match="unknown key"):
        tracking.log(run, {**FINAL_LINE, "note": "x"})  # the trainer's lines are checked before they are written
    assert run.metrics() == [{**EVAL_LINE, "identity": run.identity}]  # the refused line was not written
    with open(run.path / METRICS, "a") as f:
        f.write('{"event": "final", "step": 100}\n{"event": "final", "step": 101, "accuracy": 1}\n')
    with pytest.raises(RunError, match=r"metrics.jsonl, line 2: metrics record: no 'accuracy'"):
        run.metrics_log()


def test_a_head_scores_csv_from_before_the_intervals_reads_with_blank_intervals():
    from possym.records import HeadScoreRecord, read_records_text

    old = ("task,layer,head,kv_head,s_pos,s_sym,entropy,n,s_pos_sd,s_sym_sd,previous_token_head,duplicate_token_head,"
           "induction_head\nbinding,0,1,0,0.9,0.2,1.5,100,0.1,0.05,0.3,0.0,0.1\n")
    (row,) = read_records_text(old, HeadScoreRecord)
    assert row.n_inputs == 100 and row.s_pos_low is None and row.induction_head == 0.1
