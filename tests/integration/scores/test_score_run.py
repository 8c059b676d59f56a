"""``possym score`` on a freshly trained run, and the live monitor inside the training loop."""

from __future__ import annotations

import math

import torch

from possym.cli import main
from possym.config import load_config
from possym.runs import RunDir, read_csv
from possym.scores.checkpoints import hop_queries, score_inputs
from possym.scores.monitor import monitor_scores
from possym.scores.swap_and_rerun import reference_head_scores
from possym.scores.swaps import head_scores
from possym.stages.memo import run_memo
from possym.tasks import make_splits
from possym.train.loop import train


def test_score_cli_writes_scores_purity_frequency_and_figures(tmp_path, tiny_overrides, capsys):
    run = RunDir.create(tmp_path / "run", load_config("number", None, tiny_overrides), argv=["test"])
    train(run, make_splits(run.config.task, 0), monitor=monitor_scores)
    logged = [r for r in run.metrics() if r.get("event") == "eval"]
    assert all(len(r["scores"]) == 2 and r["monitor_s"] > 0 for r in logged)  # 2 layers x 1 head at every eval

    assert main(["score", str(run.path), "score.hops=true", "score.n_inputs=40", "score.threads=1"]) == 0
    rows = read_csv(run.path / "scores.csv")
    assert {"step", "layer", "head", "query", "s_pos", "s_sym", "entropy", "entropy_norm"} <= set(rows[0])
    assert sorted({int(r["step"]) for r in rows}) == run.checkpoint_steps() == [0, 10, 20, 30]
    assert {r["query"] for r in rows} == {"last", "hop1", "hop2", "hop3"}
    for r in rows:
        assert 0 <= float(r["s_pos"]) <= 1 + 1e-9 and 0 <= float(r["s_sym"]) <= 1 + 1e-9
        assert 0 <= float(r["entropy_norm"]) <= 1
    last = [r for r in rows if r["query"] == "last"]
    assert all(int(r["n_inputs"]) == 40 for r in last)
    # The monitor logged the same quantity, on other inputs: at step 0 both see near-uniform attention.
    assert all(math.isclose(s["s_sym"], 1.0, abs_tol=0.05) for s in logged[0]["scores"])

    purity = read_csv(run.path / "purity.csv")
    assert {(p["gamma"], p["layer"]) for p in purity} == {(g, str(l)) for g in ("0.1", "0.05") for l in (0, 1)}
    assert all(p["best_step"] != "" for p in purity)
    tally = read_csv(run.path / "purity_tally.csv")
    assert len(tally) == 2 * 4
    table = read_csv(run.path / "table1.csv")
    assert len(table) == 2 and all(1 <= int(t["dominant_id"]) <= 8 for t in table)  # d_head 16: 8 planes
    assert len(read_csv(run.path / "frequency_use.csv")) == 2 * 8
    assert len(read_csv(run.path / "plane_scores.csv")) == 2 * 8
    for stem in ("fig2_dynamics", "fig3_hop_attention", "fig4b_geometry", "fig6_scores", "fig7_purity",
                 "fig8_frequency_use", "fig6_scores_hop1"):
        for ext in ("png", "svg"):
            assert (run.path / "figures" / f"{stem}.{ext}").stat().st_size > 1000
    out = capsys.readouterr().out
    assert "max-accuracy step" in out and "s_pos" in out

    # A second call with the same settings re-uses every scored step.
    assert main(["score", str(run.path), "score.hops=true", "score.n_inputs=40", "score.figures=false",
                 "score.frequency=false"]) == 0
    assert "4 already scored" in capsys.readouterr().out
    assert read_csv(run.path / "scores.csv") == rows
    # Every score carries its spread over the 40 inputs.
    assert all(float(r["s_pos_low"]) <= float(r["s_pos"]) <= float(r["s_pos_high"]) for r in last)
    assert all(r["final_straddles"] in ("True", "False") for r in read_csv(run.path / "purity.csv"))

    # The authors' cosine is another setting: every step is scored again, and recorded as such.
    assert main(["score", str(run.path), "score.n_inputs=40", "score.figures=false", "score.frequency=false",
                 "score.cosine=torch"]) == 0
    assert "0 already scored" in capsys.readouterr().out
    assert run_memo(run.path).entry("score")["settings"]["cosine"] == "torch"
    assert main(["score", str(run.path), "score.cosine=cos"]) == 2
    assert "score cosine='cos' is not a cosine possym knows; allowed: ('exact', 'torch')" in capsys.readouterr().err


def test_engine_matches_the_reference_on_a_trained_runs_checkpoints(tmp_path, tiny_overrides):
    run = RunDir.create(tmp_path / "run", load_config("letter", None, tiny_overrides), argv=["test"])
    train(run, make_splits(run.config.task, 0))
    samples = score_inputs(run.config.task, run.config.seeds.data, n=12)
    tokens = torch.as_tensor(samples.tokens)
    for step in (0, run.checkpoint_steps()[-1]):
        model = run.load_model(step, dtype=torch.float64)
        for query in (None, hop_queries(samples, 1)):
            for block_size in (1, 2):
                fast = head_scores(model, tokens, query=query, block_size=block_size)
                slow = reference_head_scores(model, tokens, query=query, block_size=block_size)
                assert (fast.s_pos - slow.s_pos).nan_to_num().abs().max() <= 1e-6
                assert (fast.s_sym - slow.s_sym).nan_to_num().abs().max() <= 1e-6
