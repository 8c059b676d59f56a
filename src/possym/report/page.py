"""Assemble a reproduction into ``report.html``, ``claims.csv``, ``figures/`` and ``tables/``, every seed shown.

:func:`build_report` takes per task the run directories of its seeds (see :mod:`possym.report.evidence`), draws
the paper-beside-ours figures with one thin line per seed, copies each run's own figures and key
tables under one name scheme (``figures/{task}_s{seed}_{stem}.png|svg``,
``tables/{task}_s{seed}_{name}.csv``), grades the claims over the seeds and renders one
self-contained page. Whatever a stage has not produced yet is left out, so a report can be built
from a partial run (and a tiny one, in the tests).
"""

from __future__ import annotations

import csv
import html as html_text
import json
import os
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from possym.errors import PossymError
from possym.paper import paper_numbers
from possym.records import (
    BoundCheckRecord,
    ClaimRecord,
    FinalScoreRecord,
    LearningRecord,
    LengthRecord,
    Record,
    ScoreRecord,
    Table1Record,
    frame,
    read_records,
    read_records_text,
    records_csv,
    table_record,
)
from possym.report import compare_plots, html
from possym.report.evidence import Evidence, TaskEvidence, final_kinds, load_evidence, run_seed
from possym.report.grading import check_claims, claim_summary
from possym.report.length_plots import plot_length_curves
from possym.report.rules import NA
from possym.report.seeds import claims_wide
from possym.runs import ARTIFACTS, RunDir, atomic_write_text, read_csv, save_figure

# Each run's own figures, in the order the paper shows them: (stem in RUN/figures, caption).
RUN_FIGURES = (
    ("fig2_dynamics", "Learning dynamics: accuracy, scores of three layers, pure-head tally (Fig. 2)"),
    ("fig3_hop_attention", "Attention along the hops of one 4-hop input (Fig. 3)"),
    ("fig4b_geometry", "Query and keys in the most used RoPE plane of L1 (Fig. 4B)"),
    ("fig6_scores", "Scores of every layer over training (Fig. 6)"),
    ("fig7_purity", "Pure heads over training at two thresholds (Fig. 7)"),
    ("fig8_frequency_use", "Frequency use per layer (Fig. 8)"),
)
# Each run's tables copied into DIR/tables, by their names in the run directory's registry.
RUN_TABLES = tuple(
    ARTIFACTS[key].name
    for key in ("lengthgen", "table1", "purity", "plane_scores", "discrepancy_summary", "discrepancy_accuracy")
)
THEORY_FIGURES = (
    ("theory_discrepancy", "Exact discrepancy of T_Index and T_Retrieval against Theorem 3.2's bounds"),
    ("theory_beta", "Smallest softmax β per n0 against Lemma F.1"),
)
THEORY_TABLES = ("verification.csv", "bounds.csv", "violations.csv", "counterexamples.csv", "beta.csv")
# The claims table as the page shows it first: the claim, the paper's value, ours over seeds, the verdict with
# each seed's; the rule, the per-seed values, the readings and the paper's uncertainty fold out under each row.
CLAIM_COLUMNS = ("claim", "paper", "ours", "verdict", "paper-preset replication", "per seed", "details")


def _copy_figure(src_stem: Path, dst_stem: Path) -> bool:
    if not src_stem.with_suffix(".png").exists():
        return False
    for ext in (".png", ".svg"):
        if src_stem.with_suffix(ext).exists():
            shutil.copyfile(src_stem.with_suffix(ext), dst_stem.with_suffix(ext))
    return True


def _save(fig, stem: Path) -> Path:
    save_figure(fig, stem)  # a Figure made without pyplot: nothing to close, the garbage collector frees it
    return stem


def _images(items: Sequence[tuple[Path, str]]) -> list[html.Image]:
    """(figure stem, caption) pairs as the page's images (the PNG of each)."""
    return [html.Image(caption, stem.with_suffix(".png").read_bytes()) for stem, caption in items]


