"""The replication report: the claims table regraded from committed tables, its calibration, and
``docs/replication.md``, a page a reader can cite, generated from ``claims.csv`` so that the two cannot
drift.

:func:`regrade` reads one or more directories of a reproduction's committed tables (``docs/reproduce_paper``
and any seeds trained since, exported by :func:`export_tables`), grades every claim by today's rules
(:func:`possym.report.claims.check_claims`) and writes ``claims.csv`` and ``calibration.csv`` (the rules on the
paper's own data, :mod:`possym.report.calibration`); :func:`render` turns them into Markdown: the whole table
first (claim, the paper's value, ours over seeds, the verdict with each seed's, the robustness over readings,
one line of evidence), then one short section per claim with its rule, its readings, its figure and the
command that made it.

Example:
    >>> claims = regrade([Path("docs/reproduce_paper")])                   # doctest: +SKIP
    >>> tally(claims)                                                      # doctest: +SKIP
    {'match': 17, 'partial': 9, ...}
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
from possym.report.calibration import CalibrationRecord, calibrate
from possym.report.claims import Evidence, check_claims, claim_summary
from possym.report.evidence import tables_evidence, task_evidence
from possym.report.rules import EMPIRICAL, NA
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
# Claims of the paper that a regrade leaves ungraded when its evidence lacks what they need, and why; a row is shown
# only while no graded claim's name contains its key.
UNGRADED = (
    ("resembles the theory", "the decay of accuracy with length resembles the theory (Fig. 5A against Fig. 5B)",
     "no seed has both tasks' length curves over Fig. 5B's range and Table 1's layer 2"),
    ("(Fig. 3)", "Fig. 3's information flow along the hops, in the trained heads",
     "no hop_flow.csv among the tables (possym.scores.flow.hop_flow_records on trained checkpoints makes it)"),
    ("(Fig. 4B)", "Fig. 4B's geometry, in the trained heads",
     "no plane_geometry.csv among the tables (possym.scores.flow.geometry_records makes it)"),
)
COMMAND = "possym regrade {tables} --out {out} --replication docs/replication.md"


def regrade(tables: Sequence[Path], runs: Mapping[str, Sequence[RunDir]] | None = None) -> list[ClaimRecord]:
    """Every claim graded over the seeds of the committed ``tables`` directories (and of ``runs``, if any)."""
    return check_claims(evidence(tables, runs))


def evidence(tables: Sequence[Path], runs: Mapping[str, Sequence[RunDir]] | None = None) -> Evidence:
    """The seeds of the committed ``tables`` directories (and of ``runs``), merged per task in seed order."""
    found = [tables_evidence(Path(t)) for t in tables]
    merged: dict[str, list] = {}
    for ev in found:
        for task, seeds in ev.tasks.items():
            merged.setdefault(task, []).extend(seeds)
    for task, dirs in (runs or {}).items():
        merged.setdefault(task, []).extend(task_evidence(r) for r in dirs)
    # Every table of records (bounds, witnesses, hop_flow, ...), concatenated over the directories.
    tables_of: dict[str, Any] = {f.name: [x for ev in found for x in getattr(ev, f.name)]
                                 for f in dataclasses.fields(Evidence) if f.name not in ("tasks", "hop_queries")}
    return Evidence({t: sorted(v, key=lambda te: te.seed) for t, v in merged.items()}, **tables_of,
                    hop_queries={t: sorted((te for ev in found for te in ev.hop_queries.get(t, ())),
                                           key=lambda te: te.seed)
                                 for t in {t for ev in found for t in ev.hop_queries}})


def tally(claims: Sequence[ClaimRecord]) -> dict[str, int]:
    """How many empirical claims give each verdict, and how many checks of our code or of a formula there are
    (``verifications``, whatever their verdict: they stay out of the empirical tally).

    >>> tally([ClaimRecord("a", "", "", "", "match", ""), ClaimRecord("b", "", "", "", "verified", "",
    ...                                                          kind="verification")])
    {'match': 1, 'verifications': 1}
    """
    counts = Counter(c.verdict for c in claims if c.kind == "empirical")
    out = {v: counts[v] for v in (*EMPIRICAL, NA) if counts[v]}
    checks = sum(c.kind != "empirical" for c in claims)
    return out | ({"verifications": checks} if checks else {})


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _row(cells: Sequence[str]) -> str:
    """One Markdown table row."""
    return "| " + " | ".join(_cell(x) for x in cells) + " |"


def _evidence(text: str, limit: int = 140) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def table_rows(claims: Sequence[ClaimRecord]) -> list[dict[str, str]]:
    """The whole table's rows, as replication.md shows them: claim, the paper's value, ours over seeds, the
    verdict, per-seed verdicts, robustness over readings, the p-value, one line of evidence."""
    return [{"claim": c.claim, "paper": c.paper, "ours over seeds": claim_summary(c), "verdict": f"**{c.verdict}**",
             "per seed": c.seed_verdict_counts, "readings": c.robustness or "one reading",
             "p": "" if c.p_value is None else f"{c.p_value:.2g}", "evidence": _evidence(c.per_seed)} for c in claims]


def _figure(c: ClaimRecord, figures: Path) -> str:
    for key, name in FIGURES:
        if key in c.section and (figures / name).exists():
            return name
    return ""


def render(claims: Sequence[ClaimRecord], calibration: Sequence[CalibrationRecord], *, figures: Path,
           link: str, command: str, provenance: str) -> str:
    """``docs/replication.md``: the table, the tally, the calibration, then a section per claim. ``figures``: the
    directory the figures lie in, ``link`` its path relative to the page; ``provenance``: which commit, preset
    and seeds made the tables."""
    counts = tally(claims)
    empirical = [c for c in claims if c.kind == "empirical"]
    checks = [c for c in claims if c.kind != "empirical"]
    lines = [
        "# Replication report: Urrutia et al., *Positional versus Symbolic Attention Heads* (arXiv 2605.31558)",
        "",
        "Generated by `" + command + "` from `claims.csv`; a test holds this page equal to it. "
        "The rules are in `possym.report.rules` and `possym.report.claims`, each tested on both sides of its "
        "thresholds, and each was first run on the paper's own data (calibration, below). " + provenance,
        "",
        "**Tally** (empirical claims): " + ", ".join(f"{n} {v}" for v, n in counts.items() if v in EMPIRICAL)
        + (f", {counts[NA]} n/a" if counts.get(NA) else "")
        + f"; {len(checks)} verifications of our code or of a formula, outside the tally.",
        "",
        "| claim | paper | ours over seeds | verdict | per seed | readings | p | evidence |",
        "|---|---|---|---|---|---|---|---|",
    ]
    lines += [_row(list(row.values())) for row in table_rows(empirical)]
    lines += ["", "Verifications (checks of our code or of a formula; they reproduce nothing):", "",
              "| check | paper | ours | verdict |", "|---|---|---|---|"]
    lines += [_row((c.claim, c.paper, c.ours, f"**{c.verdict}**")) for c in checks]
    ungraded = [(name, why) for key, name, why in UNGRADED if not any(key in c.claim for c in claims)]
    if ungraded:
        lines += ["", "Not graded, and why:", "", "| claim | why not |", "|---|---|"]
        lines += [_row(row) for row in ungraded]
    lines += [
        "", "## How to read it", "",
        "- **Verdicts.** *match*: the paper's value is not significantly unlike a new seed of ours (p ≥ 0.05, our "
        "t prediction interval over seeds against the paper's value with its own uncertainty), or the ordering "
        "holds at every seed; *partial*: within a stated band (a factor 2 in odds; 10% of a step), or at most seeds; "
        "*differs*: beyond it; *uninformative* / *ceiling*: the paper and every seed at chance's floor / within the "
        "figure's resolution of 1, where agreement is no evidence; *verified*: a check of our code or of a formula.",
        "- **Per seed.** Each seed graded alone by the same rule (its own interval). With few seeds the prediction "
        "interval for a new seed is wide, so the claim's verdict can be *match* while single seeds are not: the "
        "seeds disagree with the paper one by one, but not more than they disagree with each other.",
        "- **Readings.** Where the paper leaves its protocol open, every admissible reading is graded; *robust* "
        "means every reading gives the claim's verdict. The graded reading is the one the docs chose before "
        "calibration (named in each section); the fitted hop mix is chosen after the fact and never grades.",
        "- **The paper's uncertainty.** Values read off a figure carry ±0.01 (the digitisation notes; measured "
        "on Fig. 5A, whose truth is a closed form, the gap is 0.0005); accuracies carry the binomial error of an "
        "evaluation sample the paper does not state: graded at 500 inputs, with the verdicts at 100 and 2,400 "
        "beside them.",
        "",
        "## Calibration: the rules on the paper's own data",
        "",
        "Every rule must grade the paper against itself as agreeing before it grades us. "
        f"{sum(r.passes for r in calibration)} of {len(calibration)} rows pass "
        "(`calibration.csv`, `tests/unit/report/test_calibration.py`).",
        "",
        "| claim | the paper's data | verdict |",
        "|---|---|---|",
    ]
    lines += [_row((r.claim, r.data, f"**{r.verdict}**")) for r in calibration]
    lines += ["", "## The claims, one by one", ""]
    for c in claims:
        lines += [f"### {c.claim}", "", f"*{c.section}.* Paper: {c.paper}. Verdict: **{c.verdict}**"
                  + (f" ({c.seed_verdict_counts})" if c.seed_verdict_counts else "") + ".", "",
                  f"- Ours: {c.ours}"]
        lines += [f"- {name}: {value}" for name, value in (
            ("Per seed", c.per_seed), ("Per-seed verdicts", c.seed_verdicts), ("Checkpoint", c.step),
            ("The paper's uncertainty", c.paper_uncertainty)) if value]
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
    """Regrade ``tables`` (and ``runs``) into ``out/claims.csv`` and ``out/calibration.csv``; with ``replication``,
    write the page there too (it shows the figures that lie in ``out``). Returns the claims."""
    ev = evidence(tables, runs)
    claims = check_claims(ev)
    calibration = calibrate()
    out.mkdir(parents=True, exist_ok=True)
    per_hop_figure(ev).savefig(out / "compare_fig5b_per_hop.png", dpi=110)
    decay_figure(ev).savefig(out / "compare_decay.png", dpi=110)
    if ev.hop_flow:
        from possym.records import HopFlowRecord, frame
        from possym.report.compare_plots import flow_compare

        flow_compare(frame(list(ev.hop_flow), HopFlowRecord)).savefig(out / "compare_fig3_hop_flow.png", dpi=110)
    atomic_write_text(out / "claims.csv", records_csv(claims))
    atomic_write_text(out / "calibration.csv", records_csv(calibration))
    if replication is not None:
        command = COMMAND.format(tables=" ".join(str(t) for t in tables), out=out)
        link = os.path.relpath(out, replication.parent)
        atomic_write_text(replication, render(claims, calibration, figures=out, link=link, command=command,
                                              provenance=provenance) + "\n")
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
    from possym.report.claims import decay_curves
    from possym.report.compare_plots import decay_compare

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
    ``every_checkpoint``: also each run's point estimates at every checkpoint and query
    (``{task}_s{seed}_scores.csv``, without the spread), for the claims read at the hop queries. ``figures``:
    the report's figures too."""
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

        # The point estimates decide every onset; the spread columns would triple the committed size.
        spread: dict[str, Any] = dict.fromkeys(("entropy_norm", "s_pos_sd", "s_pos_low", "s_pos_high", "s_sym_sd",
                                                "s_sym_low", "s_sym_high"))
        for r in runs:
            rows = [dataclasses.replace(x, **spread) for x in r.read("scores", ScoreRecord)]
            atomic_write_text(out / f"{r.config.task.name}_s{run_seed(r.config)}_scores.csv", records_csv(rows))
    if experiment is not None:
        shutil.copyfile(experiment, out / "experiment.yaml")
    return out
