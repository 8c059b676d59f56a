"""A run whose writer lock a process on another host holds: the executor is refused before the run is written,
its memo is left to the holder, and the refusal, with its advice, stays on disk in the run's log OUT/logs/ID.log
(in this process and on an engine's worker)."""

from __future__ import annotations

import json

import pytest

from possym.experiment import experiment_from_dict, run_experiment
from possym.locks import LOCK_FILE
from possym.runs import RunDir, ensure_run
from possym.stages.memo import run_memo
from possym.sweep.engines import LocalEngine


@pytest.mark.parametrize("engine", ["here", "local"])
def test_a_run_locked_on_another_host_is_refused_and_the_refusal_stays_in_its_log(tmp_path, tiny_overrides, engine):
    exp = experiment_from_dict({"tasks": ["number"], "overrides": tiny_overrides, "retries": 0,
                                "stages": {"training": {"group": False}}})
    (spec,) = exp.runs()
    run = ensure_run(tmp_path / "runs" / spec.id, spec.config())
    (run.path / LOCK_FILE).write_text(json.dumps({"host": "node-elsewhere", "pid": 4242}))
    outcome = run_experiment(exp, tmp_path, progress=False, engine=LocalEngine(1) if engine == "local" else None)
    advice = (f"run {run.path} is being written by process 4242 on node-elsewhere, a host this one cannot check; "
              f"if that process is gone, delete {run.path / LOCK_FILE}")
    assert advice in outcome.failed[spec.id]
    assert run_memo(run.path).entry("training") is None  # the memo is the lock holder's to write
    log = (tmp_path / "logs" / f"{spec.id}.log").read_text()
    assert "training failed:" in log and advice in log
    (run.path / LOCK_FILE).unlink()  # the advice
    assert run_experiment(exp, tmp_path, progress=False).failed == {} and RunDir.open(run.path).finished
