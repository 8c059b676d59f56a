"""The command line turns the library's own refusals into one line and exit 2; anything else is a bug
and keeps its traceback."""

from __future__ import annotations

import pytest

from possym import cli
from possym.errors import PossymError, RunError


def _main_with(monkeypatch, exc: Exception) -> int:
    def fail(_args):
        raise exc

    real = cli.build_parser

    def parser(only=None):
        p = real(only)
        p._subparsers._group_actions[0].choices["export"].set_defaults(func=fail)  # type: ignore[union-attr]
        return p

    monkeypatch.setattr(cli, "build_parser", parser)
    return cli.main(["export", "RUN", "--out", "x"])


@pytest.mark.parametrize("exc", [PossymError("n=0 must be >= 1"), RunError("runs/x is not a directory")])
def test_a_library_refusal_is_one_line_and_exit_2(monkeypatch, capsys, exc):
    assert _main_with(monkeypatch, exc) == 2
    err = capsys.readouterr().err
    assert err == f"possym export: error: {exc}\n"


@pytest.mark.parametrize("exc", [ValueError("a bug"), KeyError("step"), FileNotFoundError("x")])
def test_any_other_exception_keeps_its_traceback(monkeypatch, exc):
    with pytest.raises(type(exc)):
        _main_with(monkeypatch, exc)


@pytest.mark.parametrize(("argv", "missing"), [
    (["sweep"], "spec, --out"), (["theory"], "--out"), (["score"], "run"), (["data"], "--task, --out"),
    (["reproduce"], "EXPERIMENT, --out"), (["canonical"], "--out"),
])
def test_a_missing_argument_names_only_what_is_required_never_the_optional_overrides(argv, missing, capsys):
    with pytest.raises(SystemExit) as stop:
        cli.main(argv)
    assert stop.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1].endswith(f"error: the following arguments are required: {missing}")
