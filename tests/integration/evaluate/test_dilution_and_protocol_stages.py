"""The dilution and length-protocol stages on tiny trained runs: files, reuse, skips and cross-table agreement."""

import json

import pandas as pd
import pytest

from possym.cli import main
from possym.config import ConfigError
from possym.experiment import run_stage
from possym.records import ScoreRecord
from possym.report.length_protocol import ORDER_CLAIM, accuracy_claim, claims_by_reading, length_claim_values
from possym.runs import RunDir
from possym.stages.dilution import DilutionConfig, _layer_sets, read_dilution, symbolic_layers
from possym.stages.length_protocol import protocol_table, read_protocol_curves
from possym.stages.registry import get_stage


@pytest.fixture(scope="module")
def runs(tmp_path_factory, tiny_session_overrides):
    root = tmp_path_factory.mktemp("runs")
    out = {}
    for task in ("letter", "number"):
        assert main(["train", "--task", task, "--out", str(root / task), *tiny_session_overrides]) == 0
        out[task] = RunDir.open(root / task)
    return out


def test_dilution_writes_three_tables_that_agree_and_skips_a_number_run(runs):
    run = runs["letter"]
    scores = [ScoreRecord(step=s, query="last", layer=layer, head=0, s_pos=p, s_sym=1 - p, entropy=1.0, n_inputs=9)
              for s in (20, 30) for layer, p in ((0, 0.8 if s == 30 else 0.2), (1, 0.3))]
    run.write("scores", scores)
    assert symbolic_layers(run, 30) == (1,) and symbolic_layers(run, 21) == (0, 1)  # the nearest scored step
    cfg = get_stage("dilution").settings_from({"grid": [0, 20], "hops": [3, 4], "n": 6, "n_prefixes": 2,
                                               "betas": [1.0, 1.5], "step": "final"})
    assert cfg.curve.n == 6 and cfg.curve.grid == (0, 20)  # the length curve's settings, nested
    result = run_stage(run, "dilution", cfg).result
    assert result.step == 30 and result.sharpened == {"symbolic": (1,), "all": (0, 1)}
    tables = read_dilution(run)
    for name, table in tables.items():  # read as their records, they write back byte for byte
        assert table.to_csv(index=False) == (run.path / "dilution" / f"{name}.csv").read_text()
    attention, knockout, sharpen = tables["attention"], tables["knockout"], tables["sharpen"]
    assert set(attention.query_hop) == {0, 1, 2, 3} and set(attention.layer) == {0, 1}
    assert (attention.next_hop <= attention.chain + 1e-12).all()
    assert (attention.extra_mass[attention.extra == 0] == 0).all()
    assert set(knockout.knocked_out) == {"none", "L0", "L1", "all"}
    # The unedited knock-out rows and the β = 1 sharpening rows measure the same windows.
    none = knockout[knockout.knocked_out == "none"].set_index(["extra", "n_hops"]).correct
    for name in ("symbolic", "all"):
        plain = sharpen[(sharpen.beta == 1.0) & (sharpen.set == name)].set_index(["extra", "n_hops"]).correct
        assert plain.to_dict() == none.to_dict()
    # K = 0 has no extra window: every knock-out is the unedited model there.
    at0 = knockout[knockout.extra == 0].groupby("n_hops").correct.nunique()
    assert (at0 == 1).all()

    assert json.loads((run.path / "dilution" / "settings.json").read_text())["sharpened"] == {"symbolic": [1],
                                                                                              "all": [0, 1]}
    # Through the run's memo, a second call with the same settings is read back, not measured again.
    stamp = (run.path / "dilution" / "attention.csv").stat().st_mtime_ns
    assert not run_stage(run, "dilution", cfg).ran
    assert (run.path / "dilution" / "attention.csv").stat().st_mtime_ns == stamp

    skipped = run_stage(runs["number"], "dilution", cfg).result
    assert skipped.files == () and "number" in skipped.skipped and not (runs["number"].path / "dilution").exists()
    with pytest.raises(ConfigError, match="allowed: 'symbolic', 'all', 'each', 'not_symbolic' or layers"):
        get_stage("dilution").settings_from({"sharpen": ["fast"]})


def test_the_sharpening_controls_single_layers_and_the_layers_that_are_not_symbolic(runs):
    """At step 30 layer 0 leans positional and layer 1 symbolic: "not_symbolic" is layer 0. At step 20 both lean
    symbolic: the nearest control the run allows is the layer that leans least (1: 0.4 < 0.6), with the reason."""
    run = runs["letter"]
    scores = [ScoreRecord(step=s, query="last", layer=layer, head=0, s_pos=p, s_sym=1 - p, entropy=1.0, n_inputs=9)
              for s in (20, 30) for layer, p in ((0, 0.8 if s == 30 else 0.2), (1, 0.3))]
    run.write("scores", scores)
    cfg = DilutionConfig(sharpen=("each", "not_symbolic", "symbolic"))
    sets, reasons = _layer_sets(run, 30, cfg, 2)
    assert sets == {"L0": (0,), "L1": (1,), "not_symbolic": (0,), "symbolic": (1,)} and reasons == {}
    sets, reasons = _layer_sets(run, 20, cfg, 2)
    assert sets["not_symbolic"] == (1,) and sets["symbolic"] == (0, 1) and "lean least" in reasons["not_symbolic"]


