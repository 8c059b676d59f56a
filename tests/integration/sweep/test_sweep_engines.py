"""`possym sweep` for real, with tiny runs: the local pool (2 workers), Ray (num_cpus=2), submitit's local executor;
resuming after a failure and after a kill, and the summary. The evidence is the executor's layout: OUT/runs/ID,
the memo OUT/log/ID.json (each stage's status and attempts) and each run's metrics log."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from possym.cli import main
from possym.experiment.spec import load_experiment
from possym.report.claimspec import load_claims
from possym.report.evidence import load_evidence
from possym.report.grading import check_claims
from possym.runs import RunDir, read_csv
from possym.stages.memo import ExperimentMemo
from possym.sweep.claims import SWEEP_SKIPS

SCORE = {"n_inputs": 4, "figures": False, "frequency": False}


# One run per unit of work: these tests hold what the engines do with units (their seeds would otherwise
# train as one group, in one unit; tests/integration/experiment covers grouped units).
ALONE = {"training": {"group": False}}


def write_spec(path: Path, tiny: list[str], seeds=(0, 1), stages=None, **extra) -> Path:
    data = {
        "tasks": ["number"],
        "seeds": list(seeds),
        "overrides": tiny,
        "stages": {**ALONE, **(stages if stages is not None else {"score": SCORE})},
        "retries": 0,
        **extra,
    }
    path.write_text(yaml.safe_dump(data, sort_keys=False))  # the stages run in the order written
    return path


def log(out: Path, rid: str) -> dict:
    """The run's memo: stage -> {status, attempts, error, ...}."""
    return ExperimentMemo(out).memo(rid).read()


def attempts(out: Path, rid: str) -> dict[str, int]:
    return {stage: e["attempts"] for stage, e in log(out, rid).items()}


def assert_finished(out: Path, spec: Path) -> None:
    for run in load_experiment(str(spec)).runs():
        assert all(e["status"] == "done" for e in log(out, run.id).values()), log(out, run.id)
        assert (out / "runs" / run.id / "scores.csv").exists()
        assert any(r.get("event") == "final" for r in RunDir.open(out / "runs" / run.id).metrics())


@pytest.mark.long
def test_local_engine_runs_every_stage_then_resumes_without_redoing_work(tmp_path, tiny_overrides, capsys):
    stages = {
        "score": SCORE,
        "lengthgen": {"grid": [0, 10], "n": 4, "n_prefixes": 2, "steps": ["best", "final"]},
        "discrepancy": {"samples": 4, "extras": [0, 10]},
    }
    spec = write_spec(
        tmp_path / "spec.yaml",
        tiny_overrides,
        stages=stages,
        variants={"base": [], "nope1": ["model.nope_from_layer=1"]},
    )
    out = tmp_path / "sweep"
    assert main(["sweep", str(spec), "--out", str(out), "engine.workers=2"]) == 0
    assert "4/4 runs done, 0 failed, 0 retried (none), engine local" in capsys.readouterr().out
    assert_finished(out, spec)
    assert (out / "runs/nope1-number-s1/theory/discrepancy_summary.csv").exists()
    rows = (out / "summary.csv").read_text().splitlines()
    assert rows[0] == "variant,task,metric,mean,sd,n,value"
    assert any(r.startswith("nope1,number,test_accuracy,") and r.endswith(",2,") for r in rows)
    assert any(r.startswith("base,number,len_acc_10,") for r in rows)  # the length curve, all hops
    assert (out / "figures/sweep_accuracy.png").exists() and (out / "figures/sweep_layer_scores.svg").exists()
    # The claims table per seed: seed 1's verdicts are those of its run read as a reproduction alone.
    claims = read_csv(out / "claims_by_seed.csv")
    assert {(r["variant"], r["seed"]) for r in claims} == {(v, s) for v in ("base", "nope1") for s in ("0", "1")}
    # The same grading as a reproduction's, over that one seed.
    ev = load_evidence({"number": [RunDir.open(out / "runs/base-number-s1")]}, None)
    specs = [s for s in load_claims() if s.kind == "empirical" and s.measure not in SWEEP_SKIPS]
    alone = check_claims(ev, specs, power=False)
    mine = [r for r in claims if r["variant"] == "base" and r["seed"] == "1"]
    fields = ("claim", "ours", "verdict")
    assert [tuple(r[f] for f in fields) for r in mine] == [tuple(getattr(c, f) for f in fields) for c in alone]
    assert "| number-task hops are learned in order |" in (out / "claims_by_seed.md").read_text()
    # Rerunning skips everything: no stage of any run starts again.
    final = RunDir.open(out / "runs/base-number-s0").checkpoint_path(30).stat().st_mtime_ns
    assert main(["sweep", str(spec), "--out", str(out), "engine.workers=2"]) == 0
    assert "4/4 runs done, 0 failed, 0 retried (none)" in capsys.readouterr().out
    for rid in ("base-number-s0", "nope1-number-s1"):
        assert attempts(out, rid) == {"training": 1, "score": 1, "lengthgen": 1, "discrepancy": 1}
    assert RunDir.open(out / "runs/base-number-s0").checkpoint_path(30).stat().st_mtime_ns == final


