"""The paper's headline claims, each graded over seeds by a rule of :mod:`possym.report.rules`.

Evidence is per task a list of runs, one per seed (:class:`Evidence`, :class:`TaskEvidence`). Every
claim is a :class:`~possym.records.ClaimRecord`: the paper's value, ours per seed, the seed summary,
the verdict and the rule in words, and the checkpoint each seed's number comes from.

Which rule grades which claim (the rules and their thresholds: :mod:`possym.report.rules`):

- **numbers**: accuracy at +100, +800, +5,000 tokens (Fig. 5B; with the chance floor) and the step
  of maximum accuracy (Fig. 2A's dashed line), by :func:`~possym.report.rules.grade_accuracy` and
  :func:`~possym.report.rules.grade_step`;
- **layer sets and counts**: the layers that become pure (Figs. 2C, 7; "become" = pure at some scored
  step), the pure heads at the end (Fig. 6) and Table 1's agreeing layers, by the set or count most
  seeds give (:func:`~possym.report.rules.grade_set`, :func:`~possym.report.rules.grade_count`);
- **orderings and statements per seed**: hops in order, hops together, letter before number,
  positional layers in the number task only, letter above number in length, fast IDs for positional
  heads, accuracy converging only once the heads are pure (Sec. 3.1), n hops needing n positional
  layers (Sec. 3.3), by :func:`~possym.report.rules.grade_holds`; seeds are paired by their number.

Purity is the point estimate's (γ = 0.1, head 0, last-token query). A layer whose bootstrap interval
box admits another verdict (it *straddles* γ) is listed beside the verdict, with its seed, and never
changes it. Claims about layers need the paper's 12 layers (else ``n/a``, or a weaker form where one
is stated). Theorem 3.2's claims have no seeds (exact computations).

Example:
    >>> log = [{"event": "eval", "step": 6750, "accuracy": 1.0}]
    >>> ev = Evidence({"number": [TaskEvidence(n_layers=12, seed=s, best_step=4000 + 300 * s, eval_every=50,
    ...                                        metrics=log) for s in range(3)]})
    >>> c = next(c for c in check_claims(ev) if c.claim.startswith("number task: step of maximum"))
    >>> c.verdict, c.per_seed
    ('partial', 's0 4000; s1 4300; s2 4600')
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from possym.paper import paper_numbers
from possym.records import (
    GAMMA,
    BoundCheckRecord,
    ClaimRecord,
    Fig5aRecord,
    LengthRecord,
    PurityRecord,
    ScoreRecord,
    Table1Record,
    VerificationRecord,
)
from possym.report import rules
from possym.report.rules import NA, VERDICTS, Estimate, compare_groups, summarise
from possym.scores.dynamics import layer_sets, purity, record_kinds

PAPER_LAYERS = 12
SOLVED = 0.9  # "reaches 0.9": hop order, learning speed, k-hop accuracy in Sec. 3.3
TABLE1_WITHIN = 3  # a layer's weighted frequency ID agrees with Table 1 within 3 IDs
PAPER_STEPS = 6750  # the paper's training: one epoch of 432,000 sequences at batch 64


@dataclass(frozen=True)
class TaskEvidence:
    """What one trained run (one seed of one task) produced, as typed records (a missing table: empty).

    ``chance``: accuracy of a uniform guess over the task's possible answers (None: not known, and
    no claim is graded ``uninformative``); ``n_planes``: RoPE planes per head (valid frequency IDs
    are 1..n_planes); ``best_step``: the run's best checkpoint (maximum validation accuracy);
    ``eval_every``: the spacing of its evaluations, a step's own uncertainty.
    """

    n_layers: int
    seed: int = 0
    chance: float | None = None
    n_planes: int = 64
    metrics: Sequence[Mapping[str, Any]] = ()  # the run's log (JSON records, already typed)
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


@dataclass(frozen=True)
class Evidence:
    """Per task, its runs in seed order; the theory's tables."""

    tasks: Mapping[str, Sequence[TaskEvidence]] = field(default_factory=dict)
    bounds: Sequence[BoundCheckRecord] = ()
    verification: Sequence[VerificationRecord] = ()
    fig5a: Sequence[Fig5aRecord] = ()

    def __post_init__(self) -> None:
        tasks = {t: tuple(v) for t, v in self.tasks.items()}
        for task, runs in tasks.items():
            seeds = [r.seed for r in runs]
            if len(set(seeds)) != len(seeds):
                raise ValueError(f"task {task!r}: seeds {seeds} repeat; give one run per seed")
        object.__setattr__(self, "tasks", tasks)

    def seeds(self, task: str) -> list[TaskEvidence]:
        return list(self.tasks.get(task, ()))


