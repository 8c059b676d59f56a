"""Opening a directory that is not a run says what it is instead."""

from __future__ import annotations

import pytest

from possym.errors import RunError
from possym.runs import CONFIG, RunDir


def test_an_experiment_directory_opened_as_a_run_is_refused_naming_the_runs_it_holds(tmp_path):
    for name in ("number-s0", "letter-s0"):
        (tmp_path / "runs" / name).mkdir(parents=True)
        (tmp_path / "runs" / name / CONFIG).write_text("{}")
    (tmp_path / "runs" / "notes").mkdir()  # not a run: no config
    with pytest.raises(RunError) as refusal:
        RunDir.open(tmp_path)
    assert str(refusal.value) == (f"{tmp_path} is not a run directory: it has no {CONFIG}; it holds an experiment's "
                                  f"runs: {tmp_path / 'runs' / 'letter-s0'}, {tmp_path / 'runs' / 'number-s0'}")


def test_any_other_directory_is_refused_with_what_it_lacks(tmp_path):
    with pytest.raises(RunError, match=f"is not a run directory: it has no {CONFIG}$"):
        RunDir.open(tmp_path)
