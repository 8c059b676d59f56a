"""`possym lengthgen RUN` on a tiny trained run: the CSV, its settings record, reuse and bad input."""

import json

from possym.cli import main
from possym.runs import read_csv


def test_lengthgen_writes_its_curve_reuses_it_and_refuses_bad_input(tmp_path, tiny_overrides, capsys):
    run = tmp_path / "run"
    assert main(["train", "--task", "letter", "--out", str(run), *tiny_overrides]) == 0
    args = ["lengthgen", str(run), "lengthgen.grid=[0,5,40]", "lengthgen.n=8", "lengthgen.n_prefixes=2"]
    assert main(args) == 0
    rows = read_csv(run / "lengthgen.csv")
    assert {"extra", "n_hops", "accuracy", "n", "ci_low", "ci_high", "cluster_low", "n_prefixes"} <= set(rows[0])
    assert [(r["extra"], r["n_hops"]) for r in rows][:2] == [("0", "0"), ("0", "1")] and len(rows) == 15
    record = json.loads((run / "lengthgen.json").read_text())
    assert record["settings"]["grid"] == [0, 5, 40] and record["steps"]["30"]["inputs"] == 96
    assert {r["step"] for r in rows} == {"30"}
    assert (run / "figures" / "fig5b_length_generalisation.png").stat().st_size > 1000

    stamp = (run / "lengthgen.csv").stat().st_mtime_ns
    assert main(args) == 0  # same settings: reused, not recomputed
    assert (run / "lengthgen.csv").stat().st_mtime_ns == stamp
    assert main([*args[:-1], "lengthgen.n_prefixes=3"]) == 0  # other settings: recomputed
    assert json.loads((run / "lengthgen.json").read_text())["settings"]["n_prefixes"] == 3

    capsys.readouterr()
    assert main(["lengthgen", str(run), "lengthgen.n=2", "lengthgen.n_prefixes=8"]) == 2
    assert "need 1 <= n_prefixes <= n" in capsys.readouterr().err
    assert main(["lengthgen", str(tmp_path / "nowhere")]) == 2