# ---- shared pieces ------------------------------------------------------------------------------


def _layers(layers) -> str:
    return "{" + ", ".join(f"L{x}" for x in sorted(layers)) + "}" if layers else "none"


def _claim(claim: str, section: str, paper: str, ours: str, verdict: str, rule: str, *,
           runs: Sequence[TaskEvidence] = (), per_seed: Sequence[str] = (), step: str = "",
           paper_value: float | None = None, values: Sequence[float] = ()) -> ClaimRecord:
    if verdict not in VERDICTS:
        raise ValueError(f"verdict {verdict!r}; allowed: {VERDICTS}")
    summary = summarise(values) if values else None
    return ClaimRecord(
        claim=claim, section=section, paper=paper, ours=ours, verdict=verdict, rule=rule, step=step,
        per_seed="; ".join(f"s{r.seed} {text}" for r, text in zip(runs, per_seed, strict=True)),
        seeds=",".join(str(r.seed) for r in runs), paper_value=paper_value,
        seed_mean=summary.mean if summary else None, seed_sd=summary.sd if summary else None,
        seed_min=summary.min if summary else None, seed_max=summary.max if summary else None,
    )


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


def first_steps(metrics: Sequence[Mapping[str, Any]], threshold: float = SOLVED) -> dict[str, int | None]:
    """First evaluated step at which each accuracy key (``acc_hop1``.., ``accuracy``) reaches ``threshold``."""
    from possym.evaluate.curves import learning_summary

    return learning_summary([dict(m) for m in metrics], threshold)["first_step"]


def _head0(scores: Sequence[ScoreRecord]) -> list[ScoreRecord]:
    return [r for r in scores if r.query == "last" and r.head == 0]


def kinds_at(scores: Sequence[ScoreRecord], step: int) -> dict[int, str]:
    """Per layer (head 0, last-token query), the point estimate's purity kind at ``step`` ("" if mixed)."""
    return {r.layer: purity(r.s_pos, r.s_sym, GAMMA) for r in _head0(scores) if r.step == step}


def straddling_at(scores: Sequence[ScoreRecord], step: int) -> set[int]:
    """Layers whose interval box at ``step`` admits more than one purity verdict."""
    return {r.layer for r in _head0(scores) if r.step == step and len(record_kinds(r, GAMMA)) > 1}


def final_kinds(scores: Sequence[ScoreRecord]) -> dict[int, str]:
    """Per layer (head 0), the purity kind at the last scored step ("" if mixed)."""
    last = max((r.step for r in scores), default=None)
    return kinds_at(scores, last) if last is not None else {}


def ever_pure(purity_rows: Sequence[PurityRecord], kind: str) -> set[int]:
    """Layers (head 0, last-token query, γ = 0.1) that are pure ``kind`` at some checkpoint (the purity table)."""
    return {r.layer for r in purity_rows
            if r.gamma == GAMMA and r.query == "last" and r.head == 0 and kind in (r.kind, r.final_kind)}


def ever_set(te: TaskEvidence, kind: str) -> tuple[frozenset[int], set[int]]:
    """(layers pure ``kind`` at some scored step by their point estimate, layers that straddle γ at some
    step): from the scores when the run has them, else from the purity table (no straddlers known)."""
    if te.scores:
        point = frozenset(r.layer for r in _head0(te.scores) if purity(r.s_pos, r.s_sym, GAMMA) == kind)
        sure, possible = layer_sets(te.scores, kind, GAMMA, ever=True)
        return point, possible - sure
    return frozenset(ever_pure(te.purity, kind)), set()


