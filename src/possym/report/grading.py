"""Grade every claim of ``possym/data/claims.yaml`` over a set of seeds: one path for a reproduction's report, a
regrade of committed tables, each seed of a sweep and the calibration on the paper's own data.

For one claim (:func:`grade`): a run of another preset than the paper's, in a quantity the claim's value depends
on (its ``preset`` field: training steps, depth, width), grades it ``n/a`` and says why; else its measure
(:mod:`possym.report.measures`) gives each reading's seeds, its rule kind (:mod:`possym.report.rules`) grades
every reading the claim has, the first reading's verdict is the claim's, and

- where the claim names a nuisance (the length test's hop mix), the readings that are its admissible values must
  agree, or the claim is ``unresolved`` and says under which values each verdict holds;
- the other readings give the robustness: ``robust`` when every one agrees, else ``reading-dependent``;
- each seed is graded alone by the same definitions (its own interval standing in for the spread);
- ``power`` says what the evidence could have detected: the rule kind simulated at these seeds
  (:mod:`possym.report.power`).

Example:
    >>> from possym.report.evidence import Evidence, TaskEvidence
    >>> log = [{"event": "eval", "step": 6750, "accuracy": 1.0}]
    >>> ev = Evidence({"number": [TaskEvidence(n_layers=12, seed=s, best_step=4000 + 300 * s, eval_every=50,
    ...                                        metrics=log) for s in range(3)]})
    >>> c = grade(spec_of("number-max-step"), ev)
    >>> c.verdict, c.per_seed, c.seed_verdict_counts
    ('consistent', 's0 4000; s1 4300; s2 4600', 'differs at 2 seeds, match at 1')
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from possym.records import ClaimRecord
from possym.report.claimspec import ClaimSpec, load_claims
from possym.report.evidence import PAPER_LAYERS, PAPER_PLANES, PAPER_STEPS, Evidence, TaskEvidence
from possym.report.measures import MEASURES, Measured, Reading
from possym.report.power import claim_power, seeds_power
from possym.report.rules import (
    CONSISTENT,
    GRADING_N,
    MATCH,
    NA,
    PAPER_SAMPLE_SIZES,
    PARTIAL,
    UNRESOLVED,
    VERIFIED,
    PaperValue,
    SeedsGrade,
    ValueGrade,
    _f,
    grade_one_seed,
    grade_seeds,
    grade_value,
    per_seed_verdicts,
    summarise_seeds,
)

__all__ = ["applies", "check_claims", "claim_summary", "grade", "grade_measured", "spec_of"]

PAPER_SETTING = {"steps": PAPER_STEPS, "depth": PAPER_LAYERS, "width": PAPER_PLANES}
SETTING_WORDS = {"steps": "training steps", "depth": "layers", "width": "RoPE planes per head"}
VALUE_RULE = ("a number: match if the gap between the paper's value and our seeds' mean is shown to lie within "
              "±{margin} (both one-sided tests at 0.05: its 90% interval inside the margin; {why}); differs if the "
              "paper's value is outside what our seeds predict for a new seed (two-sided p < 0.05{scale}); else "
              "consistent")
SEEDS_RULE = ("per seed, its intervals give the best and worst verdict it allows; match if it surely matches at every "
              "seed, differs if it surely differs at more than half, partial if it is surely at least partial at "
              "more than half and surely not a match at one, else consistent")


def spec_of(claim_id: str) -> ClaimSpec:
    """The claim ``claim_id`` of the package's claims.yaml."""
    specs = {s.id: s for s in load_claims()}
    if claim_id not in specs:
        raise KeyError(f"claim {claim_id!r}; known: {sorted(specs)}")
    return specs[claim_id]


def _setting(te: TaskEvidence, quantity: str) -> int | None:
    return {"steps": te.total_steps(), "depth": te.n_layers, "width": te.n_planes}[quantity]


def _read_seeds(spec: ClaimSpec, ev: Evidence) -> list[TaskEvidence]:
    tasks = [spec.task] if spec.task else list(ev.tasks)
    return [te for t in tasks for te in ev.seeds(t, spec.population)]


def applies(spec: ClaimSpec, ev: Evidence) -> str:
    """Why the claim cannot be graded on ``ev``'s seeds ("" where it can): they were trained with another value of
    a quantity the paper's claim depends on (its ``preset`` field), so that the paper's absolute number says
    nothing of them."""
    seeds = _read_seeds(spec, ev)
    for quantity in spec.preset:
        ours = sorted({v for te in seeds if (v := _setting(te, quantity)) is not None})
        want = PAPER_SETTING[quantity]
        if ours and ours != [want]:
            return (f"the paper's value holds for its {want:,} {SETTING_WORDS[quantity]}; these seeds have "
                    f"{', '.join(f'{v:,}' for v in ours)}")
    return ""


