"""The claims are data: every entry of claims.yaml loads and names a registered measure, its numbers are the
paper's own, a bad entry is refused with what is wrong, and a new claim is one entry (plus a measure if new)."""

from __future__ import annotations

from pathlib import Path

import pytest

from possym.errors import PossymError
from possym.paper import paper_numbers
from possym.report.calibration import fig2a_first
from possym.report.claimspec import load_claims, parse_claim
from possym.report.evidence import Evidence, TaskEvidence
from possym.report.grading import check_claims
from possym.report.measures import MEASURES, Measured, Reading, SeedReading, measure
from possym.report.rules import Estimate


def test_every_claim_loads_with_a_unique_id_a_registered_measure_and_its_rule_written_down():
    specs = load_claims()
    assert len(specs) >= 44 and len({s.id for s in specs}) == len(specs)
    assert all(s.measure in MEASURES and s.rule_text for s in specs)
    for s in (s for s in specs if s.rule == "value"):
        assert s.value is not None and s.margin and s.margin_why, s.id
    assert {s.kind for s in specs} == {"empirical", "finding", "verification"}


def test_the_claims_numbers_are_the_papers_own():
    """A second reading of paper_numbers.json: every number a claim carries is the one the paper reports."""
    d = paper_numbers()
    specs = {s.id: s for s in load_claims()}
    fig5b = d["fig5b_length_generalisation"]
    for task in ("number", "letter"):
        at = dict(zip(fig5b["extra"], fig5b[f"{task}_task"], strict=True))
        for k in (100, 800, 5000):
            assert specs[f"{task}-length-{k}"].value.value == at[k]
    assert specs["number-max-step"].value.value == d["fig2a_number_task_test_accuracy_by_hop"]["max_accuracy_step"]
    assert specs["letter-max-step"].value.value == d["fig2a_letter_task_test_accuracy_global"]["max_accuracy_step"]
    fig2a = d["fig2a_number_task_test_accuracy_by_hop"]
    for h in range(1, 5):  # the first digitised step at 0.9 is the top of the interval the claim states
        spec = specs[f"number-hop{h}-step"]
        assert spec.value.value + spec.value.tolerance == fig2a_first(fig2a, f"hop{h}")
    fig2c = d["fig2c_purity_gamma_0.1"]
    assert specs["number-positional-layers"].arg("layers") == fig2c["number_task"]["pure_positional_layers"]
    assert specs["number-symbolic-layers"].arg("layers") == fig2c["number_task"]["pure_symbolic_layers"]
    assert specs["letter-symbolic-layers"].arg("layers") == fig2c["letter_task"]["pure_symbolic_layers"]
    table1 = d["table1_weighted_frequency_id"]
    assert specs["number-table1"].arg("ids") == table1["number_task"]
    assert specs["letter-table1"].arg("ids") == table1["letter_task"]


BASE = {"id": "x", "claim": "x", "section": "s", "paper": "p", "measure": {"name": "best_step"}, "rule": "seeds",
        "rule_text": "t", "kind": "empirical", "calibration": "derived"}


@pytest.mark.parametrize("change,message", [
    ({"colour": "red"}, "unknown fields ['colour']"),
    ({"measure": {"name": "no_such_measure"}}, "measure.name='no_such_measure'; allowed:"),
    ({"rule": "vibes"}, "rule='vibes'; allowed: 'value', 'seeds', 'check'"),
    ({"rule": "value", "value": {"value": 1}}, "needs a positive margin"),
    ({"rule": "value", "value": {"value": 1}, "margin": 5}, "margin_why"),
    ({"margin": 5}, "margin and value belong to rule 'value'"),
    ({"calibration": "none"}, "calibration 'none' needs data"),
    ({"preset": ["colour"]}, "preset='colour'; allowed: 'steps', 'depth', 'width'"),
])
def test_a_bad_entry_is_refused_naming_the_claim_and_what_is_allowed(change, message):
    with pytest.raises(PossymError, match="claim 'x'") as err:
        parse_claim(BASE | change)
    assert message in str(err.value)


def test_repeated_ids_are_refused(tmp_path):
    import yaml

    path = tmp_path / "claims.yaml"
    path.write_text(yaml.safe_dump([BASE, BASE]), "utf-8")
    with pytest.raises(PossymError, match=r"claim ids \['x'\] repeat"):
        load_claims(path)


def test_a_new_claim_is_one_entry_and_one_measure(tmp_path: Path):
    """A toy claim about a new quantity: a registered measure (the seeds' 'depth', a number), one YAML entry with
    its paper value and margin, graded by the one grading path like every other claim."""
    @measure("toy_depth")
    def toy_depth(ev: Evidence, spec) -> Measured:
        return Measured((Reading("as measured", tuple(SeedReading(te.seed, str(te.n_layers),
                                                                  Estimate.of(float(te.n_layers)))
                                                      for te in ev.seeds(spec.task))),))

    try:
        path = tmp_path / "claims.yaml"
        path.write_text("""
- id: toy-depth
  claim: "number task: the model has twelve layers"
  section: toy
  task: number
  paper: "12"
  measure: {name: toy_depth}
  rule: value
  value: {value: 12, read: "a table's number"}
  margin: 1
  margin_why: one layer either way is the same architecture
  rule_text: Ours is each seed's depth.
  kind: empirical
  calibration: identity
  data: the paper's setting
""", "utf-8")
        specs = load_claims(path)
        twelve = Evidence({"number": [TaskEvidence(n_layers=12, seed=s) for s in range(3)]})
        six = Evidence({"number": [TaskEvidence(n_layers=n, seed=s) for s, n in enumerate((6, 6, 7))]})
        assert [c.verdict for c in check_claims(twelve, specs, power=False)] == ["match"]
        assert [c.verdict for c in check_claims(six, specs, power=False)] == ["differs"]
    finally:
        del MEASURES["toy_depth"]