def _straddle_text(per_seed: Sequence[tuple[TaskEvidence, set[int]]]) -> str:
    parts = [f"{_layers(s)} at s{r.seed}" for r, s in per_seed if s]
    return f"; straddling γ (not counted): {', '.join(parts)}" if parts else ""


def _at(lengthgen: Sequence[LengthRecord], extra: int) -> LengthRecord | None:
    return next((p for p in lengthgen if p.extra == extra and p.n_hops == 0), None)


def _holds_text(holds: Sequence[bool]) -> str:
    return f"holds at {sum(holds)} of {len(holds)} seeds"


HOLDS_RULE = "an ordering per seed: match if it holds at every seed, partial if at most (more than half)"


# ---- learning (Sec. 3.1-3.2, Fig. 2A) ----------------------------------------------------------


def learning_claims(ev: Evidence) -> list[ClaimRecord]:
    out = []
    numbers = paper_numbers()
    fig2a = numbers["fig2a_number_task_test_accuracy_by_hop"]
    name, section = "number-task hops are learned in order", "Sec. 3.2, Fig. 2A"
    paper_text = "hops learned in order: 1 -> 2 -> 3 ~ 4 (Fig. 2A, 0.9 reached at about 2000/3000/3500/3500)"
    rule = (f"{HOLDS_RULE}; it holds at a seed if every hop count reaches {SOLVED}, the first steps never "
            "decrease with the hop count, and 1 hop comes before the most")
    runs = [r for r in ev.seeds("number") if r.metrics]
    if runs:
        holds, texts = [], []
        for r in runs:
            steps = first_steps(r.metrics)
            hops = [steps.get(f"acc_hop{h}") for h in range(1, 5) if f"acc_hop{h}" in steps]
            reached = [s for s in hops if s is not None]
            ordered = all(a <= b for a, b in zip(reached, reached[1:], strict=False))
            holds.append(len(reached) == len(hops) > 0 and ordered and reached[0] < reached[-1])
            texts.append(" / ".join(str(s) for s in hops))
        out.append(_claim(name, section, paper_text, _holds_text(holds), rules.grade_holds(holds), rule,
                          runs=runs, per_seed=texts))
    else:
        out.append(_claim(name, section, paper_text, "no run", NA, rule))

    name = "letter-task hops are learned together"
    rule = (f"{HOLDS_RULE}, or if its weaker form holds at every seed; it holds at a seed if every hop count "
            f"reaches {SOLVED} and their first steps spread over <= 10% of training (weaker: <= 20%)")
    runs = [r for r in ev.seeds("letter") if r.metrics]
    if runs:
        holds, weak, texts = [], [], []
        for r in runs:
            steps = first_steps(r.metrics)
            hops = [s for k, s in steps.items() if k.startswith("acc_hop")]
            reached = [s for s in hops if s is not None]
            total = max(m["step"] for m in r.metrics if "step" in m)
            if len(reached) < len(hops) or not reached:
                holds.append(False)
                weak.append(False)
                texts.append("some hop count never reaches 0.9")
                continue
            spread = (max(reached) - min(reached)) / max(total, 1)
            holds.append(spread <= 0.1)
            weak.append(spread <= 0.2)
            texts.append(f"{min(reached)}-{max(reached)} ({spread:.0%} of {total})")
        out.append(_claim(name, section, "per-hop curves within a few points of each other", _holds_text(holds),
                          rules.grade_holds(holds, weak), rule, runs=runs, per_seed=texts))

    pairs = [(n, le) for n, le in _pairs(ev, "number", "letter") if n.metrics and le.metrics]
    if pairs:
        holds, texts, l_steps, n_steps = [], [], [], []
        for n, le in pairs:
            n_step, l_step = first_steps(n.metrics)["accuracy"], first_steps(le.metrics)["accuracy"]
            holds.append(n_step is not None and l_step is not None and l_step < n_step)
            texts.append(f"letter {l_step} vs number {n_step}")
            if n_step is not None and l_step is not None:
                n_steps.append(float(n_step))
                l_steps.append(float(l_step))
        test = (f"; two-group test: {compare_groups(n_steps, l_steps).text('.0f')}"
                if len(l_steps) >= 2 else "")
        letter_max = numbers["fig2a_letter_task_test_accuracy_global"]["max_accuracy_step"]
        out.append(_claim(
            "the letter task is learned before the number task", section,
            f"max accuracy at step {letter_max} (letter) vs {fig2a['max_accuracy_step']} (number)",
            _holds_text(holds) + test, rules.grade_holds(holds),
            f"{HOLDS_RULE}; it holds at a seed if the letter model reaches {SOLVED} global accuracy at an earlier "
            "step than the number model of the same seed",
            runs=[n for n, _ in pairs], per_seed=texts))

    for task, key in (("number", "fig2a_number_task_test_accuracy_by_hop"),
                      ("letter", "fig2a_letter_task_test_accuracy_global")):
        runs = [r for r in ev.seeds(task) if r.best_step is not None]
        paper_step = numbers[key]["max_accuracy_step"]
        name = f"{task} task: step of maximum accuracy"
        rule = ("a step: match if the paper's step lies in our seeds' range widened by each seed's evaluation "
                f"spacing, partial if within {rules.STEP_PARTIAL:.0%} of the paper's step beyond it; ours is the "
                "best checkpoint (the earliest at the maximum validation accuracy)")
        if not runs:
            continue
        trained = {max((int(m["step"]) for m in r.metrics if "step" in m), default=0) for r in runs}
        if trained != {PAPER_STEPS}:
            out.append(_claim(name, "Sec. 3.1, Fig. 2A (dashed line)", f"{paper_step}",
                              f"trained for {sorted(trained)} steps, not the paper's {PAPER_STEPS}", NA,
                              rule + f"; needs the paper's {PAPER_STEPS} training steps", runs=runs,
                              per_seed=[f"{r.best_step}" for r in runs]))
            continue
        seeds = [Estimate(r.best_step, r.best_step - r.eval_every, r.best_step + r.eval_every)
                 for r in runs if r.best_step is not None]
        grade = rules.grade_step(seeds, paper_step)
        values = [e.value for e in seeds]
        out.append(_claim(name, "Sec. 3.1, Fig. 2A (dashed line)", f"{paper_step}",
                          f"{summarise(values).text('.0f')}: {grade.detail}", grade.verdict, rule, runs=runs,
                          per_seed=[f"{r.best_step}" for r in runs], paper_value=float(paper_step), values=values))
    return out