def _last_scores(te: TaskEvidence) -> list[ScoreRecord]:
    """A run's scores at its last scored step, last-token query."""
    return list(te.final_scores)


def learning_rows(evidence: Evidence) -> list[LearningRecord]:
    """Per task, seed and accuracy key: the first step reaching 0.9, the final test accuracy, and the
    training wall-clock from the run's own timestamps (blank where the log has none)."""
    rows = []
    for task, runs in evidence.tasks.items():
        for te in runs:
            first = te.metrics.first_steps()
            final = te.metrics.final.accuracies() if te.metrics.final else {}
            times = [r.time for r in te.metrics if r.time is not None]
            minutes = round((max(times) - min(times)) / 60, 1) if len(times) > 1 else None
            rows += [LearningRecord(task, te.seed, key, step, final.get(key), minutes) for key, step in first.items()]
    return rows


# A reproduction's stages, as its memo has them (tables/stages.csv): written, never read back by field.
STAGE_ROW = table_record("tables/stages.csv", "stage:str status:str seconds:float? runs:int")
# The columns of a sweep's seeds.csv the report shows (its others vary with the sweep's settings).
SWEEP_SEED = table_record("sweep/seeds.csv", "variant:str? task:str seed:int test_accuracy:float steps_to_90:float "
                          "hop_order:str? pure_positional:str? pure_symbolic:str?")


def final_score_rows(evidence: Evidence) -> list[FinalScoreRecord]:
    """Per task and seed, every layer's scores at the last scored step and its purity there."""
    rows = []
    for task, runs in evidence.tasks.items():
        for te in runs:
            kinds = final_kinds(te.final_scores)
            rows += [FinalScoreRecord(task, te.seed, r.step, r.layer, r.head, r.s_pos, r.s_sym, kinds.get(r.layer, ""))
                     for r in _last_scores(te)]
    return rows


def replication_verdicts() -> dict[str, ClaimRecord]:
    """The committed paper-preset replication's claims, by id (the package's copy of
    ``docs/reproduce_paper/claims.csv``, ``possym/data/replication_claims.csv``; a test holds the two equal)."""
    import importlib.resources

    text = importlib.resources.files("possym").joinpath("data/replication_claims.csv").read_text("utf-8")
    return {c.id: c for c in read_records_text(text, ClaimRecord)}


def _replication_cell(c: ClaimRecord | None) -> str:
    """``match (8 seeds)``: the committed replication's verdict for a claim, with its seeds."""
    if c is None:
        return ""
    n = len(c.seeds.split(",")) if c.seeds else 0
    return f"{c.verdict}" + (f" ({n} seed{'s' if n != 1 else ''})" if n else "")


def claim_rows(claims: Sequence[ClaimRecord], replication: Mapping[str, ClaimRecord] | None = None
               ) -> list[dict[str, Any]]:
    """The claims as the page's table shows them (:data:`CLAIM_COLUMNS`, and ``kind``): this run's verdict, and
    beside it the committed paper-preset replication's for the same claim."""
    replication = replication_verdicts() if replication is None else replication
    rows = []
    for c in claims:
        lines = [f"{c.section}", f"rule: {c.rule}"] + [f"{name}: {value}" for name, value in (
            ("per seed", c.per_seed), ("per-seed verdicts", c.seed_verdicts), ("checkpoint", c.step),
            ("p-value", "" if c.p_value is None else f"{c.p_value:.2g}"),
            ("the paper's uncertainty", c.paper_uncertainty), ("power", c.power), ("evidence", c.evidence),
            ("graded reading", c.reading), ("every reading", f"{c.readings} ({c.robustness})" if c.readings else ""),
            ("as the rule read it", c.ours)) if value]
        rows.append({"claim": c.claim, "paper": c.paper, "ours": claim_summary(c), "verdict": c.verdict,
                     "paper-preset replication": _replication_cell(replication.get(c.id)),
                     "per seed": c.seed_verdict_counts, "details": html.Fold("rule, seeds, readings", lines),
                     "kind": c.kind})
    return rows


