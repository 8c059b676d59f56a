"""``possym discrepancy RUN`` on a run directory, and ``possym theory --quick`` end to end (about 5 s), into
OUT/theory as the theory stage of an experiment in OUT writes."""

from __future__ import annotations

import torch

from possym.cli import main
from possym.config import load_config
from possym.model.gptj import GPTJ
from possym.records import MetricsRecord
from possym.runs import RunDir, read_csv


def test_discrepancy_cli_writes_per_layer_records_accuracy_and_a_figure(tmp_path, tiny_overrides):
    # the command only needs a run directory with a checkpoint; training it would add nothing here
    run = RunDir.create(tmp_path / "run", load_config("number", None, tiny_overrides), argv=["test"])
    run.save_checkpoint(30, GPTJ(run.model_config, torch.Generator().manual_seed(0)).state_dict())
    run.log(MetricsRecord("final", step=30, split="test", accuracy=0.0))  # "final" names a finished run
    rc = main(["discrepancy", str(run.path), "discrepancy.extras=[0,20,200]", "discrepancy.samples=4",
               "discrepancy.dtype=float64"])
    assert rc == 0
    out = run.path / "theory"
    heads = read_csv(out / "discrepancy_heads.csv")
    assert {(r["layer"], r["extra"]) for r in heads} == {(str(l), str(e)) for l in (0, 1) for e in (0, 20, 200)}
    assert all(r["step"] == str(run.checkpoint_steps()[-1]) for r in heads)
    acc = read_csv(out / "discrepancy_accuracy.csv")
    assert [r["extra"] for r in acc] == ["0", "20", "200"]
    assert len(read_csv(out / "discrepancy_summary.csv")) == 2
    assert (out / "discrepancy_heads.png").stat().st_size > 0 and (out / "discrepancy_heads.svg").exists()


def test_theory_cli_quick_writes_every_table_and_figure(tmp_path):
    assert main(["theory", "--out", str(tmp_path), "theory.quick=true"]) == 0
    out = tmp_path / "theory"  # where the theory stage of an experiment in tmp_path writes
    for name in ("verification", "violations", "beta", "witnesses", "discrepancy", "bounds", "counterexamples"):
        assert read_csv(out / f"{name}.csv"), name
    rows = read_csv(out / "discrepancy.csv")
    assert {"function", "definition", "theta", "n", "discrepancy", "bound", "holds"} <= set(rows[0])
    assert {r["definition"] for r in rows} == {"max", "min", "proof"}
    assert all(r["ok"] == "True" for r in read_csv(out / "verification.csv"))
    for stem in ("theory_fig5a", "theory_discrepancy", "theory_beta"):
        assert (out / f"{stem}.png").exists() and (out / f"{stem}.svg").exists()