def _max_accuracy(te: TaskEvidence) -> float:
    return max((float(m["accuracy"]) for m in te.metrics if m.get("event") == "eval" and "accuracy" in m), default=0.0)


def convergence_claims(ev: Evidence) -> list[ClaimRecord]:
    """Sec. 3.1: heads must be pure for accuracy to converge, i.e. at the step of maximum accuracy (the paper's
    dashed line) some layer is pure and every layer pure at the end is pure already."""
    out = []
    for task in ("number", "letter"):
        have = [r for r in ev.seeds(task) if r.scores and r.best_step is not None and r.metrics]
        runs = [r for r in have if _max_accuracy(r) >= SOLVED]
        name = f"{task} task: accuracy converges only once the heads are pure"
        rule = (f"{HOLDS_RULE}, over the seeds whose global validation accuracy reaches {SOLVED}; it holds at a seed "
                "if some layer is pure at its last scored step and every such layer is pure of the same kind (point "
                "estimate) at the best checkpoint (the last scored step at or before it); the first step at "
                f"{SOLVED} global accuracy is reported beside it, not graded")
        paper = ("heads must be pure for test accuracy to converge to its maximum; when accuracy converges "
                 "(Fig. 2A's dashed line), both head types are pure")
        if not have:
            continue
        if not runs:
            out.append(_claim(name, "Sec. 3.1, Fig. 2B", paper, f"no seed reaches {SOLVED}", NA, rule))
            continue
        holds, texts = [], []
        straddle: list[tuple[TaskEvidence, set[int]]] = []
        for r in runs:
            scored = sorted({s.step for s in _head0(r.scores)})
            at = [s for s in scored if r.best_step is not None and s <= r.best_step]
            if not at:
                holds.append(False)
                texts.append(f"no scored step at or before best {r.best_step}")
                straddle.append((r, set()))
                continue
            final, then = final_kinds(r.scores), kinds_at(r.scores, at[-1])
            pure = {layer: k for layer, k in final.items() if k}
            late = sorted(layer for layer, k in pure.items() if then.get(layer) != k)
            holds.append(bool(pure) and not late)
            text = f"best {r.best_step}: " + (
                "no layer pure at the end" if not pure else
                f"{_layers(late)} of {len(pure)} final pure layers not yet pure" if late else
                f"all {len(pure)} final pure layers pure")
            first = first_steps(r.metrics).get("accuracy")
            early = [s for s in scored if first is not None and s <= first]
            if early and pure:
                then90 = kinds_at(r.scores, early[-1])
                late90 = sorted(layer for layer, k in pure.items() if then90.get(layer) != k)
                text += f" (at the first {SOLVED}, step {first}: {len(late90)} not yet pure)"
            texts.append(text)
            straddle.append((r, straddling_at(r.scores, at[-1]) & set(pure)))
        out.append(_claim(name, "Sec. 3.1, Fig. 2B", paper, _holds_text(holds) + _straddle_text(straddle),
                          rules.grade_holds(holds), rule, runs=runs, per_seed=texts,
                          step=_steps(runs, lambda r: f"best {r.best_step}")))
    return out


