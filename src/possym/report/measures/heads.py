"""Measures of the heads over training (Sec. 3.1, 3.3, 3.5; Figs. 2B, 2C, 6, 7; Table 1), read from each seed's
purity history (:class:`possym.report.evidence.PurityHistory`): which layers become pure, when, and what is pure at
the end, each as surely or possibly as the history allows.

An onset statement ("every layer in a set became pure by step T") holds *surely* when every layer that may be in
the set surely became pure by T (its sure onset, the first step of a persistent run, at most T), and *possibly*
when every layer surely in the set may have (its first possible step at most T).

Example:
    >>> from possym.report.evidence import LayerPurity, PurityHistory
    >>> h = PurityHistory({(1, "positional"): LayerPurity(1, "positional", 100, 300, True, True),
    ...                    (2, "positional"): LayerPurity(2, "positional", 500, None, False, True)})
    >>> onset_by(h, [(1, "positional")], [(1, "positional"), (2, "positional")], 400)
    (False, True)
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

import numpy as np

from possym.records import SOLVED
from possym.report.evidence import Evidence, PurityHistory, TaskEvidence, same_run
from possym.report.measures.base import MEASURES, Measured, Reading, SeedReading, measure, not_measured
from possym.report.measures.learning import pairs
from possym.report.rules import SeedVerdict, count_seed, set_seed

__all__ = ["MEASURES", "layers_text", "onset_by"]


def layers_text(layers: Collection[int]) -> str:
    return "{" + ", ".join(f"L{x}" for x in sorted(layers)) + "}" if layers else "none"


def _range_text(sure: Collection[int], possible: Collection[int]) -> str:
    """A set known between ``sure`` and ``possible``: ``{L1, L2}``, or ``{L1, L2} (+ L3 undecided)``."""
    extra = sorted(set(possible) - set(sure))
    return layers_text(sure) + (f" (+ {', '.join(f'L{x}' for x in extra)} undecided)" if extra else "")


def onset_by(history: PurityHistory, sure: Collection[tuple[int, str]], possible: Collection[tuple[int, str]],
             by: float) -> tuple[bool, bool]:
    """(surely, possibly): every (layer, kind) that may be in a set became pure by step ``by`` (module docstring);
    ``sure``: the pairs surely in the set, ``possible``: those possibly in it."""
    surely = all((lp := history.layer(*k)).first_sure is not None and lp.first_sure <= by for k in possible)
    maybe = all((lp := history.layer(*k)).first_possible is not None and lp.first_possible <= by for k in sure)
    return surely, maybe


def _seeds(ev: Evidence, spec) -> list[TaskEvidence]:
    return [r for r in ev.seeds(spec.task, spec.population) if r.history]


def _retrains(ev: Evidence, spec) -> tuple[str, list[TaskEvidence]]:
    """The seeds retrained to be scored at every checkpoint (the hop-query population) that are not the main seeds'
    own runs, and a reading's name for them ("" where there are none)."""
    main = ev.seeds(spec.task)
    other = [r for r in ev.seeds(spec.task, "hop_queries")
             if r.history and not any(same_run(r, m) for m in main)]
    if not other or spec.population != "main":
        return "", []
    last = sorted({r.history.last_step for r in other if r.history.last_step is not None})
    span = f"{last[0]:,}" if len(last) == 1 else f"{last[0]:,}-{last[-1]:,}"
    return f"the {len(other)} seeds retrained and scored at every checkpoint (to step {span})", other


def _sources(runs: Sequence[TaskEvidence], attr: str = "history") -> str:
    found = sorted({getattr(r, attr).source for r in runs if getattr(r, attr)})
    return "; ".join(found)


def _max_accuracy(te: TaskEvidence) -> float:
    if te.metrics:
        return max((r.accuracy for r in te.metrics.evals), default=0.0)
    return 1.0 if te.solved_steps().get("accuracy") is not None else 0.0