PAPER_SETTING = {"layers": 12, "steps": 6750}
REPLICATION_DOC = Path(__file__).resolve().parents[3] / "docs" / "replication.md"  # in a checkout


def what_this_run_is(evidence: Evidence, claims: Sequence[ClaimRecord], out: Path) -> str:
    """The page's first paragraph: the preset, its depth, steps and seeds against the paper's; what this run can
    grade and what it cannot; where the committed replication is."""
    seeds = [te for runs in evidence.tasks.values() for te in runs]
    presets = sorted({te.preset for te in seeds if te.preset}) or ["(unnamed)"]
    layers = sorted({te.n_layers for te in seeds})
    steps = sorted({s for te in seeds if (s := te.total_steps()) is not None})
    n_seeds = max((len(v) for v in evidence.tasks.values()), default=0)
    graded = [c for c in claims if c.kind != "verification" and c.verdict != NA]
    other = [c for c in claims
             if c.kind != "verification" and c.verdict == NA and "the paper's value holds for" in c.ours]
    same = layers == [PAPER_SETTING["layers"]] and steps == [PAPER_SETTING["steps"]]
    link = (os.path.relpath(REPLICATION_DOC, out.resolve()) if REPLICATION_DOC.exists()
            else "docs/replication.md in possym's repository")
    setting = (f"the <b>{html_text.escape(', '.join(presets))}</b> preset: {', '.join(map(str, layers))} layers "
               f"(the paper: {PAPER_SETTING['layers']}), {', '.join(f'{s:,}' for s in steps)} training steps "
               f"(the paper: {PAPER_SETTING['steps']:,}), {n_seeds} seed{'s' if n_seeds != 1 else ''} per task")
    if same:
        scope = (f"It is the paper's setting, so every claim can be graded here ({len(graded)} graded); with "
                 f"{n_seeds} seed{'s' if n_seeds != 1 else ''} a match (equivalence within the claim's margin) needs "
                 "several seeds.")
    else:
        scope = (f"It checks the whole pipeline at small scale; it is not a replication. The {len(other)} claims "
                 "whose paper value depends on the paper's depth, training length or width (a step, a layer, an "
                 f"accuracy of its model) are n/a here and say why; the {len(graded)} that hold whatever the scale "
                 "(orderings and statements) are graded below, with one seed, so at best consistent where a "
                 "number is concerned.")
    return (f"This run is {setting}. {scope} Whether the paper replicates is answered by the committed "
            f"replication of the paper preset (3-8 seeds per claim): <a href='{html_text.escape(link)}'>"
            "docs/replication.md</a>, whose verdict for each claim stands beside this run's in the table.")


def _seed_frame(runs: Sequence[TaskEvidence], records, kind) -> pd.DataFrame:
    """One record type's rows of every seed, with a ``seed`` column."""
    parts = [frame(records(te), kind).assign(seed=te.seed) for te in runs]
    return pd.concat(parts, ignore_index=True) if parts else frame([], kind).assign(seed=0)


def eval_frame(runs: Sequence[TaskEvidence]) -> pd.DataFrame:
    """Every seed's eval events (``step``, ``accuracy``, ``acc_hop*``), with a ``seed`` column."""
    rows = [{"seed": te.seed, "step": r.step, **r.accuracies()} for te in runs for r in te.metrics.evals]
    return pd.DataFrame(rows)


def _run_name(task: str, te: TaskEvidence) -> str:
    return f"{task}_s{te.seed}"