def hop_claims(ev: Evidence) -> list[ClaimRecord]:
    """Sec. 3.3: solving n hops needs n positional heads; looked for as a checkpoint where some k-hop accuracy
    is >= 0.9 while fewer than k layers are pure positional."""
    have = [r for r in ev.seeds("number") if r.scores and r.metrics]
    if not have:
        return []
    runs, holds, texts = [], [], []
    straddle: list[tuple[TaskEvidence, set[int]]] = []
    for r in have:
        evals = {int(m["step"]): m for m in r.metrics if m.get("event") == "eval" and "step" in m}
        found, checked = [], 0
        for step in sorted({s.step for s in _head0(r.scores)} & set(evals)):
            n_pos = sum(k == "positional" for k in kinds_at(r.scores, step).values())
            solved = [k for k in range(1, 9) if (evals[step].get(f"acc_hop{k}") or 0.0) >= SOLVED]
            checked += bool(solved)
            bad = [k for k in solved if n_pos < k]
            if bad:
                found.append((step, max(bad), float(evals[step][f"acc_hop{max(bad)}"]), n_pos))
        if not checked:
            continue  # no checkpoint solves any hop count: nothing to test at this seed
        runs.append(r)
        holds.append(not found)
        if found:
            step, k, acc, n_pos = found[0]
            last = found[-1]
            texts.append(f"at {len(found)} of {checked} checkpoints with a k-hop accuracy >= {SOLVED}; first at "
                         f"step {step} ({k}-hop {acc:.2f} with {n_pos} pure positional), last at step {last[0]} "
                         f"({last[1]}-hop {last[2]:.2f} with {last[3]})")
            straddle.append((r, {layer for layer in straddling_at(r.scores, step)
                                 if kinds_at(r.scores, step).get(layer) != "positional"}))
        else:
            texts.append(f"no such checkpoint among {checked}")
            straddle.append((r, set()))
    name, section = "number task: n hops need n pure positional layers", "Sec. 3.3, Fig. 2C"
    paper = ("reliably solving n hops requires sufficiently many positional heads (Sec. 3.3); note the paper's own L0 "
             "ends mixed (Fig. 6), leaving 3 pure positional layers under its ~1.0 4-hop accuracy")
    rule = (f"{HOLDS_RULE}, over the seeds with a checkpoint where some hop count reaches {SOLVED}; it holds at a seed "
            f"if no scored checkpoint has a k-hop validation accuracy >= {SOLVED} while fewer than k layers are pure "
            "positional (point estimates; layers that straddle γ there are listed, not counted)")
    if not runs:
        return [_claim(name, section, paper, f"no checkpoint reaches {SOLVED} on any hop count", NA, rule)]
    return [_claim(
        name, section, paper,
        "a checkpoint with k-hop accuracy >= 0.9 and fewer than k pure positional layers: "
        f"{sum(not h for h in holds)} of {len(holds)} seeds" + _straddle_text(straddle),
        rules.grade_holds(holds), rule, runs=runs, per_seed=texts)]


