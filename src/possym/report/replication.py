"""The replication report: the claims table regraded from committed tables, its calibration, the rules' size and
power, and ``docs/replication.md``, a page a reader can cite, generated from ``claims.csv`` so that the two cannot
drift.

:func:`regrade` reads one or more directories of a reproduction's committed tables (``docs/reproduce_paper`` and any
seeds trained since, exported by :func:`export_tables`) and grades every claim of ``possym/data/claims.yaml``
(:func:`possym.report.grading.check_claims`); :func:`write` also writes ``calibration.csv`` (the controls on the
paper's own data, :mod:`possym.report.calibration`) and ``rule_power.csv`` (:mod:`possym.report.power`);
:func:`render` turns them into Markdown. Its first screen is a summary in prose (what replicates, what is only
consistent, what differs, what the unstated protocol leaves unresolved, what we found beyond the paper), the tally,
then the whole table; one short section per claim follows, with its rule, readings, figure and command.

Example:
    >>> claims = regrade([Path("docs/reproduce_paper")])                   # doctest: +SKIP
    >>> tally(claims)                                                      # doctest: +SKIP
    {'match': 14, 'consistent': 6, ...}
"""

from __future__ import annotations

import dataclasses
import os
import shutil
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from possym.records import ClaimRecord, read_records, records_csv
from possym.report.calibration import CalibrationRecord, calibrate, calibration_counts
from possym.report.evidence import Evidence, TaskEvidence, same_run, tables_evidence, task_evidence
from possym.report.grading import check_claims, claim_summary
from possym.report.power import power_table
from possym.report.rules import (
    CEILING,
    CONSISTENT,
    DIFFERS,
    EMPIRICAL,
    MATCH,
    NA,
    PARTIAL,
    UNINFORMATIVE,
    UNRESOLVED,
)
from possym.runs import RunDir, atomic_write_text

# The figure each claim's section shows, by the figure its section names (files of the tables directory).
FIGURES = (
    ("Fig. 5A/5B", "compare_decay.png"),
    ("Fig. 3", "compare_fig3_hop_flow.png"),
    ("Fig. 4B", "hop_flow/number_s0_fig4b_geometry.png"),
    ("Fig. 5B", "compare_fig5b_per_hop.png"),
    ("Fig. 5A", "compare_fig5a_bounds.png"),
    ("Table 1", "compare_table1_frequency_ids.png"),
    ("Fig. 6", "compare_fig6_final_scores.png"),
    ("Fig. 2A", "compare_fig2a_accuracy.png"),
    ("Fig. 2C", "number_s0_fig2_dynamics.png"),
    ("Fig. 7", "compare_fig6_final_scores.png"),
    ("Fig. 2B", "compare_fig2a_accuracy.png"),
    ("Thm.", "compare_fig5a_bounds.png"),
)
COMMAND = "possym regrade {tables} --out {out} --replication docs/replication.md"


def regrade(tables: Sequence[Path], runs: Mapping[str, Sequence[RunDir]] | None = None) -> list[ClaimRecord]:
    """Every claim graded over the seeds of the committed ``tables`` directories (and of ``runs``, if any)."""
    return check_claims(evidence(tables, runs))


def evidence(tables: Sequence[Path], runs: Mapping[str, Sequence[RunDir]] | None = None) -> Evidence:
    """The seeds of the committed ``tables`` directories (and of ``runs``), merged per task in seed order. A seed
    scored again at every checkpoint (a hop-query directory) that is the same run as a main seed
    (:func:`~possym.report.evidence.same_run`) lends that seed its per-checkpoint history: one run, one summary."""
    found = [tables_evidence(Path(t)) for t in tables]
    merged: dict[str, list] = {}
    for ev in found:
        for task, seeds in ev.tasks.items():
            merged.setdefault(task, []).extend(seeds)
    for task, dirs in (runs or {}).items():
        merged.setdefault(task, []).extend(task_evidence(r) for r in dirs)
    hop_queries = {t: sorted((te for ev in found for te in ev.hop_queries.get(t, ())), key=lambda te: te.seed)
                   for t in {t for ev in found for t in ev.hop_queries}}
    for task, seeds in merged.items():
        rescored = {te.seed: te for te in hop_queries.get(task, ())}
        merged[task] = [_lend(te, rescored[te.seed]) if te.seed in rescored and same_run(te, rescored[te.seed])
                        else te for te in seeds]
    # Every table of records (bounds, witnesses, hop_flow, ...), concatenated over the directories.
    tables_of: dict[str, Any] = {f.name: [x for ev in found for x in getattr(ev, f.name)]
                                 for f in dataclasses.fields(Evidence) if f.name not in ("tasks", "hop_queries")}
    return Evidence({t: sorted(v, key=lambda te: te.seed) for t, v in merged.items()}, hop_queries=hop_queries,
                    **tables_of)


