"""A run scored at the hop queries, exported with every checkpoint's scores and regraded from the tables alone."""

from __future__ import annotations

import yaml

from possym.config import load_config
from possym.experiment import run_stage
from possym.records import ScoreRecord, read_records
from possym.report.evidence import tables_evidence
from possym.report.replication import evidence, export_tables
from possym.runs import RunDir
from possym.stages.score import ScoreConfig
from possym.tasks import make_splits
from possym.train.loop import train


def test_exported_hop_query_scores_read_back_as_the_runs_onsets_and_stay_apart(tmp_path, tiny_overrides):
    run = RunDir.create(tmp_path / "runs" / "number-s0", load_config("number", None, tiny_overrides), argv=["t"])
    train(run, make_splits(run.config.task, 0))
    run_stage(run, "score", ScoreConfig(n_inputs=20, hops=True, frequency=False, figures=False, threads=1))
    spec = tmp_path / "experiment.yaml"
    spec.write_text(yaml.safe_dump({"preset": None, "tasks": ["number"], "seeds": [0], "overrides": tiny_overrides,
                                    "stages": {"score": {"n_inputs": 20, "hops": True}}}))
    out = export_tables([run], tmp_path / "tables", spec, every_checkpoint=True, figures=False)
    assert not list(out.glob("*.png"))

    exported = read_records(out / "number_s0_scores.csv", ScoreRecord)
    kept = run.read("scores", ScoreRecord)
    columns = ("step", "query", "layer", "s_pos", "s_sym", "s_pos_low", "s_pos_high", "s_sym_low", "s_sym_high")
    assert [tuple(getattr(r, c) for c in columns) for r in exported] == [
        tuple(getattr(r, c) for c in columns) for r in kept]  # the point estimates and their intervals, bit for bit
    assert any(r.s_pos_low is not None for r in exported)  # the intervals the structural claims read

    ev = tables_evidence(out)
    assert not ev.tasks and [te.seed for te in ev.hop_queries["number"]] == [0]  # kept apart from the seeds
    (te,) = ev.hop_queries["number"]
    live = evidence([], {"number": [run]}).seeds("number")[0]
    # One run, one summary: the exported tables give the measures what the run directory gives them.
    assert te.history == live.history and te.hop_history == live.hop_history and te.hop_history
    # Without `hops: true` in its experiment.yaml the same directory is a reproduction's seed.
    spec.write_text(yaml.safe_dump({"preset": None, "tasks": ["number"], "seeds": [0], "overrides": tiny_overrides}))
    (out / "experiment.yaml").write_text(spec.read_text())
    assert [te.seed for te in tables_evidence(out).seeds("number")] == [0]
