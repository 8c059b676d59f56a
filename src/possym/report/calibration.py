"""The positive control: every claim's rule run on the paper's own data, which it must grade as agreeing.

A rule that grades the paper against itself "differs" tests a reading the paper does not hold, and is
mended before it grades us (docs/replication.md, "Calibration"). :func:`paper_evidence` turns the
paper's reported numbers (:func:`possym.paper.paper_numbers`: Fig. 2A's digitised per-hop curves, Fig.
2C's purity onsets, Fig. 6's final scores, Table 1, Fig. 5B) into one "seed" of evidence per task, the
form our runs take; :func:`calibrate` grades it by :func:`possym.report.claims.check_claims` and says,
per claim, which of the paper's data fed it, or why none could ("n/a: the paper reports only ...").

A claim passes when the verdict is one of :data:`AGREEING`: ``match``, or its counterparts at the floor
(``uninformative``) and the ceiling (``ceiling``), where the rule declines to call agreement evidence.

:func:`digitisation_error` measures how far values read off the paper's figures lie from the truth,
on the one figure whose truth is known: Fig. 5A plots Theorem 3.2's closed-form bounds.

Example:
    >>> rows = calibrate()
    >>> all(r.verdict in AGREEING or r.verdict == "n/a" for r in rows)
    True
    >>> round(digitisation_error(), 4)
    0.0005
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from possym.config import load_config
from possym.paper import paper_numbers
from possym.records import (
    ClaimRecord,
    LengthRecord,
    PurityRecord,
    Record,
    ScoreRecord,
    Table1Record,
)
from possym.report.claims import FIG2A_SPACING, PAPER_STEPS, Evidence, TaskEvidence, check_claims, fig2a_first
from possym.report.evidence import chance
from possym.report.rules import CEILING, DIGITISATION, MATCH, NA, UNINFORMATIVE

AGREEING = (MATCH, UNINFORMATIVE, CEILING)
PAPER_EVAL_EVERY = 50  # the authors' recipe evaluates every 50 steps (configs/paper.yaml)
FIG6_STEP = 6000


@dataclass(frozen=True)
class CalibrationRecord(Record):
    """One claim graded on the paper's own data (``calibration.csv``): which data, the verdict, and how."""

    claim: str
    data: str
    verdict: str
    detail: str
    passes: bool


def digitisation_error() -> float:
    """The largest gap between Fig. 5A's digitised points and the closed forms the figure plots (Theorem 3.2 at
    θ = 0.8 for the index bound; θ = 0.0027, ω = 2π/8 for the retrieval bound)."""
    fig = paper_numbers()["fig5a_discrepancy_bounds"]
    gaps = []
    for n, index, retrieval in zip(fig["n"], fig["index"], fig["retrieval"], strict=True):
        if index is not None:
            gaps.append(abs(index - min(1 - math.cos(0.8), 2 * math.pi ** 2 / n ** 2)))
        if retrieval is not None:
            gaps.append(abs(retrieval - (1 - math.cos(2 * math.pi / 8 - n * 0.0027))))
    return max(gaps)


def _chance(task: str) -> float:
    """A uniform guess's accuracy on the paper's ``task``, as the task declares it (possym.tasks.Task.chance)."""
    return chance(load_config(task, "paper"))


def _purity(layer: int, kind: str, step: int | None, final: str, gamma: float = 0.1) -> PurityRecord:
    return PurityRecord(layer=layer, head=0, query="last", gamma=gamma, kind=kind, step=step, final_kind=final,
                        final_kind_step=step if final else None)


def _final_score(layer: int, s_pos: float, s_sym: float) -> ScoreRecord:
    return ScoreRecord(FIG6_STEP, "last", layer, 0, s_pos, s_sym, entropy=math.nan, n_inputs=0)


def _curve(task: str) -> list[LengthRecord]:
    fig = paper_numbers()["fig5b_length_generalisation"]
    return [LengthRecord(k, 0, k + 17, a, 0, 0, a, a, 1, 0.0, max(a - DIGITISATION, 0.0), min(a + DIGITISATION, 1.0),
                         "paper") for k, a in zip(fig["extra"], fig[f"{task}_task"], strict=True)]