@pytest.mark.long
def test_a_failing_stage_keeps_the_finished_ones_and_a_rerun_completes_it(tmp_path, tiny_overrides, capsys):
    bad = write_spec(
        tmp_path / "bad.yaml", tiny_overrides, seeds=[0], stages={"score": SCORE, "discrepancy": {"step": 999}}
    )
    out = tmp_path / "sweep"
    assert main(["sweep", str(bad), "--out", str(out), "engine.workers=1"]) == 1
    printed = capsys.readouterr().out
    assert "0/1 runs done, 1 failed" in printed and "FAILED number-s0" in printed
    entry = log(out, "number-s0")
    # The refused setting was refused before the run's memo was touched; the run's log holds the error.
    assert "discrepancy" not in entry and "no checkpoint for step 999" in (out / "logs/number-s0.log").read_text()
    assert entry["training"]["status"] == entry["score"]["status"] == "done"
    good = write_spec(
        tmp_path / "good.yaml",
        tiny_overrides,
        seeds=[0],
        stages={"score": SCORE, "discrepancy": {"samples": 4, "extras": [0, 10]}},
    )
    assert main(["sweep", str(good), "--out", str(out), "engine.workers=1"]) == 0
    assert attempts(out, "number-s0") == {"training": 1, "score": 1, "discrepancy": 1}
    assert all(e["status"] == "done" and e["error"] is None for e in log(out, "number-s0").values())


def test_a_changed_run_config_is_refused_not_mixed(tmp_path, tiny_overrides, capsys):
    out = tmp_path / "sweep"
    spec = write_spec(tmp_path / "a.yaml", tiny_overrides, seeds=[0], stages={})
    assert main(["sweep", str(spec), "--out", str(out), "engine.workers=1"]) == 0
    before = (out / "runs/number-s0/config.yaml").read_text()
    changed = write_spec(tmp_path / "b.yaml", [*tiny_overrides, "train.lr=2e-3"], seeds=[0], stages={})
    assert main(["sweep", str(changed), "--out", str(out), "engine.workers=1"]) == 2
    assert "train.lr differ" in capsys.readouterr().err
    assert (out / "runs/number-s0/config.yaml").read_text() == before and attempts(out, "number-s0") == {"training": 1}


@pytest.mark.long
def test_a_run_is_its_resolved_config_so_an_equivalent_spelling_continues_it(tmp_path, tiny_overrides):
    out = tmp_path / "sweep"
    spec = write_spec(tmp_path / "a.yaml", tiny_overrides, seeds=[0], stages={})
    assert main(["sweep", str(spec), "--out", str(out), "engine.workers=1"]) == 0
    # The same config spelled otherwise: overrides reversed, and a default restated.
    same = write_spec(tmp_path / "b.yaml", [*reversed(tiny_overrides), "train.grad_clip=1.0"], seeds=[0],
                      stages={"score": SCORE})
    (run,) = load_experiment(str(same)).runs()
    assert run.config() == RunDir.open(out / "runs" / run.id).config
    assert main(["sweep", str(same), "--out", str(out), "engine.workers=1"]) == 0
    assert attempts(out, "number-s0") == {"training": 1, "score": 1}  # only the added stage ran


@pytest.mark.long
def test_killing_the_sweep_loses_no_finished_run_and_the_interrupted_one_resumes(tmp_path, tiny_overrides):
    steps = [*tiny_overrides, "train.steps=150", "train.checkpoint_every=25", "train.state_every=25"]
    spec = write_spec(tmp_path / "spec.yaml", steps, seeds=[0, 1], stages={})
    out = tmp_path / "sweep"
    cmd = [sys.executable, "-m", "possym", "sweep", str(spec), "--out", str(out), "engine.workers=1"]
    proc = subprocess.Popen(cmd, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    second = out / "runs/number-s1"
    deadline = time.monotonic() + 240

    def first_done() -> bool:
        return (out / "runs/number-s0/resume.json").is_file() and log(out, "number-s0")["training"]["status"] == "done"

    while not (first_done() and (second / "state.pt").is_file() and RunDir.open(second).load_state()["step"] >= 25):
        assert proc.poll() is None and time.monotonic() < deadline, "the sweep stopped or hung"
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)  # the driver and its worker, mid-training of the second run
    proc.wait()
    killed_at = time.time()
    resumed_from = RunDir.open(second).load_state()["step"]
    assert 25 <= resumed_from < 150 and log(out, "number-s1")["training"]["status"] == "running"
    assert main(["sweep", str(spec), "--out", str(out), "engine.workers=1"]) == 0
    assert attempts(out, "number-s0") == {"training": 1}  # finished: not rerun
    assert attempts(out, "number-s1") == {"training": 2}
    # Resumed from its state, not restarted: the evaluations up to the state are the first run's, once each.
    evals = [r for r in RunDir.open(second).metrics() if r.get("event") == "eval"]
    assert [r["step"] for r in evals] == list(range(0, 151, 10))
    assert all(r["time"] <= killed_at for r in evals if r["step"] <= resumed_from)
    assert all(r["time"] > killed_at for r in evals if r["step"] > resumed_from)


