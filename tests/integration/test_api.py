"""The library API against the command line on one tiny trained run: the same tables, cached or not,
and `best` as the checkpoint HF Trainer would keep."""

from __future__ import annotations

import json
import re

import pandas as pd
import pytest
import torch

import possym
from possym.cli import main
from possym.errors import PossymError
from possym.evaluate.lengthgen import LengthGenConfig
from possym.experiment import run_stage
from possym.records import LengthRecord, ScoreRecord, frame, points_at, read_records
from possym.stages.lengthgen import LengthStageConfig
from possym.stages.memo import run_memo
from possym.stages.registry import get_stage


@pytest.fixture(scope="module")
def run(tmp_path_factory, tiny_session_overrides):
    cfg = possym.load_config("number", None, tiny_session_overrides)
    return possym.train_model(cfg, out=tmp_path_factory.mktemp("api") / "run", progress=False)


def test_best_is_the_earliest_checkpoint_at_the_maximum_validation_accuracy(run):
    evals = run.dir.metrics_log().evals
    top = max(m.accuracy for m in evals)
    assert run.step("best") == min(m.step for m in evals if m.accuracy == top)
    recorded = json.loads((run.path / "best.json").read_text())["step"]
    (run.path / "best.json").rename(run.path / "best.json.bak")  # an older run: derived from the log
    try:
        assert run.step("best") == recorded == run.dir.metrics_log().best_step(run.checkpoint_steps())
    finally:
        (run.path / "best.json.bak").rename(run.path / "best.json")
    with pytest.raises(possym.PossymError, match="available"):
        run.step(7)


def test_a_checkpoint_file_alone_gives_the_run_model(run):
    step = run.step("best")
    alone = possym.load_model(run.path / "checkpoints" / f"step_{step:06d}.safetensors")
    tokens = torch.randint(0, alone.cfg.d_vocab, (2, 12))
    assert torch.equal(alone(tokens), run.model(step="best")(tokens))


def test_api_scores_equal_what_the_cli_wrote_and_a_recomputation(run):
    assert main(["score", str(run.path), "score.n_inputs=6", "score.figures=false", "score.frequency=false",
                 "score.table_step=best"]) == 0
    written = read_records(run.path / "scores.csv", ScoreRecord)
    cached = run.scores(n_inputs=6, frequency=False)
    assert cached.to_dict("records") == [r.to_dict() for r in written]
    redone = run_stage(run.dir, "score", get_stage("score").settings_from({"n_inputs": 6, "frequency": False}),
                       redo=True)
    assert redone.ran and redone.steps == tuple(run.checkpoint_steps())
    pd.testing.assert_frame_equal(run.scores(n_inputs=6, frequency=False), cached)
    assert set(run.purity(gamma=0.05)["gamma"]) == {0.05}


def test_length_curves_at_best_and_final_share_one_cached_file(run, capsys):
    args = ["lengthgen", str(run.path), "lengthgen.grid=[0,5]", "lengthgen.n=4", "lengthgen.n_prefixes=2",
            "--no-figures"]
    assert main([*args, "lengthgen.steps=[best]"]) == 0 and main([*args, "lengthgen.steps=[final]"]) == 0
    assert run_memo(run.path).entry("lengthgen")["steps"] == sorted({run.step("best"), run.step("final")})
    curve = run.length_curve(grid=(0, 5), n=4, n_prefixes=2, step="best")
    assert set(curve["step"]) == {run.step("best")} and {"ci_low", "cluster_high"} <= set(curve.columns)
    cfg = LengthStageConfig(LengthGenConfig(grid=(0, 5), n=4, n_prefixes=2), steps=("best",))
    assert run_stage(run.dir, "lengthgen", cfg, redo=True).ran  # measured afresh equals read back
    pd.testing.assert_frame_equal(run.length_curve(grid=(0, 5), n=4, n_prefixes=2, step="best"), curve)
    assert run.length_curve(grid=(0, 5), n=4, n_prefixes=2, step="final").equals(
        frame(points_at(run.dir.read("lengthgen", LengthRecord), run.step("final")), LengthRecord))
    capsys.readouterr()
    with pytest.raises(SystemExit):  # argparse refuses it, naming what is allowed
        main(["export", str(run.path), "--step", "nope", "--out", "x"])
    assert "best or final" in capsys.readouterr().err


