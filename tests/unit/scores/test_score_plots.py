"""The score figures take records or their DataFrame and return Figures; they never score or write."""

from __future__ import annotations

import torch
from matplotlib.figure import Figure

from possym.records import (
    FrequencyUseRecord,
    MetricsLog,
    PurityRecord,
    ScoreRecord,
    Table1Record,
    TallyRecord,
    frame,
)
from possym.report.score_plots import (
    fig2_dynamics,
    fig3_hop_attention,
    fig4b_geometry,
    fig6_layer_scores,
    fig7_purity,
    fig8_frequency_use,
)
from possym.scores.frequency import PlaneGeometry


def _scores(n_layers=3, steps=(0, 50, 100), **interval):
    return [ScoreRecord(step=s, query="last", layer=layer, head=0, s_pos=0.5, s_sym=0.9, entropy=1.0, n_inputs=4,
                        entropy_norm=0.3, **interval)
            for s in steps for layer in range(n_layers)]


def test_dynamics_figures_have_a_panel_per_layer_and_per_gamma():
    steps = (0, 50, 100)
    metrics = MetricsLog.from_json({"event": "eval", "step": s, "accuracy": s / 100, "acc_hop1": 1.0, "acc_hop2": 0.5}
                                   for s in steps)
    tally = [TallyRecord(gamma=0.1, step=s, positional=0, symbolic=int(s > 0)) for s in steps]
    first = [PurityRecord(gamma=0.1, layer=1, head=0, query="last", kind="symbolic", step=50, final_kind="symbolic",
                          final_kind_step=50)]
    fig = fig2_dynamics(_scores(), metrics, tally, first, layers=(1, 2), best_step=50)
    assert isinstance(fig, Figure) and len(fig.axes) == 4  # accuracy, two layers, tally
    assert "L1" in [t.get_text() for t in fig.axes[-1].texts]  # the new pure head is labelled
    assert len(fig6_layer_scores(_scores(n_layers=5)).axes) == 8  # 2 rows of 4; 3 switched off
    assert len(fig6_layer_scores(frame(_scores(n_layers=5), ScoreRecord)).axes) == 8  # a DataFrame alike
    assert len(fig7_purity({0.1: tally, 0.05: tally}, {0.1: first}).axes) == 2


def test_attention_geometry_and_frequency_figures():
    attention = torch.rand(3, 1, 2, 5)  # layer, head, hop, key
    assert len(fig3_hop_attention(attention, list("abcde"), [4, 2, 0]).axes) == 2
    geo = PlaneGeometry(2, 0.5, torch.randn(5, 2), torch.randn(5, 2), torch.arange(5), 4)
    assert isinstance(fig4b_geometry(geo), Figure)
    use = [FrequencyUseRecord(step=0, layer=layer, head=0, frequency_id=k, theta=1.0, use=1.0 / k)
           for layer in range(2) for k in range(1, 9)]
    table = [Table1Record(step=0, layer=layer, head=0, weighted_id=2.5, frequency_id=2, frequency=1.0, dominant_id=1)
             for layer in range(2)]
    assert "mean ID 2.5" in fig8_frequency_use(use, table).axes[0].get_title()


def test_score_panels_draw_the_interval_as_a_band_where_records_have_one():
    from matplotlib.collections import PolyCollection

    with_ci = _scores(n_layers=1, s_pos_low=0.4, s_pos_high=0.6, s_sym_low=0.85, s_sym_high=0.95)
    bands = [c for c in fig6_layer_scores(with_ci).axes[0].collections if isinstance(c, PolyCollection)]
    assert len(bands) == 2  # s_pos and s_sym
    ys = sorted(float(v[1]) for v in bands[0].get_paths()[0].vertices)
    assert ys[0] == 0.4 and ys[-1] == 0.6
    plain = [c for c in fig6_layer_scores(_scores(n_layers=1)).axes[0].collections if isinstance(c, PolyCollection)]
    assert plain == []  # records without intervals: no band