def _fig5a(function: str) -> list[tuple[float, float | None]]:
    """Fig. 5A's digitised bound of ``function`` ("index", "retrieval") against n (None where not read)."""
    fig = paper_numbers()["fig5a_discrepancy_bounds"]
    return [(float(n), b) for n, b in zip(fig["n"], fig[function], strict=True)]


def _paper_seed(task: str, bound: str, purity: list[PurityRecord], scores: list[ScoreRecord],
                solved: dict[str, int | None], best_step: int) -> TaskEvidence:
    """One task's reported numbers as one seed: Table 1's IDs, Fig. 5B's curve and Fig. 5A's ``bound`` with what
    is given (the purity table, the final scores, the first steps at 0.9 and the step of maximum accuracy)."""
    ids = paper_numbers()["table1_weighted_frequency_id"][f"{task}_task"]
    return TaskEvidence(
        n_layers=12, seed=0, chance=_chance(task), purity=purity, scores=scores,
        table1=[Table1Record(FIG6_STEP, layer, 0, float(i), int(i), math.nan, int(i)) for layer, i in enumerate(ids)],
        lengthgen=_curve(task), decay_bound=_fig5a(bound), best_step=best_step, eval_every=PAPER_EVAL_EVERY,
        solved=solved, trained_steps=PAPER_STEPS, solved_spacing=FIG2A_SPACING,
        lengthgen_step="the paper's evaluated model", scores_step=f"step {FIG6_STEP}", table1_step="Table 1")


def paper_evidence() -> Evidence:
    """The paper's reported numbers as one seed of each task (seed label 0): what our rules read from a run."""
    d = paper_numbers()
    fig2a, fig2a_l = d["fig2a_number_task_test_accuracy_by_hop"], d["fig2a_letter_task_test_accuracy_global"]
    fig2c, fig6 = d["fig2c_purity_gamma_0.1"], d["fig6_final_scores_last_token_step_6000"]

    # Number task. Fig. 2C: L0-L3 become pure positional (onsets read off the figure), L4-L11 pure symbolic
    # between steps 2500 and 3000 (the later end taken); Fig. 6: L0 ends mixed, the rest pure; at γ = 0.05
    # only L1 and L2 are pure positional (the paper's text).
    pos_onsets = {int(k[1:]): v for k, v in fig2c["number_task"]["first_pure_step_approx"].items()}
    sym_onset = fig2c["number_task"]["symbolic_between_steps"][1]
    number_purity = [_purity(layer, "positional", pos_onsets[layer], "positional" if layer else "")
                     for layer in fig2c["number_task"]["pure_positional_layers"]]
    number_purity += [_purity(layer, "symbolic", sym_onset, "symbolic")
                      for layer in fig2c["number_task"]["pure_symbolic_layers"]]
    number_purity += [_purity(layer, "positional", pos_onsets[layer], "positional", gamma=0.05) for layer in (1, 2)]
    number_scores = [_final_score(int(k[1:]), *v) for k, v in fig6["number_task"].items() if k[1:].isdigit()]
    number_scores += [_final_score(layer, 0.06, 0.99) for layer in range(4, 12)]  # "s_pos <= 0.06, s_sym >= 0.99"
    solved = {f"acc_hop{h}": fig2a_first(fig2a, f"hop{h}") for h in range(1, 5)}
    solved["accuracy"] = fig2a_first(fig2a, "global")
    number = _paper_seed("number", "index", number_purity, number_scores, solved, fig2a["max_accuracy_step"])

    # Letter task. Fig. 7: 3, 7, 11 layers pure symbolic at 2000, 2500, 3000 (which layers turn first is not
    # legible: taken in layer order); L0 never pure; no layer ever pure positional.
    counts = sorted((int(k), v) for k, v in fig2c["letter_task"]["count_by_step"].items())
    layers = iter(fig2c["letter_task"]["pure_symbolic_layers"])
    letter_purity, done = [], 0
    for step, count in counts:
        for _ in range(count - done):
            letter_purity.append(_purity(next(layers), "symbolic", step, "symbolic"))
        done = count
    letter_purity.append(_purity(0, "", None, ""))
    letter_scores = [_final_score(0, *fig6["letter_task"]["L0"])] + [_final_score(layer, 0.04, 1.0)
                                                                      for layer in range(1, 12)]
    letter = _paper_seed("letter", "retrieval", letter_purity, letter_scores,
                         {"accuracy": fig2a_first(fig2a_l, "global")}, fig2a_l["max_accuracy_step"])
    return Evidence({"number": [number], "letter": [letter]})