def test_a_long_measurement_shows_a_bar_over_its_work_unless_asked_not_to(run, capsys):
    run.length_curve(grid=(0, 7), n=4, n_prefixes=2, step="best", progress=False)
    assert "lengthgen" not in capsys.readouterr().err
    run.length_curve(grid=(0, 9), n=4, n_prefixes=2, step="best")
    assert re.search(r"lengthgen: +0%\|.*\| 0/32 ", capsys.readouterr().err)  # 4 inputs x 2 K x 4 hop counts
    run.scores(n_inputs=3, steps=(0,))
    assert re.search(r"score: +0%\|.*\| 0/1 ", capsys.readouterr().err)
    with pytest.raises(PossymError, match="progress='yes' must be True or False"):
        run.scores(progress="yes")


def test_a_corrupt_checkpoint_is_a_possym_error_that_names_the_file(tmp_path):
    import possym
    from possym.errors import RunError

    bad = tmp_path / "step_000010.safetensors"
    bad.write_bytes(b"\x08\x00\x00\x00\x00\x00\x00\x00{bad json")
    with pytest.raises(RunError, match="step_000010.safetensors is truncated or corrupt"):
        possym.load_model(bad)


def test_run_scores_and_length_curve_leave_the_callers_thread_count_as_they_found_it(run):
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        run.scores(n_inputs=4, figures=False, frequency=False, threads=1)
        assert torch.get_num_threads() == 2
        run.length_curve(grid=(0, 10), step="final", n=4, n_prefixes=2)
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)


def test_the_run_draws_its_own_figures_through_the_api(run):
    from matplotlib.figure import Figure

    fig = run.plot_scores(n_inputs=4, figures=False, frequency=False)
    assert isinstance(fig, Figure) and len(fig.axes) >= run.config.model.n_layers
    curve = run.plot_length_curve(grid=(0, 10), n=4, n_prefixes=2)
    assert isinstance(curve, Figure) and curve.axes[0].lines


def test_a_measured_length_curve_is_drawn_without_measuring_it_again(run, monkeypatch):
    measured = run.length_curve(grid=(0, 10), step="best", n=4, n_prefixes=2)

    def measure(*args, **kwargs):
        raise AssertionError("measured again")

    monkeypatch.setattr(possym.Run, "length_curve", measure)
    fig = run.plot_length_curve(curve=measured)
    drawn = {tuple(line.get_xdata()) for line in fig.axes[0].lines}
    assert tuple(float(k) for k in sorted(set(measured["extra"]))) in {tuple(map(float, x)) for x in drawn}
    with pytest.raises(PossymError, match="not both"):
        run.plot_length_curve(grid=(0, 10), curve=measured)


def test_head_detectors_sit_beside_the_scores_and_equal_transformer_lens_detect_head(run):
    pytest.importorskip("transformer_lens.head_detector", reason="TransformerLens 3.x (possym[tl3]) has detect_head")
    from transformer_lens.head_detector import detect_head

    from possym.heads.detectors import HEAD_NAMES
    from possym.scores.checkpoints import score_inputs
    from possym.tasks import task_vocab

    detectors = run.head_detectors(step="best", n_inputs=5, exclude_bos=True)
    both = run.scores(n_inputs=5, frequency=False).merge(detectors, on=["step", "layer", "head"])
    assert len(both) == len(detectors) == run.config.model.n_layers * run.config.model.n_heads
    ht = run.hooked_transformer(step="best")
    words = task_vocab(run.config.task).tokens
    tokens = score_inputs(run.config.task, run.config.seeds.data, 5, 0).tokens
    texts = [" ".join(words[t] for t in row) for row in tokens.tolist()]
    assert torch.equal(ht.to_tokens(texts).cpu(), torch.as_tensor(tokens))
    for name in HEAD_NAMES:
        theirs = detect_head(ht, texts, name, exclude_bos=True).flatten().tolist()
        assert detectors[name].tolist() == pytest.approx(theirs, abs=1e-6)
