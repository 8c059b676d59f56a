"""`possym reproduce` on tiny runs: every stage, the report, resuming after SIGKILL, and a real browser."""

import base64
import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

import matplotlib.image as mpimg
import pytest
from safetensors.torch import load_file

from possym.cli import main
from possym.records import LengthRecord
from possym.runs import RunDir, read_csv
from possym.stages.memo import ExperimentMemo

FAST = ["lengthgen.grid=[0,10,100]", "lengthgen.n=8", "lengthgen.n_prefixes=2", "score.n_inputs=8",
        "discrepancy.extras=[0,10]", "discrepancy.samples=4"]


def reproduce_args(out, tiny, skip=("theory", "canonical")):
    # The theory and canonical stages have their own tests (tests/integration/theory, .../canonical); here
    # they would only add minutes. The canonical section of the report is tested below on a tiny grid.
    return ["reproduce", "quick", "--out", str(out), "--skip", ",".join(skip), *FAST, *tiny]


def log(out, owner):
    return ExperimentMemo(out).memo(owner).read()


@pytest.fixture(scope="module")
def tiny_reproduction(tmp_path_factory, tiny_session_overrides):
    out = tmp_path_factory.mktemp("repro") / "out"
    assert main(reproduce_args(out, tiny_session_overrides)) == 0
    return out


def test_every_stage_ran_once_and_left_its_outputs(tiny_reproduction):
    out = tiny_reproduction
    assert list(log(out, "experiment")) == ["data", "report"]
    for task in ("number", "letter"):
        stages = log(out, f"{task}-s0")
        assert list(stages) == ["training", "score", "discrepancy", "lengthgen"]
        assert all(s["status"] == "done" and s["attempts"] == 1 and s["seconds"] >= 0 for s in stages.values())
        assert (out / "runs" / f"{task}-s0" / "scores.csv").exists()
        assert (out / "runs" / f"{task}-s0" / "lengthgen.csv").exists()
    data = read_csv(out / "tables" / "data.csv")
    assert len(data) == 6 and all(r["solver_agrees"] == r["solver_checked"] for r in data)
    claims = read_csv(out / "claims.csv")
    assert {"claim", "paper", "ours", "verdict", "rule", "step"} <= set(claims[0]) and len(claims) >= 15


def test_length_curves_are_measured_at_the_best_checkpoint_and_the_final_one_and_claims_say_which(tiny_reproduction):
    out = tiny_reproduction
    for task in ("number", "letter"):
        run = RunDir.open(out / "runs" / f"{task}-s0")
        best, final = run.best(), run.checkpoint_steps()[-1]
        assert {p.step for p in run.read("lengthgen", LengthRecord)} == {best, final}
        assert json.loads((run.path / "best.json").read_text())["step"] == best
    claims = read_csv(out / "claims.csv")
    # The paper's accuracies hold for its 12 layers: on a 2-layer run they are n/a, and say why.
    length = [c for c in claims if "accuracy at +100 tokens" in c["claim"]]
    assert len(length) == 2 and all(c["verdict"] == "n/a" and "12 layers" in c["ours"] for c in length)
    scores = [c for c in claims if c["claim"] == "positional layers appear in the number task only"]
    assert scores and scores[0]["step"].endswith(str(RunDir.open(out / "runs" / "number-s0").checkpoint_steps()[-1]))


def test_the_report_embeds_every_figure_it_names_and_each_decodes(tiny_reproduction):
    out = tiny_reproduction
    page = (out / "report.html").read_text()
    images = re.findall(r"<img alt='([^']*)' src='data:image/png;base64,([^']+)'", page)
    assert len(images) >= 10
    for _, data in images:
        assert mpimg.imread(io.BytesIO(base64.b64decode(data))).shape[1] > 100
    # Every figure in figures/ comes as PNG and SVG, and the comparisons with the paper are there.
    pngs = sorted(p.stem for p in (out / "figures").glob("*.png"))
    assert pngs == sorted(p.stem for p in (out / "figures").glob("*.svg"))
    assert {
        "compare_fig2a_accuracy",
        "compare_fig5b_length",
        "compare_fig6_final_scores",
        "number_s0_fig2_dynamics",
        "letter_s0_fig8_frequency_use",
    } <= set(pngs)
    assert len(images) == len(pngs)


def test_a_second_call_only_rebuilds_the_report_and_other_settings_are_refused(
    tiny_reproduction, tiny_session_overrides, capsys
):
    TINY = tiny_session_overrides
    out = tiny_reproduction
    assert main(reproduce_args(out, TINY)) == 0
    assert log(out, "number-s0")["training"]["attempts"] == 1 and log(out, "experiment")["report"]["attempts"] == 2
    capsys.readouterr()
    assert main(reproduce_args(out, [*TINY, "train.lr=0.01"])) == 2
    assert "holds a run with another config (train.lr differ)" in capsys.readouterr().err


