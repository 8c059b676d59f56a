"""`possym --help` answers without importing torch, scipy or pandas (it took 3 s), listing every command with the
one-line help its module registers."""

from __future__ import annotations

import argparse
import subprocess
import sys

import pytest

from possym import cli

HEAVY = ("torch", "scipy", "pandas", "matplotlib", "transformers")


def test_possym_help_imports_no_heavy_package():
    code = ("import sys\nfrom possym.cli import main\ntry:\n    main(['--help'])\nexcept SystemExit as e:\n"
            f"    assert e.code == 0\nprint(sorted(m for m in {HEAVY!r} if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "COMMAND" in out and "heads" in out and "positional/symbolic scores of every head" in out
    assert out.strip().splitlines()[-1] == "[]"


def test_the_help_listing_is_the_help_each_command_registers():
    assert set(cli.SUMMARIES) == set(cli.SUBCOMMANDS)
    for name in cli.SUBCOMMANDS:
        sub = next(a for a in cli.build_parser(name)._actions if isinstance(a, argparse._SubParsersAction))
        assert {c.dest: c.help for c in sub._choices_actions}[name] == cli.SUMMARIES[name], name


def test_a_command_still_gets_its_own_parser_and_an_unknown_one_the_list(capsys):
    with pytest.raises(SystemExit) as done:
        cli.parse(["data", "--help"])
    help_text = capsys.readouterr().out
    assert done.value.code == 0 and "data.extra=0" in help_text and ">>>" not in help_text  # the command's own keys
    with pytest.raises(SystemExit) as done:
        cli.parse(["bogus"])
    assert done.value.code == 2 and "invalid choice: 'bogus'" in capsys.readouterr().err
