"""The rules on the paper's own data before they grade us: a positive control and two negative ones per claim.

**Positive** (:func:`calibrate`): the paper's reported numbers (:func:`paper_evidence`: Fig. 2A's digitised
curves, Fig. 2C's purity onsets, Fig. 6's final scores, Table 1, Fig. 5A/5B) become one "seed" of each task, and
each claim is graded on them through the same multi-seed path that grades us (:func:`possym.report.grading
.grade_measured`): for a number, the paper's value as one draw among synthetic seeds at our spread (our seeds'
deviations from their mean, moved to the paper's value on the rule's scale); for a statement, the paper's seed
repeated as many times as we have seeds. It must grade ``match`` (or ``uninformative`` / ``ceiling``, where the
rule declines to call agreement evidence). A number whose margin our spread cannot reach is ``consistent`` here:
the row says so, and the claim can be at best consistent.

**Negative**: the same claim (a) graded on the other task's evidence, where the paper states it of one task only
(``negative: other_task``: the tasks swapped), and (b) for a number, on our seeds moved to 1.5 margins from the
paper's value; neither may grade ``match``.

Each row says how the paper's data feeds the claim (``calibration`` in claims.yaml): *derived* (the measure
computes the property from the paper's raw data, and could fail), *identity* (the paper's number is fed back as
its own evidence: a check of the plumbing), or *n/a* (the paper has no data for it, or it is a check of our code);
:func:`calibration_counts` counts each apart, and an n/a row is never counted as a pass.

:func:`digitisation_error` measures how far values read off the paper's figures lie from the truth, on the one
figure whose truth is known: Fig. 5A plots Theorem 3.2's closed-form bounds.

Example:
    >>> round(digitisation_error(), 4)
    0.0005
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from possym.config import load_config
from possym.paper import paper_numbers
from possym.records import (
    GAMMA,
    LengthRecord,
    PurityRecord,
    Record,
    ScoreRecord,
    Table1Record,
)
from possym.report.claimspec import ClaimSpec, load_claims
from possym.report.evidence import (
    PAPER_LAYERS,
    PAPER_STEPS,
    Evidence,
    TaskEvidence,
    chance,
    history_from_table,
)
from possym.report.grading import applies, grade, grade_measured
from possym.report.measures import MEASURES, Measured, Reading, SeedReading
from possym.report.rules import (
    CEILING,
    DIGITISATION,
    MATCH,
    NA,
    UNINFORMATIVE,
    Estimate,
    _f,
    _inv,
)

AGREEING = (MATCH, UNINFORMATIVE, CEILING)
PAPER_EVAL_EVERY = 50  # the authors' recipe evaluates every 50 steps (configs/paper.yaml)
FIG2A_SPACING = 500  # Fig. 2A is digitised every 500 steps (paper_numbers.json)
FIG6_STEP = 6000
SHIFT = 1.5  # the negative control moves our seeds this many margins from the paper's value


@dataclass(frozen=True)
class CalibrationRecord(Record):
    """One claim's controls (``calibration.csv``): how the paper's data feeds it (``calibration``: derived,
    identity, n/a) and which (``data``); the verdict on the paper's own data (``verdict``) with how it was reached
    (``detail``); the verdicts of the negative controls, on the other task's evidence (``other_task``) and on our
    seeds moved beyond the margin (``shifted``), blank where not applicable; ``passes``: the positive control agrees
    and no negative control matches (blank for n/a)."""

    claim: str
    id: str
    calibration: str
    data: str
    verdict: str
    detail: str
    other_task: str = ""
    shifted: str = ""
    passes: bool | None = None


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


def fig2a_first(curve: dict, key: str) -> int | None:
    """The first digitised step of Fig. 2A at which ``key`` reaches 0.9."""
    from possym.records import first_step_at

    return first_step_at(zip(curve["step"], curve[key], strict=True))


def _purity(layer: int, kind: str, step: int | None, final: str, gamma: float = GAMMA) -> PurityRecord:
    return PurityRecord(layer=layer, head=0, query="last", gamma=gamma, kind=kind, step=step, final_kind=final,
                        final_kind_step=step if final else None)


def _final_score(layer: int, s_pos: float, s_sym: float) -> ScoreRecord:
    return ScoreRecord(FIG6_STEP, "last", layer, 0, s_pos, s_sym, entropy=math.nan, n_inputs=0)


def _curve(task: str) -> list[LengthRecord]:
    fig = paper_numbers()["fig5b_length_generalisation"]
    return [LengthRecord(k, 0, k + 17, a, 0, 0, a, a, 1, 0.0, max(a - DIGITISATION, 0.0), min(a + DIGITISATION, 1.0),
                         "paper") for k, a in zip(fig["extra"], fig[f"{task}_task"], strict=True)]


def _fig5a(function: str) -> list[tuple[float, float | None]]:
    fig = paper_numbers()["fig5a_discrepancy_bounds"]
    return [(float(n), b) for n, b in zip(fig["n"], fig[function], strict=True)]


def _paper_seed(task: str, bound: str, purity: list[PurityRecord], scores: list[ScoreRecord],
                solved: dict[str, int | None], best_step: int) -> TaskEvidence:
    """One task's reported numbers as one seed: Table 1's IDs, Fig. 5B's curve and Fig. 5A's ``bound`` with the
    purity onsets, the final scores, the first steps at 0.9 and the step of maximum accuracy."""
    ids = paper_numbers()["table1_weighted_frequency_id"][f"{task}_task"]
    return TaskEvidence(
        n_layers=PAPER_LAYERS, seed=0, chance=chance(load_config(task, "paper")),
        table1=[Table1Record(FIG6_STEP, layer, 0, float(i), int(i), math.nan, int(i)) for layer, i in enumerate(ids)],
        lengthgen=_curve(task), decay_bound=_fig5a(bound), best_step=best_step, eval_every=PAPER_EVAL_EVERY,
        solved=solved, trained_steps=PAPER_STEPS, solved_spacing=FIG2A_SPACING,
        lengthgen_step="the paper's evaluated model", scores_step=f"step {FIG6_STEP}", table1_step="Table 1",
        history=history_from_table(purity, finals=scores), history_005=history_from_table(purity, gamma=0.05),
        preset="paper", final_scores=scores)


def paper_evidence() -> Evidence:
    """The paper's reported numbers as one seed of each task (seed label 0): what our measures read from a run."""
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