def build_report(
    out: Path,
    runs: Mapping[str, Sequence[RunDir]],
    theory_dir: Path | None = None,
    stages: list[Record] | None = None,
    title: str = "",
    sweep: Path | None = None,
    canonical: Path | None = None,
) -> Path:
    """Write OUT/report.html, OUT/claims.csv, OUT/figures/ and OUT/tables/; returns the report's path.

    ``runs``: per task its run directories, one per seed; ``theory_dir``: ``possym theory``'s tables;
    ``canonical``: a ``possym canonical`` directory (default OUT/canonical, if it has claims);
    ``sweep``: a ``possym sweep`` output directory whose per-seed table, mean ± sd summary and band
    figures become a section of the report (and ``tables/sweep_*.csv``, ``figures/sweep_*``).
    """
    figures, tables = out / "figures", out / "tables"
    figures.mkdir(parents=True, exist_ok=True)
    tables.mkdir(parents=True, exist_ok=True)
    paper = paper_numbers()
    evidence = load_evidence(runs, theory_dir)
    dirs = {task: {run_seed(r.config): r for r in rs} for task, rs in runs.items()}
    claims = check_claims(evidence)
    claims_text = records_csv(claims)
    atomic_write_text(out / "claims.csv", claims_text)
    atomic_write_text(tables / "claims.csv", claims_text)

    learning, finals = learning_rows(evidence), final_score_rows(evidence)
    for name, rows in (("learning", learning), ("stages", stages or [])):
        if rows:
            atomic_write_text(tables / f"{name}.csv", records_csv(rows))
    if finals:
        atomic_write_text(tables / "final_scores.csv", records_csv(finals))
    tasks = evidence.tasks
    for task, seeds in tasks.items():
        for te in seeds:
            for name in RUN_TABLES:
                src = dirs[task][te.seed].path / name
                if src.exists():
                    shutil.copyfile(src, tables / f"{_run_name(task, te)}_{Path(name).name}")
    for name in THEORY_TABLES:
        if theory_dir is not None and (theory_dir / name).exists():
            shutil.copyfile(theory_dir / name, tables / f"theory_{name}")

    def checkpoints(attr: str) -> str:
        return ", ".join(f"{t} s{te.seed} {getattr(te, attr)}" for t, seeds in tasks.items() for te in seeds
                         if getattr(te, attr))

    compared: list[tuple[Path, str]] = []
    if any(te.metrics for seeds in tasks.values() for te in seeds):
        fig = compare_plots.fig2a_compare({t: eval_frame(s) for t, s in tasks.items()}, paper)
        compared.append((_save(fig, figures / "compare_fig2a_accuracy"),
                         "Validation accuracy over training, every seed, beside the paper's digitised Fig. 2A"))
    if finals:
        fig = compare_plots.fig6_compare({t: _seed_frame(s, _last_scores, ScoreRecord) for t, s in tasks.items()},
                                         paper["fig6_final_scores_last_token_step_6000"])
        compared.append((_save(fig, figures / "compare_fig6_final_scores"),
                         "Final scores per layer, every seed, beside the paper's Fig. 6; checkpoints: "
                         + checkpoints("scores_step")))
    if any(te.table1 for seeds in tasks.values() for te in seeds):
        fig = compare_plots.table1_compare({t: _seed_frame(s, lambda te: te.table1, Table1Record)
                                            for t, s in tasks.items()}, paper["table1_weighted_frequency_id"])
        compared.append((_save(fig, figures / "compare_table1_frequency_ids"),
                         "Weighted frequency ID per layer, every seed, beside the paper's Table 1; checkpoints: "
                         + checkpoints("table1_step")))
    if evidence.fig5a:
        fig = compare_plots.fig5a_compare(evidence.fig5a, paper["fig5a_discrepancy_bounds"])
        compared.append((_save(fig, figures / "compare_fig5a_bounds"),
                         "Theorem 3.2's bounds, ours beside the paper's digitised Fig. 5A"))
    curves = {t: _seed_frame(s, lambda te: te.lengthgen, LengthRecord) for t, s in tasks.items()
              if any(te.lengthgen for te in s)}
    if curves:
        fig = plot_length_curves(curves, paper["fig5b_length_generalisation"])
        compared.append((_save(fig, figures / "compare_fig5b_length"),
                         "Length generalisation, every seed (one seed: band = per-prefix 95% interval), beside the "
                         "paper's digitised Fig. 5B; checkpoints: " + checkpoints("lengthgen_step")))

    per_run: list[tuple[Path, str]] = []
    for task, seeds in tasks.items():
        for te in seeds:
            src, name = dirs[task][te.seed].path, _run_name(task, te)
            for stem, caption in RUN_FIGURES:
                if _copy_figure(src / ARTIFACTS["figures"].name / stem, figures / f"{name}_{stem}"):
                    per_run.append((figures / f"{name}_{stem}", f"{task} task, seed {te.seed}: {caption}"))
            if _copy_figure((src / ARTIFACTS["discrepancy_heads"].name).with_suffix(""),
                            figures / f"{name}_discrepancy_heads"):
                per_run.append((figures / f"{name}_discrepancy_heads",
                                f"{task} task, seed {te.seed}: discrepancy of the trained heads against extra length "
                                "(the paper's future work)"))
    theory_figs = [(figures / stem, caption) for stem, caption in THEORY_FIGURES
                   if theory_dir is not None and _copy_figure(theory_dir / stem, figures / stem)]

    canonical = out / "canonical" if canonical is None else canonical
    sections = [
        html.Section(
            "The paper beside ours",
            "Thin solid lines and filled markers are ours, one per seed; hollow markers on dashed lines "
            "are the paper's values, digitised from its figures (<code>possym/data/paper_numbers.json</code>, "
            "with its source).",
            _images(compared),
        ),
        html.Section(
            "Learning",
            tables=[html.Table("per seed: first step at which each accuracy reaches 0.9; final test accuracy",
                               [r.named() for r in learning])],
        ),
        html.Section(
            "Scores, purity and frequency use, per run",
            images=_images(per_run),
            tables=[html.Table("final scores per layer and seed (γ = 0.1 purity)", [r.to_dict() for r in finals])],
        ),
        html.Section(
            "Theory",
            images=_images(theory_figs),
            tables=[html.Table("Theorem 3.2's bounds: where they hold",
                               [r.named() for r in read_records(theory_dir / "bounds.csv", BoundCheckRecord)]
                               if theory_dir is not None else [])],
        ),
        html.Section(
            "Length generalisation",
            "The curves are measured at the best checkpoint (the earliest at the maximum validation accuracy, "
            "as the authors kept it), and at the final one beside it where the two differ.",
            tables=[
                html.Table(f"{t}, seed {te.seed}: accuracy per K, pooled over hops, at {label}",
                           [p.to_dict() for p in curve if p.n_hops == 0])
                for t, seeds in tasks.items() for te in seeds
                for label, curve in ((te.lengthgen_step, te.lengthgen), ("the final checkpoint", te.lengthgen_final))
                if curve
            ],
        ),
        *([_canonical_section(canonical, figures, tables)] if (canonical / "claims.csv").exists() else []),
        *([_sweep_section(sweep, figures, tables)] if sweep is not None else []),
        html.Section(
            "Run: config, seeds, versions, timings",
            tables=[html.Table("stages", [r.named() for r in stages or []])],
            pre=_run_info({f"{t} seed {te.seed}": dirs[t][te.seed] for t, seeds in tasks.items() for te in seeds}),
        ),
    ]
    intro = (
        "A reproduction of Urrutia et al., <i>Positional versus Symbolic Attention Heads</i> (arXiv 2605.31558), "
        "made by <code>possym reproduce</code>. " + what_this_run_is(evidence, claims, out) + " Each claim is an "
        "entry of <code>possym/data/claims.yaml</code>, graded by the rules of <code>possym.report.rules</code> "
        "(docs/reproduce.md); each row folds out its rule, seeds and readings."
    )
    page = html.render(title or f"possym reproduction: {out.name}", sections, claim_rows(claims), intro)
    atomic_write_text(out / "report.html", page)
    return out / "report.html"