def test_the_report_renders_in_headless_chromium_with_no_missing_image(tiny_reproduction):
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    assert browser, "Debian's chromium is needed (`make test` and .ci/run install it: apt-get install chromium)"
    dom = subprocess.run(
        [
            browser,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--virtual-time-budget=10000",
            "--dump-dom",
            (tiny_reproduction / "report.html").as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    body = re.search(r"<body[^>]*data-images-loaded=\"(\d+)\"[^>]*data-images-total=\"(\d+)\"", dom)
    assert body, "the page's load script did not run"
    loaded, total = map(int, body.groups())
    assert total >= 10 and loaded == total
    # The first screen, as a newcomer reads it: what this run is, against the paper's setting, and where the
    # replication is; its claims table grades no step or layer of the paper's model on this tiny preset.
    intro = re.search(r"<p id=\"intro\">(.*?)</p>", dom, re.S).group(1)
    assert "<b>quick</b> preset: 2 layers (the paper: 12), 30 training steps (the paper: 6,750)" in intro
    assert "not a replication" in intro and "replication.md</a>" in intro
    assert re.search(r"<h2 id=\"claims\">Claims this run can grade \(\d+\)", dom)
    from possym.report.claimspec import load_claims

    scaled = {s.claim for s in load_claims() if s.preset}
    claims = read_csv(tiny_reproduction / "claims.csv")
    assert scaled and all(c["verdict"] == "n/a" for c in claims if c["claim"] in scaled)
    assert "paper-preset replication" in dom


@pytest.mark.long
def test_a_killed_reproduction_resumes_where_it_stopped(tmp_path, tiny_overrides):
    # Long enough training that the kill lands inside the train stage, after a few checkpoints.
    tiny = [o for o in tiny_overrides if not o.startswith("train.steps")] + ["train.steps=400"]
    out = tmp_path / "out"
    args = reproduce_args(out, tiny, skip=("theory", "discrepancy", "score"))
    argv = [sys.executable, "-m", "possym", *args]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    ckpts = out / "runs" / "number-s0" / "checkpoints"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and len(list(ckpts.glob("*.safetensors"))) < 3 and proc.poll() is None:
        time.sleep(0.2)
    assert proc.poll() is None, "the reproduction ended before it could be killed"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert log(out, "experiment")["data"]["status"] == "done"
    assert log(out, "number-s0")["training"]["status"] == "running"

    assert main(args) == 0
    assert log(out, "experiment")["data"]["attempts"] == 1 and log(out, "number-s0")["training"]["attempts"] == 2
    assert all(s["status"] == "done" for owner in ("number-s0", "letter-s0") for s in log(out, owner).values())
    # The resumed training ends exactly where an uninterrupted one does.
    fresh = tmp_path / "fresh"
    assert main(["train", "--task", "number", "--preset", "quick", "--out", str(fresh), *tiny]) == 0
    a = load_file(RunDir.open(out / "runs" / "number-s0").checkpoint_path(400))
    b = load_file(RunDir.open(fresh).checkpoint_path(400))
    assert all((a[k] == b[k]).all() for k in a)


def test_a_sweep_given_to_the_report_becomes_a_section_with_its_figures(tiny_reproduction, tiny_session_overrides):
    import matplotlib.pyplot as plt

    from possym.runs import csv_text

    sweep = tiny_reproduction.parent / "sweep"
    (sweep / "figures").mkdir(parents=True)
    row = {"variant": "baseline", "task": "number", "seed": 0, "test_accuracy": 1.0, "hop_order": "1<2<3<4"}
    (sweep / "seeds.csv").write_text(csv_text([row]))
    (sweep / "summary.csv").write_text(csv_text([{"variant": "baseline", "metric": "test_accuracy", "mean": 1.0}]))
    claim = {"variant": "baseline", "claim": "hops in order", "paper": "1<2<3~4", "verdict": "match"}
    claims = [{**claim, "seed": s, "ours": f"order {s}"} for s in (0, 1)]
    (sweep / "claims_by_seed.csv").write_text(csv_text(claims))
    fig, ax = plt.subplots()
    ax.plot([0, 1])
    fig.savefig(sweep / "figures" / "sweep_accuracy.png")
    plt.close(fig)
    args = [*reproduce_args(tiny_reproduction, tiny_session_overrides)[1:], f"report.sweep={sweep}"]
    assert main(["reproduce", *args]) == 0
    page = (tiny_reproduction / "report.html").read_text()
    assert "Sweep: sweep" in page and "sweep: sweep_accuracy" in page and "1&lt;2&lt;3&lt;4" in page
    assert (tiny_reproduction / "tables" / "sweep_seeds.csv").exists()
    assert "the claims table, seed by seed" in page and "match: order 1" in page and "holds for every seed" in page
    args[-1] = f"report.sweep={sweep / 'nowhere'}"
    assert main(["reproduce", *args]) == 2


def test_the_canonical_part_is_the_grid_of_its_preset():
    """A reproduction's canonical part is the quick grid for the quick preset and the default grid otherwise."""
    from possym.experiment import load_experiment
    from possym.experiment.reproduce import reproduction

    assert dict(reproduction("quick").parts) == {"canonical": load_experiment("canonical_quick")}
    assert dict(reproduction("paper").parts) == {"canonical": load_experiment("canonical")}
    assert dict(reproduction("quick", skip=("canonical",)).parts) == {}


def test_a_canonical_grid_in_the_directory_becomes_a_section_of_the_report(tiny_reproduction, tiny_session_overrides):
    out = tiny_reproduction
    tiny_grid = ["canonical", "--quick", "experiment.tasks=[index,retrieval]", "experiment.variants=[band1,nope]",
                 "train.steps=100"]
    assert main([*tiny_grid, "--out", str(out / "canonical")]) == 0
    assert main(reproduce_args(out, tiny_session_overrides)) == 0
    page = (out / "report.html").read_text()
    assert "The metric paper&#x27;s canonical tasks" in page  # escaped as html.escape writes a quote
    assert "Theorem 7: w_max(j)" in page and (out / "figures" / "canonical_fig_plane.png").exists()
    claims = read_csv(out / "tables" / "canonical_claims.csv")
    assert claims and {"claim", "verdict", "rule"} <= set(claims[0])
