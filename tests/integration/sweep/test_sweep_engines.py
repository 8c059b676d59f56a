"""`possym sweep` for real, with tiny trials: the local pool (2 workers), Ray (num_cpus=2), submitit's local executor;
resuming after a failure and after a kill, and the summary."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from possym.sweep.spec import expand, load_spec

from possym.cli import main
from possym.report.claims import frequency_claims, head_claims, learning_claims, length_claims
from possym.report.evidence import legacy_runs, load_evidence
from possym.runs import RunDir, read_csv

SCORE = {"n_inputs": 4, "figures": False, "frequency": False}


def write_spec(path: Path, tiny: list[str], seeds=(0, 1), stages=None, **extra) -> Path:
    data = {
        "tasks": ["number"],
        "seeds": list(seeds),
        "overrides": tiny,
        "stages": stages if stages is not None else {"score": SCORE},
        "retries": 0,
        **extra,
    }
    path.write_text(yaml.safe_dump(data))
    return path


def stage_runs(trial_dir: Path, stage: str) -> int:
    """How many times the trial's log shows STAGE starting."""
    return (trial_dir / "log.txt").read_text().count(f"== {stage} (")


def assert_finished(out: Path, spec: Path) -> None:
    for trial in expand(load_spec(spec), out):
        record = json.loads((Path(trial.state_dir) / "DONE").read_text())
        assert record["status"] == "done"
        assert (Path(trial.run_dir) / "scores.csv").exists()


def test_local_engine_runs_every_stage_then_resumes_without_redoing_work(tmp_path, tiny_overrides):
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
    assert main(["sweep", str(spec), "--out", str(out), "--workers", "2"]) == 0
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
    (tmp_path / "alone").mkdir()
    (tmp_path / "alone/number").symlink_to(out / "runs/base-number-s1")
    ev = load_evidence(legacy_runs(tmp_path / "alone"), None)
    alone = learning_claims(ev) + head_claims(ev) + frequency_claims(ev) + length_claims(ev)
    mine = [r for r in claims if r["variant"] == "base" and r["seed"] == "1"]
    fields = ("claim", "ours", "verdict")
    assert [tuple(r[f] for f in fields) for r in mine] == [tuple(c[f] for f in fields) for c in alone]
    assert "| number-task hops are learned in order |" in (out / "claims_by_seed.md").read_text()
    # Rerunning skips everything; a stage added to the spec runs alone on the finished trials.
    assert main(["sweep", str(spec), "--out", str(out), "--workers", "2"]) == 0
    trial = out / "trials/base-number-s0"
    assert stage_runs(trial, "train") == 1 and stage_runs(trial, "score") == 1


def test_a_failing_stage_keeps_the_finished_ones_and_a_rerun_completes_it(tmp_path, tiny_overrides, capsys):
    bad = write_spec(
        tmp_path / "bad.yaml", tiny_overrides, seeds=[0], stages={"score": SCORE, "discrepancy": {"step": 999}}
    )
    out = tmp_path / "sweep"
    assert main(["sweep", str(bad), "--out", str(out), "--workers", "1"]) == 1
    assert "FAILED baseline-number-s0" in capsys.readouterr().out
    trial = out / "trials/baseline-number-s0"
    report = json.loads((trial / "failed.json").read_text())
    assert "stage discrepancy failed (RunError: no checkpoint for step 999" in report["error"] and report["final"]
    assert (trial / "train.done").exists() and (trial / "score.done").exists()
    good = write_spec(
        tmp_path / "good.yaml",
        tiny_overrides,
        seeds=[0],
        stages={"score": SCORE, "discrepancy": {"samples": 4, "extras": [0, 10]}},
    )
    assert main(["sweep", str(good), "--out", str(out), "--workers", "1"]) == 0
    assert stage_runs(trial, "train") == 1 and stage_runs(trial, "discrepancy") == 2
    assert not (trial / "failed.json").exists()