CANONICAL_FIGURES = (
    ("fig_accuracy_by_band", "accuracy against the allowed RoPE band, per task (the fastest band first)"),
    ("fig_accuracy_by_position", "accuracy against the answer's position, per band (the U and inverted-U curves)"),
    ("fig_plane", "the trained toy heads on the positional-symbolic plane"),
    ("fig_theorem7_wmax", "Theorem 7: w_max(j) of the positional construction and of the simplified symbolic head"),
)


def _canonical_section(canonical: Path, figures: Path, tables: Path) -> html.Section:
    """The metric paper's canonical tasks (``possym canonical``): its claims, with verdicts, and figures."""
    claims = [c.to_dict() for c in read_records(canonical / "claims.csv", ClaimRecord)]
    shutil.copyfile(canonical / "claims.csv", tables / "canonical_claims.csv")
    shown = [(figures / f"canonical_{stem}", caption) for stem, caption in CANONICAL_FIGURES
             if _copy_figure(canonical / stem, figures / f"canonical_{stem}")]
    counts = ", ".join(f"{sum(c['verdict'] == v for c in claims)} {v}" for v in ("match", "partial", "differs"))
    return html.Section(
        "The metric paper's canonical tasks",
        "Index (positional), Retrieval (symbolic) and partial induction on one-layer, attention-only RoPE heads "
        f"whose planes are chosen by frequency gating (<code>possym canonical</code>; docs/canonical.md): {counts}.",
        _images(shown),
        tables=[html.Table("the metric paper's claims, with our verdicts", claims)],
    )