def _recentred(spec: ClaimSpec, ours: Sequence[Estimate], centre: float) -> list[Estimate]:
    """Our seeds' deviations from their mean, moved to ``centre``, on the rule's scale (each own interval moved
    with its point)."""
    x = _f(spec.scale, np.array([e.value for e in ours]))
    move = float(_f(spec.scale, np.array([centre]))[0] - x.mean())

    def shift(v: float) -> float:
        return float(_inv(spec.scale, _f(spec.scale, np.array([v])) + move)[0])

    return [Estimate.of(shift(e.value), shift(e.low), shift(e.high)) for e in ours]


def _synthetic(name: str, seeds: Sequence[Estimate]) -> Measured:
    return Measured((Reading(name, tuple(SeedReading(i, f"{s.value:.3g}", s) for i, s in enumerate(seeds))),))


def swap_tasks(ev: Evidence) -> Evidence:
    """``ev`` with the two tasks' evidence exchanged: every claim about one task then reads the other's."""
    other = {"number": "letter", "letter": "number"}

    def claim(name: str) -> str:
        for a, b in other.items():
            if name.startswith(f"{a} task"):
                return name.replace(f"{a} task", f"{b} task", 1)
        return name

    return dataclasses.replace(
        ev, tasks={other.get(t, t): v for t, v in ev.tasks.items()},
        hop_queries={other.get(t, t): v for t, v in ev.hop_queries.items()},
        length_seeds=[dataclasses.replace(r, task=other.get(r.task, r.task)) for r in ev.length_seeds],
        protocol=[dataclasses.replace(r, claim=claim(r.claim)) for r in ev.protocol],
        hop_flow=[dataclasses.replace(r, task=other.get(r.task, r.task)) for r in ev.hop_flow],
        geometry=[dataclasses.replace(r, task=other.get(r.task, r.task)) for r in ev.geometry])