# ---- heads (Sec. 3.3, Figs. 2C, 6, 7) -----------------------------------------------------------


SET_RULE = ("a layer set per seed (point estimates): the verdict on the set most seeds give (a tie: the tied set "
            "furthest from the paper), by its Jaccard index J with the paper's: match if J = 1, partial if J >= 0.5")
COUNT_RULE = ("a count per seed (point estimates): the verdict on the count most seeds give (a tie: the one "
              "furthest from the paper): match if within 1 of the paper's, partial if within 3")


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
        runs = [r for r in ev.seeds(task) if r.scores or r.purity]
        if not runs:
            out.append(_claim(name, section, _layers(paper_set), "no scores", NA, SET_RULE))
            continue
        sets = [ever_set(r, kind) for r in runs]
        texts = [_layers(s) for s, _ in sets]
        st_text = _straddle_text([(r, st) for r, (_, st) in zip(runs, sets, strict=True)])
        step = _steps(runs, lambda r: f"every scored step to {r.scores_step}" if r.scores_step else "")
        if any(r.n_layers != PAPER_LAYERS for r in runs):
            out.append(_claim(name, section, _layers(paper_set), "needs the paper's 12 layers" + st_text, NA,
                              SET_RULE, runs=runs, per_seed=texts, step=step))
            continue
        g = rules.grade_set([s for s, _ in sets], paper_set)
        out.append(_claim(name, section, _layers(paper_set), f"{_layers(g.chosen)}, {g.detail}{st_text}",
                          g.verdict, SET_RULE, runs=runs, per_seed=texts, step=step))

    pairs = [(n, le) for n, le in _pairs(ev, "number", "letter") if n.scores and le.scores]
    if pairs:
        holds, texts = [], []
        for n, le in pairs:
            n_pos = {layer for layer, k in final_kinds(n.scores).items() if k == "positional"}
            l_pos = {layer for layer, k in final_kinds(le.scores).items() if k == "positional"}
            holds.append(bool(n_pos) and not l_pos)
            n_st = straddling_at(n.scores, max(r.step for r in n.scores))
            l_st = straddling_at(le.scores, max(r.step for r in le.scores))
            st = (f" (straddling γ, not counted: number {_layers(n_st)}, letter {_layers(l_st)})"
                  if n_st or l_st else "")
            texts.append(f"number {_layers(n_pos)}; letter {_layers(l_pos)}{st}")
        out.append(_claim(
            "positional layers appear in the number task only", "Sec. 3.3, Fig. 6",
            "number L1-L3 positional; letter none", _holds_text(holds), rules.grade_holds(holds),
            f"{HOLDS_RULE}; it holds at a seed if the number model has a pure positional layer at its last scored step "
            "and the letter model of the same seed none (point estimates)",
            runs=[n for n, _ in pairs], per_seed=texts, step=_steps([n for n, _ in pairs], lambda r: r.scores_step)))

    fig6 = paper_numbers()["fig6_final_scores_last_token_step_6000"]
    for task in ("number", "letter"):
        runs = [r for r in ev.seeds(task) if r.scores]
        if not runs:
            continue
        counts: list[int] = []
        straddle: list[tuple[TaskEvidence, set[int]]] = []
        for r in runs:
            counts.append(sum(bool(k) for k in final_kinds(r.scores).values()))
            straddle.append((r, straddling_at(r.scores, max(s.step for s in r.scores))))
        paper_pure = PAPER_LAYERS - 1  # every layer but L0 (Fig. 6: L0 at (s_pos, s_sym) = mixed)
        name = f"{task} task: pure heads at the end of training"
        paper = f"{paper_pure} of 12 (L0 mixed at {tuple(fig6[f'{task}_task']['L0'])})"
        texts = [f"{c} of {r.n_layers}" for c, r in zip(counts, runs, strict=True)]
        step = _steps(runs, lambda r: r.scores_step)
        if any(r.n_layers != PAPER_LAYERS for r in runs):
            holds = [c >= 1 for c in counts]
            out.append(_claim(name, "Sec. 3.3, Fig. 6", paper, _holds_text(holds) + _straddle_text(straddle),
                              rules.grade_holds(holds),
                              f"pure heads emerge (a model without the paper's 12 layers): {HOLDS_RULE}; it holds "
                              "at a seed with at least one pure layer at the last scored step",
                              runs=runs, per_seed=texts, step=step, values=[float(c) for c in counts]))
            continue
        g = rules.grade_count(counts, paper_pure)
        out.append(_claim(name, "Sec. 3.3, Fig. 6", paper, f"{g.chosen} of 12, {g.detail}{_straddle_text(straddle)}",
                          g.verdict, COUNT_RULE, runs=runs, per_seed=texts, step=step, paper_value=float(paper_pure),
                          values=[float(c) for c in counts]))
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
                          step=step, values=[float(c) for c in counts]))

    runs, holds, weak, texts = [], [], [], []
    for r in ev.seeds("number"):
        if not (r.table1 and r.scores):
            continue
        kinds, ids = final_kinds(r.scores), valid_ids(r)
        pos = [ids[layer] for layer, k in sorted(kinds.items()) if k == "positional" and layer in ids]
        sym = [ids[layer] for layer, k in sorted(kinds.items()) if k == "symbolic" and layer in ids]
        if not (pos and sym):
            continue
        runs.append(r)
        holds.append(max(pos) <= 12 and min(sym) >= 25)
        weak.append(sum(pos) / len(pos) < sum(sym) / len(sym))
        texts.append(f"positional {', '.join(f'{x:.0f}' for x in pos)}; symbolic {', '.join(f'{x:.0f}' for x in sym)}")
    if runs:
        out.append(_claim(
            "positional heads use the fastest rotations, symbolic heads slow ones", "Sec. 3.5, Table 1",
            "positional L0-L3: IDs 1-10; symbolic L4-L11: IDs 37-39", _holds_text(holds),
            rules.grade_holds(holds, weak),
            f"{HOLDS_RULE}, or if its weaker form holds at every seed; it holds at a seed (with both kinds of pure "
            "layer at its last scored step) if every pure positional layer's valid ID is <= 12 and every pure symbolic "
            "one's >= 25 (weaker: their means are so ordered)",
            runs=runs, per_seed=texts, step=_steps(runs, lambda r: r.table1_step)))
    return out