@measure("converges_pure")
def converges_pure(ev: Evidence, spec) -> Measured:
    """Sec. 3.1, per seed whose accuracy reaches 0.9: some layer is pure at the end, and every layer pure at the end
    became pure of its kind by the best checkpoint plus one evaluation."""
    have = [r for r in _seeds(ev, spec) if r.best_step is not None]
    runs = [r for r in have if _max_accuracy(r) >= SOLVED]
    if not have:
        return not_measured("no scores")
    if not runs:
        return not_measured(f"no seed reaches {SOLVED}")
    out = []
    for r in runs:
        assert r.best_step is not None
        h, by = r.history, r.best_step + r.eval_every
        sure = [(lp.layer, lp.kind) for lp in h.layers.values() if lp.end_sure]
        possible = [(lp.layer, lp.kind) for lp in h.layers.values() if lp.end_possible]
        surely, maybe = onset_by(h, sure, possible, by)
        late = sorted(f"L{la} from {h.layer(la, k).first_sure}" if h.layer(la, k).ever_sure else
                      f"L{la} never surely" for la, k in possible if (h.layer(la, k).first_sure or 10 ** 9) > by)
        text = (f"best {r.best_step}: {len(sure)} layers surely pure at the end"
                + (f", {len(possible) - len(sure)} possibly" if len(possible) > len(sure) else "")
                + (f"; not surely pure by then: {', '.join(late)}" if late else "; every one pure by then"))
        out.append(SeedReading(r.seed, text, verdict=SeedVerdict.holds(bool(sure) and surely,
                                                                       bool(possible) and maybe, text=text)))
    return Measured((Reading("intervals and persistence", tuple(out)),), source=_sources(runs),
                    step="; ".join(f"s{r.seed} best {r.best_step}" for r in runs))


def _history(r: TaskEvidence, gamma: float) -> PurityHistory:
    return r.history_005 if gamma == 0.05 else r.history


@measure("ever_pure_set")
def ever_pure_set(ev: Evidence, spec) -> Measured:
    """Per seed: the layers that become pure ``kind`` at some scored step (at ``gamma``), against the paper's
    ``layers``, by Jaccard index, between the surely and the possibly pure sets."""
    gamma, kind = float(spec.arg("gamma", 0.1)), spec.arg("kind")
    paper = frozenset(spec.arg("layers"))
    runs = [r for r in _seeds(ev, spec) if _history(r, gamma)]
    if not runs:
        return not_measured("no scores" + (f" at γ = {gamma:g}" if gamma != 0.1 else ""))
    def reading(name: str, seeds: Sequence[TaskEvidence]) -> Reading:
        out = []
        for r in seeds:
            sure, possible = _history(r, gamma).ever(kind)
            text = _range_text(sure, possible)
            out.append(SeedReading(r.seed, text, verdict=set_seed(sure, possible, paper, text)))
        return Reading(name, tuple(out))

    name, other = _retrains(ev, spec)
    readings = [reading("the reproduction's seeds", runs)] + ([reading(name, other)] if other and gamma == 0.1 else [])
    return Measured(tuple(readings), source=_sources(runs, "history_005" if gamma == 0.05 else "history"),
                    step="; ".join(sorted({f"every scored step to {r.scores_step}" for r in runs if r.scores_step})))


@measure("layer_ever_pure")
def layer_ever_pure(ev: Evidence, spec) -> Measured:
    """Per seed: layer ``layer`` becomes pure ``kind`` at some scored step."""
    layer, kind = int(spec.arg("layer")), spec.arg("kind")
    runs = _seeds(ev, spec)
    if not runs:
        return not_measured("no scores")
    def reading(name: str, seeds: Sequence[TaskEvidence]) -> Reading:
        out = []
        for r in seeds:
            lp = r.history.layer(layer, kind)
            text = (f"L{layer} pure {kind} from {lp.first_sure}" if lp.ever_sure else
                    f"L{layer} possibly pure {kind} at {lp.first_possible} (not persistently)" if lp.ever_possible
                    else f"L{layer} never pure {kind}")
            out.append(SeedReading(r.seed, text, verdict=SeedVerdict.holds(lp.ever_sure, lp.ever_possible,
                                                                           text=text)))
        return Reading(name, tuple(out))

    name, other = _retrains(ev, spec)
    readings = [reading("the reproduction's seeds", runs)] + ([reading(name, other)] if other else [])
    return Measured(tuple(readings), source=_sources(runs))


