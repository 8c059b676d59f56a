"""The paper's headline claims, each graded over seeds by a rule of :mod:`possym.report.rules`.

Evidence is per task a list of runs, one per seed (:class:`Evidence`, :class:`TaskEvidence`): read from
trained runs (:mod:`possym.report.evidence`), from a reproduction's committed tables, or from the
paper's own data (:mod:`possym.report.calibration`, the positive control every rule must pass). Every
claim is a :class:`~possym.records.ClaimRecord`: the paper's value and its uncertainty, ours per seed
and over seeds, the verdict, each seed's verdict by the same rule, the p-value for a number, the
verdict under every admissible reading of the protocol and the rule in words.

Which rule grades which claim (the rules and their thresholds: :mod:`possym.report.rules`):

- **numbers**: accuracy at +100, +800, +5,000 tokens (Fig. 5B; floor and ceiling), the step of
  maximum accuracy (Fig. 2A's dashed line) and the step at which each hop count first reaches 0.9
  (Fig. 2A), by :func:`~possym.report.rules.grade_accuracy` and :func:`~possym.report.rules.grade_step`:
  our prediction interval for a new seed against the paper's value read off its figure;
- **layer sets and counts**: the layers that become pure (Figs. 2C, 7; "become" = pure at some scored
  step, by the point estimate), the pure heads at the end (Fig. 6) and Table 1's agreeing layers, by the
  set or count most seeds give (:func:`~possym.report.rules.grade_set`,
  :func:`~possym.report.rules.grade_count`), each seed's own verdict beside it;
- **orderings and statements per seed**: hops in order (and spread over more than a tenth of training),
  hops together, letter before number, positional layers in the number task only, no positional layer
  in the letter task, letter above number in length, fast IDs for positional heads, accuracy
  converging only once the heads are pure (Sec. 3.1), hops learned as layers purify (Sec. 3.3), by
  :func:`~possym.report.rules.grade_holds`; seeds are paired by their number;
- **verifications** (Theorem 3.1's constructions, Theorem 3.2's bounds, Fig. 5A's curves): checks of
  our code or of a formula, graded ``verified`` and kept out of the empirical tally.

Purity is the point estimate's (γ = 0.1, head 0, last-token query): point estimates decide every set,
count and onset. A layer whose bootstrap interval box admits another verdict (it *straddles* γ) is
listed beside the verdict, with its seed, and the reading that leaves straddlers out is graded as a
reading. Claims about layers need the paper's 12 layers (else ``n/a``, or a weaker form where one is
stated).

Example:
    >>> log = [{"event": "eval", "step": 6750, "accuracy": 1.0}]
    >>> ev = Evidence({"number": [TaskEvidence(n_layers=12, seed=s, best_step=4000 + 300 * s, eval_every=50,
    ...                                        metrics=log) for s in range(3)]})
    >>> c = next(c for c in check_claims(ev) if c.claim.startswith("number task: step of maximum"))
    >>> c.verdict, c.per_seed, c.seed_verdict_counts
    ('match', 's0 4000; s1 4300; s2 4600', 'partial at 2 seeds, differs at 1')
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from possym.paper import paper_numbers
from possym.records import (
    GAMMA,
    SOLVED,
    BoundCheckRecord,
    ClaimRecord,
    Fig5aRecord,
    HopFlowRecord,
    LengthRecord,
    LengthSeedRecord,
    MetricsLog,
    PlaneGeometryRecord,
    ProtocolValueRecord,
    PurityRecord,
    ScoreRecord,
    Table1Record,
    VerificationRecord,
    WitnessRecord,
    first_step_at,
)
from possym.report import rules
from possym.report.rules import (
    DIFFERS,
    DIGITISATION,
    GRADING_N,
    MATCH,
    NA,
    PAPER_SAMPLE_SIZES,
    VERDICTS,
    VERIFIED,
    Estimate,
    PaperValue,
    compare_groups,
    summarise,
)
from possym.scores.dynamics import layer_sets, purity, record_kinds

PAPER_LAYERS = 12
TABLE1_WITHIN = 3  # a layer's weighted frequency ID agrees with Table 1 within 3 IDs
PAPER_STEPS = 6750  # the paper's training: one epoch of 432,000 sequences at batch 64
# Hops learned "together" spread their first 0.9 steps over at most this share of training; "in order"
# needs more than it, so that one task's curves cannot pass both claims.
TOGETHER = 0.10
# How far the paper's dashed line (its step of maximum accuracy) can be read off Fig. 2A: two of its
# evaluations (50 steps apart), about 1.5% of the axis, the same ±0.01 of the axis as its y readings.
STEP_READ = 100
# Fig. 2A is digitised every 500 steps (paper_numbers.json): a first step at 0.9 read there lies in
# (s − 500, s].
FIG2A_SPACING = 500


@dataclass(frozen=True)
class TaskEvidence:
    """What one trained run (one seed of one task) produced, as typed records (a missing table: empty).

    ``chance``: accuracy of a uniform guess over the task's possible answers (None: not known, and
    no claim is graded ``uninformative``); ``n_planes``: RoPE planes per head (valid frequency IDs
    are 1..n_planes); ``best_step``: the run's best checkpoint (maximum validation accuracy);
    ``eval_every``: the spacing of its evaluations, a step's own uncertainty. Where the training log
    is not at hand (a committed table, the paper's figures), ``solved`` gives the first step at which
    each accuracy key reaches 0.9 (None: never) and ``trained_steps`` the last step; the scores may then
    hold the last scored step only, and the purity table the onsets.
    """

    n_layers: int
    seed: int = 0
    chance: float | None = None
    n_planes: int = 64
    metrics: MetricsLog = field(default_factory=MetricsLog)  # the run's log (its JSON lines are converted)
    purity: Sequence[PurityRecord] = ()
    scores: Sequence[ScoreRecord] = ()
    table1: Sequence[Table1Record] = ()
    lengthgen: Sequence[LengthRecord] = ()  # the curve at ``lengthgen_step``
    lengthgen_final: Sequence[LengthRecord] = ()  # the curve at the final checkpoint, shown beside it
    best_step: int | None = None
    eval_every: int = 0
    # The checkpoint each kind of number comes from, as a claim names it ("best 4800", "final 6750").
    lengthgen_step: str = ""
    scores_step: str = ""
    table1_step: str = ""
    solved: Mapping[str, int | None] | None = None
    trained_steps: int | None = None
    solved_spacing: int | None = None  # the spacing of the curve ``solved`` was read on (None: eval_every)
    # The task's Fig. 5A curve (n, bound) as given (the paper's digitised figure); empty: Theorem 3.2's bound at the
    # angle of Table 1's layer 2 (:func:`theory_curve`).
    decay_bound: Sequence[tuple[float, float | None]] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.metrics, MetricsLog):  # the log's JSON lines, as RunDir.metrics() gives them
            object.__setattr__(self, "metrics", MetricsLog.from_json(self.metrics))


@dataclass(frozen=True)
class Evidence:
    """Per task, its runs in seed order; the theory's tables; ``length_seeds``: pooled length accuracies of a
    task's seeds kept without their curves (a sweep of more seeds), which then grade that task's length claims
    (the hop-mix readings stay on the seeds with per-hop curves); ``protocol``: the length claims' per-seed values
    under the protocol's other readings (what the extra tokens are, the x-axis), graded as readings."""

    tasks: Mapping[str, Sequence[TaskEvidence]] = field(default_factory=dict)
    bounds: Sequence[BoundCheckRecord] = ()
    length_seeds: Sequence[LengthSeedRecord] = ()
    protocol: Sequence[ProtocolValueRecord] = ()
    verification: Sequence[VerificationRecord] = ()
    fig5a: Sequence[Fig5aRecord] = ()
    witnesses: Sequence[WitnessRecord] = ()
    hop_queries: Mapping[str, Sequence[TaskEvidence]] = field(default_factory=dict)
    hop_flow: Sequence[HopFlowRecord] = ()
    geometry: Sequence[PlaneGeometryRecord] = ()

    def __post_init__(self) -> None:
        for name in ("tasks", "hop_queries"):
            tasks = {t: tuple(v) for t, v in getattr(self, name).items()}
            for task, runs in tasks.items():
                seeds = [r.seed for r in runs]
                if len(set(seeds)) != len(seeds):
                    raise ValueError(f"task {task!r}: seeds {seeds} repeat; give one run per seed")
            object.__setattr__(self, name, tasks)

    def seeds(self, task: str) -> list[TaskEvidence]:
        return list(self.tasks.get(task, ()))

    def hop_seeds(self, task: str) -> list[TaskEvidence]:
        """The seeds scored at every checkpoint at the hop queries: ``hop_queries``'s (runs trained again to be
        scored there, kept apart from ``tasks`` whose seeds they may repeat), else ``tasks``'s own where their
        scores carry the hop queries."""
        given = self.hop_queries.get(task)
        return list(given) if given else [r for r in self.seeds(task) if hop_query_names(r) and _per_checkpoint(r)]


# ---- shared pieces ------------------------------------------------------------------------------


def _layers(layers) -> str:
    return "{" + ", ".join(f"L{x}" for x in sorted(layers)) + "}" if layers else "none"


def _claim(claim: str, section: str, paper: str, ours: str, verdict: str, rule: str, *,
           runs: Sequence[TaskEvidence | _Kept] = (), per_seed: Sequence[str] = (), step: str = "",
           paper_value: float | None = None, values: Sequence[float] = (), seed_verdicts: Sequence[str] = (),
           p_value: float | None = None, paper_uncertainty: str = "", reading: str = "",
           readings: Mapping[str, str] | None = None, kind: str = "empirical") -> ClaimRecord:
    for v in (verdict, *seed_verdicts, *(readings or {}).values()):
        if v not in VERDICTS:
            raise ValueError(f"verdict {v!r}; allowed: {VERDICTS}")
    summary = summarise(values) if values else None
    named = dict(readings or {})
    robust = "" if not named else "robust" if set(named.values()) == {verdict} else "reading-dependent"
    return ClaimRecord(
        claim=claim, section=section, paper=paper, ours=ours, verdict=verdict, rule=rule, step=step,
        per_seed="; ".join(f"s{r.seed} {text}" for r, text in zip(runs, per_seed, strict=True)),
        seeds=",".join(str(r.seed) for r in runs), paper_value=paper_value,
        seed_mean=summary.mean if summary else None, seed_sd=summary.sd if summary else None,
        seed_min=summary.min if summary else None, seed_max=summary.max if summary else None,
        seed_verdicts="; ".join(f"s{r.seed} {v}" for r, v in zip(runs, seed_verdicts, strict=True))
        if seed_verdicts else "",
        seed_verdict_counts=rules.per_seed_verdicts(seed_verdicts) if seed_verdicts else "",
        p_value=None if p_value is None or math.isnan(p_value) else p_value,
        paper_uncertainty=paper_uncertainty, reading=reading,
        readings="; ".join(f"{k}: {v}" for k, v in named.items()), robustness=robust, kind=kind,
    )


def _holds_verdicts(holds: Sequence[bool]) -> list[str]:
    return [MATCH if h else DIFFERS for h in holds]


def _steps(runs: Sequence[TaskEvidence], label: Callable[[TaskEvidence], str]) -> str:
    """One checkpoint label if every seed shares it, else one per seed."""
    labels = [label(r) for r in runs]
    if not any(labels):
        return ""
    return labels[0] if len(set(labels)) == 1 else "; ".join(f"s{r.seed} {x}" for r, x in zip(runs, labels,
                                                                                               strict=True))


def _pairs(ev: Evidence, a: str, b: str) -> list[tuple[TaskEvidence, TaskEvidence]]:
    """Runs of tasks ``a`` and ``b`` paired by seed (a seed that only one task has is left out)."""
    other = {r.seed: r for r in ev.seeds(b)}
    return [(r, other[r.seed]) for r in ev.seeds(a) if r.seed in other]


def solved_steps(te: TaskEvidence) -> dict[str, int | None]:
    """The first step at which each accuracy key reaches 0.9: given, or read from the training log."""
    return dict(te.solved) if te.solved is not None else te.metrics.first_steps() if te.metrics else {}


def trained_steps(te: TaskEvidence) -> int | None:
    if te.trained_steps is not None:
        return te.trained_steps
    return max((r.step for r in te.metrics), default=None)


def _solved_spacing(te: TaskEvidence) -> int:
    """How far a first step at 0.9 can lie before the one read: the spacing of the curve it was read on."""
    return te.eval_every if te.solved_spacing is None else te.solved_spacing


def _head0(scores: Sequence[ScoreRecord], queries: Collection[str] = ("last",)) -> list[ScoreRecord]:
    return [r for r in scores if r.query in queries and r.head == 0]


def hop_query_names(te: TaskEvidence) -> list[str]:
    """The hop queries a run was scored at (``"hop1"``, ...: :func:`possym.scores.checkpoints.hop_queries`)."""
    return sorted({r.query for r in te.scores} - {"last"})


def final_kinds(scores: Sequence[ScoreRecord]) -> dict[int, str]:
    """Per layer (head 0, last-token query), the point estimate's purity kind at the last scored step ("" if
    mixed)."""
    last = max((r.step for r in scores), default=None)
    return {r.layer: purity(r.s_pos, r.s_sym, GAMMA) for r in _head0(scores) if r.step == last}


def _purity0(purity_rows: Sequence[PurityRecord], gamma: float = GAMMA) -> list[PurityRecord]:
    """The purity table's rows that every claim reads: head 0, last-token query, at ``gamma``."""
    return [r for r in purity_rows if r.gamma == gamma and r.query == "last" and r.head == 0]


def _final_straddlers(te: TaskEvidence) -> set[int]:
    """Layers whose interval box at the last scored step admits more than one purity verdict."""
    if te.scores:
        last = max(r.step for r in te.scores)
        return {r.layer for r in _head0(te.scores) if r.step == last and len(record_kinds(r, GAMMA)) > 1}
    return {r.layer for r in _purity0(te.purity) if r.final_straddles}


def ever_pure(purity_rows: Sequence[PurityRecord], kind: str, gamma: float = GAMMA) -> set[int]:
    """Layers (head 0, last-token query, γ) that are pure ``kind`` at some checkpoint (the purity table)."""
    return {r.layer for r in _purity0(purity_rows, gamma) if kind in (r.kind, r.final_kind)}


def _per_checkpoint(te: TaskEvidence) -> bool:
    """Read onsets and sets from the scores: they cover every checkpoint (a run's), or there is no purity table to
    read them from; a committed table's scores hold the last checkpoint alone, beside its purity table."""
    return bool(te.scores) and (len({r.step for r in te.scores}) > 1 or not te.purity)


def ever_set(te: TaskEvidence, kind: str) -> tuple[frozenset[int], set[int]]:
    """(layers pure ``kind`` at some scored step by their point estimate, layers that straddle γ at some
    step): from the scores of every checkpoint when the run has them, else from the purity table."""
    if _per_checkpoint(te):
        point = frozenset(r.layer for r in _head0(te.scores) if purity(r.s_pos, r.s_sym, GAMMA) == kind)
        sure, possible = layer_sets(te.scores, kind, GAMMA, ever=True)
        return point, possible - sure
    return frozenset(ever_pure(te.purity, kind)), set()


def onsets(te: TaskEvidence, kind: str, queries: Collection[str] = ("last",)) -> dict[int, int]:
    """Per layer that is ever pure ``kind`` (point estimates), the first step it is: from the scores of
    every checkpoint, else from the purity table (head 0, last-token query, γ = 0.1). With several
    ``queries`` (the hop queries), a layer's onset is the first step it is pure ``kind`` at any of them: a
    layer that resolves one hop need be pure at that hop's query only."""
    if _per_checkpoint(te) or queries != ("last",):
        out: dict[int, int] = {}
        for r in sorted(_head0(te.scores, queries), key=lambda r: r.step):
            if purity(r.s_pos, r.s_sym, GAMMA) == kind:
                out.setdefault(r.layer, r.step)
        return out
    out = {}
    for row in _purity0(te.purity):
        if row.kind == kind and row.step is not None:
            out[row.layer] = row.step
        elif row.final_kind == kind and row.final_kind_step is not None:
            out[row.layer] = row.final_kind_step
    return out


def final_kind_onsets(te: TaskEvidence) -> dict[int, tuple[str, int | None]]:
    """Per layer pure at the end: (its kind, the first step it is pure of that kind)."""
    if _per_checkpoint(te):
        final = {layer: k for layer, k in final_kinds(te.scores).items() if k}
        first = {k: onsets(te, k) for k in set(final.values())}
        return {layer: (k, first[k].get(layer)) for layer, k in final.items()}
    return {r.layer: (r.final_kind, r.final_kind_step) for r in _purity0(te.purity) if r.final_kind}


def end_kinds(te: TaskEvidence) -> dict[int, str]:
    """Per layer, its purity at the end: the last scored step's scores, else the purity table's."""
    if te.scores:
        return final_kinds(te.scores)
    return {r.layer: r.final_kind for r in _purity0(te.purity)}


def _straddle_text(per_seed: Sequence[tuple[TaskEvidence, set[int]]]) -> str:
    parts = [f"{_layers(s)} at s{r.seed}" for r, s in per_seed if s]
    return f"; straddling γ (counted by its point estimate): {', '.join(parts)}" if parts else ""


def _at(lengthgen: Sequence[LengthRecord], extra: int, n_hops: int = 0) -> LengthRecord | None:
    return next((p for p in lengthgen if p.extra == extra and p.n_hops == n_hops), None)


def _holds_text(holds: Sequence[bool]) -> str:
    return f"holds at {sum(holds)} of {len(holds)} seeds"


HOLDS_RULE = "an ordering per seed: match if it holds at every seed, partial if at most (more than half)"


def _holds_claim(name: str, section: str, paper: str, holds: Sequence[bool], rule: str, *,
                 runs: Sequence[TaskEvidence | _Kept], per_seed: Sequence[str], weak: Sequence[bool] | None = None,
                 extra: str = "", **kw) -> ClaimRecord:
    return _claim(name, section, paper, _holds_text(holds) + extra, rules.grade_holds(holds, weak), rule, runs=runs,
                  per_seed=per_seed, seed_verdicts=_holds_verdicts(holds), **kw)


# ---- learning (Sec. 3.1-3.2, Fig. 2A) ----------------------------------------------------------


def fig2a_first(curve: Mapping[str, Any], key: str) -> int | None:
    """The first digitised step of Fig. 2A at which ``key`` reaches 0.9."""
    return first_step_at(zip(curve["step"], curve[key], strict=True))


def learning_claims(ev: Evidence) -> list[ClaimRecord]:
    out = []
    numbers = paper_numbers()
    fig2a = numbers["fig2a_number_task_test_accuracy_by_hop"]
    name, section = "number-task hops are learned in order", "Sec. 3.2, Fig. 2A"
    paper_text = "hops learned in order: 1 -> 2 -> 3 ~ 4 (Fig. 2A, 0.9 reached at about 2000/3000/3500/3500)"
    rule = (f"{HOLDS_RULE}; it holds at a seed if every hop count reaches {SOLVED}, the first steps never "
            f"decrease with the hop count, and they spread over more than {TOGETHER:.0%} of training (what "
            "'learned together' allows)")
    runs = [r for r in ev.seeds("number") if solved_steps(r)]
    if runs:
        holds, texts = [], []
        for r in runs:
            steps = solved_steps(r)
            hops = [steps.get(f"acc_hop{h}") for h in range(1, 5) if f"acc_hop{h}" in steps]
            reached = [s for s in hops if s is not None]
            ordered = all(a <= b for a, b in zip(reached, reached[1:], strict=False))
            total = trained_steps(r) or PAPER_STEPS
            spread = (reached[-1] - reached[0]) / total if reached else 0.0
            holds.append(len(reached) == len(hops) > 0 and ordered and spread > TOGETHER)
            texts.append(" / ".join(str(s) for s in hops) + f" (spread {spread:.0%} of {total})")
        out.append(_holds_claim(name, section, paper_text, holds, rule, runs=runs, per_seed=texts))
    else:
        out.append(_claim(name, section, paper_text, "no run", NA, rule))

    name = "letter-task hops are learned together"
    rule = (f"{HOLDS_RULE}, or if its weaker form holds at every seed; it holds at a seed if every hop count "
            f"reaches {SOLVED} and their first steps spread over <= {TOGETHER:.0%} of training (weaker: <= 20%)")
    runs = [r for r in ev.seeds("letter") if any(k.startswith("acc_hop") for k in solved_steps(r))]
    if runs:
        holds, weak, texts = [], [], []
        for r in runs:
            hops = [s for k, s in solved_steps(r).items() if k.startswith("acc_hop")]
            reached = [s for s in hops if s is not None]
            total = trained_steps(r) or PAPER_STEPS
            if len(reached) < len(hops) or not reached:
                holds.append(False)
                weak.append(False)
                texts.append("some hop count never reaches 0.9")
                continue
            spread = (max(reached) - min(reached)) / max(total, 1)
            holds.append(spread <= TOGETHER)
            weak.append(spread <= 0.2)
            texts.append(f"{min(reached)}-{max(reached)} ({spread:.0%} of {total})")
        out.append(_holds_claim(name, section, "per-hop curves within a few points of each other", holds, rule,
                                runs=runs, per_seed=texts, weak=weak))
    elif ev.seeds("letter"):
        out.append(_claim(name, section, "per-hop curves within a few points of each other",
                          "no per-hop curve", NA, rule))

    pairs = [(n, le) for n, le in _pairs(ev, "number", "letter") if solved_steps(n) and solved_steps(le)]
    if pairs:
        holds, texts, l_steps, n_steps = [], [], [], []
        for n, le in pairs:
            n_step, l_step = solved_steps(n).get("accuracy"), solved_steps(le).get("accuracy")
            holds.append(n_step is not None and l_step is not None and l_step < n_step)
            texts.append(f"letter {l_step} vs number {n_step}")
            if n_step is not None and l_step is not None:
                n_steps.append(float(n_step))
                l_steps.append(float(l_step))
        test = None
        if len(l_steps) >= 2 and (np.ptp(n_steps) > 0 or np.ptp(l_steps) > 0):
            test = compare_groups(n_steps, l_steps)
        letter_max = numbers["fig2a_letter_task_test_accuracy_global"]["max_accuracy_step"]
        out.append(_holds_claim(
            "the letter task is learned before the number task", section,
            f"max accuracy at step {letter_max} (letter) vs {fig2a['max_accuracy_step']} (number)", holds,
            f"{HOLDS_RULE}; it holds at a seed if the letter model reaches {SOLVED} global accuracy at an earlier "
            "step than the number model of the same seed",
            runs=[n for n, _ in pairs], per_seed=texts,
            extra=f"; two-group test: {test.text('.0f')}" if test else "",
            p_value=test.p_permutation if test else None))

    out += _step_of_maximum(ev) + _solved_step_claims(ev)
    return out


def _step_of_maximum(ev: Evidence) -> list[ClaimRecord]:
    numbers = paper_numbers()
    out = []
    for task, key in (("number", "fig2a_number_task_test_accuracy_by_hop"),
                      ("letter", "fig2a_letter_task_test_accuracy_global")):
        runs = [r for r in ev.seeds(task) if r.best_step is not None]
        paper = PaperValue(numbers[key]["max_accuracy_step"], STEP_READ)
        name = f"{task} task: step of maximum accuracy"
        rule = ("a step: match if the paper's step (± its reading off the figure) is not significantly unlike a new "
                "seed of ours (t prediction interval over seeds, p >= 0.05), partial if within "
                f"{rules.STEP_PARTIAL:.0%} of the paper's step of our interval; ours is the best checkpoint (the "
                "earliest at the maximum validation accuracy), each seed's own interval its evaluation spacing")
        if not runs:
            continue
        trained = {trained_steps(r) or 0 for r in runs}
        if trained != {PAPER_STEPS}:
            out.append(_claim(name, "Sec. 3.1, Fig. 2A (dashed line)", f"{paper.value:g}",
                              f"trained for {sorted(trained)} steps, not the paper's {PAPER_STEPS}", NA,
                              rule + f"; needs the paper's {PAPER_STEPS} training steps", runs=runs,
                              per_seed=[f"{r.best_step}" for r in runs]))
            continue
        seeds = [Estimate(r.best_step, r.best_step - r.eval_every, r.best_step + r.eval_every)
                 for r in runs if r.best_step is not None]
        out.append(_step_claim(name, "Sec. 3.1, Fig. 2A (dashed line)", f"{paper.value:g}", paper, runs, seeds, rule,
                               f"±{STEP_READ} steps read off Fig. 2A's dashed line"))
    return out


def _step_claim(name: str, section: str, paper_text: str, paper: PaperValue, runs: Sequence[TaskEvidence],
                seeds: Sequence[Estimate], rule: str, uncertainty: str) -> ClaimRecord:
    """A step graded over the seeds (:func:`~possym.report.rules.grade_step`), each seed also graded alone."""
    grade = rules.grade_step(seeds, paper)
    values = [e.value for e in seeds]
    return _claim(name, section, paper_text, f"{summarise(values).text('.0f')}: {grade.detail}", grade.verdict, rule,
                  runs=runs, per_seed=[f"{v:.0f}" for v in values], paper_value=float(paper.value), values=values,
                  seed_verdicts=[rules.grade_step([e], paper).verdict for e in seeds], p_value=grade.p_value,
                  paper_uncertainty=uncertainty)


def _solved_step_claims(ev: Evidence) -> list[ClaimRecord]:
    """The step each hop count (number task) or the global accuracy (letter task, whose hops the paper does not
    plot apart) first reaches 0.9, against Fig. 2A's digitised curves."""
    numbers = paper_numbers()
    settings = [("number", f"acc_hop{h}", numbers["fig2a_number_task_test_accuracy_by_hop"], f"hop{h}",
                 f"{h}-hop") for h in range(1, 5)]
    settings.append(("letter", "accuracy", numbers["fig2a_letter_task_test_accuracy_global"], "global", "global"))
    rule = ("a step: match if the paper's first step at 0.9 (within Fig. 2A's digitisation, every "
            f"{FIG2A_SPACING} steps) is not significantly unlike a new seed of ours, partial if within "
            f"{rules.STEP_PARTIAL:.0%} of it; each seed's own interval its evaluation spacing")
    out = []
    for task, key, curve, paper_key, label in settings:
        runs = [r for r in ev.seeds(task) if solved_steps(r).get(key) is not None]
        first = fig2a_first(curve, paper_key)
        if not runs or first is None:
            continue
        paper = PaperValue(first - FIG2A_SPACING / 2, FIG2A_SPACING / 2)
        steps = [int(solved_steps(r)[key]) for r in runs]  # type: ignore[arg-type]
        seeds = [Estimate(s, s - _solved_spacing(r), s) for s, r in zip(steps, runs, strict=True)]
        out.append(_step_claim(f"{task} task: step at which {label} accuracy first reaches {SOLVED}",
                               "Sec. 3.2, Fig. 2A", f"in ({first - FIG2A_SPACING}, {first}]", paper, runs, seeds, rule,
                               f"Fig. 2A digitised every {FIG2A_SPACING} steps"))
    return out


def _max_accuracy(te: TaskEvidence) -> float:
    if te.metrics:
        return max((r.accuracy for r in te.metrics.evals), default=0.0)
    return 1.0 if solved_steps(te).get("accuracy") is not None else 0.0


def convergence_claims(ev: Evidence) -> list[ClaimRecord]:
    """Sec. 3.1: heads must be pure for accuracy to converge, i.e. every layer pure at the end is pure by the step
    of maximum accuracy (the paper's dashed line), within one evaluation."""
    out = []
    for task in ("number", "letter"):
        have = [r for r in _scored(ev, task) if r.best_step is not None]
        runs = [r for r in have if _max_accuracy(r) >= SOLVED]
        name = f"{task} task: accuracy converges only once the heads are pure"
        rule = (f"{HOLDS_RULE}, over the seeds whose global validation accuracy reaches {SOLVED}; it holds at a seed "
                "if some layer is pure at its last scored step and every such layer first became pure of that kind "
                "(point estimate) at or before the best checkpoint plus one evaluation (a step's own uncertainty)")
        paper = ("heads must be pure for test accuracy to converge to its maximum; when accuracy converges "
                 "(Fig. 2A's dashed line), both head types are pure")
        if not have:
            continue
        if not runs:
            out.append(_claim(name, "Sec. 3.1, Fig. 2B", paper, f"no seed reaches {SOLVED}", NA, rule))
            continue
        holds, holds_firm, texts = [], [], []
        straddle: list[tuple[TaskEvidence, set[int]]] = []
        for r in runs:
            assert r.best_step is not None
            final = final_kind_onsets(r)
            late = sorted(layer for layer, (_, s) in final.items()
                          if s is None or s > r.best_step + r.eval_every)
            st = _final_straddlers(r) & set(final)
            holds.append(bool(final) and not late)
            holds_firm.append(bool(set(final) - st) and not set(late) - st)
            text = f"best {r.best_step}: " + (
                "no layer pure at the end" if not final else
                f"{_layers(late)} of {len(final)} final pure layers pure only later "
                f"({', '.join(f'L{x} at {final[x][1]}' for x in late)})" if late else
                f"all {len(final)} final pure layers pure by then")
            texts.append(text)
            straddle.append((r, st))
        readings = {"point estimates decide (pre-registered)": rules.grade_holds(holds),
                    "straddling layers left out": rules.grade_holds(holds_firm)}
        out.append(_holds_claim(name, "Sec. 3.1, Fig. 2B", paper, holds, rule, runs=runs, per_seed=texts,
                                extra=_straddle_text(straddle), step=_steps(runs, lambda r: f"best {r.best_step}"),
                                reading="point estimates decide (pre-registered)", readings=readings))
    return out


def _hop_counts(r: TaskEvidence, queries: Collection[str]) -> list[tuple[int, int, int]]:
    """(k, the first step s at which k hops reach 0.9, how many layers are pure positional at ``queries`` by s plus
    one evaluation) for every hop count the run solves."""
    steps = solved_steps(r)
    first = sorted(onsets(r, "positional", queries).values())
    solved = [(k, s) for k in range(1, 9) if (s := steps.get(f"acc_hop{k}")) is not None]
    return [(k, s, sum(o <= s + r.eval_every for o in first)) for k, s in solved]


Judge = Callable[[TaskEvidence, str, Collection[str]], tuple[dict[str, bool], str] | None]


def _judge_seeds(last: Sequence[TaskEvidence], hops: Sequence[TaskEvidence], judge: Judge
                 ) -> tuple[dict[str, list[bool]], dict[str, list[str]], dict[str, list[TaskEvidence]]]:
    """Grade each seed at each place a claim is read: the runs ``last`` at the last token, the runs ``hops`` at their
    hop queries; ``judge(run, place, queries)`` gives None to leave the run out there, else whether the claim holds
    under each reading (named with the place) and the seed's text.

    Returns (per reading, the seeds' holds), (per place, the seeds' texts) and (per place, the runs judged), each
    in the order of the places and their runs, as the claims' per-seed columns list them.
    """
    results: dict[str, list[bool]] = {}
    texts: dict[str, list[str]] = {}
    used: dict[str, list[TaskEvidence]] = {}
    where: dict[str, tuple[Sequence[TaskEvidence], Callable[[TaskEvidence], Collection[str]]]] = {
        "last token": (last, lambda r: ("last",)), "hop queries": (hops, hop_query_names)}
    for at, (runs, queries) in where.items():
        for r in runs:
            judged = judge(r, at, queries(r))
            if judged is None:
                continue
            holds, text = judged
            used.setdefault(at, []).append(r)
            for reading, held in holds.items():
                results.setdefault(reading, []).append(held)
            texts.setdefault(at, []).append(text)
    return results, texts, used


def _places(used: Mapping[str, Sequence[TaskEvidence]]) -> tuple[str, str | None]:
    """The place that grades a claim read at two (the hop queries where any run has them, else the last token) and
    the other place read, if any."""
    at = "hop queries" if "hop queries" in used else "last token"
    return at, next((a for a in used if a != at), None)


def _scored(ev: Evidence, task: str) -> list[TaskEvidence]:
    """The seeds of ``task`` with scores or a purity table."""
    return [r for r in ev.seeds(task) if r.scores or r.purity]


def hop_claims(ev: Evidence) -> list[ClaimRecord]:
    """Sec. 3.3: solving n hops needs positional heads, compared as onsets: by the step at which k hops first reach
    0.9 (plus one evaluation), how many layers have become pure positional. Read at the last token (the query of
    every figure of the paper) and at the hop queries, where the paper's mechanism works: a layer that resolves a
    hop attends from that hop's position (Sec. 3.2, Fig. 3). The hop queries are graded where a run has them."""
    last = [r for r in _scored(ev, "number") if solved_steps(r)]
    hops = [r for r in ev.hop_seeds("number") if solved_steps(r)]
    need = {"k − 1": 1, "k": 0}

    def judge(r: TaskEvidence, at: str, queries: Collection[str]) -> tuple[dict[str, bool], str] | None:
        counts = _hop_counts(r, queries)
        if not counts:
            return None
        return ({f"{n} layers at the {at}": all(c >= k - slack for k, _, c in counts) for n, slack in need.items()},
                "; ".join(f"{k}-hop at {s}: {c} pure positional by then" for k, s, c in counts))

    results, texts, used = _judge_seeds(last, hops, judge)
    name, section = "number task: n hops need n pure positional layers", "Sec. 3.3, Fig. 2C"
    paper = ("reliably solving n hops requires sufficiently many positional heads (Sec. 3.3); the paper's own "
             "Fig. 2A/2C solve 1 hop at 2000 before L1 turns pure (2200) and 4 hops at 3500 with 3 pure positional "
             "layers")
    at, other = _places(used)
    graded = f"k − 1 layers at the {at}"
    rule = (f"{HOLDS_RULE}; it holds at a seed if, whenever k hops first reach {SOLVED} (step s), at least k − 1 "
            "layers have become pure positional (point estimates, head 0) by s plus one evaluation: at the last "
            "token, and at the hop queries (a layer counts there once it is pure positional at any hop query) on "
            "the seeds scored there at every checkpoint, which are graded when there are any. The pre-registered "
            "reading asked for k and fails the paper's own data (docs/replication.md); k − 1 is calibrated on the "
            "paper's Fig. 2A/2C, which were scored at the last token")
    if not used:
        if not last and not hops:
            return []
        return [_claim(name, section, paper, f"no checkpoint reaches {SOLVED} on any hop count", NA, rule)]
    # The last token's readings keep the names they were calibrated and pre-registered under.
    names = {"k − 1 layers at the last token": "k − 1 layers (calibrated on Fig. 2A/2C)",
             "k layers at the last token": "k layers (pre-registered)"}
    readings = {names.get(n, n): rules.grade_holds(v) for n, v in results.items()}
    extra = (f"; {_holds_text(results[f'k − 1 layers at the {other}'])} at the {other}" if other else "")
    return [_claim(name, section, paper, _holds_text(results[graded]) + f" ({at})" + extra,
                   rules.grade_holds(results[graded]), rule, runs=used[at], per_seed=texts[at],
                   seed_verdicts=_holds_verdicts(results[graded]), reading=names.get(graded, graded),
                   readings=readings)]


def purify_claims(ev: Evidence) -> list[ClaimRecord]:
    """Sec. 3.3, letter task: the hops are learned as the layers purify (Fig. 7: 3, 7, 11 pure symbolic layers at
    2000, 2500, 3000, when the accuracy reaches 0.99): the last layer to turn pure symbolic does so by the step the
    global accuracy first reaches 0.9, within its evaluation spacing. Read at the last token and at the hop queries
    (a layer is pure there once it is at any hop query), which are graded where a run has them."""
    def judge(r: TaskEvidence, at: str, queries: Collection[str]) -> tuple[dict[str, bool], str] | None:
        s = solved_steps(r).get("accuracy")
        if s is None:
            return None
        first = onsets(r, "symbolic", queries)
        last = max(first.values(), default=None)
        return ({at: last is not None and last <= s + _solved_spacing(r)},
                f"global 0.9 at {s}; last layer pure symbolic at {last} ({len(first)} layers)")

    results, texts, used = _judge_seeds(_scored(ev, "letter"), ev.hop_seeds("letter"), judge)
    if not used:
        return []
    at, other = _places(used)
    extra = f"; {_holds_text(results[other])} at the {other}" if other else ""
    return [_holds_claim(
        "letter task: the hops are learned as the layers purify", "Sec. 3.3, Fig. 7",
        "11 layers pure symbolic by step 3000, when accuracy reaches 0.99 (3 at 2000, 7 at 2500)", results[at],
        f"{HOLDS_RULE}; it holds at a seed if its last layer to turn pure symbolic (point estimate, head 0) does so "
        f"no later than the first step of {SOLVED} global accuracy plus that curve's spacing: at the last token, and "
        "at the hop queries (a layer counts there once it is pure symbolic at any hop query) on the seeds scored "
        "there at every checkpoint, which are graded when there are any", runs=used[at], per_seed=texts[at],
        extra=f" ({at}){extra}", reading=f"at the {at}",
        readings={f"at the {a}": rules.grade_holds(v) for a, v in results.items()} if other else None)]


# ---- heads (Sec. 3.3, Figs. 2C, 6, 7) -----------------------------------------------------------


SET_RULE = ("a layer set per seed (point estimates): the verdict on the set most seeds give (a tie: the tied set "
            "furthest from the paper), by its Jaccard index J with the paper's: match if J = 1, partial if J >= 0.5")
COUNT_RULE = ("a count per seed (point estimates): the verdict on the count most seeds give (a tie: the one "
              "furthest from the paper): match if within 1 of the paper's, partial if within 3")


def _set_claim(name: str, section: str, runs: Sequence[TaskEvidence], sets: Sequence[frozenset[int]],
               paper_set: frozenset[int], straddle: Sequence[tuple[TaskEvidence, set[int]]], step: str = "",
               rule: str = SET_RULE) -> ClaimRecord:
    texts = [_layers(s) for s in sets]
    st_text = _straddle_text(straddle)
    if any(r.n_layers != PAPER_LAYERS for r in runs):
        return _claim(name, section, _layers(paper_set), "needs the paper's 12 layers" + st_text, NA, rule,
                      runs=runs, per_seed=texts, step=step)
    g = rules.grade_set(list(sets), paper_set)
    return _claim(name, section, _layers(paper_set), f"{_layers(g.chosen)}, {g.detail}{st_text}", g.verdict, rule,
                  runs=runs, per_seed=texts, step=step,
                  seed_verdicts=[rules.set_verdict(s, paper_set) for s in sets])


def head_claims(ev: Evidence) -> list[ClaimRecord]:
    fig2c = paper_numbers()["fig2c_purity_gamma_0.1"]
    out = []
    settings = [
        ("number", "positional", frozenset(fig2c["number_task"]["pure_positional_layers"]), "Sec. 3.3, Fig. 2C"),
        ("number", "symbolic", frozenset(fig2c["number_task"]["pure_symbolic_layers"]), "Sec. 3.3, Fig. 2C"),
        ("letter", "symbolic", frozenset(fig2c["letter_task"]["pure_symbolic_layers"]), "Sec. 3.3, Fig. 7"),
    ]
    for task, kind, paper_set, section in settings:
        name = f"{task} task: layers that become pure {kind} (γ = 0.1)"
        runs = _scored(ev, task)
        if not runs:
            out.append(_claim(name, section, _layers(paper_set), "no scores", NA, SET_RULE))
            continue
        sets = [ever_set(r, kind) for r in runs]
        step = _steps(runs, lambda r: f"every scored step to {r.scores_step}" if r.scores_step else "")
        out.append(_set_claim(name, section, runs, [s for s, _ in sets], paper_set,
                              [(r, st) for r, (_, st) in zip(runs, sets, strict=True)], step))

    runs = [r for r in ev.seeds("number") if any(x.gamma == 0.05 for x in r.purity)]
    if runs:
        strict = [frozenset(ever_pure(r.purity, "positional", 0.05)) for r in runs]
        out.append(_set_claim("number task: layers that become pure positional at γ = 0.05", "Sec. 3.3, Fig. 2C",
                              runs, strict, frozenset({1, 2}), [],
                              rule=SET_RULE + "; purity at γ = 0.05 from the purity table"))

    runs = _scored(ev, "number")
    if runs:
        holds = [4 in ever_set(r, "symbolic")[0] for r in runs]
        out.append(_holds_claim(
            "number task: L4 becomes pure symbolic", "Sec. 3.3, Fig. 2C", "L4 pure symbolic (with L5-L11)", holds,
            f"{HOLDS_RULE}; it holds at a seed if L4 is pure symbolic (point estimate) at some scored step",
            runs=runs, per_seed=["L4 pure symbolic" if h else "L4 never pure symbolic" for h in holds]))

    runs = _scored(ev, "letter")
    if runs:
        positional = [ever_set(r, "positional")[0] for r in runs]
        holds = [not s for s in positional]
        out.append(_holds_claim(
            "letter task: no layer is ever pure positional", "Sec. 3.3, Fig. 7", "no pure positional layer", holds,
            f"{HOLDS_RULE}; it holds at a seed if no layer is pure positional (point estimate) at any scored step",
            runs=runs, per_seed=[_layers(s) for s in positional]))

    pairs = [(n, le) for n, le in _pairs(ev, "number", "letter") if end_kinds(n) and end_kinds(le)]
    if pairs:
        holds, texts = [], []
        for n, le in pairs:
            n_pos, l_pos = ({layer for layer, k in end_kinds(te).items() if k == "positional"} for te in (n, le))
            holds.append(bool(n_pos) and not l_pos)
            n_st, l_st = _final_straddlers(n), _final_straddlers(le)
            st = (f" (straddling γ, counted by its point estimate: number {_layers(n_st)}, letter {_layers(l_st)})"
                  if n_st or l_st else "")
            texts.append(f"number {_layers(n_pos)}; letter {_layers(l_pos)}{st}")
        out.append(_holds_claim(
            "positional layers appear in the number task only", "Sec. 3.3, Fig. 6",
            "number L1-L3 positional; letter none", holds,
            f"{HOLDS_RULE}; it holds at a seed if the number model has a pure positional layer at its last scored step "
            "and the letter model of the same seed none (point estimates)",
            runs=[n for n, _ in pairs], per_seed=texts, step=_steps([n for n, _ in pairs], lambda r: r.scores_step)))

    fig6 = paper_numbers()["fig6_final_scores_last_token_step_6000"]
    for task in ("number", "letter"):
        runs = [r for r in ev.seeds(task) if end_kinds(r)]
        if not runs:
            continue
        counts = [sum(bool(k) for k in end_kinds(r).values()) for r in runs]
        straddle = [(r, _final_straddlers(r)) for r in runs]
        paper_pure = PAPER_LAYERS - 1  # every layer but L0 (Fig. 6: L0 at (s_pos, s_sym) = mixed)
        name = f"{task} task: pure heads at the end of training"
        paper = f"{paper_pure} of 12 (L0 mixed at {tuple(fig6[f'{task}_task']['L0'])})"
        texts = [f"{c} of {r.n_layers}" for c, r in zip(counts, runs, strict=True)]
        step = _steps(runs, lambda r: r.scores_step)
        if any(r.n_layers != PAPER_LAYERS for r in runs):
            holds = [c >= 1 for c in counts]
            out.append(_holds_claim(name, "Sec. 3.3, Fig. 6", paper, holds,
                                    f"pure heads emerge (a model without the paper's 12 layers): {HOLDS_RULE}; it "
                                    "holds at a seed with at least one pure layer at the last scored step",
                                    runs=runs, per_seed=texts, step=step, values=[float(c) for c in counts],
                                    extra=_straddle_text(straddle)))
            continue
        g = rules.grade_count(counts, paper_pure)
        out.append(_claim(name, "Sec. 3.3, Fig. 6", paper, f"{g.chosen} of 12, {g.detail}{_straddle_text(straddle)}",
                          g.verdict, COUNT_RULE, runs=runs, per_seed=texts, step=step, paper_value=float(paper_pure),
                          values=[float(c) for c in counts],
                          seed_verdicts=[rules.count_verdict(c, paper_pure) for c in counts]))
    return out


# ---- frequencies (Sec. 3.5, Table 1) -------------------------------------------------------------


def valid_ids(te: TaskEvidence) -> dict[int, float]:
    """Head 0's weighted frequency IDs per layer that lie in the plane range 1..n_planes (NaN or out of range:
    left out; tables written before the ID was bounded can hold IDs <= 0)."""
    return {r.layer: r.weighted_id for r in te.table1
            if r.head == 0 and math.isfinite(r.weighted_id) and 1.0 <= r.weighted_id <= te.n_planes}


def frequency_claims(ev: Evidence) -> list[ClaimRecord]:
    paper = paper_numbers()["table1_weighted_frequency_id"]
    out = []
    rule = (f"a layer agrees at a seed if its weighted ID is valid (in 1..64) and within {TABLE1_WITHIN} of the "
            "paper's; a count per seed of agreeing layers: the verdict on the count most seeds give (a tie: the "
            "lowest): match if >= 10 of 12, partial if >= 6")
    for task in ("number", "letter"):
        runs = [r for r in ev.seeds(task) if r.table1]
        if not runs:
            continue
        want = paper[f"{task}_task"]
        name = f"{task} task: Table 1 weighted frequency IDs"
        texts, counts = [], []
        for r in runs:
            ids = valid_ids(r)
            every = {t.layer: t.weighted_id for t in r.table1 if t.head == 0}
            texts.append(" ".join(f"{every[x]:.0f}" if x in ids else f"({every[x]:.0f}: invalid)"
                                  for x in sorted(every)))
            counts.append(sum(layer in ids and abs(ids[layer] - w) <= TABLE1_WITHIN for layer, w in enumerate(want)))
        step = _steps(runs, lambda r: r.table1_step)
        if any(r.n_layers != PAPER_LAYERS for r in runs):
            out.append(_claim(name, "Sec. 3.5, Table 1", " ".join(map(str, want)), "needs the paper's 12 layers", NA,
                              rule, runs=runs, per_seed=texts, step=step))
            continue
        g = rules.grade_count(counts, PAPER_LAYERS, match_within=2, partial_within=6)
        out.append(_claim(name, "Sec. 3.5, Table 1", " ".join(map(str, want)),
                          f"{g.chosen} of 12 layers within {TABLE1_WITHIN}, {g.detail}", g.verdict, rule, runs=runs,
                          per_seed=[f"{t} ({c} within {TABLE1_WITHIN})" for t, c in zip(texts, counts, strict=True)],
                          step=step, values=[float(c) for c in counts],
                          seed_verdicts=[rules.count_verdict(c, PAPER_LAYERS, 2, 6) for c in counts]))

    runs, holds, weak, texts = [], [], [], []
    for r in ev.seeds("number"):
        if not (r.table1 and end_kinds(r)):
            continue
        kinds, ids = end_kinds(r), valid_ids(r)
        pos, sym = ([ids[layer] for layer, k in sorted(kinds.items()) if k == kind and layer in ids]
                    for kind in ("positional", "symbolic"))
        if not (pos and sym):
            continue
        runs.append(r)
        holds.append(max(pos) <= 12 and max(pos) < min(sym) and float(np.median(sym)) >= 25)
        weak.append(sum(pos) / len(pos) < sum(sym) / len(sym))
        texts.append(f"positional {', '.join(f'{x:.0f}' for x in pos)}; symbolic {', '.join(f'{x:.0f}' for x in sym)}")
    if runs:
        out.append(_holds_claim(
            "positional heads use the fastest rotations, symbolic heads slow ones", "Sec. 3.5, Table 1",
            "positional L1-L3: IDs 2; symbolic L4-L11: IDs 10 (L4), 37-39", holds,
            f"{HOLDS_RULE}, or if its weaker form holds at every seed; it holds at a seed (with both kinds of pure "
            "layer at its last scored step) if every pure positional layer's valid ID is <= 12 and below every pure "
            "symbolic one's, and the symbolic layers' median ID is >= 25 (the paper's own L4 is symbolic at ID 10; "
            "weaker: the means are so ordered)",
            runs=runs, per_seed=texts, weak=weak, step=_steps(runs, lambda r: r.table1_step)))
    return out


# ---- length (Sec. 3.6, Fig. 5B) -------------------------------------------------------------------


HOPS = (1, 2, 3, 4)


@dataclass(frozen=True)
class _Kept:
    """A seed known by its pooled length accuracies alone (:class:`~possym.records.LengthSeedRecord`)."""

    seed: int
    source: str
PRE_REGISTERED_LENGTH = "uniform hop mix, best checkpoint"


def mixed(curve: Sequence[LengthRecord], extra: int, mix: Sequence[float]) -> Estimate | None:
    """The accuracy at ``extra`` under hop weights ``mix`` (over 1..4 hops), from the per-hop points; its interval
    the same mix of theirs (their per-prefix intervals where measured, else the binomial ones)."""
    points = [_at(curve, extra, h) for h in HOPS]
    if any(p is None for p in points):
        return None
    value = low = high = 0.0
    for w, p in zip(mix, points, strict=True):
        assert p is not None
        lo = p.cluster_low if p.cluster_low is not None and math.isfinite(p.cluster_low) else p.ci_low
        hi = p.cluster_high if p.cluster_high is not None and math.isfinite(p.cluster_high) else p.ci_high
        value, low, high = value + w * p.accuracy, low + w * lo, high + w * hi
    return Estimate.of(value, low, high)


def _pooled(curve: Sequence[LengthRecord], extra: int) -> Estimate | None:
    p = _at(curve, extra)
    return None if p is None else Estimate.of(p.accuracy, p.cluster_low, p.cluster_high)


@dataclass(frozen=True)
class FittedMix:
    """The hop mix that brings the seeds' mean per-hop curve closest to Fig. 5B (least squares over the paper's
    lengths), and its 95% bootstrap interval over seeds, per hop count. Fitted after the fact: a reading, never
    the graded one."""

    weights: tuple[float, ...]
    low: tuple[float, ...]
    high: tuple[float, ...]
    rmse: float

    def text(self) -> str:
        return ", ".join(f"{h} hop {w:.2f} [{lo:.2f}, {hi:.2f}]"
                         for h, w, lo, hi in zip(HOPS, self.weights, self.low, self.high, strict=True))


def _fit(per_hop: np.ndarray, target: np.ndarray) -> np.ndarray:
    """Weights w >= 0, sum 1, minimising |per_hop.T @ w − target|² (per_hop: hops × lengths)."""
    from scipy.optimize import minimize

    k = per_hop.shape[0]
    res = minimize(lambda w: float(((per_hop.T @ w - target) ** 2).sum()), np.full(k, 1.0 / k), method="SLSQP",
                   bounds=[(0.0, 1.0)] * k, constraints=[{"type": "eq", "fun": lambda w: w.sum() - 1.0}])
    w = np.clip(res.x, 0.0, 1.0)
    return w / w.sum()


def fitted_mix(curves: Sequence[Sequence[LengthRecord]], task: str, n_boot: int = 200,
               rng: np.random.Generator | None = None) -> FittedMix | None:
    """:class:`FittedMix` of ``task``'s per-seed curves against the paper's Fig. 5B (None without per-hop points).

    >>> from possym.records import LengthRecord
    >>> paper = {100: 0.74, 800: 0.25}  # Fig. 5B's number task: only 2-hop windows reproduce it
    >>> pts = [LengthRecord(k, h, k + 17, a, 100, int(100 * a), a, a, 1, 0.0, a, a, "cached")
    ...        for k in paper for h in HOPS for a in [paper[k] if h == 2 else 1.0 - paper[k]]]
    >>> [round(w, 2) for w in fitted_mix([pts], "number").weights]
    [0.0, 1.0, 0.0, 0.0]
    """
    rng = np.random.default_rng(0) if rng is None else rng
    paper = paper_numbers()["fig5b_length_generalisation"]
    want = dict(zip(paper["extra"], paper[f"{task}_task"], strict=True))
    lengths = sorted(k for k in want if all(_at(c, k, h) is not None for c in curves for h in HOPS))
    if not curves or not lengths:
        return None
    arr = np.array([[[_at(c, k, h).accuracy for k in lengths] for h in HOPS] for c in curves])  # type: ignore[union-attr]
    target = np.array([want[k] for k in lengths])
    w = _fit(arr.mean(axis=0), target)
    boots = np.array([_fit(arr[rng.integers(0, len(arr), len(arr))].mean(axis=0), target) for _ in range(n_boot)])
    rmse = float(np.sqrt(((arr.mean(axis=0).T @ w - target) ** 2).mean()))
    return FittedMix(tuple(float(x) for x in w), tuple(float(x) for x in np.percentile(boots, 2.5, axis=0)),
                     tuple(float(x) for x in np.percentile(boots, 97.5, axis=0)), rmse)


def length_readings(runs: Sequence[TaskEvidence], extra: int, fit: FittedMix | None) -> dict[str, list[Estimate]]:
    """Per reading of the length protocol the paper leaves open (hop mix × checkpoint), the seeds' estimates at
    ``extra``: the uniform mix (the pre-registered reading, pooled over every window), each hop count alone, and
    the fitted mix; at the best checkpoint and the final one."""
    mixes: dict[str, Sequence[float] | None] = {"uniform hop mix": None}
    for h in HOPS:
        mixes[f"{h} hop{'s' if h > 1 else ''} only"] = tuple(float(h == x) for x in HOPS)
    if fit is not None:
        mixes["fitted hop mix (after the fact)"] = fit.weights
    out: dict[str, list[Estimate]] = {}
    for checkpoint in ("best", "final"):
        for name, mix in mixes.items():
            curves = [r.lengthgen if checkpoint == "best" else (r.lengthgen_final or r.lengthgen) for r in runs]
            seeds = [e for c in curves for e in [_pooled(c, extra) if mix is None else mixed(c, extra, mix)]
                     if e is not None]
            if seeds:
                out[f"{name}, {checkpoint} checkpoint"] = seeds
    return out


# The reading every length claim is graded under (docs/choices.md): the extra tokens drawn as the window's
# targets, the x-axis counting them (K), the uniform hop mix, the best checkpoint.
PRE_REGISTERED_PROTOCOL = ("targets", "uniform", "best", "extra")
X_AXIS_TEXT = {"extra": "x = K extra tokens", "seq_len": "x = total length"}


def protocol_readings(protocol: Sequence[ProtocolValueRecord], claim: str) -> dict[str, list[Estimate]]:
    """The seeds' values of ``claim`` under each reading of the length protocol measured apart from the pre-registered
    one (what the extra tokens are × the x-axis, at a hop mix and checkpoint), keyed by the reading's name.

    >>> rows = [ProtocolValueRecord(kind, "uniform", "best", axis, "c", seed, 0.5, 0.4, 0.6)
    ...         for kind in ("targets", "mixed") for axis in ("extra", "seq_len") for seed in (0, 1)]
    >>> sorted(protocol_readings(rows, "c"))[0]
    'extra tokens mixed, x = K extra tokens, uniform hop mix, best checkpoint (2 seeds, length_protocol)'
    >>> len(protocol_readings(rows, "c"))   # the pre-registered (targets, K) is graded on its own seeds
    3
    """
    grouped: dict[tuple[str, str, str, str], list[ProtocolValueRecord]] = {}
    for r in protocol:
        if r.claim == claim:
            grouped.setdefault((r.extra_tokens, r.hop_mix, r.checkpoint, r.x_axis), []).append(r)
    out = {}
    for key in sorted(grouped):
        if key == PRE_REGISTERED_PROTOCOL:
            continue
        kind, mix, checkpoint, axis = key
        rows = sorted(grouped[key], key=lambda r: (r.seed is None, r.seed or 0, r.value))
        name = (f"extra tokens {kind}, {X_AXIS_TEXT.get(axis, axis)}, {mix} hop mix, {checkpoint} checkpoint "
                f"({len(rows)} seeds, length_protocol)")
        out[name] = [Estimate.of(r.value, r.low, r.high) for r in rows]
    return out


def length_claims(ev: Evidence) -> list[ClaimRecord]:
    paper = paper_numbers()["fig5b_length_generalisation"]
    rule = ("an accuracy: match if the paper's value (±0.01 read off Fig. 5B, and the binomial error of "
            f"{GRADING_N} inputs) is not significantly unlike a new seed of ours (t prediction interval on the "
            f"log-odds over seeds, p >= 0.05), partial if within a factor {rules.ODDS_PARTIAL:g} in odds of our "
            f"interval; uninformative if the paper's value and every seed's are at the floor (odds within a factor "
            f"{rules.ODDS_FLOOR:g} of chance), ceiling if both are within the figure's resolution of 1")
    out = []
    for task in ("number", "letter"):
        values = dict(zip(paper["extra"], paper[f"{task}_task"], strict=True))
        have = [r for r in ev.seeds(task) if r.lengthgen]
        fit = fitted_mix([r.lengthgen for r in have], task)
        for extra in (100, 800, 5000):
            name = f"{task} task: accuracy at +{extra} tokens"
            runs = [r for r in ev.seeds(task) if _at(r.lengthgen, extra) is not None]
            want = values.get(extra)
            if not runs or want is None:
                out.append(_claim(name, "Sec. 3.6, Fig. 5B", str(want), "not measured", NA, rule))
                continue
            chance_set = {r.chance for r in runs}
            chance = chance_set.pop() if len(chance_set) == 1 else None
            pv = PaperValue(float(want), DIGITISATION, GRADING_N)
            kept = sorted((x for x in ev.length_seeds if x.task == task and x.extra == extra), key=lambda x: x.seed)
            readings = {}
            graded: list[TaskEvidence | _Kept]
            if kept:  # a self-consistent set of more seeds grades; the curves' seeds give the hop-mix readings
                best = [x for x in kept if x.checkpoint == "best"]
                final = [x for x in kept if x.checkpoint == "final"]
                graded = [_Kept(x.seed, x.source) for x in best]
                estimates = [Estimate.of(x.accuracy, x.low, x.high) for x in best]
                if final:
                    sweep = final[0].source.split(" (")[0]
                    name_final = f"uniform hop mix, final checkpoint ({len(final)} seeds, {sweep})"
                    readings[name_final] = rules.grade_accuracy(
                        [Estimate.of(x.accuracy, x.low, x.high) for x in final], pv, chance).verdict
                source = best[0].source if best else ""
            else:
                graded = list(runs)
                estimates = [e for e in (_pooled(r.lengthgen, extra) for r in runs) if e is not None]
                source = ""
            grade = rules.grade_accuracy(estimates, pv, chance)
            by_n = {n: rules.grade_accuracy(estimates, PaperValue(float(want), DIGITISATION, n), chance).verdict
                    for n in PAPER_SAMPLE_SIZES}
            curve_seeds = f" ({len(runs)} seeds with per-hop curves)" if kept else ""
            for reading, est in length_readings(runs, extra, fit).items():
                readings[reading + curve_seeds] = rules.grade_accuracy(est, pv, chance).verdict
            for reading, est in protocol_readings(ev.protocol, name).items():
                readings[reading] = rules.grade_accuracy(est, pv, chance).verdict
            texts = [f"{e.value:.2f} [{e.low:.2f}, {e.high:.2f}]" for e in estimates]
            if not kept:  # the curves' own seeds: the final checkpoint beside the best
                texts = [t + ("" if (f := _at(r.lengthgen_final, extra)) is None else
                              f" (final checkpoint {f.accuracy:.2f})") for t, r in zip(texts, runs, strict=True)]
            acc = [e.value for e in estimates]
            uncertainty = (f"±{DIGITISATION:g} read off Fig. 5B; binomial at n = {GRADING_N} (graded); verdict at "
                           + ", ".join(f"n = {n}: {v}" for n, v in by_n.items()))
            if fit is not None:
                uncertainty += f"; fitted hop mix {fit.text()} (rmse {fit.rmse:.3f})"
            if source:
                uncertainty += f"; seeds: {source}"
            out.append(_claim(name, "Sec. 3.6, Fig. 5B", f"{want:.2f}", f"{summarise(acc).text()}: {grade.detail}",
                              grade.verdict, rule, runs=graded, per_seed=texts, paper_value=float(want), values=acc,
                              step="best" if kept else _steps(runs, lambda r: r.lengthgen_step),
                              seed_verdicts=[rules.grade_accuracy([e], pv, chance).verdict for e in estimates],
                              p_value=grade.p_value, paper_uncertainty=uncertainty,
                              reading=f"{PRE_REGISTERED_LENGTH} (pre-registered)", readings=readings))
    pairs = [(n, le) for n, le in _pairs(ev, "number", "letter") if n.lengthgen and le.lengthgen]
    if pairs:
        holds, weak, texts = [], [], []
        for n, le in pairs:
            pooled = {t: {p.extra: p.accuracy for p in te.lengthgen if p.n_hops == 0}
                      for t, te in (("n", n), ("l", le))}
            beyond = [k for k in sorted(set(pooled["n"]) & set(pooled["l"])) if k >= 50]
            above = [k for k in beyond if pooled["l"][k] >= pooled["n"][k]]
            share = len(above) / len(beyond) if beyond else 0.0
            holds.append(bool(beyond) and share == 1.0)
            weak.append(share >= 0.8)
            texts.append(f"letter >= number at {len(above)} of {len(beyond)} lengths >= +50")
        order = "the letter model extrapolates much further than the number model"
        readings = {name: rules.grade_holds([e.value == 1.0 for e in est], [e.value >= 0.8 for e in est])
                    for name, est in protocol_readings(ev.protocol, order).items()}
        out.append(_holds_claim(
            order, "Sec. 3.6, Fig. 5B",
            "letter above number at every length beyond +40", holds,
            f"{HOLDS_RULE}, or if its weaker form holds at every seed; it holds at a seed if the letter accuracy >= "
            "the number accuracy (same seed) at every K >= 50 (weaker: at >= 80% of them)",
            runs=[n for n, _ in pairs], per_seed=texts, weak=weak,
            reading=f"{PRE_REGISTERED_LENGTH} (pre-registered)" if readings else "", readings=readings))
    return out


# ---- the decay against the theory (Sec. 3.6, Fig. 5A against 5B) -----------------------------------------


FIG5A_LAYER = 2  # "the plot is made with the angles corresponding to the second layer in each model" (Sec. 3.6)
FIG5A_N = (1, 100)  # Fig. 5A's x-range: input length n <= 100
FIG5A_LETTERS = 8  # |ALPH| of Fig. 5A's retrieval bound (the letter task's alphabet)
FIG5A_ANGLES = (0.8, 0.0027)  # the caption's θ for Index and Retrieval
FIG5B_RANGE = (0, 5000)  # Fig. 5B's x-range: K extra tokens
ROPE_BASE = 10_000


def frequency_angle(frequency_id: int, n_planes: int = 64) -> float:
    """θ of a 1-based RoPE frequency ID: plane k = ID − 1 of :func:`possym.model.rope.rope_frequencies` over
    2·n_planes rotated dimensions, base^(−(ID − 1)/n_planes) (Table 1's IDs: θ_2 = 0.866, θ_42 = 0.0027).

    >>> round(frequency_angle(2), 3), round(frequency_angle(42), 4), frequency_angle(1)
    (0.866, 0.0027, 1.0)
    """
    from possym.model.rope import rope_frequencies  # here, so reading a claim table never loads torch

    return float(rope_frequencies(2 * n_planes, ROPE_BASE)[frequency_id - 1])


def theory_curve(function: str, theta: float) -> list[tuple[float, float | None]]:
    """Theorem 3.2's bound at θ over Fig. 5A's x-range, n = 1..100: Index min(1 − cos θ, 2π²/n²), Retrieval
    1 − cos(2π/8 − nθ)."""
    from possym.theory.discrepancy import index_bound, retrieval_bound

    ns = np.arange(FIG5A_N[0], FIG5A_N[1] + 1)
    bound = index_bound(theta, ns) if function == "index" else retrieval_bound(theta, FIG5A_LETTERS, ns)
    return [(float(n), float(b)) for n, b in zip(ns, bound, strict=True)]


def _layer_angle(te: TaskEvidence, layer: int = FIG5A_LAYER) -> tuple[int, float] | None:
    """(Table 1's frequency ID of ``layer``, head 0, and its θ)."""
    row = next((r for r in te.table1 if r.layer == layer and r.head == 0), None)
    return None if row is None else (row.frequency_id, frequency_angle(row.frequency_id, te.n_planes))


def _accuracy_curve(te: TaskEvidence) -> list[tuple[float, float | None]]:
    """The pooled length curve (all hop counts) on Fig. 5B's x-range; empty unless it spans the range."""
    pts = sorted((p.extra, p.accuracy) for p in te.lengthgen if p.n_hops == 0 and FIG5B_RANGE[0] <= p.extra
                 <= FIG5B_RANGE[1])
    if not pts or pts[0][0] != FIG5B_RANGE[0] or pts[-1][0] != FIG5B_RANGE[1]:
        return []
    return [(float(x), float(y)) for x, y in pts]


Curve = list[tuple[float, float | None]]


def decay_curves(ev: Evidence) -> dict[int, tuple[Curve, Curve, Curve, Curve]]:
    """Per seed with both tasks' curves: (Index bound, Retrieval bound at Table 1's layer-2 angles, number accuracy,
    letter accuracy), the curves :func:`decay_claims` grades (for drawing them)."""
    out: dict[int, tuple[Curve, Curve, Curve, Curve]] = {}
    for n, le in _pairs(ev, "number", "letter"):
        if (pair := _decay_pair(n, le, TABLE1_ANGLES)) is not None:
            (index, retrieval), (number, letter), _ = pair
            out[n.seed] = (index, retrieval, number, letter)
    return out


DECAY_RULE = (
    f"{HOLDS_RULE}, or if its weaker form holds at every seed; the 'qualitative pattern' is the shape features the "
    "paper's text names, read on each figure's own x-range (Fig. 5A: n = 1..100; Fig. 5B: K = 0..5000), each "
    "curve's half-drop point h = where it has lost half of its start-to-end drop, as a share of the range (1 if it "
    f"drops by no more than {DIGITISATION:g}): the number (Index) curve collapses early while the letter (Retrieval) "
    f"one decays slowly, h(letter) >= {rules.DECAY_RATIO:g} × h(number), and the letter curve lies at or above the "
    f"number one (within {DIGITISATION:g}) from the number curve's half-drop point on. It holds at a seed if the "
    "pattern holds both in its Fig. 5A (Theorem 3.2's bounds at the angles of Table 1's layer 2 of its number and "
    "letter models, as the paper's Sec. 3.6 made it) and in its Fig. 5B (pooled accuracy at the best checkpoint); "
    "weaker: h(letter) > h(number) and ordered, in both. Seeds with both tasks' curves, paired by number"
)


TABLE1_ANGLES = "table 1"  # Fig. 5A's bounds at the angles of Table 1's layer 2, whatever curves are given


def _decay_pair(number: TaskEvidence, letter: TaskEvidence, angles: tuple[float, float] | str = ""
                ) -> tuple[tuple[Curve, Curve], tuple[Curve, Curve], str] | None:
    """(Fig. 5A's two curves, Fig. 5B's two curves, the angles used) for one seed pair; ``angles``: fixed (θ_Index,
    θ_Retrieval); :data:`TABLE1_ANGLES`: Table 1's layer 2; "": the curves given (``decay_bound``) where both runs
    have them, else Table 1's layer 2. None: a curve is missing."""
    acc = _accuracy_curve(number), _accuracy_curve(letter)
    if not all(acc):
        return None
    if isinstance(angles, tuple):
        curves = theory_curve("index", angles[0]), theory_curve("retrieval", angles[1])
        used = f"θ = {angles[0]:g} / {angles[1]:g}"
    elif not angles and number.decay_bound and letter.decay_bound:
        curves = list(number.decay_bound), list(letter.decay_bound)
        used = "Fig. 5A as digitised"
    else:
        ids = _layer_angle(number), _layer_angle(letter)
        if ids[0] is None or ids[1] is None:
            return None
        curves = theory_curve("index", ids[0][1]), theory_curve("retrieval", ids[1][1])
        used = f"L{FIG5A_LAYER} IDs {ids[0][0]} / {ids[1][0]} (θ = {ids[0][1]:.3g} / {ids[1][1]:.3g})"
    return curves, acc, used


def decay_claims(ev: Evidence) -> list[ClaimRecord]:
    """Sec. 3.6: "the qualitative patterns of decay in the generalization performance closely resemble those
    predicted by our theoretical model" (Fig. 5B against Fig. 5A). The paper names the pattern in words: the
    number task "barely generalizes" while the letter task keeps over 90% to +850 (Fig. 5B); Theorem 3.2's
    Index bound decays as O(1/n²) while Retrieval's decays slowly (Remark 3.2, Fig. 5A). A seed resembles the
    theory when both figures show that pattern (:func:`possym.report.rules.decay_shape`): the number curve halves
    at least twice as early on its figure's range as the letter one, and lies below it from there on. The paper's
    own figures give ×4.1 (Fig. 5A, digitised) and ×7.4 (Fig. 5B)."""
    pairs = [(n, le) for n, le in _pairs(ev, "number", "letter") if _decay_pair(n, le) is not None]
    if not pairs:
        return []
    name, section = "the decay of accuracy with length resembles the theory (Fig. 5A against Fig. 5B)", \
        "Sec. 3.6, Fig. 5A/5B"
    paper = ("the number curve collapses early, the letter one decays slowly, in both the bounds (Fig. 5A) and the "
             "accuracy (Fig. 5B)")
    graded = "Fig. 5A as digitised" if all(n.decay_bound for n, _ in pairs) else \
        f"theory at Table 1's L{FIG5A_LAYER} angles (pre-registered)"
    settings: dict[str, tuple[float, float] | str] = {graded: ""}
    if graded == "Fig. 5A as digitised":
        settings[f"theory at Table 1's L{FIG5A_LAYER} angles"] = TABLE1_ANGLES
    settings["theory at Fig. 5A's angles (θ = 0.8, 0.0027)"] = FIG5A_ANGLES
    results: dict[str, tuple[list[bool], list[bool]]] = {}
    texts = []
    for reading, angles in settings.items():
        holds, weak = [], []
        for n, le in pairs:
            pair = _decay_pair(n, le, angles)
            assert pair is not None
            theory, accuracy, used = rules.decay_shape(*pair[0]), rules.decay_shape(*pair[1]), pair[2]
            holds.append(theory.holds and accuracy.holds)
            weak.append(theory.weak and accuracy.weak)
            if reading == graded:
                texts.append(f"5A ({used}): {theory.text()}; 5B: {accuracy.text()}")
        results[reading] = (holds, weak)
    holds, weak = results[graded]
    readings = {r: rules.grade_holds(h, w) for r, (h, w) in results.items()}
    return [_holds_claim(name, section, paper, holds, DECAY_RULE, runs=[n for n, _ in pairs], per_seed=texts,
                         weak=weak, reading=graded, readings=readings)]


# ---- information flow and geometry in the trained heads (Sec. 3.2, Fig. 3; Sec. 3.4, Fig. 4B) -------------------


# A share of inputs "most" inputs reach: a hop query's attention lands on the next hop at more than half of them.
FLOW_MAJORITY = 0.5
# Keys "aligned" as T_Index's (where all keys are one vector v, alignment 1): the mean of the unit keys at least
# this long, i.e. their angles within a circular sd of sqrt(−2 ln 0.9) ≈ 26° of one direction.
KEYS_ALIGNED = 0.9
FIG4B_LAYER = 1
FIG4B_TASK = "number"  # Fig. 4B pictures the trained number model


@dataclass(frozen=True)
class Fig3Panel:
    """What the paper says of one task's panel of Fig. 3: where, its words, and whether it names the layer that
    carries each hop (Fig. 3A: layer d − 1 at d hops from the answer) or no layer at all (Fig. 3B)."""

    section: str
    paper: str
    layer_per_hop: bool


FIG3_PANELS = {
    "number": Fig3Panel("Sec. 3.2, Fig. 3A", "one hop per layer: from the hop query d hops from the answer, "
                        "layer d − 1 attends the next hop (Fig. 3A: L0 at the last hop, L1 at the one before, L3 at "
                        "the last token)", layer_per_hop=True),
    "letter": Fig3Panel("Sec. 3.2, Fig. 3B", "analogous to the number task's (Fig. 3B; the text names no layers)",
                        layer_per_hop=False),
}


def _flow_by_seed(rows: Sequence[HopFlowRecord], task: str) -> dict[int, dict[tuple[int, int], HopFlowRecord]]:
    out: dict[int, dict[tuple[int, int], HopFlowRecord]] = {}
    for r in rows:
        if r.task == task:
            out.setdefault(r.seed, {})[r.depth, r.layer] = r
    return out


def flow_claims(ev: Evidence) -> list[ClaimRecord]:
    """Sec. 3.2, Fig. 3: the information flow along the hops in the trained heads. The paper describes one
    number-task input (Fig. 3A): from the hop query nearest the answer, layer 0's attention is largest on the
    answer letter; from the hop before it, layer 1's on that hop's position; at the last token, layer 3 copies
    the letter that has arrived: one hop per layer, the hop ``d`` hops from the answer carried by layer d − 1.
    Of the letter task it says only that "an analogous analysis can be extrapolated". Read over many correctly
    solved inputs with the most hops (``hop_flow.csv``), per hop query: the share of inputs at which a layer's
    attention maximum (head 0) lies on the next position of the hop path. That attention lands there says
    nothing of what is copied; the paper's "no information flow" at layers 1-2 of the last token is not graded."""
    out = []
    for task, panel in FIG3_PANELS.items():
        by_seed = _flow_by_seed(ev.hop_flow, task)
        if not by_seed:
            continue
        runs = [_Kept(seed, "hop_flow") for seed in sorted(by_seed)]
        strict, some, texts = [], [], []
        for seed in sorted(by_seed):
            cells = by_seed[seed]
            depths = sorted({d for d, _ in cells})
            best = {d: max((c for (dd, _), c in cells.items() if dd == d), key=lambda c: c.on_next) for d in depths}
            at_layer = {d: cells.get((d, d - 1)) for d in depths}
            strict.append(all(c is not None and c.on_next > FLOW_MAJORITY for c in at_layer.values()))
            some.append(all(c.on_next > FLOW_MAJORITY for c in best.values()))
            n_inputs = next(iter(cells.values())).n_inputs
            one = " / ".join(f"{c.on_next:.2f}" if c is not None else "-" for c in at_layer.values())
            most = ", ".join(f"d{d} L{c.layer} {c.on_next:.2f}" for d, c in best.items())
            texts.append(f"{n_inputs} inputs at step {next(iter(cells.values())).step}; depth 1..{len(depths)} at "
                         f"L0..L{len(depths) - 1}: {one}; best layer per depth: {most}")
        name = f"{task} task: attention follows the hop path (Fig. 3)"
        if panel.layer_per_hop:
            rule = (f"{HOLDS_RULE}, or if its weaker form holds at every seed; on correctly solved inputs with the "
                    f"most hops, it holds at a seed if, at every hop query, layer d − 1 (d: hops from the answer) has "
                    f"its attention maximum on the next position of the hop path at more than {FLOW_MAJORITY:.0%} of "
                    "them (weaker: some layer does, at every hop query)")
            readings = {"one hop per layer (Fig. 3A's text; pre-registered)": rules.grade_holds(strict),
                        "some layer per hop query": rules.grade_holds(some)}
            out.append(_holds_claim(name, panel.section, panel.paper, strict, rule, runs=runs, per_seed=texts,
                                    weak=some, reading="one hop per layer (Fig. 3A's text; pre-registered)",
                                    readings=readings))
        else:
            rule = (f"{HOLDS_RULE}; on correctly solved inputs with the most hops, it holds at a seed if, at every "
                    f"hop query, some layer has its attention maximum on the next position of the hop path at more "
                    f"than {FLOW_MAJORITY:.0%} of them (the paper names no layers for the letter task)")
            out.append(_holds_claim(name, panel.section, panel.paper, some, rule, runs=runs, per_seed=texts))
    return out


def geometry_claims(ev: Evidence) -> list[ClaimRecord]:
    """Sec. 3.4, Fig. 4B: in layer 1 of the trained number model, on its dominant RoPE plane, the keys and queries
    are organised as in T_Index (Fig. 4A): every key aligned with one vector v, and the query rotated so that
    after RoPE it meets v at the position it asks for. The paper shows one input's picture and states no measure;
    read over many correctly solved inputs (``plane_geometry.csv``, the last token as query, whose number is the
    offset it asks for): the keys' alignment (the length of the mean unit key) and whether the plane's partial
    logit favours the asked-for offset. A reading added after the result, which never grades: the query's aim as
    an angle (the asked-for offset's rotation within half a position of the keys' direction), since a fast plane's
    argmax can land on an alias about 2π/θ positions away."""
    rows = [r for r in ev.geometry if r.task == FIG4B_TASK and r.layer == FIG4B_LAYER]
    if not rows:
        return []
    seeds = sorted({r.seed for r in rows})
    holds, weak, head_holds, angle_holds, texts = [], [], [], [], []
    for seed in seeds:
        mine = [r for r in rows if r.seed == seed]
        align = float(np.median([r.key_alignment for r in mine]))
        aim = float(np.mean([r.plane_argmax == r.pointed for r in mine]))
        head = float(np.mean([r.head_argmax == r.pointed for r in mine]))
        error = float(np.median([r.aim_error / r.theta for r in mine if r.theta > 0] or [math.nan]))
        ids = sorted({r.frequency_id for r in mine}, key=lambda i: -sum(r.frequency_id == i for r in mine))
        holds.append(align >= KEYS_ALIGNED and aim > FLOW_MAJORITY)
        weak.append(align >= KEYS_ALIGNED)
        head_holds.append(align >= KEYS_ALIGNED and head > FLOW_MAJORITY)
        angle_holds.append(align >= KEYS_ALIGNED and error <= 0.5)
        texts.append(f"{len(mine)} inputs at step {mine[0].step}; dominant plane ID {ids[0]} (of {len(ids)} seen); "
                     f"median key alignment {align:.2f}; plane's argmax at the asked offset {aim:.2f}, head's "
                     f"{head:.2f}; median aim error {error:.2f} positions")
    rule = (f"{HOLDS_RULE}, or if its weaker form holds at every seed; it holds at a seed if, in layer {FIG4B_LAYER} "
            "on each input's dominant plane (the largest mean max partial logit, Fig. 4C), the median over inputs "
            f"of the keys' alignment is at least {KEYS_ALIGNED:g} (T_Index: 1) and the plane's partial logit from "
            "the last token is largest at the offset its number asks for at more than "
            f"{FLOW_MAJORITY:.0%} of the inputs (weaker: the keys aligned only)")
    runs = [_Kept(seed, "plane_geometry") for seed in seeds]
    readings = {"the dominant plane's logit (pre-registered)": rules.grade_holds(holds, weak),
                "the head's whole attention": rules.grade_holds(head_holds, weak)}
    if not any(math.isnan(r.aim_error) for r in rows):
        # Added after the result: with θ near 1 rad the plane turns through 2π every 6.3 positions, so an offset
        # about 6 away can face the keys as well, and the argmax can land there although the query is aimed.
        readings["the plane's aim as an angle, within half a position (added after the result)"] = \
            rules.grade_holds(angle_holds, weak)
    return [_holds_claim("number task: L1's keys aligned and queries aimed, as T_Index's (Fig. 4B)",
                         "Sec. 3.4, Fig. 4B", "keys along one direction, queries rotated to the position they ask for "
                         "(one input's picture; no measure stated)", holds, rule, runs=runs, per_seed=texts,
                         weak=weak, reading="the dominant plane's logit (pre-registered)", readings=readings)]


# ---- theory (Thm. 3.1, 3.2; exact, no seeds): verifications, outside the empirical tally --------


def theory_claims(ev: Evidence) -> list[ClaimRecord]:
    out = []
    if ev.verification:
        bad = [r for r in ev.verification if not r.ok]
        out.append(_claim("T_Index and T_Retrieval implement their functions exactly", "Thm. 3.1", "exact (proof)",
                          f"{len(ev.verification) - len(bad)} of {len(ev.verification)} settings exact",
                          VERIFIED if not bad else DIFFERS,
                          "a check of our constructions: verified if every verification setting is exact",
                          kind="verification"))
    statements = {"index": "Δ_Index ≤ min(1 − cos θ, 2π²/n²)", "retrieval": "Δ_Retrieval ≤ 1 − cos(ω − nθ)"}
    rule = ("a check of the theorem on our exact discrepancy: verified if the bound holds on every n in the premise "
            "for Definition 3.1 (max over inputs); partial if only for the worst case (min); differs if for neither")
    for function, statement in statements.items():
        rows = [r for r in ev.bounds if r.function == function]
        if not rows:
            continue
        definitions = {r.definition for r in rows}
        holds = {d: all(r.n_failed == 0 for r in rows if r.definition == d) for d in definitions}
        verdict = VERIFIED if holds.get("max") else "partial" if holds.get("min") else DIFFERS
        ours = "; ".join(f"{d}: {'holds' if ok else 'fails'}" for d, ok in sorted(holds.items()))
        out.append(_claim(statement, "Thm. 3.2, Fig. 5A", "holds", ours, verdict, rule, kind="verification"))
    out += witness_claims(ev.witnesses)
    fig5a = paper_numbers()["fig5a_discrepancy_bounds"]
    if ev.fig5a:
        bound = {(r.function, r.n): r.bound for r in ev.fig5a}
        pairs = [(n, want, bound[key, n]) for key in ("index", "retrieval")
                 for n, want in zip(fig5a["n"], fig5a[key], strict=True) if want is not None and (key, n) in bound]
        worst = max(abs(a - b) for _, a, b in pairs)
        out.append(_claim("Fig. 5A: the bounds' curves (index falls to 0, retrieval stays near 0.13 at n = 99)",
                          "Fig. 5A", f"{len(pairs)} digitised points", f"largest gap {worst:.3f}",
                          VERIFIED if worst <= DIGITISATION else "partial" if worst <= 0.05 else DIFFERS,
                          "a check of the formula's plot: verified if every digitised point is within "
                          f"{DIGITISATION:g} (the digitisation) of the closed form, partial if within 0.05",
                          kind="verification"))
    return out


# A head's outputs on the two inputs of a swap pair count as equal within float rounding of a softmax over
# a few hundred logits (the measured differences are 1e-14 and 1e-16).
EQUAL_OUTPUTS = 1e-6


def witness_claims(rows: Sequence[WitnessRecord]) -> list[ClaimRecord]:
    """Remark 3.1 run on its swap pairs (App. F.2.3, :mod:`possym.theory.witnesses`): checks of the remark's
    proofs on our model code, so verifications. Index: every random purely symbolic (NoPE) head gives equal
    outputs on two inputs whose Index answers differ, while T_Index is right on both. Retrieval: no random
    positional head (Theorem 4's F) is right on both inputs of a pair with one answer, while T_Retrieval is. The
    scope: a positional head with a query-reading F computes Retrieval on every proper input."""
    if not rows:
        return []
    out = []
    for function, kind, construction, statement in (
            ("index", "symbolic", "T_Index", "Remark 3.1: no purely symbolic head computes Index"),
            ("retrieval", "positional", "T_Retrieval",
             "Remark 3.1: no purely positional head computes Retrieval (Theorem 4's F)")):
        pair = [r for r in rows if r.function == function]
        built = [r for r in pair if r.head.startswith(construction)]
        random_heads = [r for r in pair if r not in built]  # random heads, and one pointed at input a's answer
        if not random_heads or not built:
            continue
        blind = all(r.right_on_both == 0 for r in random_heads)
        if function == "index":  # a symbolic head cannot tell the inputs apart: equal outputs
            blind = blind and all((r.max_difference or 0.0) <= EQUAL_OUTPUTS for r in random_heads)
        exact = all(r.right_on_both == 1 for r in built)
        heads = " and ".join(r.head.split(" (")[0] for r in random_heads)
        equal = " (and its outputs are equal)" if function == "index" else ""
        out.append(_claim(
            statement, "Remark 3.1, App. F.2.3", "impossible (proof)",
            f"{heads}: right on both inputs of the swap pair {sum(r.right_on_both for r in random_heads)} times; "
            f"{construction} right on both: {'yes' if exact else 'no'}",
            VERIFIED if blind and exact else DIFFERS,
            f"a check of the remark's proof on our model code: verified if no purely {kind} head (random or pointed) "
            f"is right on both inputs of a swap pair whose answers the function tells apart{equal}, "
            f"and {construction} is right on both", kind="verification"))
    scope = [r for r in rows if r.function == "retrieval (scope)"]
    if scope:
        r = scope[0]
        out.append(_claim(
            "Remark 3.1's scope: a positional head with a query-reading F computes Retrieval", "Remark 3.1, App. F.2.3",
            "Retrieval's impossibility needs Theorem 4's F", f"exact on {r.right_on_a} of {r.right_on_b} proper inputs",
            VERIFIED if r.right_on_both == 1 and r.right_on_a == r.right_on_b else DIFFERS,
            "a check of the remark's premise: verified if the head is exact on every proper input",
            kind="verification"))
    return out


def claim_summary(c: ClaimRecord) -> str:
    """Ours over seeds in a few words: a number's mean ± sd (range, seeds), else the rule's reading up to its
    first colon."""
    if c.seed_mean is not None and c.seed_min is not None and c.seed_max is not None:
        n = len(c.seeds.split(",")) if c.seeds else 1
        fmt = ".0f" if abs(c.seed_mean) >= 50 else ".2f"  # steps, or accuracies and counts
        sd = f" ± {c.seed_sd:{fmt}}" if c.seed_sd is not None else ""
        return f"{c.seed_mean:{fmt}}{sd} ({c.seed_min:{fmt}}–{c.seed_max:{fmt}}, {n} seed{'s' if n > 1 else ''})"
    return c.ours.split(":")[0].split("; straddling")[0]


def check_claims(ev: Evidence) -> list[ClaimRecord]:
    """Every claim's record, in the paper's order, graded over the seeds of ``ev``."""
    return (learning_claims(ev) + convergence_claims(ev) + head_claims(ev) + hop_claims(ev) + purify_claims(ev)
            + frequency_claims(ev) + length_claims(ev) + decay_claims(ev) + flow_claims(ev) + geometry_claims(ev)
            + theory_claims(ev))
