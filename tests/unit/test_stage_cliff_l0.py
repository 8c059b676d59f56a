"""The cliff and l0 stages on a tiny trained number run: the files they write, their tables' agreement with
the library calls they are built from, and a letter run skipped by the cliff stage."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

import possym
from possym.config import load_config
from possym.errors import PossymError
from possym.evaluate.breakdown import accuracy_table, length_points, length_predictions
from possym.evaluate.landing import alias_distance, attention_landing
from possym.experiment import run_stage
from possym.model.rope import rope_frequencies
from possym.runs import RunDir
from possym.scores.checkpoints import score_inputs
from possym.stages.cliff import CliffConfig, positional_layers
from possym.stages.l0 import L0Config
from possym.stages.registry import get_stage


@pytest.fixture(scope="module")
def number_run(tmp_path_factory, tiny_session_overrides):
    cfg = possym.load_config("number", None, tiny_session_overrides)
    return possym.train_model(cfg, out=tmp_path_factory.mktemp("cliff") / "number", progress=False).dir


@pytest.mark.parametrize("mode", ["cached", "plain"])
def test_the_cliff_stage_writes_its_tables_and_they_are_the_library_calls(number_run, mode):
    cfg = CliffConfig(start=3, stop=6, n=8, n_prefixes=2, layers=(0, 1), gate_every=2, step="final", device="cpu",
                      mode=mode)
    result = run_stage(number_run, "cliff", cfg, redo=True).result
    out = number_run.artifact("cliff")
    assert (out / "accuracy_first_key.csv").is_file()
    for name in ("accuracy", "accuracy_hops", "landing", "landing_summary", "plane_margins", "gated", "evidence"):
        # written through its record, byte for byte as pandas writes the library's frame
        assert (out / f"{name}.csv").read_text() == getattr(result, name).to_csv(index=False)
    settings = json.loads((out / "settings.json").read_text())
    theta_2 = float(rope_frequencies(number_run.model_config.rot_dim, number_run.model_config.rope_base)[1])
    assert settings["layers_used"] == [0, 1] and settings["aliases"] == {"1": 44, "2": alias_distance(theta_2, 100)}
    assert int(result.accuracy["n"].sum()) == 4 * 8 * len(number_run.config.task.hops)
    model = number_run.load_model("final")
    again = accuracy_table(length_predictions(model, number_run.config.task, cfg.curve()), by=("extra", "n_hops"))
    assert result.accuracy_hops[["extra", "n_hops", "correct"]].equals(again[["extra", "n_hops", "correct"]])
    base = result.gated[result.gated.layer == -1]
    assert sorted(base.extra.unique()) == [3, 5]
    assert sorted({(r.layer, r.plane) for r in result.gated.itertuples()}) == [(-1, 0), (0, 1), (0, 2), (1, 1), (1, 2)]
    assert (~result.landing["correct"]).all() and set(result.landing.layer) <= {0, 1}
    shares = result.landing_summary[["share_right", "share_alias_any", "share_other"]]
    assert np.allclose(shares["share_right"] + shares["share_alias_any"] + shares["share_other"], 1.0)
    assert sorted(zip(result.evidence.layer, result.evidence.plane, strict=True)) == [(0, 1), (0, 2), (1, 1), (1, 2)]
    planes = set(result.plane_margins.plane)
    assert planes == set(range(number_run.model_config.n_planes + 1))  # every plane and the unrotated part
    written = pd.read_csv(out / "accuracy.csv")
    assert written["n"].sum() == result.accuracy["n"].sum()
    land = attention_landing(model, next(iter(length_points(number_run.config.task, cfg.curve()))).samples,
                             layers=[0, 1], queries="hops")  # the first point, the plain way
    first = result.landing[(result.landing.extra == 3) & (result.landing.prefix == 0) & (result.landing.n_hops == 1)]
    if mode == "cached":  # one point per batch: its inputs are the point's own
        want = land[~land.correct].reset_index(drop=True)
        assert first.drop(columns="prefix").reset_index(drop=True)[["input", "layer", "offset"]].equals(
            want[["input", "layer", "offset"]])


@pytest.mark.parametrize(("change", "says"), [
    (lambda t: t.assign(surprise=1), r"cliff/accuracy_hops.csv: columns .* \(unknown: \['surprise'\]\)"),
    (lambda t: t.drop(columns="ci_high"), r"cliff/accuracy_hops.csv: columns .* \(missing: \['ci_high'\]\)"),
    (lambda t: t.assign(n=t["n"].astype(str)), r"cliff/accuracy_hops.csv.n: '8' is not an int"),
])
def test_the_cliff_stage_refuses_a_table_its_record_does_not_fit_naming_table_and_column(number_run, monkeypatch,
                                                                                         change, says):
    import possym.stages.cliff as stage
    from possym.errors import RecordError
    from possym.evaluate.cliff import CliffTables

    hops = pd.DataFrame({"extra": [3], "n_hops": [1], "n": [8], "correct": [4], "accuracy": [0.5], "ci_low": [0.2],
                         "ci_high": [0.8]})
    empty = pd.DataFrame()
    tables = CliffTables({}, empty, change(hops), *[empty] * 6)
    monkeypatch.setattr(stage, "cliff_tables", lambda *a, **k: tables)
    with pytest.raises(RecordError, match=says):
        run_stage(number_run, "cliff", CliffConfig(layers=(0,), step="final", device="cpu"), redo=True)


def test_the_cliff_stage_skips_a_letter_run_and_needs_scores_to_choose_layers(tmp_path, tiny_overrides):
    import torch

    from possym.model.gptj import GPTJ

    letter = RunDir.create(tmp_path / "letter", load_config("letter", None, tiny_overrides))
    letter.save_checkpoint(0, GPTJ(letter.model_config, torch.Generator().manual_seed(0)).state_dict())
    result = run_stage(letter, "cliff", CliffConfig(step=0)).result
    assert "number task" in result.skipped and not letter.artifact("cliff").exists()
    unscored = RunDir.create(tmp_path / "number", load_config("number", None, tiny_overrides))
    with pytest.raises(PossymError, match="score it first"):
        positional_layers(unscored)
    assert get_stage("cliff").settings_from({"n": 4}).n == 4


def test_the_l0_stage_splits_tests_and_tallies(number_run):
    cfg = L0Config(layers=(0,), steps=("final",), n_inputs=20, n_boot=50, modality_boot=20)
    result = run_stage(number_run, "l0", cfg, redo=True).result
    assert result.scored_steps == tuple(number_run.checkpoint_steps())
    out = number_run.artifact("l0")
    for name in ("per_input", "split", "split_position", "modality", "sustained", "tally"):
        assert (out / f"{name}.csv").read_text() == getattr(result, name).to_csv(index=False)
    # the pooled last-token means are the score stage's, on the score stage's own inputs
    scores = possym.open_run(number_run.path).scores(n_inputs=20, frequency=False)
    final = scores[(scores.step == result.steps[0]) & (scores["query"] == "last")]
    pooled = result.split[(result.split.n_hops == 0) & (result.split["query"] == "last")]
    for r in pooled.itertuples():
        assert r.s_pos == pytest.approx(final[final.layer == r.layer].s_pos.item(), abs=1e-9)
    assert len(score_inputs(number_run.config.task, number_run.config.seeds.data, 20)) == 20
    assert set(result.modality["score"]) == {"s_pos", "s_sym"} and set(result.modality.layer) == {0}
    assert set(result.sustained.kind) == {"positional", "symbolic"}
    for r in result.tally.itertuples():
        mine = result.sustained[result.sustained.kind == r.kind]
        assert (r.ever_point, r.counted) == (int(mine.ever_point.sum()), int(mine.counted.sum()))
    hop_rows = result.per_input[result.per_input["query"] != "last"]
    assert result.split_position["n"].sum() == len(hop_rows)
    assert len(result.sustained) == 2 * number_run.config.model.n_layers


def test_positional_layers_are_those_ending_pure_positional_else_those_ever_pure(tmp_path, tiny_overrides):
    from possym.records import PurityRecord

    run = RunDir.create(tmp_path / "number", load_config("number", None, tiny_overrides))

    def rec(layer, kind, final, query="last", gamma=0.1):
        return PurityRecord(layer=layer, head=0, query=query, gamma=gamma, kind=kind, step=100 if kind else None,
                            final_kind=final, final_kind_step=100 if final else None)

    other_gamma = rec(3, "positional", "positional", gamma=0.05)
    other_query = rec(4, "positional", "positional", "hop1")
    run.write("purity", [rec(0, "positional", ""), rec(1, "positional", "positional"), rec(2, "symbolic", "symbolic"),
                         other_gamma, other_query])
    assert positional_layers(run) == (1,)
    run.write("purity", [rec(0, "positional", ""), rec(2, "symbolic", "symbolic")])
    assert positional_layers(run) == (0,)
    run.write("purity", [rec(2, "symbolic", "symbolic")])
    with pytest.raises(PossymError, match="no layer is ever pure positional"):
        positional_layers(run)


def test_the_mechanisms_table_stacks_each_runs_tables_and_its_summary_is_read_from_them(number_run, tmp_path):
    from possym.report.mechanisms import collect_tables
    from possym.stages.mechanisms import MechanismsTableConfig
    from possym.stages.registry import ExperimentDir

    run_stage(number_run, "cliff", CliffConfig(start=3, stop=6, n=8, n_prefixes=2, layers=(0, 1), gate_every=2,
                                               step="final", device="cpu"))
    run_stage(number_run, "l0", L0Config(layers=(0,), steps=("final",), n_inputs=20, n_boot=50, modality_boot=20))
    tables = collect_tables([number_run])
    assert {"cliff_accuracy_hops", "cliff_evidence", "l0_tally", "l0_modality"} <= set(tables)
    assert not any(name.startswith("dilution") for name in tables)  # a number run has no dilution tables
    hops = pd.read_csv(number_run.path / "cliff" / "accuracy_hops.csv")
    assert tables["cliff_accuracy_hops"].drop(columns=["task", "seed"]).equals(hops)
    exp = ExperimentDir(tmp_path, {"r": number_run}, {"r": "number"}, {"r": 0})
    summary = run_stage(exp, "mechanisms_table", MechanismsTableConfig()).result
    assert (tmp_path / "mechanisms" / "summary_by_seed.csv").is_file()
    assert set(summary.task) == {"number"} and set(summary.seed) == {number_run.config.seeds.init}
    for r in hops[hops.extra == 6].itertuples():  # the end of the K grid, read back as the summary says
        got = summary.loc[summary.measure == f"cliff: {r.n_hops}-hop accuracy at K = 6", "value"].item()
        assert got == pytest.approx(r.accuracy)
    evidence = pd.read_csv(number_run.path / "cliff" / "evidence.csv")
    for r in evidence.itertuples():
        got = summary.loc[summary.measure == f"cliff: accuracy past the cliff, plane {r.plane} gated in L{r.layer}",
                          "value"].item()
        assert got == pytest.approx(r.acc_above_gated, nan_ok=True)
    assert run_stage(ExperimentDir(tmp_path / "none", {}), "mechanisms_table", MechanismsTableConfig()).result.empty