@measure("never_pure")
def never_pure(ev: Evidence, spec) -> Measured:
    """Per seed: no layer is pure ``kind`` at any scored step."""
    kind = spec.arg("kind")
    runs = _seeds(ev, spec)
    if not runs:
        return not_measured("no scores")
    out = []
    for r in runs:
        sure, possible = r.history.ever(kind)
        text = _range_text(sure, possible)
        out.append(SeedReading(r.seed, text, verdict=SeedVerdict.holds(not possible, not sure, text=text)))
    return Measured((Reading("intervals and persistence", tuple(out)),), source=_sources(runs))


@measure("positional_in_one_task")
def positional_in_one_task(ev: Evidence, spec) -> Measured:
    """Per seed with both tasks: the ``task`` model has a pure positional layer at its last scored step and the
    ``other`` model of the same seed none."""
    task, other = spec.task or "number", spec.arg("other", "letter")
    both = [(a, b) for a, b in pairs(ev, task, other) if a.history and b.history]
    if not both:
        return not_measured("no seed with both tasks' scores")
    out = []
    for a, b in both:
        a_sure, a_possible = a.history.end("positional")
        b_sure, b_possible = b.history.end("positional")
        text = f"{task} {_range_text(a_sure, a_possible)}; {other} {_range_text(b_sure, b_possible)}"
        out.append(SeedReading(a.seed, text, verdict=SeedVerdict.holds(bool(a_sure) and not b_possible,
                                                                       bool(a_possible) and not b_sure, text=text)))
    return Measured((Reading("at the last scored step", tuple(out)),), source=_sources([a for a, _ in both]),
                    step="; ".join(sorted({a.scores_step for a, _ in both if a.scores_step})))


@measure("pure_at_end")
def pure_at_end(ev: Evidence, spec) -> Measured:
    """Per seed: how many layers are pure (either kind) at the last scored step, between the sure and the possible
    count, against the paper's ``count``."""
    paper = int(spec.arg("count"))
    runs = _seeds(ev, spec)
    if not runs:
        return not_measured("no scores")
    out = []
    for r in runs:
        sure, possible = r.history.end()
        text = f"{len(sure)} of {r.n_layers}" + (f" (up to {len(possible)})" if len(possible) > len(sure) else "")
        out.append(SeedReading(r.seed, text, verdict=count_seed(len(sure), len(possible), paper, text=text)))
    return Measured((Reading("at the last scored step", tuple(out)),), source=_sources(runs),
                    step="; ".join(sorted({r.scores_step for r in runs if r.scores_step})))


def _hop_counts(r: TaskEvidence, h: PurityHistory, slack: int) -> tuple[bool, bool, str] | None:
    """Whether, whenever k hops first reach 0.9 (step s), at least k − ``slack`` layers have surely / possibly
    become pure positional by s plus one evaluation; None where no hop count is solved."""
    steps = r.solved_steps()
    solved = [(k, s) for k in range(1, 9) if (s := steps.get(f"acc_hop{k}")) is not None]
    if not solved:
        return None
    sure_on = [lp.first_sure for (_, k), lp in h.layers.items() if k == "positional" and lp.first_sure is not None]
    maybe_on = [lp.first_possible for (_, k), lp in h.layers.items()
                if k == "positional" and lp.first_possible is not None]
    counts = [(k, s, sum(o <= s + r.eval_every for o in sure_on), sum(o <= s + r.eval_every for o in maybe_on))
              for k, s in solved]
    text = "; ".join(f"{k}-hop at {s}: {c}" + (f" to {m}" if m > c else "") + " pure positional by then"
                     for k, s, c, m in counts)
    return all(c >= k - slack for k, _, c, _ in counts), all(m >= k - slack for k, _, _, m in counts), text