PROVENANCE = "provenance.txt"  # in a tables directory: the sentence naming the commit, preset and seeds that made it
TALLIED = ("empirical", "finding")  # the kinds of claim the tally counts: the paper's results, and ours beyond them


def _lend(te: TaskEvidence, rescored: TaskEvidence) -> TaskEvidence:
    """``te`` with the histories of ``rescored`` (the same run, scored again), its end as both read it."""
    return dataclasses.replace(te, history=rescored.history.with_end_of(te.history),
                               history_005=rescored.history_005.with_end_of(te.history_005),
                               hop_history=rescored.hop_history)


def tally(claims: Sequence[ClaimRecord]) -> dict[str, int]:
    """How many claims about the results (the paper's, and our findings beyond it) give each verdict, and how many
    checks of our code or of a formula there are (``verifications``, outside the tally).

    >>> tally([ClaimRecord("a", "", "", "", "match", ""), ClaimRecord("b", "", "", "", "verified", "",
    ...                                                          kind="verification")])
    {'match': 1, 'verifications': 1}
    """
    counts = Counter(c.verdict for c in claims if c.kind in TALLIED)
    out = {v: counts[v] for v in (*EMPIRICAL, NA) if counts[v]}
    checks = sum(c.kind not in TALLIED for c in claims)
    return out | ({"verifications": checks} if checks else {})


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _row(cells: Sequence[str]) -> str:
    """One Markdown table row."""
    return "| " + " | ".join(_cell(x) for x in cells) + " |"


def _gap(c: ClaimRecord) -> str:
    """A number's gap to our mean with its 90% interval, against its margin: ``+0.25 [+0.18, +0.32] / ±0.1``."""
    if c.gap is None:
        return ""
    fmt = ".0f" if abs(c.margin or 0) >= 10 else ".2f"
    interval = f" [{c.gap_low:+{fmt}}, {c.gap_high:+{fmt}}]" if c.gap_low is not None and c.gap_high is not None else ""
    return f"{c.gap:+{fmt}}{interval} / ±{c.margin:g}"


def _percentile(c: ClaimRecord) -> str:
    if c.percentile is None:
        return ""
    q = 100 * c.percentile
    return "<1" if q < 0.5 else ">99" if q > 99.5 else f"{q:.0f}"


def table_rows(claims: Sequence[ClaimRecord]) -> list[dict[str, str]]:
    """The whole table's rows, as replication.md shows them: claim, the paper's value, ours over seeds, the verdict,
    the gap to the paper with its 90% interval and the margin, the paper's percentile among our seeds, the seeds'
    own verdicts, the robustness over readings, and the rule's power at these seeds."""
    return [{"claim": c.claim, "paper": c.paper, "ours over seeds": claim_summary(c), "verdict": f"**{c.verdict}**",
             "gap [90%] / margin": _gap(c), "paper's percentile": _percentile(c), "per seed": c.seed_verdict_counts,
             "readings": c.robustness or "one reading", "power": c.power} for c in claims]


def _figure(c: ClaimRecord, figures: Path) -> str:
    for key, name in FIGURES:
        if key in c.section and (figures / name).exists():
            return name
    return ""


def _short(c: ClaimRecord) -> str:
    """A claim's name for a sentence: the name, without its figure reference."""
    return c.claim.split(" (Fig.")[0]


def _listing(claims: Sequence[ClaimRecord], why=None) -> str:
    return "; ".join(f"{_short(c)}" + (f" ({why(c)})" if why is not None and why(c) else "") for c in claims) + "."


def _why_consistent(c: ClaimRecord) -> str:
    if c.gap is not None:
        return f"gap {_gap(c)}, p = {c.p_value:.2g}" if c.p_value is not None else f"gap {_gap(c)}"
    return c.seed_verdict_counts


def _why_differs(c: ClaimRecord) -> str:
    if c.gap is not None and c.p_value is not None:
        return f"the paper at our {_percentile(c)}th percentile, gap {_gap(c)}"
    return c.seed_verdict_counts