# What of the paper's data feeds each claim, by the claim's name (the first key contained in it).
DATA = (
    ("hops are learned in order", "Fig. 2A: the per-hop curves, digitised every 500 steps"),
    ("learned before", "Fig. 2A: both tasks' global curves"),
    ("step of maximum", "Fig. 2A: the dashed line"),
    ("first reaches", "Fig. 2A: the digitised curve"),
    ("converges only once", "Fig. 2C / 7 purity onsets, Fig. 6 final scores, Fig. 2A's dashed line"),
    ("n hops need", "Fig. 2A per-hop curves and Fig. 2C purity onsets"),
    ("as the layers purify", "Fig. 7 pure-symbolic counts at 2000/2500/3000 and Fig. 2A's global curve"),
    ("γ = 0.05", "the text of Sec. 3.3 (only L1 and L2 at γ = 0.05)"),
    ("layers that become", "Fig. 2C / Fig. 7 purity"),
    ("L4 becomes", "Fig. 2C purity"),
    ("no layer is ever pure positional", "Fig. 7 purity"),
    ("number task only", "Fig. 6 final scores"),
    ("pure heads at the end", "Fig. 6 final scores"),
    ("Table 1", "Table 1"),
    ("fastest rotations", "Table 1 with Fig. 6's final purity"),
    ("accuracy at +", "Fig. 5B, digitised"),
    ("extrapolates", "Fig. 5B, digitised"),
    ("resembles the theory", "Fig. 5A's digitised bounds (θ = 0.8, 0.0027) and Fig. 5B's digitised accuracy"),
)
# Claims the paper's data cannot feed, and why.
NOT_FED = {
    "letter-task hops are learned together": "n/a: the paper reports only the letter task's global curve (Fig. 2A), "
                                             "and says in words that its per-hop curves lie within a few points",
    "number task: attention follows the hop path (Fig. 3)":
        "n/a: the paper reports only one drawn input (Fig. 3A) and, in words, where three of its four hop queries "
        "attend; no rate over inputs",
    "letter task: attention follows the hop path (Fig. 3)":
        "n/a: the paper reports only one drawn input (Fig. 3B), and says that the number task's analysis "
        "'can be extrapolated' to it",
    "number task: L1's keys aligned and queries aimed, as T_Index's (Fig. 4B)":
        "n/a: the paper reports only a picture of one input's keys and queries in L1 (Fig. 4B), and no measure",
}
VERIFICATIONS = ("Thm. 3.1's constructions, Thm. 3.2's bounds and Fig. 5A's curves are checks of our code and of a "
                 "formula against the paper's; they have no data of the paper's to be graded on")


def _data(claim: str) -> str:
    return next((text for key, text in DATA if key in claim), "")


def calibrate() -> list[CalibrationRecord]:
    """Every empirical claim graded on the paper's own data (:func:`paper_evidence`), in the claims' order."""
    claims = [c for c in check_claims(paper_evidence()) if c.kind == "empirical"]
    rows = [CalibrationRecord(c.claim, _data(c.claim), c.verdict,
                              f"{c.ours}" + (f"; readings: {c.readings}" if c.readings else ""),
                              c.verdict in AGREEING) for c in claims]
    for claim, why in NOT_FED.items():
        rows = [r for r in rows if r.claim != claim]
        rows.append(CalibrationRecord(claim, why, NA, "", True))
    rows.append(CalibrationRecord("Theorem 3.1 and 3.2, Fig. 5A (verifications)", "n/a: " + VERIFICATIONS, NA, "",
                                  True))
    return rows


def failing(rows: list[CalibrationRecord] | None = None) -> list[CalibrationRecord]:
    """The claims whose rule grades the paper's own data as disagreeing (none, for a calibrated table)."""
    return [r for r in (calibrate() if rows is None else rows) if not r.passes]


def paper_claims() -> list[ClaimRecord]:
    """The claims graded on the paper's data, whole records (for reading the detail of one)."""
    return check_claims(paper_evidence())