@measure("hops_need_layers")
def hops_need_layers(ev: Evidence, spec) -> Measured:
    """Sec. 3.3, per seed: whenever k hops first reach 0.9 (step s), at least k − 1 layers have become pure
    positional by s plus one evaluation, at the hop queries (a layer counts there once it is pure at any hop
    query); readings: k layers, and the last token (on the same seeds, and on the reproduction's)."""
    hop_runs = [r for r in ev.seeds(spec.task, "hop_queries") if r.hop_history and r.solved_steps()]
    last_runs = [r for r in ev.seeds(spec.task) if r.history and r.solved_steps()]
    readings = []
    places = [("the hop queries", hop_runs, "hop_history", ""), ("the last token", hop_runs, "history", ""),
              ("the last token", last_runs, "history", " (the reproduction's seeds)")]
    for need, slack in (("k − 1", 1), ("k", 0)):
        for place, runs, attr, who in places:
            out = []
            for r in runs:
                got = _hop_counts(r, getattr(r, attr), slack)
                if got is not None:
                    out.append(SeedReading(r.seed, got[2], verdict=SeedVerdict.holds(got[0], got[1], text=got[2])))
            if out:
                readings.append(Reading(f"{need} layers at {place}{who}", tuple(out)))
    if not readings:
        return not_measured("no seed solves a hop count and has scores")
    readings.sort(key=lambda x: x.name != "k − 1 layers at the hop queries")
    return Measured(tuple(readings), source=_sources(hop_runs, "hop_history") or _sources(last_runs))


@measure("purify_with_hops")
def purify_with_hops(ev: Evidence, spec) -> Measured:
    """Sec. 3.3, letter task, per seed: every layer that turns pure symbolic does so by the first step of 0.9 global
    accuracy plus that curve's spacing, at the hop queries (a layer counts once pure at any hop query); readings: at
    the last token (the same seeds, and the reproduction's)."""
    def judge(r: TaskEvidence, h: PurityHistory) -> SeedReading | None:
        s = r.solved_steps().get("accuracy")
        if s is None or not h:
            return None
        by = s + r.spacing()
        sure = [(lp.layer, "symbolic") for (_, k), lp in h.layers.items() if k == "symbolic" and lp.ever_sure]
        possible = [(lp.layer, "symbolic") for (_, k), lp in h.layers.items() if k == "symbolic" and lp.ever_possible]
        surely, maybe = onset_by(h, sure, possible, by)
        last = max((h.layer(*k).first_sure or 0 for k in sure), default=None)
        text = (f"global 0.9 at {s}; {len(sure)} layers surely pure symbolic, the last from {last}"
                + (f"; {len(possible) - len(sure)} more possibly" if len(possible) > len(sure) else ""))
        return SeedReading(r.seed, text, verdict=SeedVerdict.holds(surely and bool(sure), maybe and bool(sure),
                                                                   text=text))

    hop_runs = ev.seeds(spec.task, "hop_queries")
    readings = []
    places = (("at the hop queries", hop_runs, "hop_history"), ("at the last token", hop_runs, "history"),
              ("at the last token (the reproduction's seeds)", ev.seeds(spec.task), "history"))
    for name, runs, attr in places:
        out = [x for r in runs if (x := judge(r, getattr(r, attr))) is not None]
        if out:
            readings.append(Reading(name, tuple(out)))
    if not readings:
        return not_measured("no seed with scores reaches 0.9")
    return Measured(tuple(readings), source=_sources(hop_runs, "hop_history") or _sources(ev.seeds(spec.task)))