def test_the_dilution_controls_stage_writes_prediction_and_knockouts_beside_the_margins(runs):
    run = runs["letter"]
    cfg = get_stage("dilution_controls").settings_from({"grid": [0, 10], "hops": [3], "n": 4, "n_prefixes": 2,
                                                        "steps": ["final"], "fractions": [0.5]})
    result = run_stage(run, "dilution_controls", cfg).result
    out = run.artifact("dilution_controls")
    for name in ("margins", "prediction", "knockouts"):  # through the records, as pandas writes the library's frame
        assert (out / f"{name}.csv").read_text() == getattr(result, name).to_csv(index=False)
    assert (out / "settings.json").is_file()
    assert set(result.prediction.query_hop) == {0, 1, 2} and set(result.prediction.n_extra) == {0, 10}
    # K = 0 is the window alone: the prediction is the measured mass there, whatever the margin
    assert result.prediction[result.prediction.n_extra == 0].residual.abs().max() < 1e-6  # float32 patterns
    assert set(result.knockouts.chosen) == {"none", "random", "mass"} and set(result.knockouts.extra) == {10}
    assert result.knockouts[result.knockouts.query_hop == 0].accuracy.notna().all()
    written = pd.read_csv(out / "prediction.csv")
    assert len(written) == len(result.prediction)


def test_length_protocol_curves_and_the_claims_table(runs, tmp_path):
    grid = (0, 33, 50, 83, 100)
    cfg = get_stage("length_protocol").settings_from({"grid": list(grid), "n": 8, "n_prefixes": 2,
                                                      "extra_tokens": ["targets", "mixed"], "steps": ["final"]})
    for run in runs.values():
        curves = run_stage(run, "length_protocol", cfg).result
        assert curves.to_csv(index=False) == (run.path / "length_protocol" / "curves.csv").read_text()
        assert set(curves.extra_tokens) == {"targets", "mixed"} and set(curves.hop_mix) == {"uniform", "test"}
        assert (curves.seq_len == curves.extra + 17).all()
        # tiny runs have n_test = 200, a multiple of 4: the test split's mix is uniform, so nothing moves.
        u = curves[curves.hop_mix == "uniform"].accuracy.to_numpy()
        assert u == pytest.approx(curves[curves.hop_mix == "test"].accuracy.to_numpy())
        record = json.loads((run.path / "length_protocol" / "settings.json").read_text())
        assert record["steps"] == {"final": 30}
    table = protocol_table(runs.values(), tmp_path)
    assert table.to_csv(index=False) == (tmp_path / "length_protocol" / "claims.csv").read_text()
    claims = set(table.claim)
    assert accuracy_claim("number", 100) in claims and ORDER_CLAIM in claims
    on_k = table[(table.claim == accuracy_claim("letter", 100)) & (table.x_axis == "extra")]
    assert len(on_k) == 4  # 2 extra-token readings x 2 hop mixes, one checkpoint
    curves = pd.read_csv(runs["letter"].path / "length_protocol" / "curves.csv")
    want = curves[(curves.extra == 83) & (curves.n_hops == 0) & (curves.extra_tokens == "mixed")
                  & (curves.hop_mix == "uniform")].accuracy.iloc[0]
    on_total = table[(table.claim == accuracy_claim("letter", 100)) & (table.x_axis == "seq_len")
                     & (table.extra_tokens == "mixed") & (table.hop_mix == "uniform")]
    assert on_total["mean"].iloc[0] == pytest.approx(want)  # total length 100 is K = 83
    wide = claims_by_reading(table)
    assert wide.shape[1] == 8 and (tmp_path / "length_protocol" / "claims_by_reading.csv").is_file()
    # The per-seed values read back as records, and each non-default reading becomes a reading of the claim.
    from possym.records import ProtocolValueRecord, read_records
    from possym.report.measures.length import protocol_readings

    values = read_records(tmp_path / "length_protocol" / "values.csv", ProtocolValueRecord)
    assert len(values) == len(length_claim_values(read_protocol_curves(list(runs.values()))))
    named = protocol_readings(values, accuracy_claim("letter", 100))
    # extra tokens x hop mix x x-axis, at the final checkpoint only: none is the pre-registered (best) reading
    assert len(named) == 2 * 2 * 2
    assert all(len(est) == 1 for est in named.values())  # one seed per task here