# ---- length (Sec. 3.6, Fig. 5B) -------------------------------------------------------------------


def length_claims(ev: Evidence) -> list[ClaimRecord]:
    paper = paper_numbers()["fig5b_length_generalisation"]
    rule = ("an accuracy: match if the paper's value lies in our seeds' range widened by each seed's per-prefix 95% "
            f"interval, partial if within a factor {rules.ODDS_PARTIAL:g} in odds beyond it; uninformative if the "
            f"paper's value and every seed's are at the floor (odds within a factor {rules.ODDS_FLOOR:g} of chance)")
    out = []
    for task in ("number", "letter"):
        values = dict(zip(paper["extra"], paper[f"{task}_task"], strict=True))
        for extra in (100, 800, 5000):
            name = f"{task} task: accuracy at +{extra} tokens"
            runs = [r for r in ev.seeds(task) if _at(r.lengthgen, extra) is not None]
            want = values.get(extra)
            if not runs or want is None:
                out.append(_claim(name, "Sec. 3.6, Fig. 5B", str(want), "not measured", NA, rule))
                continue
            points = [_at(r.lengthgen, extra) for r in runs]
            seeds = [Estimate.of(p.accuracy, p.cluster_low, p.cluster_high) for p in points if p is not None]
            chance = {r.chance for r in runs}
            grade = rules.grade_accuracy(seeds, want, chance.pop() if len(chance) == 1 else None)
            texts = []
            for r, e in zip(runs, seeds, strict=True):
                final = _at(r.lengthgen_final, extra)
                texts.append(f"{e.value:.2f} [{e.low:.2f}, {e.high:.2f}]"
                             + (f" (final checkpoint {final.accuracy:.2f})" if final is not None else ""))
            acc = [e.value for e in seeds]
            out.append(_claim(name, "Sec. 3.6, Fig. 5B", f"{want:.2f}", f"{summarise(acc).text()}: {grade.detail}",
                              grade.verdict, rule, runs=runs, per_seed=texts, paper_value=float(want), values=acc,
                              step=_steps(runs, lambda r: r.lengthgen_step)))
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
        out.append(_claim(
            "the letter model extrapolates much further than the number model", "Sec. 3.6, Fig. 5B",
            "letter above number at every length beyond +40", _holds_text(holds), rules.grade_holds(holds, weak),
            f"{HOLDS_RULE}, or if its weaker form holds at every seed; it holds at a seed if the letter accuracy >= "
            "the number accuracy (same seed) at every K >= 50 (weaker: at >= 80% of them)",
            runs=[n for n, _ in pairs], per_seed=texts))
    return out