@pytest.mark.long
def test_ray_engine_with_two_cpus(tmp_path, tiny_overrides, capsys):
    ray = pytest.importorskip("ray")
    spec = write_spec(tmp_path / "spec.yaml", tiny_overrides)
    out = tmp_path / "sweep"
    ray.init(num_cpus=2, include_dashboard=False)
    try:
        assert main(["sweep", str(spec), "--out", str(out), "engine.name=ray"]) == 0
    finally:
        ray.shutdown()
    assert "2/2 runs done, 0 failed, 0 retried (none), engine ray" in capsys.readouterr().out
    assert_finished(out, spec)


@pytest.mark.long
def test_slurm_engine_through_submitit_local_executor(tmp_path, tiny_overrides, capsys):
    pytest.importorskip("submitit")
    spec = write_spec(tmp_path / "spec.yaml", tiny_overrides)
    out = tmp_path / "sweep"
    assert (
        main(["sweep", str(spec), "--out", str(out), "engine.name=slurm", "engine.cluster=local", "engine.time_min=10"])
        == 0
    )
    assert "2/2 runs done, 0 failed, 0 retried (none), engine slurm" in capsys.readouterr().out
    assert_finished(out, spec)
    assert any((out / "submitit").iterdir())  # submitit's own job folders


def test_missing_engine_extra_is_named(monkeypatch, tmp_path, tiny_overrides):
    monkeypatch.setitem(sys.modules, "ray", None)  # as if not installed
    spec = write_spec(tmp_path / "spec.yaml", tiny_overrides)
    with pytest.raises(ImportError, match=r"pip install 'possym\[ray\]'"):
        main(["sweep", str(spec), "--out", str(tmp_path / "o"), "engine.name=ray"])


def test_the_slurm_engine_without_sbatch_says_where_to_run_it(monkeypatch, tmp_path, tiny_overrides, capsys):
    pytest.importorskip("submitit")
    monkeypatch.setenv("PATH", str(tmp_path))  # no Slurm commands here
    spec = write_spec(tmp_path / "spec.yaml", tiny_overrides)
    assert main(["sweep", str(spec), "--out", str(tmp_path / "o"), "engine.name=slurm"]) == 2
    assert "sbatch" in capsys.readouterr().err and not (tmp_path / "o/runs").exists()


def _alive(pid: int) -> bool:
    """Running, not a zombie waiting for its new parent to reap it."""
    try:
        return "State:\tZ" not in Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False


def test_a_local_worker_dies_with_a_killed_sweep(tmp_path):
    (tmp_path / "probe.py").write_text(
        "import os, time\n\ndef hold(path):\n    open(path, 'w').write(str(os.getpid()))\n    time.sleep(60)\n"
    )
    pid_file = tmp_path / "worker.pid"
    driver = (
        f"import sys; sys.path.insert(0, {str(tmp_path)!r}); from probe import hold; "
        f"from possym.sweep.engines import LocalEngine; list(LocalEngine(1).map(hold, [{str(pid_file)!r}]))"
    )
    proc = subprocess.Popen([sys.executable, "-c", driver], start_new_session=True)
    deadline = time.monotonic() + 60
    while not (pid_file.exists() and pid_file.read_text()):
        assert proc.poll() is None and time.monotonic() < deadline, "the worker never started"
        time.sleep(0.1)
    worker = int(pid_file.read_text())
    os.kill(proc.pid, signal.SIGKILL)  # the driver alone: its worker is orphaned mid-trial
    proc.wait()
    deadline = time.monotonic() + 10
    while _alive(worker):
        if time.monotonic() > deadline:
            os.kill(worker, signal.SIGKILL)
            pytest.fail("the orphaned worker kept running after its sweep was killed")
        time.sleep(0.1)
