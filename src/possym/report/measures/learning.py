"""Measures of learning (Sec. 3.1-3.2, Fig. 2A): when each hop count is solved, in what order, and the step of
maximum accuracy. A first step at 0.9 is known to within its curve's spacing, the best checkpoint to within one
evaluation either side.

Example:
    >>> from possym.report.evidence import Evidence, TaskEvidence
    >>> from possym.report.claimspec import load_claims
    >>> spec = next(s for s in load_claims() if s.id == "number-max-step")
    >>> runs = [TaskEvidence(12, seed=s, best_step=4000 + 300 * s, eval_every=50) for s in range(3)]
    >>> [r.estimate.value for r in MEASURES["best_step"](Evidence({"number": runs}), spec).graded.seeds]
    [4000.0, 4300.0, 4600.0]
"""

from __future__ import annotations

from possym.records import SOLVED
from possym.report.evidence import Evidence, TaskEvidence
from possym.report.measures.base import MEASURES, Measured, Reading, SeedReading, measure, not_measured
from possym.report.rules import Estimate, SeedVerdict, compare_groups

__all__ = ["MEASURES"]


def pairs(ev: Evidence, a: str, b: str) -> list[tuple[TaskEvidence, TaskEvidence]]:
    """Seeds of tasks ``a`` and ``b`` paired by seed number (a seed that only one task has is left out)."""
    other = {r.seed: r for r in ev.seeds(b)}
    return [(r, other[r.seed]) for r in ev.seeds(a) if r.seed in other]


def _hop_steps(r: TaskEvidence) -> list[int | None]:
    steps = r.solved_steps()
    return [steps[k] for k in sorted((k for k in steps if k.startswith("acc_hop")), key=lambda k: int(k[7:]))]


@measure("hops_in_order")
def hops_in_order(ev: Evidence, spec) -> Measured:
    """Per seed: every hop count reaches 0.9, the first steps never decrease with the hop count, and they spread
    over more than ``spread`` of training (what "learned together" allows)."""
    spread_max = float(spec.arg("spread", 0.10))
    out = []
    for r in ev.seeds(spec.task):
        hops = _hop_steps(r)
        if not hops:
            continue
        reached = [s for s in hops if s is not None]
        total = r.total_steps() or 1
        spread = (reached[-1] - reached[0]) / total if reached else 0.0
        ordered = all(a <= b for a, b in zip(reached, reached[1:], strict=False))
        holds = len(reached) == len(hops) and ordered and spread > spread_max
        text = " / ".join(str(s) for s in hops) + f" (spread {spread:.0%} of {total})"
        out.append(SeedReading(r.seed, text, verdict=SeedVerdict.holds(holds, text=text)))
    if not out:
        return not_measured("no seed with per-hop accuracy curves")
    return Measured((Reading("as stated", tuple(out)),))


@measure("hops_together")
def hops_together(ev: Evidence, spec) -> Measured:
    """Per seed: every hop count reaches 0.9 and their first steps spread over at most ``spread`` of training
    (weaker form: ``weak``)."""
    spread_max, weak_max = float(spec.arg("spread", 0.10)), float(spec.arg("weak", 0.20))
    out = []
    for r in ev.seeds(spec.task):
        hops = _hop_steps(r)
        if not hops:
            continue
        reached = [s for s in hops if s is not None]
        if len(reached) < len(hops):
            out.append(SeedReading(r.seed, "some hop count never reaches 0.9", verdict=SeedVerdict.holds(False)))
            continue
        spread = (max(reached) - min(reached)) / max(r.total_steps() or 1, 1)
        text = f"{min(reached)}-{max(reached)} ({spread:.0%} of {r.total_steps()})"
        out.append(SeedReading(r.seed, text, verdict=SeedVerdict.holds(spread <= spread_max, weak=spread <= weak_max,
                                                                       text=text)))
    if not out:
        return not_measured("no seed with per-hop accuracy curves")
    return Measured((Reading("as stated", tuple(out)),))


@measure("learned_before")
def learned_before(ev: Evidence, spec) -> Measured:
    """Per seed with both tasks: the ``first`` task reaches 0.9 global accuracy at an earlier step than the other
    of the same seed; the two groups' steps are compared beside (an exact permutation test and Welch's t)."""
    first, then = spec.arg("first", "letter"), spec.arg("then", "number")
    both = [(a, b) for a, b in pairs(ev, then, first) if a.solved_steps() and b.solved_steps()]
    if not both:
        return not_measured("no seed with both tasks' learning curves")
    out, a_steps, b_steps = [], [], []
    for late, early in both:
        s_late, s_early = late.solved_steps().get("accuracy"), early.solved_steps().get("accuracy")
        holds = s_late is not None and s_early is not None and s_early < s_late
        text = f"{first} {s_early} vs {then} {s_late}"
        out.append(SeedReading(late.seed, text, verdict=SeedVerdict.holds(holds, text=text)))
        if s_late is not None and s_early is not None:
            a_steps.append(float(s_late))
            b_steps.append(float(s_early))
    extra = ""
    if len(a_steps) >= 2 and len(set(a_steps + b_steps)) > 1:
        extra = f"two-group test: {compare_groups(a_steps, b_steps).text('.0f')}"
    return Measured((Reading("as stated", tuple(out)),), extra=extra)


@measure("best_step")
def best_step(ev: Evidence, spec) -> Measured:
    """Per seed: its best checkpoint (the earliest at the maximum validation accuracy), ± one evaluation."""
    out = [SeedReading(r.seed, str(r.best_step), Estimate(float(r.best_step), float(r.best_step - r.eval_every),
                                                          float(r.best_step + r.eval_every)))
           for r in ev.seeds(spec.task) if r.best_step is not None]
    if not out:
        return not_measured("no seed with a best checkpoint")
    return Measured((Reading("the best checkpoint", tuple(out)),))


@measure("first_step")
def first_step(ev: Evidence, spec) -> Measured:
    """Per seed: the first evaluated step at which accuracy ``key`` reaches 0.9, within its curve's spacing before."""
    key = spec.arg("key", "accuracy")
    out = []
    for r in ev.seeds(spec.task):
        s = r.solved_steps().get(key)
        if s is not None:
            out.append(SeedReading(r.seed, str(s), Estimate(float(s), float(s - r.spacing()), float(s))))
    if not out:
        return not_measured(f"no seed whose {key} reaches {SOLVED}")
    return Measured((Reading(f"first step at {SOLVED}", tuple(out)),))
