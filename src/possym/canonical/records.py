"""The canonical grid's rows, one frozen record per CSV (see :mod:`possym.records`).

- :class:`CellRecord` (``results.csv``): one trained toy head (task, condition, seed, head) with its
  accuracies at 1x, 2x and 4x the training length, its scores, frequency use and plane geometry;
- :class:`PositionRecord` (``positions.csv``): correct/total counts of one run at one evaluation length
  and answer position, from which every accuracy curve and U test is computed;
- :class:`WmaxRecord` (``theorem7.csv``): one point of Theorem 7's w_max(j) curves.
"""

from __future__ import annotations

from dataclasses import dataclass

from possym.records import Record


@dataclass(frozen=True)
class CellRecord(Record):
    task: str
    condition: str
    seed: int
    head: int
    planes: str  # the plane IDs the condition lets in, e.g. "1-2" or "5,16"
    theta_centre: float  # geometric-mean angle of its rotating planes (0: none rotates)
    acc: float  # at the training length
    acc_2x: float
    acc_4x: float
    s_pos: float  # last-token query, mean over the scored inputs
    s_sym: float
    entropy: float
    dominant_id: int  # argmax of frequency use (1-based plane ID)
    dominant_s_pos: float  # the dominant plane's projection-head scores
    dominant_s_sym: float
    key_collapse: float  # mean resultant length of the pre-RoPE key directions on the dominant plane
    query_alignment: float  # mean resultant length of angle(R_δ* q) − angle(mean key) over inputs
    query_alignment_shuffled: float  # the same with the target offsets δ* shuffled across inputs
    train_s: float  # wall-clock seconds of training (0 when resumed from a finished run)


@dataclass(frozen=True)
class PositionRecord(Record):
    task: str
    condition: str
    seed: int
    length: int  # content tokens of the evaluated inputs
    position: int  # answer position
    correct: int
    total: int


@dataclass(frozen=True)
class WmaxRecord(Record):
    head: str  # "H_POS" or "H_SYM"
    theta: float
    beta: float
    n_content: int
    j: int
    w_max: float
    shape: str  # the two-sided contrast rule on the whole curve