def summary(claims: Sequence[ClaimRecord]) -> list[str]:
    """The page's first screen in prose: what replicates (and how robustly), what is only consistent, partial, what
    differs, what the unstated hop mix leaves unresolved, what we found beyond the paper; each claim named once."""
    results = [c for c in claims if c.kind == "empirical"]
    findings = [c for c in claims if c.kind == "finding"]

    def of(*verdicts: str) -> list[ClaimRecord]:
        return [c for c in results if c.verdict in verdicts]

    robust = [c for c in of(MATCH) if c.robustness in ("", "robust")]
    fragile = [c for c in of(MATCH) if c not in robust]
    lines = ["## Summary", ""]
    if of(MATCH):
        lines.append(f"**Replicates ({len(of(MATCH))} claims).** The paper's value is equivalent to ours within the "
                     "claim's margin, or its statement holds surely at every seed: "
                     + _listing(robust) + (f" Under one reading only (see each claim's readings): {_listing(fragile)}"
                                           if fragile else ""))
    if of(CONSISTENT):
        lines.append(f"**Only consistent ({len(of(CONSISTENT))}).** The evidence neither excludes the paper's value "
                     "nor shows it equivalent (or the intervals leave a statement undecided at some seeds), so these "
                     "are not counted as matches: " + _listing(of(CONSISTENT), _why_consistent))
    if of(PARTIAL):
        lines.append(f"**Partial ({len(of(PARTIAL))}).** It holds at most seeds, or in a weaker form, or shares at "
                     "least half its layers with the paper's set: "
                     + _listing(of(PARTIAL), lambda c: c.seed_verdict_counts))
    if of(DIFFERS):
        lines.append(f"**Differs ({len(of(DIFFERS))}).** " + _listing(of(DIFFERS), _why_differs))
    if of(UNRESOLVED):
        lines.append(f"**Unresolved ({len(of(UNRESOLVED))}).** The paper does not state its length test's hop mix "
                     "(nor does the authors' released code, which has no length script), and the verdict moves "
                     "with it: "
                     + " ".join(f"{_short(c)}: {c.ours.split('. Graded reading')[0].split('decides: ', 1)[-1]}."
                                for c in of(UNRESOLVED)))
    floor = of(UNINFORMATIVE, CEILING)
    if floor:
        lines.append(f"**At the floor or the ceiling ({len(floor)}).** Agreement there is no evidence: "
                     + _listing(floor, lambda c: c.verdict))
    if findings:
        lines.append("**Beyond the paper's text.** " + " ".join(
            f"{c.claim}: **{c.verdict}** ({c.ours.split('; near-periods')[0]})." for c in findings))
    na = of(NA)
    if na:
        lines.append(f"**Not graded ({len(na)}).** " + _listing(na, lambda c: c.ours.removeprefix("n/a: ")))
    return [lines[0], ""] + [x for line in lines[2:] for x in (line, "")]