def _chance(spec: ClaimSpec, ev: Evidence) -> float | None:
    found = {te.chance for te in _read_seeds(spec, ev)}
    return found.pop() if len(found) == 1 else None


def _grade_reading(spec: ClaimSpec, reading: Reading, chance: float | None,
                   paper: PaperValue | None = None) -> tuple[str, ValueGrade | SeedsGrade]:
    """(verdict, the rule's grade) of one reading."""
    if spec.rule == "value":
        assert spec.value is not None and spec.margin is not None
        estimates = [s.estimate for s in reading.seeds if s.estimate is not None]
        g = grade_value(estimates, paper or spec.value, margin=spec.margin, scale=spec.scale, chance=chance,
                        units=spec.units)
        return g.verdict, g
    verdicts = [s.verdict for s in reading.seeds if s.verdict is not None]
    h = grade_seeds(verdicts)
    if spec.rule == "check":
        return {MATCH: VERIFIED, CONSISTENT: PARTIAL}.get(h.verdict, h.verdict), h
    return h.verdict, h


def _na(spec: ClaimSpec, why: str) -> ClaimRecord:
    return ClaimRecord(claim=spec.claim, section=spec.section, paper=spec.paper, ours=f"n/a: {why}", verdict=NA,
                       rule=_rule_words(spec), kind=spec.kind, id=spec.id, margin=spec.margin)


def _rule_words(spec: ClaimSpec) -> str:
    if spec.rule == "value":
        scale = ", on the arcsine scale" if spec.scale == "accuracy" else ""
        unit = f" {spec.units}" if spec.units else ""
        general = VALUE_RULE.format(margin=f"{spec.margin:g}{unit}", why=spec.margin_why, scale=scale)
    elif spec.rule == "seeds":
        general = SEEDS_RULE
    else:
        general = "a check of our code or of a formula: verified if it holds"
    return f"{spec.rule_text} Rule ({spec.rule}): {general}."


def _power(spec: ClaimSpec, reading: Reading, rng: np.random.Generator) -> str:
    n = len(reading.seeds)
    if spec.rule == "seeds":
        return seeds_power(n).text() if n else ""
    if spec.rule != "value" or n < 2:
        return "one seed: no spread to estimate, so no match can be shown and the size is not controlled" if n else ""
    assert spec.value is not None and spec.margin is not None
    values = np.array([[s.estimate.value for s in reading.seeds if s.estimate is not None]])
    x = _f(spec.scale, values)[0]
    bounds = np.array([[s.estimate.low, s.estimate.high] for s in reading.seeds if s.estimate is not None])
    own = float(np.mean(np.diff(_f(spec.scale, bounds), axis=1)) / 3.92)  # a 95% interval's sd
    sd = float(x.std(ddof=1))
    if sd == 0:
        return "no spread over seeds: the seeds' own intervals decide; the size is not controlled"
    p = claim_power(n, scale=spec.scale, sd_t=sd, paper_sd_t=spec.value.sd(spec.scale), margin=spec.margin,
                    centre=float(values.mean()), own_sd_t=own, rng=rng)
    fmt = ".2f" if spec.scale == "accuracy" else ".0f"
    return p.text(fmt, spec.units)


def _robustness(main: str, graded: Sequence[tuple[Reading, str]], nuisance: dict[str, str]) -> str:
    if len(set(nuisance.values()) - {NA}) > 1:
        return "unresolved"
    others = [v for _, v in graded[1:] if v != NA]
    if not others:
        return ""
    return "robust" if all(v == main for v in others) else "reading-dependent"


def grade(spec: ClaimSpec, ev: Evidence, *, power: bool = True, rng: np.random.Generator | None = None) -> ClaimRecord:
    """One claim's record over the seeds of ``ev`` (module docstring)."""
    why = applies(spec, ev)
    if why:
        return _na(spec, why)
    return grade_measured(spec, MEASURES[spec.measure](ev, spec), _chance(spec, ev), power=power, rng=rng)