def _control(spec: ClaimSpec, ours: Evidence, paper: Evidence) -> CalibrationRecord:
    base: dict[str, Any] = dict(claim=spec.claim, id=spec.id,
                                calibration="n/a" if spec.calibration == "none" else spec.calibration)
    if spec.calibration == "none":
        return CalibrationRecord(**base, data=f"n/a: {spec.data}", verdict=NA, detail="")
    theirs = MEASURES[spec.measure](paper, spec)
    mine = MEASURES[spec.measure](ours, spec) if not applies(spec, ours) else Measured(na="another preset")
    n = len(mine.graded.seeds) if not mine.na and mine.readings else 1
    chance = next((te.chance for te in paper.seeds(spec.task or "number")), None)
    other = ""
    if spec.negative == "other_task":
        other = grade(spec, swap_tasks(ours), power=False).verdict
    shifted = ""
    if theirs.na:
        return CalibrationRecord(**base, data=spec.data, verdict=NA, detail=theirs.na, other_task=other)
    if spec.rule == "value":
        assert spec.value is not None and spec.margin is not None
        paper_seed = theirs.graded.seeds[0].estimate
        assert paper_seed is not None
        estimates = ([s.estimate for s in mine.graded.seeds if s.estimate is not None] if n > 1
                     else [paper_seed])
        # The paper's seed at the middle of its own interval: a first step read on a curve digitised every 500 steps
        # lies anywhere in the 500 before it.
        centre = (paper_seed.low + paper_seed.high) / 2
        synthetic = _recentred(spec, estimates, centre) if n > 1 else estimates
        record = grade_measured(spec, _synthetic("the paper among seeds at our spread", synthetic), chance,
                                power=False)
        if n > 1:
            away = spec.value.value + SHIFT * spec.margin
            if spec.scale == "accuracy" and not 0.0 <= away <= 1.0:
                away = spec.value.value - SHIFT * spec.margin
            moved = _recentred(spec, estimates, away)
            shifted = grade_measured(spec, _synthetic("our seeds beyond the margin", moved), chance,
                                     power=False).verdict
        detail = (f"the paper's value {centre:g} among {n} synthetic seeds at our spread: {record.ours}"
                  if n > 1 else f"the paper's value as one seed: {record.ours}")
    else:
        seeds = tuple(dataclasses.replace(s, seed=i) for i in range(n) for s in theirs.graded.seeds[:1])
        record = grade_measured(spec, Measured((dataclasses.replace(theirs.graded, seeds=seeds),)), power=False)
        detail = f"the paper's data as {n} identical seed{'s' if n > 1 else ''}: {theirs.graded.seeds[0].text}"
    passes = record.verdict in AGREEING and MATCH not in (other, shifted)
    return CalibrationRecord(**base, data=spec.data, verdict=record.verdict, detail=detail, other_task=other,
                             shifted=shifted, passes=passes)


def calibrate(ours: Evidence | None = None, specs: Sequence[ClaimSpec] | None = None) -> list[CalibrationRecord]:
    """Every claim's controls (module docstring), in the claims' order; ``ours``: the evidence that sets the
    seed count and spread of the positive control and feeds the negative ones (None: the paper's alone, one seed)."""
    paper = paper_evidence()
    ours = paper if ours is None else ours
    return [_control(s, ours, paper) for s in (load_claims() if specs is None else specs)]


def calibration_counts(rows: Sequence[CalibrationRecord]) -> dict[str, tuple[int, int]]:
    """Per kind of calibration (derived, identity, n/a): (rows that pass, rows); an n/a row never passes.

    >>> calibration_counts([CalibrationRecord("a", "a", "derived", "", "match", "", passes=True),
    ...                     CalibrationRecord("b", "b", "n/a", "", "n/a", "")])
    {'derived': (1, 1), 'identity': (0, 0), 'n/a': (0, 1)}
    """
    return {kind: (sum(bool(r.passes) for r in rows if r.calibration == kind), sum(r.calibration == kind for r in rows))
            for kind in ("derived", "identity", "n/a")}


def failing(rows: Sequence[CalibrationRecord]) -> list[CalibrationRecord]:
    """The calibrated rows whose controls fail (the positive disagrees, or a negative matches)."""
    return [r for r in rows if r.passes is False]


__all__ = ["AGREEING", "CalibrationRecord", "calibrate",
           "calibration_counts", "digitisation_error", "failing", "paper_evidence", "swap_tasks"]