def render(claims: Sequence[ClaimRecord], calibration: Sequence[CalibrationRecord], *, figures: Path,
           link: str, command: str, provenance: str, power: pd.DataFrame | None = None) -> str:
    """``docs/replication.md``: the summary, the tally, the table, how to read it, the calibration, the rules' size
    and power, then a section per claim. ``figures``: the directory the figures lie in, ``link`` its path relative
    to the page; ``provenance``: which commit, preset and seeds made the tables."""
    counts = tally(claims)
    tallied = [c for c in claims if c.kind in TALLIED]
    checks = [c for c in claims if c.kind not in TALLIED]
    n_findings = sum(c.kind == "finding" for c in claims)
    calibrated = calibration_counts(calibration)
    lines = [
        "# Replication report: Urrutia et al., *Positional versus Symbolic Attention Heads* (arXiv 2605.31558)",
        "",
        "Generated by `" + command + "` from `claims.csv`; a test holds this page equal to it. Each claim is one "
        "entry of `possym/data/claims.yaml`, graded by one of three rule kinds (`possym.report.rules`), with its "
        "margin written there before grading; each rule kind's size and power were simulated (below), and each claim "
        "was first graded on the paper's own data (calibration, below).",
        "",
        *summary(claims),
        f"**Tally** ({len(tallied)} claims about the results: {len(tallied) - n_findings} of the paper's and "
        f"{n_findings} findings of ours beyond it): "
        + ", ".join(f"{n} {v}" for v, n in counts.items() if v in EMPIRICAL)
        + (f", {counts[NA]} n/a" if counts.get(NA) else "")
        + (" (the findings: " + ", ".join(f"{n} {v}" for v, n in Counter(
            c.verdict for c in claims if c.kind == "finding").items()) + ")" if n_findings else "")
        + f"; {len(checks)} verifications of our code or of a formula, outside the tally.",
        "",
        "| claim | paper | ours over seeds | verdict | gap [90%] / margin | paper's percentile | per seed | readings | "
        "power |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    lines += [_row(list(row.values())) for row in table_rows(tallied)]
    lines += ["", "Verifications (checks of our code or of a formula; they reproduce nothing):", "",
              "| check | paper | ours | verdict |", "|---|---|---|---|"]
    lines += [_row((c.claim, c.paper, c.ours, f"**{c.verdict}**")) for c in checks]
    lines += ["", f"Tables: {provenance}" if provenance else "",
        "", "## How to read it", "",
        "- **Verdicts** (`possym.report.rules`, each defined once). *match*: equivalent: for a number, the gap between "
        "the paper's value and our seeds' mean is shown to lie within the claim's margin (both one-sided tests at "
        "0.05: the gap's 90% interval inside ±margin); for a statement, it holds surely (its intervals decide it) at "
        "every seed. *consistent*: neither excluded nor shown equivalent; never counted as a match. *partial*: a "
        "statement holds surely at most seeds but fails at some, or in its weaker form everywhere; a set shares at "
        "least half the paper's layers. *differs*: the paper's value is outside what our seeds predict for a new "
        "seed (two-sided p < 0.05), or the statement surely fails at most seeds. *unresolved*: the hop mix the "
        "paper leaves unstated decides the verdict. *uninformative* / *ceiling*: the paper and every seed at "
        "chance's floor / within the figure's resolution of 1. *verified*: a check of our code or of a formula.",
        "- **Margins.** A step: 500 steps (Fig. 2A's digitisation spacing, twice the ±250 within which the paper "
        "gives a step); an accuracy: 0.10 (twice the paper's own 95% uncertainty at the graded sample: a smaller one "
        "could never be shown). Written in claims.yaml before the regrade that first used them.",
        "- **Numbers.** *gap*: paper − our mean, with its 90% interval (the equivalence test's); *paper's "
        "percentile*: where the paper's value falls in our predictive distribution for a new seed (t, on the "
        "arcsine scale for an accuracy, which stays monotone at 0 and 1); *p* (per claim below): the paper's value "
        "as one more draw of our seeds, its own uncertainty included.",
        "- **Intervals for structure.** A layer is surely pure at a checkpoint when both scores' 95% intervals "
        "(resampled over the scoring inputs) lie inside the pure region, and surely ever pure when it is so at 2 "
        "consecutive checkpoints; seeds whose per-checkpoint intervals were not kept use the sustained tally "
        "(l0_tally.csv: 2 consecutive checkpoints in 95% of input resamples) or their point estimates with "
        "persistence, and each claim's *evidence* line says which. A straddling layer is undecided, never counted "
        "either way.",
        "- **Per seed.** Each seed graded alone by the same definitions, its own interval standing in for the spread.",
        "- **Readings.** Where the paper leaves its protocol open, every admissible reading is graded; *robust* means "
        "every reading gives the claim's verdict. The hop mix is a nuisance: each admissible mix (uniform, each hop "
        "count alone, 1 and 2 hops equally) is graded, and a verdict that moves with it is *unresolved*; the mix "
        "fitted to Fig. 5B is shown, never graded.",
        "- **Power.** What the evidence could have detected at these seeds (simulated through the rule itself, "
        "`possym.report.power`): the smallest gap graded *differs* 80% of the time, the largest still graded *match* "
        "5% of the time, and how often a paper equal to our mean would be graded *match*.",
        "- **The paper's uncertainty.** Values read off a figure carry ±0.01 (measured on Fig. 5A, whose truth is a "
        "closed form, the gap is 0.0005); accuracies carry the binomial error of an evaluation sample the paper does "
        "not state: graded at 500 inputs, with the verdicts at 50, 100 and 2,400 beside them.",
        "- **Pre-registered?** No rule here has a dated pre-registration: every margin and rule is *chosen before "
        "calibration* and written in claims.yaml; where a rule was written after seeing the result, its entry says "
        "so (the cliff's aliasing rule; Fig. 4B's angle reading).",
        "",
        "## Calibration: the rules on the paper's own data, and negative controls",
        "",
        "Positive: each claim graded on the paper's own data through the path that grades us (a number: the paper's "
        "value among synthetic seeds at our spread; a statement: the paper's seed repeated); it must agree. "
        "Negative: the other task's evidence (where the paper states the claim of one task), and our seeds moved 1.5 "
        "margins from the paper's value; neither may match. "
        + ", ".join(f"{kind}: {passed} of {n} pass" if kind != "n/a" else f"{n} not calibratable (never counted as "
                    "passes)" for kind, (passed, n) in calibrated.items())
        + " (*derived*: the measure computes the property from the paper's raw data, and could fail; *identity*: "
        "the paper's number fed back as its own evidence; `calibration.csv`, `tests/unit/report/test_calibration.py`).",
        "",
        "| claim | calibration | the paper's data | on the paper's data | other task | moved beyond the margin | "
        "passes |",
        "|---|---|---|---|---|---|---|",
    ]
    lines += [_row((r.claim, r.calibration, r.data, f"**{r.verdict}**", r.other_task, r.shifted,
                    "" if r.passes is None else "yes" if r.passes else "**no**")) for r in calibration]
    if power is not None:
        lines += ["", "## Each rule kind's size and power (`rule_power.csv`)", "",
                  "Simulated through the rules' own arithmetic (`possym.report.power.power_table`): *size*, the "
                  "share of papers drawn from our own distribution graded *differs* (the stated rate is 0.05; with "
                  "one seed it is not controlled); *differs_80*, the smallest gap graded *differs* 80% of the time; "
                  "*match_05*, the largest still graded *match* 5% of the time; *match_at_0*, a paper equal to our "
                  "mean graded *match*. The units column says each row's setting.", "",
                  "| rule | seeds | size | differs_80 | match_05 | match_at_0 | units |",
                  "|---|---|---|---|---|---|---|"]
        lines += [_row((r.rule, str(r.seeds), f"{r.size:.3f}", f"{r.differs_80:.2f}", f"{r.match_05:.2f}",
                        f"{r.match_at_0:.2f}", r.units)) for r in power.itertuples()]
    lines += ["", "## The claims, one by one", ""]
    for c in claims:
        lines += [f"### {c.claim}", "", f"*{c.section}.* Paper: {c.paper}. Verdict: **{c.verdict}**"
                  + (f" ({c.seed_verdict_counts})" if c.seed_verdict_counts else "") + ".", "",
                  f"- Ours: {c.ours}"]
        lines += [f"- {name}: {value}" for name, value in (
            ("Per seed", c.per_seed), ("Per-seed verdicts", c.seed_verdicts), ("Checkpoint", c.step),
            ("Evidence", c.evidence), ("The paper's uncertainty", c.paper_uncertainty), ("Power", c.power)) if value]
        if c.readings:
            lines.append(f"- Graded reading: {c.reading or 'the only one'}; every reading: {c.readings} "
                         f"(**{c.robustness}**)")
        lines.append(f"- Rule: {c.rule}")
        fig = _figure(c, figures)
        if fig:
            lines += ["", f"![{c.section}]({link}/{fig})"]
        lines += ["", f"Made by: `{command}`", ""]
    return "\n".join(lines)


def write(tables: Sequence[Path], out: Path, *, replication: Path | None = None,
          runs: Mapping[str, Sequence[RunDir]] | None = None, provenance: str = "") -> list[ClaimRecord]:
    """Regrade ``tables`` (and ``runs``) into ``out/claims.csv``, ``out/calibration.csv`` and ``out/rule_power.csv``;
    with ``replication``, write the page there too (it shows the figures that lie in ``out``). ``provenance``: the
    sentence naming what made the tables (default: the first tables directory's ``provenance.txt``). Returns the
    claims."""
    ev = evidence(tables, runs)
    claims = check_claims(ev)
    calibration = calibrate(ev)
    power = power_table()
    if not provenance and (Path(tables[0]) / PROVENANCE).exists():
        provenance = (Path(tables[0]) / PROVENANCE).read_text("utf-8").strip()
    out.mkdir(parents=True, exist_ok=True)
    per_hop_figure(ev).savefig(out / "compare_fig5b_per_hop.png", dpi=110)
    decay_figure(ev).savefig(out / "compare_decay.png", dpi=110)
    if ev.hop_flow:
        from possym.records import HopFlowRecord, frame
        from possym.report.compare_plots import flow_compare

        flow_compare(frame(list(ev.hop_flow), HopFlowRecord)).savefig(out / "compare_fig3_hop_flow.png", dpi=110)
    atomic_write_text(out / "claims.csv", records_csv(claims))
    atomic_write_text(out / "calibration.csv", records_csv(calibration))
    atomic_write_text(out / "rule_power.csv", power.to_csv(index=False))
    if replication is not None:
        command = COMMAND.format(tables=" ".join(str(t) for t in tables), out=out)
        link = os.path.relpath(out, replication.parent)
        atomic_write_text(replication, render(claims, calibration, figures=out, link=link, command=command,
                                              provenance=provenance, power=power) + "\n")
    return claims


def per_hop_figure(ev: Evidence):
    """Fig. 5B: our curves at the best checkpoint, pooled per seed (left) and per hop count over seeds (right),
    each beside the paper's digitised curve."""
    from possym.paper import paper_numbers
    from possym.records import LengthRecord, frame
    from possym.report.length_plots import plot_length_curves

    curves = {task: pd.concat([frame(list(te.lengthgen), LengthRecord).assign(seed=te.seed) for te in seeds],
                              ignore_index=True)
              for task, seeds in ev.tasks.items() if any(te.lengthgen for te in seeds)}
    return plot_length_curves(curves, paper_numbers()["fig5b_length_generalisation"])


def decay_figure(ev: Evidence):
    """Sec. 3.6: our Fig. 5A (the bounds at each seed's layer-2 angles) and Fig. 5B (pooled accuracy), per seed
    with both tasks' curves, beside the paper's digitised figures."""
    from possym.paper import paper_numbers
    from possym.report.compare_plots import decay_compare
    from possym.report.measures.length import decay_curves

    theory: dict[str, dict[int, Any]] = {}
    accuracy: dict[str, dict[int, Any]] = {}
    for seed, (index, retrieval, number, letter) in decay_curves(ev).items():
        theory.setdefault("index", {})[seed], theory.setdefault("retrieval", {})[seed] = index, retrieval
        accuracy.setdefault("number", {})[seed], accuracy.setdefault("letter", {})[seed] = number, letter
    return decay_compare(theory, accuracy, paper_numbers())


def read(out: Path) -> tuple[list[ClaimRecord], list[CalibrationRecord]]:
    """``out/claims.csv`` and ``out/calibration.csv`` as records."""
    return read_records(out / "claims.csv", ClaimRecord), read_records(out / "calibration.csv", CalibrationRecord)


def export_tables(runs: Sequence[RunDir], out: Path, experiment: Path | None = None, *,
                  every_checkpoint: bool = False, figures: bool = True) -> Path:
    """A trained experiment's tables in the committed layout (``learning.csv``, ``final_scores.csv``,
    ``{task}_s{seed}_{purity,table1,lengthgen}.csv``, ``experiment.yaml``) under ``out``, so that
    :func:`regrade` can grade them once the runs are gone; the report's figures come along.
    ``every_checkpoint``: also each run's scores at every checkpoint and query, with their intervals
    (``{task}_s{seed}_scores.csv``), which the structural claims read (:class:`possym.report.evidence
    .PurityHistory`). ``figures``: the report's figures too."""
    import tempfile

    from possym.report.evidence import run_seed
    from possym.report.page import build_report

    by_task: dict[str, list[RunDir]] = {}
    for r in runs:
        by_task.setdefault(r.config.task.name, []).append(r)
    with tempfile.TemporaryDirectory() as tmp:
        build_report(Path(tmp), {t: sorted(v, key=lambda r: run_seed(r.config)) for t, v in by_task.items()})
        out.mkdir(parents=True, exist_ok=True)
        pictures = sorted((Path(tmp) / "figures").glob("*.png")) if figures else []
        for f in sorted((Path(tmp) / "tables").glob("*.csv")) + pictures:
            if f.name != "claims.csv":
                shutil.copyfile(f, out / f.name)
    if every_checkpoint:
        from possym.records import ScoreRecord

        # The intervals decide whether a layer is surely pure (an onset, a set): they are kept; the sd and the
        # normalised entropy, which no claim reads, are not.
        dropped: dict[str, Any] = dict.fromkeys(("entropy_norm", "s_pos_sd", "s_sym_sd"))
        for r in runs:
            rows = [dataclasses.replace(x, **dropped) for x in r.read("scores", ScoreRecord)]
            atomic_write_text(out / f"{r.config.task.name}_s{run_seed(r.config)}_scores.csv", records_csv(rows))
    if experiment is not None:
        shutil.copyfile(experiment, out / "experiment.yaml")
    return out
