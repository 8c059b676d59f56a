"""`possym lengthgen RUN` on a tiny trained run: the CSV, its memo entry, reuse, --redo and bad input."""

from possym.cli import main
from possym.runs import read_csv
from possym.stages.memo import run_memo


def test_lengthgen_writes_its_curve_reuses_it_and_refuses_bad_input(tmp_path, tiny_overrides, capsys):
    run = tmp_path / "run"
    assert main(["train", "--task", "letter", "--out", str(run), *tiny_overrides]) == 0
    args = ["lengthgen", str(run), "lengthgen.grid=[0,5,40]", "lengthgen.n=8", "lengthgen.n_prefixes=2"]
    assert main(args) == 0
    rows = read_csv(run / "lengthgen.csv")
    assert {"extra", "n_hops", "accuracy", "n", "ci_low", "ci_high", "cluster_low", "n_prefixes"} <= set(rows[0])
    assert [(r["extra"], r["n_hops"]) for r in rows][:2] == [("0", "0"), ("0", "1")] and len(rows) == 15
    entry = run_memo(run).entry("lengthgen")
    assert entry["settings"]["grid"] == [0, 5, 40] and entry["steps"] == [30] and entry["status"] == "done"
    assert {r["step"] for r in rows} == {"30"}
    assert (run / "figures" / "fig5b_length_generalisation.png").stat().st_size > 1000

    stamp = (run / "lengthgen.csv").stat().st_mtime_ns
    capsys.readouterr()
    assert main(args) == 0  # same settings: reused, not recomputed
    assert (run / "lengthgen.csv").stat().st_mtime_ns == stamp
    assert "lengthgen: done with these settings at steps [30]" in capsys.readouterr().out
    assert main([*args, "--redo"]) == 0  # --redo: recomputed
    assert (run / "lengthgen.csv").stat().st_mtime_ns != stamp
    assert main([*args[:-1], "lengthgen.n_prefixes=3"]) == 0  # other settings: recomputed
    assert run_memo(run).entry("lengthgen")["settings"]["n_prefixes"] == 3

    capsys.readouterr()
    assert main(["lengthgen", str(run), "lengthgen.n=2", "lengthgen.n_prefixes=8"]) == 2
    assert "need 1 <= n_prefixes <= n" in capsys.readouterr().err
    assert main(["lengthgen", str(tmp_path / "nowhere")]) == 2
