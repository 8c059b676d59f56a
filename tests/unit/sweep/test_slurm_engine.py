"""The slurm engine follows jobs through squeue, so that a job that dies is seen to end on a cluster without
accounting storage (where submitit's sacct answers nothing). Stand-in sbatch/squeue/srun scripts on PATH play
the cluster: no daemon, no root; the real cluster test is tests/integration/clusters."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from possym.config import ConfigError
from possym.errors import PossymError
from possym.sweep.engines import EngineConfig, SlurmEngine, make_engine, squeue_states


def fake_commands(tmp_path: Path, squeue_out: str, squeue_rc: int = 0, squeue_err: str = "") -> Path:
    """sbatch that accepts job 42 (running nothing), squeue that prints ``squeue_out``; no sacct."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls, left = tmp_path / "calls.txt", bin_dir / "leftovers.out"
    scripts = {
        "sbatch": f"echo sbatch >> {calls}; echo 'Submitted batch job 42'",
        "srun": "exit 0",
        # scancel ends what it names: the leftovers are gone once cancelled
        "scancel": f"echo scancel \"$@\" >> {calls}; : > {left}",
        # squeue --name: the jobs an earlier call left running (none unless a test writes them)
        "squeue": (f'case "$*" in *--name*) cat {left}; exit 0;; esac; '
                   f"cat {bin_dir / 'squeue.out'}; cat {bin_dir / 'squeue.err'} >&2; exit {squeue_rc}"),
    }
    (bin_dir / "squeue.out").write_text(squeue_out)
    (bin_dir / "squeue.err").write_text(squeue_err)
    left.write_text("")
    for name, body in scripts.items():
        path = bin_dir / name
        path.write_text(f"#!/bin/sh\n{body}\n")
        path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return bin_dir


def on_path(monkeypatch, bin_dir: Path) -> None:
    monkeypatch.setenv("PATH", f"{bin_dir}:/bin:/usr/bin")  # the stand-ins first, before any real Slurm


def test_squeue_states_reads_each_job_and_calls_one_it_no_longer_lists_gone(tmp_path, monkeypatch):
    on_path(monkeypatch, fake_commands(tmp_path, "42_0 RUNNING\n42_1 CANCELLED\n"))
    assert squeue_states(["42_0", "42_1", "42_2"]) == {"42_0": "RUNNING", "42_1": "CANCELLED", "42_2": "GONE"}


def test_squeue_states_is_none_when_squeue_fails_and_gone_for_an_id_it_refuses(tmp_path, monkeypatch):
    on_path(monkeypatch, fake_commands(tmp_path, "", 1, "slurm_load_jobs error: Unable to contact controller"))
    assert squeue_states(["42_0"]) is None  # unknown: keep waiting, never call a job ended on a failed query
    other = tmp_path / "other"
    other.mkdir()
    on_path(monkeypatch, fake_commands(other, "", 1, "slurm_load_jobs error: Invalid job id specified"))
    assert squeue_states(["42_0"]) == {"42_0": "GONE"}


def test_jobs_that_end_without_a_result_are_errors_naming_their_state_without_sacct(tmp_path, monkeypatch):
    pytest.importorskip("submitit")
    on_path(monkeypatch, fake_commands(tmp_path, "42_0 CANCELLED\n42_1 FAILED\n"))
    engine = SlurmEngine(tmp_path / "jobs", poll_s=0.05)
    outcomes = {item: (result, error) for item, result, error in engine.map(abs, [-1, -2])}
    assert set(outcomes) == {-1, -2} and all(result is None for result, _ in outcomes.values())
    assert outcomes[-1][1].splitlines()[-1].startswith("slurm job 42_0 ended CANCELLED without a result")
    assert outcomes[-2][1].splitlines()[-1].startswith("slurm job 42_1 ended FAILED without a result")
    assert (tmp_path / "calls.txt").read_text().split() == ["sbatch"]  # nothing left over, nothing to cancel


def test_jobs_an_earlier_killed_call_left_running_are_cancelled_before_their_runs_are_resubmitted(
        tmp_path, monkeypatch):
    pytest.importorskip("submitit")
    bin_dir = fake_commands(tmp_path, "42_0 CANCELLED\n")
    on_path(monkeypatch, bin_dir)
    (bin_dir / "leftovers.out").write_text("41_0\n41_1\n")
    engine = SlurmEngine(tmp_path / "jobs", poll_s=0.05)
    list(engine.map(abs, [-1]))
    # Cancelled first, then submitted: never two jobs training one run.
    assert (tmp_path / "calls.txt").read_text().splitlines() == ["scancel 41_0 41_1", "sbatch"]
    # One folder, one name: the next call finds these jobs; another sweep's folder has another.
    assert engine.job_name == SlurmEngine(tmp_path / "jobs").job_name != SlurmEngine(tmp_path / "other").job_name
    (script,) = (tmp_path / "jobs").rglob("*submission.sh")
    assert f"--job-name={engine.job_name}" in script.read_text()


def test_the_slurm_engine_refuses_without_sbatch_and_names_bad_settings(tmp_path, monkeypatch):
    pytest.importorskip("submitit")
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(PossymError, match="sbatch"):
        make_engine(EngineConfig(name="slurm"), tmp_path)
    on_path(monkeypatch, fake_commands(tmp_path, ""))
    with pytest.raises(ConfigError, match="engine.array_parallelism=0 must be >= 1"):
        EngineConfig(name="slurm", array_parallelism=0)
    with pytest.raises(ConfigError, match="engine.name='pbs' is not an engine; allowed"):
        EngineConfig(name="pbs")
    engine = make_engine(EngineConfig(name="slurm", slurm={"no_such_setting": 1}), tmp_path)
    with pytest.raises(PossymError, match="no_such_setting"):
        engine._executor()


def test_sbatch_settings_reach_the_job_script(tmp_path, monkeypatch):
    pytest.importorskip("submitit")
    on_path(monkeypatch, fake_commands(tmp_path, "42_0 CANCELLED\n42_1 CANCELLED\n"))
    cfg = EngineConfig(name="slurm", partition="gpu", time_min=30, gpus=1, array_parallelism=1,
                       slurm={"account": "abc", "mem_gb": 16})
    engine = make_engine(cfg, tmp_path, cpus=2)
    list(engine.map(abs, [-1, -2]))  # two runs: one job array
    (script,) = (tmp_path / "submitit").rglob("*submission.sh")
    text = script.read_text()
    for flag in ("--partition=gpu", "--time=30", "--gpus-per-node=1", "--cpus-per-task=2", "--array=0-1%1",
                 "--account=abc", "--mem=16GB"):
        assert flag in text, f"{flag} not in {script}:\n{text}"


def test_a_job_that_raised_reports_its_own_exception_last_where_the_sweep_reads_it(tmp_path):
    pytest.importorskip("submitit")
    engine = SlurmEngine(tmp_path / "jobs", cluster="local", poll_s=0.05)  # submitit's local jobs: real processes
    ((item, result, error),) = engine.map(int, ["x"])
    assert item == "x" and result is None
    assert error.splitlines()[-1] == "ValueError: invalid literal for int() with base 10: 'x'", error
    assert str(tmp_path / "jobs") in error, "the job's log paths are still named"