# ---- theory (Thm. 3.1, 3.2; exact, no seeds) ------------------------------------------------------


def theory_claims(ev: Evidence) -> list[ClaimRecord]:
    out = []
    if ev.verification:
        bad = [r for r in ev.verification if not r.ok]
        out.append(_claim("T_Index and T_Retrieval implement their functions exactly", "Thm. 3.1", "exact (proof)",
                          f"{len(ev.verification) - len(bad)} of {len(ev.verification)} settings exact",
                          "match" if not bad else "differs", "match if every verification setting is exact"))
    statements = {"index": "Δ_Index ≤ min(1 − cos θ, 2π²/n²)", "retrieval": "Δ_Retrieval ≤ 1 − cos(ω − nθ)"}
    rule = ("match if the bound holds on every n in the premise for Definition 3.1 (max over inputs); partial if "
            "only for the worst case (min); differs if for neither")
    for function, statement in statements.items():
        rows = [r for r in ev.bounds if r.function == function]
        if not rows:
            continue
        definitions = {r.definition for r in rows}
        holds = {d: all(r.n_failed == 0 for r in rows if r.definition == d) for d in definitions}
        verdict = "match" if holds.get("max") else "partial" if holds.get("min") else "differs"
        ours = "; ".join(f"{d}: {'holds' if ok else 'fails'}" for d, ok in sorted(holds.items()))
        out.append(_claim(statement, "Thm. 3.2, Fig. 5A", "holds", ours, verdict, rule))
    fig5a = paper_numbers()["fig5a_discrepancy_bounds"]
    if ev.fig5a:
        bound = {(r.function, r.n): r.bound for r in ev.fig5a}
        pairs = [(n, want, bound[key, n]) for key in ("index", "retrieval")
                 for n, want in zip(fig5a["n"], fig5a[key], strict=True) if want is not None and (key, n) in bound]
        worst = max(abs(a - b) for _, a, b in pairs)
        out.append(_claim("Fig. 5A: the bounds' curves (index falls to 0, retrieval stays near 0.13 at n = 99)",
                          "Fig. 5A", f"{len(pairs)} digitised points", f"largest gap {worst:.3f}",
                          "match" if worst <= 0.02 else "partial" if worst <= 0.05 else "differs",
                          "match if every digitised point is within 0.02 of our curve, partial if within 0.05"))
    return out


def check_claims(ev: Evidence) -> list[ClaimRecord]:
    """Every claim's record, in the paper's order, graded over the seeds of ``ev``."""
    return (learning_claims(ev) + convergence_claims(ev) + head_claims(ev) + hop_claims(ev) + frequency_claims(ev)
            + length_claims(ev) + theory_claims(ev))
