"""Every command's settings come from its configs as ``section.KEY=VALUE``: no flag of a command has the name of
a field of a config that command takes, unless that field has no default (a path, a model: what the command is
given, not how it works). A new command must say here which configs it takes, so that the rule reaches it."""

from __future__ import annotations

import argparse
import dataclasses

import pytest

from possym.cli import SUBCOMMANDS, build_parser
from possym.config import ModelConfig, Seeds, TrainConfig
from possym.experiment.spec import Experiment
from possym.stages.data import DataConfig
from possym.stages.heads import HeadsConfig
from possym.stages.llm import LLMConfig
from possym.stages.registry import stages
from possym.sweep.engines import EngineConfig
from possym.tasks import TaskConfig

RUN = [TaskConfig, ModelConfig, TrainConfig, Seeds]


def _stage(name: str) -> type:
    return stages()[name].config


def command_configs() -> dict[str, list[type]]:
    every_stage = [s.config for s in stages().values()]
    return {
        "data": [DataConfig, TaskConfig],
        "train": [*RUN, _stage("training")],
        "export": [],
        "summary": [],
        "llm": [LLMConfig],
        "score": [_stage("score")],
        "theory": [_stage("theory")],
        "discrepancy": [_stage("discrepancy")],
        "lengthgen": [_stage("lengthgen")],
        "reproduce": [Experiment, EngineConfig, *RUN, *every_stage],
        "sweep": [Experiment, EngineConfig, *RUN, *every_stage],
        "heads": [HeadsConfig],
        "canonical": [Experiment, *RUN, _stage("canonical_cell"), _stage("canonical_report")],
        "regrade": [],
        "migrate": [],
    }


def _flags(command: str) -> list[argparse.Action]:
    parser = build_parser(command)
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return [a for a in sub.choices[command]._actions if a.option_strings and a.dest != "help"]


def _defaulted(config: type) -> set[str]:
    return {f.name for f in dataclasses.fields(config)
            if f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING}


def test_every_command_names_the_configs_it_takes():
    assert set(command_configs()) == set(SUBCOMMANDS)


@pytest.mark.parametrize("command", sorted(SUBCOMMANDS))
def test_no_flag_restates_a_config_field_with_a_default(command):
    configs = command_configs()[command]
    restated = [(flag.option_strings[0], c.__name__) for flag in _flags(command) for c in configs
                if flag.dest in _defaulted(c)]
    assert not restated, (f"possym {command}: {restated} restate config fields that have a default; take them as "
                          "section.KEY=VALUE")


def test_the_rule_would_see_a_restating_flag(monkeypatch):
    """The rule can fail: a ``--workers`` flag on ``possym sweep`` beside ``engine.workers`` is caught."""
    import possym.cli.sweep as sweep_cli

    register = sweep_cli.register

    def with_flag(sub):
        register(sub)
        sub.choices["sweep"].add_argument("--workers", type=int, default=1)

    monkeypatch.setattr(sweep_cli, "register", with_flag)
    with pytest.raises(AssertionError, match=r"--workers.*EngineConfig"):
        test_no_flag_restates_a_config_field_with_a_default("sweep")