# ---- frequencies (Sec. 3.5, Table 1) -------------------------------------------------------------------------


def valid_ids(te: TaskEvidence) -> dict[int, float]:
    """Head 0's weighted frequency IDs per layer that lie in the plane range 1..n_planes (NaN or out of range:
    left out; tables written before the ID was bounded can hold IDs <= 0)."""
    return {r.layer: r.weighted_id for r in te.table1
            if r.head == 0 and np.isfinite(r.weighted_id) and 1.0 <= r.weighted_id <= te.n_planes}


@measure("table1_agreement")
def table1_agreement(ev: Evidence, spec) -> Measured:
    """Per seed: how many layers' weighted frequency IDs are valid and within ``within`` of Table 1's ``ids``,
    graded as a count against all of them (match within ``match_within``, partial within ``partial_within``)."""
    want = [float(x) for x in spec.arg("ids")]
    within = float(spec.arg("within", 3))
    runs = [r for r in ev.seeds(spec.task) if r.table1]
    if not runs:
        return not_measured("no Table 1")
    out = []
    for r in runs:
        ids = valid_ids(r)
        every = {t.layer: t.weighted_id for t in r.table1 if t.head == 0}
        count = sum(layer in ids and abs(ids[layer] - w) <= within for layer, w in enumerate(want))
        text = " ".join(f"{every[x]:.0f}" if x in ids else f"({every[x]:.0f}: invalid)" for x in sorted(every))
        text += f" ({count} within {within:g})"
        out.append(SeedReading(r.seed, text, verdict=count_seed(count, count, len(want),
                                                                match_within=int(spec.arg("match_within", 2)),
                                                                partial_within=int(spec.arg("partial_within", 6)),
                                                                text=text)))
    return Measured((Reading("weighted IDs", tuple(out)),),
                    step="; ".join(sorted({r.table1_step for r in runs if r.table1_step})))


@measure("fast_rotations")
def fast_rotations(ev: Evidence, spec) -> Measured:
    """Per seed with both kinds of pure layer at the end: every pure positional layer's valid ID is at most ``fast``
    and below every pure symbolic one's, and the symbolic layers' median ID is at least ``slow`` (weaker: the
    means are so ordered); checked on the surely and on the possibly pure layers."""
    fast, slow = float(spec.arg("fast", 12)), float(spec.arg("slow", 25))

    def check(kinds: dict[int, str], ids: dict[int, float]) -> tuple[bool, bool, str] | None:
        pos = [ids[la] for la, k in sorted(kinds.items()) if k == "positional" and la in ids]
        sym = [ids[la] for la, k in sorted(kinds.items()) if k == "symbolic" and la in ids]
        if not (pos and sym):
            return None
        holds = max(pos) <= fast and max(pos) < min(sym) and float(np.median(sym)) >= slow
        text = f"positional {', '.join(f'{x:.0f}' for x in pos)}; symbolic {', '.join(f'{x:.0f}' for x in sym)}"
        return holds, sum(pos) / len(pos) < sum(sym) / len(sym), text

    out = []
    for r in ev.seeds(spec.task):
        if not (r.table1 and r.history):
            continue
        ids = valid_ids(r)
        sure = check(r.history.end_kinds(), ids)
        possible = check({lp.layer: lp.kind for lp in r.history.layers.values() if lp.end_possible}, ids)
        if sure is None or possible is None:
            continue
        out.append(SeedReading(r.seed, sure[2], verdict=SeedVerdict.holds(sure[0] and possible[0],
                                                                          sure[0] or possible[0],
                                                                          weak=sure[1] and possible[1],
                                                                          text=sure[2])))
    if not out:
        return not_measured("no seed with both kinds of pure layer at the end and a Table 1")
    return Measured((Reading("weighted IDs of the pure layers", tuple(out)),))

