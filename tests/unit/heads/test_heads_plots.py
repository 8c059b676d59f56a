"""The heads figures draw what the records hold: the detectors beside the s_pos/s_sym maps, on one scale."""

from __future__ import annotations

import numpy as np

from possym.heads.detectors import HEAD_NAMES
from possym.heads.plots import plot_heatmaps


def records(detectors: bool = True) -> list[dict]:
    rng = np.random.default_rng(0)
    out = []
    for layer in range(3):
        for head in range(2):
            row = {"layer": layer, "head": head, "s_pos": rng.random(), "s_sym": rng.random()}
            if detectors:
                row |= {name: rng.random() for name in HEAD_NAMES}
            out.append(row)
    return out


def test_the_heatmap_draws_the_detectors_beside_the_scores():
    rows = records()
    maps = [ax for ax in plot_heatmaps(rows).axes if ax.images]
    assert [ax.get_title() for ax in maps] == ["positional score", "symbolic score", "previous-token head",
                                               "duplicate-token head", "induction head"]
    for ax, key in zip(maps, ["s_pos", "s_sym", *HEAD_NAMES], strict=True):
        want = np.array([[r[key] for r in rows if r["layer"] == layer] for layer in range(3)])  # layer x head
        np.testing.assert_array_equal(ax.images[0].get_array(), want)
        assert ax.images[0].get_clim() == (0, 1)


def test_records_without_detectors_draw_the_two_maps_alone():
    nan = [r | {name: float("nan") for name in HEAD_NAMES} for r in records(detectors=False)]
    for rows in (records(detectors=False), nan):  # none in the records, or none the model returned
        assert [ax.get_title() for ax in plot_heatmaps(rows).axes if ax.images] == ["positional score",
                                                                                   "symbolic score"]