def grade_measured(spec: ClaimSpec, measured: Measured, chance: float | None = None, *, power: bool = True,
                   rng: np.random.Generator | None = None) -> ClaimRecord:
    """One claim's record from its measure's readings (:func:`grade` after the measure; the calibration grades
    synthetic seeds through it); ``chance``: a uniform guess's accuracy, for the floor."""
    if measured.na or not measured.readings or not measured.graded.seeds:
        return _na(spec, measured.na or "no seed")
    graded = [(r, _grade_reading(spec, r, chance)) for r in measured.readings if r.graded]
    main, (verdict, g) = graded[0][0], graded[0][1]
    nuisance = {r.name: v for r, (v, _) in graded if r.nuisance}
    by_verdict: dict[str, list[str]] = {}
    for name, v in nuisance.items():
        by_verdict.setdefault(v, []).append(name)
    robustness = _robustness(verdict, [(r, v) for r, (v, _) in graded], nuisance)
    ours = g.detail
    if robustness == "unresolved":
        ours = ("the hop mix decides: " + "; ".join(f"{v} under {', '.join(names)}" for v, names in by_verdict.items())
                + f". Graded reading ({main.name}): {verdict}: {g.detail}")
        verdict = UNRESOLVED
    if measured.extra:
        ours += f"; {measured.extra}"
    shown = [r for r in measured.readings if not r.graded]
    readings = "; ".join([f"{r.name}: {v}" for r, (v, _) in graded]
                         + [f"{r.name}: " + ", ".join(f"s{s.seed} {s.text}" for s in r.seeds) + " (shown, not graded)"
                            for r in shown])
    seeds = main.seeds
    record: dict[str, Any] = dict(claim=spec.claim, section=spec.section, paper=spec.paper, ours=ours, verdict=verdict,
                  rule=_rule_words(spec), step=measured.step, per_seed="; ".join(f"s{s.seed} {s.text}" for s in seeds),
                  seeds=",".join(str(s.seed) for s in seeds), reading=main.name if len(graded) > 1 else "",
                  readings=readings if len(graded) > 1 or shown else "", robustness=robustness, kind=spec.kind,
                  id=spec.id, evidence=measured.source,
                  power=_power(spec, main, rng if rng is not None else np.random.default_rng(0)) if power else "")
    if spec.rule == "value":
        assert spec.value is not None and spec.margin is not None
        values = [s.estimate.value for s in seeds if s.estimate is not None]
        summary = summarise_seeds(values)
        per = [grade_one_seed(s.estimate, spec.value, margin=spec.margin, scale=spec.scale, chance=chance)
               for s in seeds if s.estimate is not None]
        uncertainty = spec.read
        if spec.scale == "accuracy" and spec.value.n is not None:
            at_n = {n: _grade_reading(spec, main, chance, PaperValue(spec.value.value, spec.value.tolerance, n))[0]
                    for n in PAPER_SAMPLE_SIZES}
            uncertainty += (f"; the paper's sample is unstated: graded at n = {GRADING_N}; verdict at "
                            + ", ".join(f"n = {n}: {v}" for n, v in at_n.items()))
        record.update(paper_value=spec.value.value, seed_mean=summary.mean, seed_sd=summary.sd,
                      seed_min=summary.min, seed_max=summary.max, seed_verdicts="; ".join(
                          f"s{s.seed} {v}" for s, v in zip(seeds, per, strict=True)),
                      seed_verdict_counts=per_seed_verdicts(per), paper_uncertainty=uncertainty, margin=spec.margin,
                      **{k: None if not math.isfinite(x := getattr(g, attr)) else x for k, attr in (
                          ("p_value", "p"), ("percentile", "percentile"), ("gap", "gap"), ("gap_low", "gap_low"),
                          ("gap_high", "gap_high"))})
        record["ours"] = f"{summary.text('.2f' if spec.scale == 'accuracy' else '.0f')}: {ours}"
    else:
        labels = [s.verdict.label for s in seeds if s.verdict is not None]
        record.update(seed_verdicts="; ".join(f"s{s.seed} {lab}" for s, lab in zip(seeds, labels, strict=True)),
                      seed_verdict_counts=per_seed_verdicts(labels))
    return ClaimRecord(**record)


def check_claims(ev: Evidence, specs: Sequence[ClaimSpec] | None = None, *, power: bool = True) -> list[ClaimRecord]:
    """Every claim's record (``specs``, default claims.yaml's), in the paper's order, graded over the seeds of
    ``ev``; ``power``: simulate each rule's power at these seeds (a few seconds; off for a quick look)."""
    rng = np.random.default_rng(0)
    return [grade(s, ev, power=power, rng=rng) for s in (load_claims() if specs is None else specs)]


def claim_summary(c: ClaimRecord) -> str:
    """Ours over seeds in a few words: a number's mean ± sd (range, seeds), else the rule's words up to a colon."""
    if c.seed_mean is not None and c.seed_min is not None and c.seed_max is not None:
        n = len(c.seeds.split(",")) if c.seeds else 1
        fmt = ".0f" if abs(c.seed_mean) >= 50 else ".2f"  # steps, or accuracies and counts
        sd = f" ± {c.seed_sd:{fmt}}" if c.seed_sd is not None else ""
        return f"{c.seed_mean:{fmt}}{sd} ({c.seed_min:{fmt}}–{c.seed_max:{fmt}}, {n} seed{'s' if n > 1 else ''})"
    return c.ours.split(";")[0].split(": ")[0] if c.verdict != NA else c.ours


