"""Every packaged stage can be shipped to an engine's workers: a unit of work travels pickled (the local
pool spawns its workers), so a stage whose function is a lambda would fail in every worker."""

from __future__ import annotations

import pickle

import pytest

from possym.stages.registry import stages


@pytest.mark.parametrize("name", sorted(stages()))
def test_each_packaged_stage_and_its_default_settings_round_trip_through_pickle(name):
    stage = stages()[name]
    back = pickle.loads(pickle.dumps(stage))
    assert back.run is stage.run and back.name == name
    try:
        cfg = stage.settings_from({})
    except (TypeError, ValueError):  # a stage whose settings have no defaults
        return
    assert pickle.loads(pickle.dumps(cfg)) == cfg