def require_sweep_dir(sweep: Path) -> None:
    """A ``possym sweep`` output directory (it holds summary.csv), or a ValueError that says so."""
    if not (sweep / "summary.csv").exists():
        raise PossymError(f"{sweep} has no summary.csv: give a directory made by `possym sweep`")


def _sweep_section(sweep: Path, figures: Path, tables: Path) -> html.Section:
    """Seeds and variants from ``possym sweep``: its tables and ±sd band figures, copied in."""
    require_sweep_dir(sweep)
    for name in ("summary.csv", "seeds.csv", "claims_by_seed.csv"):
        if (sweep / name).exists():
            shutil.copyfile(sweep / name, tables / f"sweep_{name}")
    stems = sorted(p.with_suffix("") for p in (sweep / "figures").glob("*.png"))
    for stem in stems:
        _copy_figure(stem, figures / stem.name)
    with (sweep / "seeds.csv").open(newline="") as f:
        seeds = [SWEEP_SEED.from_csv({k: r.get(k, "") for k in SWEEP_SEED.columns()}) for r in csv.DictReader(f)]
    return html.Section(
        f"Sweep: {sweep.name}",
        "Trials of <code>possym sweep</code> (one row per variant, task and seed); bands in the figures are ±1 sd "
        "across seeds.",
        _images([(figures / stem.name, f"sweep: {stem.name}") for stem in stems]),
        [
            html.Table("per trial", [r.named() for r in seeds]),
            *(
                [html.Table("the claims table, seed by seed", claims_wide(read_csv(sweep / "claims_by_seed.csv")))]
                if (sweep / "claims_by_seed.csv").exists()
                else []
            ),
        ],
    )


def _run_info(runs: Mapping[str, RunDir]) -> str:
    lines = []
    for name, run in runs.items():
        meta = json.loads((run.path / "meta.json").read_text())
        config = yaml.safe_load((run.path / "config.yaml").read_text())
        lines.append(f"== {name} ==")
        lines.append(
            yaml.safe_dump(
                {
                    "config": config,
                    "seeds": meta.get("seeds"),
                    "git_commit": meta.get("git_commit"),
                    "versions": meta.get("versions"),
                    "created": meta.get("created"),
                },
                sort_keys=False,
            ).rstrip()
        )
    return "\n".join(lines)
