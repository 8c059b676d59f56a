"""Frequency conditions against what the model actually does with them (layer_frequencies, plane_allowed)."""

from __future__ import annotations

import pytest
import torch

from possym.canonical.conditions import condition, frequency_conditions
from possym.config import load_config
from possym.model.rope import layer_frequencies


def _model_cfg(c):
    cfg = load_config(
        "index",
        None,
        [
            "model.n_layers=1",
            "model.d_model=32",
            "model.mlp=false",
            *c.overrides,
        ],
    )
    return cfg.model


@pytest.mark.parametrize("c", frequency_conditions(32, 8), ids=lambda c: c.name)
def test_each_condition_lets_in_exactly_its_planes_at_its_angles(c) -> None:
    m = _model_cfg(c)
    allowed = [k + 1 for k, ok in enumerate(m.plane_allowed(0)) if ok]
    assert tuple(allowed) == c.planes
    theta = layer_frequencies(m, 0)  # the angle each plane really turns by
    assert torch.allclose(theta[[p - 1 for p in c.planes]], torch.tensor(c.thetas, dtype=torch.float64))


def test_every_condition_but_all_is_width_matched() -> None:
    assert {len(c.planes) for c in frequency_conditions(32, 8) if c.name != "all"} == {2}


def test_two_angle_is_one_static_plane_and_one_moderate_one() -> None:
    c = condition("two_angle", 32, 8)
    static = [t for t in c.thetas if t == 0]
    moving = [t for t in c.thetas if t > 0]
    assert len(static) == 1 and len(moving) == 1 and 0.5 < moving[0] * 8 < 2.0  # about a radian across the window


def test_bands_run_from_the_fastest_to_the_slowest() -> None:
    bands = [c for c in frequency_conditions(32, 8) if c.kind == "band"]
    assert [max(c.thetas) for c in bands] == sorted((max(c.thetas) for c in bands), reverse=True)
    assert bands[0].planes[0] == 1 and bands[-1].planes[-1] == 16


def test_an_unknown_condition_names_the_allowed_ones() -> None:
    with pytest.raises(ValueError, match="band1..band8"):
        condition("band9", 32, 8)
