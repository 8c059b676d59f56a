"""``possym canonical`` end to end on a tiny grid: files, claims in the report's format, and resuming."""

from __future__ import annotations

from pathlib import Path

import pytest

from possym.canonical.records import CellRecord, PositionRecord, WmaxRecord
from possym.cli import main
from possym.records import ClaimRecord, read_records
from possym.runs import RunDir

ARGS = ["canonical", "--quick", "experiment.tasks=[index,retrieval]", "experiment.variants=[band1,nope]",
        "train.steps=300"]


@pytest.fixture(scope="module")
def grid_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("canonical")
    assert main([*ARGS, "--out", str(out)]) == 0
    return out


def test_the_grid_writes_its_tables_figures_and_claims(grid_dir: Path) -> None:
    runs = read_records(grid_dir / "results.csv", CellRecord)
    assert sorted((r.task, r.condition) for r in runs) == [
        ("index", "band1"),
        ("index", "nope"),
        ("retrieval", "band1"),
        ("retrieval", "nope"),
    ]
    positions = read_records(grid_dir / "positions.csv", PositionRecord)
    assert {p.length for p in positions} == {8, 16, 32}
    assert read_records(grid_dir / "theorem7.csv", WmaxRecord)
    claims = read_records(grid_dir / "claims.csv", ClaimRecord)
    assert len({c.claim for c in claims}) == len(claims) == 12  # every claim, n/a where the grid lacks it
    assert {c.verdict for c in claims} <= {"match", "partial", "differs", "n/a"}
    for stem in ("fig_accuracy_by_band", "fig_accuracy_by_position", "fig_plane", "fig_theorem7_wmax"):
        assert (grid_dir / f"{stem}.png").stat().st_size > 0


def test_each_toy_head_is_an_ordinary_run_directory(grid_dir: Path) -> None:
    run = RunDir.open(grid_dir / "runs" / "band1-index-s0")
    cfg = run.config
    assert (cfg.task.name, cfg.model.n_layers, cfg.model.mlp, cfg.model.freq_gate) == ("index", 1, False, "0@1-2")
    assert any(r.get("event") == "final" for r in run.metrics())


def test_a_nope_head_cannot_do_index_but_does_retrieval(grid_dir: Path) -> None:
    acc = {(r.task, r.condition): r.acc for r in read_records(grid_dir / "results.csv", CellRecord)}
    assert acc[("index", "nope")] < 0.2  # a NoPE one-layer head is permutation-invariant: no better than a guess
    assert acc[("retrieval", "nope")] > acc[("index", "nope")]


def test_rerunning_resumes_without_training_again(grid_dir: Path) -> None:
    ckpt = grid_dir / "runs" / "nope-retrieval-s0" / "checkpoints"
    before = {p.name: p.stat().st_mtime_ns for p in ckpt.iterdir()}
    assert main([*ARGS, "--out", str(grid_dir)]) == 0
    assert {p.name: p.stat().st_mtime_ns for p in ckpt.iterdir()} == before


def test_the_exact_engine_equals_swap_and_rerun_on_the_trained_toy_heads(grid_dir: Path) -> None:
    import numpy as np
    import torch

    from possym.scores.swap_and_rerun import reference_head_scores
    from possym.scores.swaps import head_scores
    from possym.tasks import get_task

    for task, cond in (("index", "band1"), ("retrieval", "nope")):
        run = RunDir.open(grid_dir / "runs" / f"{cond}-{task}-s0")
        model = run.load_model().double().eval()
        spec = run.config.task
        tokens = torch.as_tensor(get_task(spec.name).at_length(spec, 8, np.random.default_rng(0)).tokens)
        fast, slow = head_scores(model, tokens), reference_head_scores(model, tokens)
        assert torch.allclose(fast.s_pos, slow.s_pos, atol=1e-9) and torch.allclose(fast.s_sym, slow.s_sym, atol=1e-9)


def test_the_report_refuses_a_variant_that_does_not_let_in_the_planes_it_is_named_after(grid_dir: Path) -> None:
    from possym.canonical.grid import CanonicalReportConfig
    from possym.errors import PossymError
    from possym.experiment import run_stage
    from possym.stages.registry import ExperimentDir

    runs = {"band8-index-s0": RunDir.open(grid_dir / "runs" / "band1-index-s0")}  # trained with planes 1, 2
    exp = ExperimentDir(grid_dir / "elsewhere", runs, {"band8-index-s0": "index"}, {"band8-index-s0": 0},
                        {"band8-index-s0": "band8"})
    with pytest.raises(PossymError, match="band8 is planes \\(15, 16\\)"):
        run_stage(exp, "canonical_report", CanonicalReportConfig())
