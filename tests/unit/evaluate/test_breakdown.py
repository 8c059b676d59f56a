"""Accuracy by K, hop count and answer position: the same windows and counts as the length curve, answer
positions from the independent solver, a brute-force count of a hand-made predictor, and a plane gated at
evaluation equal to the model built with that plane gated (its prefix cache included)."""

from __future__ import annotations

import dataclasses
from collections import Counter

import numpy as np
import pytest
import torch

from possym.config import ModelConfig, TaskConfig
from possym.errors import PossymError
from possym.evaluate.breakdown import (
    accuracy_table,
    fine_grid,
    length_points,
    length_predictions,
    plane_gate_curves,
    point_rows,
)
from possym.evaluate.interventions import GatePlanes, intervene
from possym.evaluate.lengthgen import LengthGenConfig, measure_length_curve
from possym.model.gptj import GPTJ
from possym.tasks import number_alphabet, solve, task_config, task_vocab

# Two letters: chance is 1/2, so a random model's correct counts differ from point to point and a
# window drawn differently from the length curve's would show in the counts.
TASK = task_config("number", n_letters=2)
CFG = LengthGenConfig(grid=(0, 5, 9), n=12, n_prefixes=3)


def model(task: TaskConfig = TASK, **options) -> GPTJ:
    cfg = ModelConfig(n_layers=2, d_model=16, d_mlp=32, d_vocab=len(task_vocab(task)), dropout=0.0, init_range=0.3,
                      **options)
    out = GPTJ(cfg, torch.Generator().manual_seed(0)).double().eval()
    with torch.no_grad():  # the answer is one of the letters: a bias makes the model pick between them
        out.unembed.bias[task_vocab(task).encode(number_alphabet(task.n_letters))] = 10.0
    return out


@pytest.mark.parametrize("mode", ["cached", "plain"])
def test_predictions_count_what_the_length_curve_counts(mode):
    cfg = dataclasses.replace(CFG, mode=mode)
    m = model()
    rows = length_predictions(m, TASK, cfg)
    table = accuracy_table(rows, by=("extra", "n_hops"))
    curve = {(r["extra"], r["n_hops"]): (r["correct"], r["n"]) for r in measure_length_curve(m, TASK, cfg)}
    ours = {(r.extra, r.n_hops): (r.correct, r.n) for r in table.itertuples()}
    assert ours == {k: v for k, v in curve.items() if k[1] > 0}
    assert 0 < rows["correct"].mean() < 1  # the counts carried information


def test_answer_positions_are_the_solvers():
    vocab = task_vocab(TASK)
    for point in length_points(TASK, dataclasses.replace(CFG, grid=(7,), n=4)):
        rows = point_rows(point, np.zeros(len(point.samples), dtype=np.int64))
        for tokens, t, dist, first in zip(point.samples.tokens, rows["answer_pos"], rows["answer_distance"],
                                          rows["first_key_pos"], strict=True):
            path = solve(TASK, vocab.decode(tokens)).path
            assert (t, dist) == (path[-1] - 7, path[0] - path[-1])
            assert first == path[1] - 7 and (first == t) == (len(path) == 2)  # 1 hop: the answer itself
            assert 0 <= t < TASK.n_target


def test_accuracy_by_answer_position_is_a_brute_force_count_of_a_hand_made_predictor():
    # The predictor is right exactly when the answer sits at an even window position or K is 9 (else it
    # answers PAD, which is never an answer); a coin decides the rest of K = 5.
    coin = np.random.default_rng(3)
    frames, truth = [], Counter()
    for point in length_points(TASK, CFG):
        s = point.samples
        t = s.path[np.arange(len(s)), s.n_hops] - s.extra
        right = (t % 2 == 0) | (point.extra == 9)
        if point.extra == 5:
            right = coin.random(len(s)) < 0.5
        frames.append(point_rows(point, np.where(right, s.answer, 0)))
        for h, pos, r in zip(s.n_hops.tolist(), t.tolist(), right.tolist(), strict=True):
            truth[point.extra, h, pos, "n"] += 1
            truth[point.extra, h, pos, "correct"] += int(r)
    import pandas as pd

    table = accuracy_table(pd.concat(frames, ignore_index=True))
    assert len(table) == len({k[:3] for k in truth})
    for r in table.itertuples():
        assert (r.n, r.correct) == (truth[r.extra, r.n_hops, r.answer_pos, "n"],
                                    truth[r.extra, r.n_hops, r.answer_pos, "correct"])
        assert r.ci_low <= r.accuracy <= r.ci_high
    even = table[(table.extra == 0) & (table.answer_pos % 2 == 0)]
    odd = table[(table.extra == 0) & (table.answer_pos % 2 == 1)]
    assert (even.accuracy == 1).all() and (odd.accuracy == 0).all()


@pytest.mark.parametrize("mode", ["cached", "plain"])
def test_a_plane_gated_at_evaluation_predicts_as_the_model_built_with_it_gated(mode):
    # Gating layer 0 changes the prefix's keys in layer 1: a cache computed outside the gate would differ.
    cfg = dataclasses.replace(CFG, mode=mode, grid=(3, 20), n=24)
    plain = model()
    n_planes = plain.cfg.n_planes
    built = model(freq_gate=f"0@{n_planes}")
    built.load_state_dict(plain.state_dict())
    gated = length_predictions(plain, TASK, cfg, edit=lambda m: intervene(m, GatePlanes({0: range(1, n_planes)})))
    oracle = length_predictions(built, TASK, cfg)
    assert (gated["predicted"] == oracle["predicted"]).all()
    assert (gated["predicted"] != length_predictions(plain, TASK, cfg)["predicted"]).any()  # the gate did something
    one = model(freq_gate="0@" + ",".join(str(k) for k in range(2, n_planes + 1)))
    one.load_state_dict(plain.state_dict())
    curves = plane_gate_curves(plain, TASK, cfg, layers=[0], planes=[1])
    assert sorted({(r.layer, r.plane) for r in curves.itertuples()}) == [(-1, 0), (0, 1)]
    got = curves[curves.layer == 0].drop(columns=["layer", "plane"]).reset_index(drop=True)
    assert got.equals(accuracy_table(length_predictions(one, TASK, cfg), by=("extra", "n_hops")))


def test_bad_requests_say_what_is_wrong():
    with pytest.raises(PossymError, match="columns"):
        accuracy_table(length_predictions(model(), TASK, dataclasses.replace(CFG, grid=(0,))), by=("layer",))
    with pytest.raises(PossymError, match="start"):
        fine_grid(30, 20)
    with pytest.raises(PossymError, match="no layer"):
        plane_gate_curves(model(), TASK, CFG, layers=[], baseline=False)