def test_a_changed_trial_config_is_refused_not_mixed(tmp_path, tiny_overrides, capsys):
    out = tmp_path / "sweep"
    spec = write_spec(tmp_path / "a.yaml", tiny_overrides, seeds=[0], stages={})
    assert main(["sweep", str(spec), "--out", str(out), "--workers", "1"]) == 0
    changed = write_spec(tmp_path / "b.yaml", [*tiny_overrides, "train.lr=2e-3"], seeds=[0], stages={})
    assert main(["sweep", str(changed), "--out", str(out), "--workers", "1"]) == 2
    assert "already exist with other settings" in capsys.readouterr().err


def test_a_trial_is_its_resolved_config_so_an_equivalent_spelling_continues_it(tmp_path, tiny_overrides):
    out = tmp_path / "sweep"
    spec = write_spec(tmp_path / "a.yaml", tiny_overrides, seeds=[0], stages={})
    assert main(["sweep", str(spec), "--out", str(out), "--workers", "1"]) == 0
    # The same config spelled otherwise: overrides reversed, and a default restated.
    same = write_spec(tmp_path / "b.yaml", [*reversed(tiny_overrides), "train.grad_clip=1.0"], seeds=[0],
                      stages={"score": SCORE})
    (trial,) = expand(load_spec(same), out)
    assert trial.config() == RunDir.open(trial.run_dir).config
    assert main(["sweep", str(same), "--out", str(out), "--workers", "1"]) == 0
    state = out / "trials/baseline-number-s0"
    assert stage_runs(state, "train") == 1 and stage_runs(state, "score") == 1  # only the added stage ran


def test_killing_the_sweep_loses_no_finished_trial(tmp_path, tiny_overrides):
    spec = write_spec(
        tmp_path / "spec.yaml",
        [*tiny_overrides, "train.steps=150", "train.checkpoint_every=25"],
        seeds=[0, 1],
        stages={},
    )
    out = tmp_path / "sweep"
    cmd = [
        sys.executable,
        "-c",
        "import sys; from possym.cli import main; sys.exit(main())",
        "sweep",
        str(spec),
        "--out",
        str(out),
        "--workers",
        "1",
    ]
    proc = subprocess.Popen(cmd, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    first, second = out / "trials/baseline-number-s0", out / "runs/baseline-number-s1"
    deadline = time.monotonic() + 240
    while not (
        (first / "DONE").exists() and (second / "checkpoints").is_dir() and any((second / "checkpoints").iterdir())
    ):
        assert proc.poll() is None and time.monotonic() < deadline, "the sweep stopped or hung"
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)  # the driver and its worker, mid-training of the second trial
    proc.wait()
    assert main(["sweep", str(spec), "--out", str(out), "--workers", "1"]) == 0
    assert stage_runs(first, "train") == 1  # finished: not rerun
    log = (out / "trials/baseline-number-s1/log.txt").read_text()
    assert "== train (baseline-number-s1): resuming" in log  # interrupted: resumed from its checkpoint, not restarted


def test_ray_engine_with_two_cpus(tmp_path, tiny_overrides):
    ray = pytest.importorskip("ray")
    spec = write_spec(tmp_path / "spec.yaml", tiny_overrides)
    out = tmp_path / "sweep"
    ray.init(num_cpus=2, include_dashboard=False)
    try:
        assert main(["sweep", str(spec), "--out", str(out), "--engine", "ray"]) == 0
    finally:
        ray.shutdown()
    assert_finished(out, spec)


def test_slurm_engine_through_submitit_local_executor(tmp_path, tiny_overrides):
    pytest.importorskip("submitit")
    spec = write_spec(tmp_path / "spec.yaml", tiny_overrides)
    out = tmp_path / "sweep"
    assert (
        main(["sweep", str(spec), "--out", str(out), "--engine", "slurm", "--cluster", "local", "--time-min", "10"])
        == 0
    )
    assert_finished(out, spec)
    assert any((out / "submitit").iterdir())  # submitit's own job folders


def test_missing_engine_extra_is_named(monkeypatch, tmp_path, tiny_overrides, capsys):
    monkeypatch.setitem(sys.modules, "ray", None)  # as if not installed
    spec = write_spec(tmp_path / "spec.yaml", tiny_overrides)
    with pytest.raises(ImportError, match=r"pip install 'possym\[ray\]'"):
        main(["sweep", str(spec), "--out", str(tmp_path / "o"), "--engine", "ray"])


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
