"""What the claims read: per task a list of seeds, each one shape whatever it was read from.

A seed's evidence (:class:`TaskEvidence`) comes from a trained run (:func:`task_evidence`), a reproduction's
committed tables (:func:`table_evidence`) or the paper's figures (:mod:`possym.report.calibration`). Its purity
over training is summarised once into a :class:`PurityHistory` (per layer and kind: the earliest step it may be
pure, the first step from which it surely is, and whether it surely or possibly is at the end), which is all
the measures (:mod:`possym.report.measures`) read. *Surely pure* at a checkpoint: the box of both scores' 95%
intervals lies inside the pure region (*possibly*: meets it; :func:`possym.scores.dynamics.record_kinds`);
*surely ever pure*: so at :data:`MIN_RUN` consecutive scored checkpoints (head 0, γ = 0.1 unless a claim says
0.05). A seed known by its purity table alone uses the sustained tally (:mod:`possym.scores.sustained`) where
measured, else point estimates, and ``final_straddles`` for the end; at the hop queries a layer counts once
pure at any of them. :attr:`PurityHistory.source` names what a seed rests on. See docs/reproduce.md, "How the
claims are graded".

Example:
    >>> from possym.records import ScoreRecord
    >>> def at(step, p, y):
    ...     return ScoreRecord(step, "last", 1, 0, p, y, entropy=1.0, n_inputs=9)
    >>> h = history_from_scores([at(0, 0.5, 0.5), at(50, 0.95, 0.02), at(100, 0.5, 0.5), at(150, 0.95, 0.02),
    ...                          at(200, 0.96, 0.01)])
    >>> lp = h.layer(1, "positional")
    >>> lp.first_possible, lp.first_sure, lp.end_sure
    (50, 150, True)"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from possym.config import RunConfig
from possym.records import (
    GAMMA,
    BoundCheckRecord,
    Fig5aRecord,
    FinalScoreRecord,
    HopFlowRecord,
    LearningRecord,
    LengthRecord,
    LengthSeedRecord,
    MetricsLog,
    PlaneGeometryRecord,
    ProtocolValueRecord,
    PurityRecord,
    Record,
    ScoreRecord,
    Table1Record,
    VerificationRecord,
    WitnessRecord,
    points_at,
    read_records,
    table_record,
)
from possym.runs import ARTIFACTS, RunDir
from possym.scores.dynamics import KINDS, purity, record_kinds
from possym.tasks import get_task

MIN_RUN = 2  # consecutive scored checkpoints of sure purity before a head counts as surely pure
PAPER_LAYERS = 12
PAPER_STEPS = 6750  # the paper's training: one epoch of 432,000 sequences at batch 64
PAPER_PLANES = 64
HOP_FLOW, PLANE_GEOMETRY = "hop_flow.csv", "plane_geometry.csv"  # possym.scores.flow's tables (Fig. 3, Fig. 4B)
CLIFF_MARGINS, CLIFF_LANDING = "cliff_plane_margins.csv", "cliff_landing_summary.csv"
INTERVALS = "input intervals and persistence"
POINTS = "point estimates and persistence (no intervals kept)"
TALLY = "onsets by point estimate; ever pure by the sustained tally (input resamples and persistence)"
TABLE = "point estimates only (purity table)"


@dataclass(frozen=True)
class LayerPurity:
    """One layer's purity of one kind over training (module docstring): ``first_possible`` the earliest step it can
    be pure, ``first_sure`` the first step from which it surely is (None: never possibly / never surely);
    ``end_sure``, ``end_possible``: pure at the last scored step, surely or possibly."""

    layer: int
    kind: str
    first_possible: int | None = None
    first_sure: int | None = None
    end_sure: bool = False
    end_possible: bool = False

    @property
    def ever_sure(self) -> bool:
        return self.first_sure is not None

    @property
    def ever_possible(self) -> bool:
        return self.first_possible is not None


@dataclass(frozen=True)
class PurityHistory:
    """A seed's purity over training, per (layer, kind), and what it rests on (``source``); ``last_step`` the last
    scored step; ``n_layers`` the layers scored."""

    layers: Mapping[tuple[int, str], LayerPurity] = field(default_factory=dict)
    last_step: int | None = None
    source: str = ""
    n_layers: int = 0

    def layer(self, layer: int, kind: str) -> LayerPurity:
        return self.layers.get((layer, kind), LayerPurity(layer, kind))

    def __bool__(self) -> bool:
        return bool(self.layers)

    def ever(self, kind: str) -> tuple[frozenset[int], frozenset[int]]:
        """(layers surely ever pure ``kind``, layers possibly so)."""
        rows = [lp for (_, k), lp in self.layers.items() if k == kind]
        return (frozenset(lp.layer for lp in rows if lp.ever_sure),
                frozenset(lp.layer for lp in rows if lp.ever_possible))

    def end(self, kind: str | None = None) -> tuple[frozenset[int], frozenset[int]]:
        """(layers surely pure ``kind`` at the end, layers possibly so); ``kind`` None: of either kind."""
        rows = [lp for (_, k), lp in self.layers.items() if kind is None or k == kind]
        return (frozenset(lp.layer for lp in rows if lp.end_sure),
                frozenset(lp.layer for lp in rows if lp.end_possible))

    def with_end_of(self, other: PurityHistory) -> PurityHistory:
        """This history with the end as ``other`` (the same run's) also reads it: surely pure there only if both
        say so, possibly if either does (a purity table keeps the last step's interval where exported
        per-checkpoint scores dropped it)."""
        keys = set(self.layers) | set(other.layers)
        merged = {}
        for key in keys:
            a, b = self.layer(*key), other.layer(*key)
            merged[key] = dataclasses.replace(a, end_sure=a.end_sure and b.end_sure,
                                              end_possible=a.end_possible or b.end_possible)
        source = self.source + ("; the end's intervals from the purity table" if other.source != self.source else "")
        return dataclasses.replace(self, layers=merged, source=source)

    def end_kinds(self) -> dict[int, str]:
        """Per layer surely pure at the end, its kind."""
        return {lp.layer: lp.kind for lp in self.layers.values() if lp.end_sure}


def history_from_scores(scores: Iterable[ScoreRecord], queries: Collection[str] = ("last",), gamma: float = GAMMA,
                        min_run: int = MIN_RUN) -> PurityHistory:
    """The history of per-checkpoint scores (head 0), at ``queries`` (several: pure at any of them counts)."""
    rows = [r for r in scores if r.query in queries and r.head == 0]
    if not rows:
        return PurityHistory()
    steps = sorted({r.step for r in rows})
    layers = sorted({r.layer for r in rows})
    sure: dict[tuple[int, str], list[bool]] = {(la, k): [False] * len(steps) for la in layers for k in KINDS}
    possible: dict[tuple[int, str], list[bool]] = {(la, k): [False] * len(steps) for la in layers for k in KINDS}
    index = {s: i for i, s in enumerate(steps)}
    intervals = False
    for r in rows:
        kinds = record_kinds(r, gamma)
        intervals = intervals or r.s_pos_low is not None and not math.isnan(r.s_pos_low)
        for k in KINDS:
            if k in kinds:
                possible[r.layer, k][index[r.step]] = True
                if kinds == {k}:
                    sure[r.layer, k][index[r.step]] = True
    out = {}
    for key in sure:
        first_possible = next((steps[i] for i, p in enumerate(possible[key]) if p), None)
        first_sure, run = None, 0
        for i, s in enumerate(sure[key]):
            run = run + 1 if s else 0
            if run >= min_run:
                first_sure = steps[i - min_run + 1]
                break
        out[key] = LayerPurity(key[0], key[1], first_possible, first_sure, sure[key][-1], possible[key][-1])
    return PurityHistory(out, steps[-1], INTERVALS if intervals else POINTS, len(layers))


def history_from_table(rows: Sequence[PurityRecord], *, gamma: float = GAMMA,
                       tally: Mapping[str, frozenset[int]] | None = None,
                       finals: Sequence[ScoreRecord] = ()) -> PurityHistory:
    """The history of a purity table (head 0, last-token query, ``gamma``): its first pure steps as onsets; surely
    ever pure per ``tally`` (kind → layers the sustained tally counts), else by the point estimate; the end from its
    final purity, possibly the kind ``finals`` (the last step's scores) lean to where the box straddled γ."""
    rows = [r for r in rows if r.gamma == gamma and r.query == "last" and r.head == 0]
    if not rows:
        return PurityHistory()
    near = {r.layer: ("symbolic" if r.s_sym > r.s_pos else "positional") for r in finals if r.head == 0}
    out = {}
    for r in rows:
        for k in KINDS:
            first = r.step if r.kind == k else r.final_kind_step if r.final_kind == k else None
            counted = first is not None and (tally is None or r.layer in tally.get(k, frozenset()))
            end_sure = r.final_kind == k and not r.final_straddles
            end_possible = r.final_kind == k or bool(r.final_straddles) and near.get(r.layer) == k
            out[r.layer, k] = LayerPurity(r.layer, k, first, first if counted else None, end_sure, end_possible)
    last = max((s for s in (r.final_kind_step for r in rows) if s is not None), default=None)
    return PurityHistory(out, last, TALLY if tally is not None else TABLE, len({r.layer for r in rows}))


@dataclass(frozen=True)
class TaskEvidence:
    """What one seed of one task produced, as typed records and its :class:`PurityHistory` (a missing table:
    empty).

    ``chance``: accuracy of a uniform guess over the task's possible answers (None: not known, and no claim is
    graded ``uninformative``); ``n_planes``: RoPE planes per head; ``best_step``: the best checkpoint (maximum
    validation accuracy); ``eval_every``: the spacing of its evaluations, a step's own uncertainty. Where the
    training log is not at hand (a committed table, the paper's figures), ``solved`` gives the first step at which
    each accuracy key reaches 0.9 (None: never) and ``trained_steps`` the last step. ``history`` is the purity
    history at the last token, ``hop_history`` at the hop queries (empty where not scored there), ``history_005``
    at γ = 0.05. ``preset``: the preset it was trained on ("" where not known).
    """

    n_layers: int
    seed: int = 0
    chance: float | None = None
    n_planes: int = PAPER_PLANES
    metrics: MetricsLog = field(default_factory=MetricsLog)
    table1: Sequence[Table1Record] = ()
    lengthgen: Sequence[LengthRecord] = ()  # the curve at ``lengthgen_step``
    lengthgen_final: Sequence[LengthRecord] = ()  # the curve at the final checkpoint, shown beside it
    best_step: int | None = None
    eval_every: int = 0
    lengthgen_step: str = ""
    scores_step: str = ""
    table1_step: str = ""
    solved: Mapping[str, int | None] | None = None
    trained_steps: int | None = None
    solved_spacing: int | None = None  # the spacing of the curve ``solved`` was read on (None: eval_every)
    # The task's Fig. 5A curve (n, bound) as given (the paper's digitised figure); empty: Theorem 3.2's bound at the
    # angle of Table 1's layer 2.
    decay_bound: Sequence[tuple[float, float | None]] = ()
    history: PurityHistory = field(default_factory=PurityHistory)
    hop_history: PurityHistory = field(default_factory=PurityHistory)
    history_005: PurityHistory = field(default_factory=PurityHistory)
    preset: str = ""
    final_scores: Sequence[ScoreRecord] = ()  # the last scored step's scores (drawn and tabulated by the report)

    def __post_init__(self) -> None:
        if not isinstance(self.metrics, MetricsLog):  # the log's JSON lines, as RunDir.metrics() gives them
            object.__setattr__(self, "metrics", MetricsLog.from_json(self.metrics))

    def solved_steps(self) -> dict[str, int | None]:
        """The first step at which each accuracy key reaches 0.9: given, or read from the training log."""
        return dict(self.solved) if self.solved is not None else self.metrics.first_steps() if self.metrics else {}

    def total_steps(self) -> int | None:
        """The steps it trained for: given, else the last logged step."""
        if self.trained_steps is not None:
            return self.trained_steps
        return max((r.step for r in self.metrics), default=None)

    def spacing(self) -> int:
        """How far a first step at 0.9 can lie before the one read: the spacing of the curve it was read on."""
        return self.eval_every if self.solved_spacing is None else self.solved_spacing


@dataclass(frozen=True)
class Evidence:
    """Per task, its seeds in seed order (``tasks``), and the tables of the other populations and of the theory:
    ``hop_queries``, seeds scored at every checkpoint at the hop queries (runs trained again for it, whose seed
    labels may repeat ``tasks``'); ``length_seeds``, pooled length accuracies of seeds kept without their curves (a
    sweep of more seeds); ``protocol``, the length claims' per-seed values under the protocol's other readings; the
    theory's tables; Fig. 3's and Fig. 4B's tables over many inputs; the cliff's plane margins and landings."""

    tasks: Mapping[str, Sequence[TaskEvidence]] = field(default_factory=dict)
    hop_queries: Mapping[str, Sequence[TaskEvidence]] = field(default_factory=dict)
    bounds: Sequence[BoundCheckRecord] = ()
    length_seeds: Sequence[LengthSeedRecord] = ()
    protocol: Sequence[ProtocolValueRecord] = ()
    verification: Sequence[VerificationRecord] = ()
    fig5a: Sequence[Fig5aRecord] = ()
    witnesses: Sequence[WitnessRecord] = ()
    hop_flow: Sequence[HopFlowRecord] = ()
    geometry: Sequence[PlaneGeometryRecord] = ()
    cliff_margins: Sequence[Mapping[str, Any]] = ()
    cliff_landing: Sequence[Mapping[str, Any]] = ()

    def __post_init__(self) -> None:
        for name in ("tasks", "hop_queries"):
            tasks = {t: tuple(v) for t, v in getattr(self, name).items()}
            for task, runs in tasks.items():
                seeds = [r.seed for r in runs]
                if len(set(seeds)) != len(seeds):
                    raise ValueError(f"task {task!r}: seeds {seeds} repeat; give one run per seed")
            object.__setattr__(self, name, tasks)

    def seeds(self, task: str, population: str = "main") -> list[TaskEvidence]:
        """The seeds of ``task`` in a population: ``main`` (the reproduction's), ``hop_queries`` (scored at every
        checkpoint at the hop queries: those given apart, else the main seeds that carry a hop history)."""
        if population == "main":
            return list(self.tasks.get(task, ()))
        if population == "hop_queries":
            given = self.hop_queries.get(task)
            return list(given) if given else [r for r in self.seeds(task) if r.hop_history]
        raise ValueError(f"population {population!r}; allowed: main, hop_queries")


def same_run(a: TaskEvidence, b: TaskEvidence) -> bool:
    """Whether two seeds' evidence comes from one training run, read twice (a run scored again at the hop queries):
    the same seed, best checkpoint and first steps at 0.9 of every accuracy. A retrain of the same seed, on other
    hardware or precision, differs in some of them.

    >>> same_run(TaskEvidence(12, seed=3, best_step=2750, solved={"accuracy": 2050}),
    ...          TaskEvidence(12, seed=3, best_step=2750, solved={"accuracy": 2050}))
    True
    """
    return (a.seed == b.seed and a.best_step == b.best_step and bool(a.solved_steps())
            and a.solved_steps() == b.solved_steps())


def _label(run: RunDir, step: int | None) -> str:
    """How a claim names a checkpoint: "best 4800", "final 6750", or "best = final 6750"; on a run that did not
    finish, "final 140 (unfinished, of 400)"."""
    if step is None:
        return ""
    steps = run.checkpoint_steps()
    names = [n for n, s in (("best", run.best()), ("final", steps[-1] if steps else None)) if s == step]
    label = f"{' = '.join(names) or 'step'} {step}"
    return label if run.finished else f"{label} (unfinished, of {run.config.total_steps})"


def run_seed(cfg: RunConfig) -> int:
    """A run's seed, as the report names it: its init seed (a reproduction sets every seed to the same number)."""
    return cfg.seeds.init


def chance(cfg: RunConfig) -> float:
    """A uniform guess's accuracy over the task's possible answers, as the task declares it
    (:attr:`possym.tasks.Task.chance`: 1/120 on the number task, 1/64 on the letter task)."""
    return get_task(cfg.task.name).chance(cfg.task)


def _curves(points: list[LengthRecord], best: int | None,
            final: int | None) -> tuple[list[LengthRecord], list[LengthRecord], int | None]:
    """(the length curve at the best checkpoint, else at the final one; the final one beside it where the two
    differ; the step of the first)."""
    at_best = points_at(points, best) if best is not None else []
    at_final = points_at(points, final) if final is not None else []
    step = best if at_best else final if at_final else None
    return at_best or at_final, at_final if at_best and best != final else [], step


def _last_scores(scores: Sequence[ScoreRecord]) -> list[ScoreRecord]:
    last = max((r.step for r in scores), default=None)
    return [r for r in scores if r.step == last and r.query == "last"]


def final_kinds(scores: Sequence[ScoreRecord], gamma: float = GAMMA) -> dict[int, str]:
    """Per layer (head 0, last-token query), the point estimate's purity kind at the last scored step ("" if
    mixed)."""
    return {r.layer: purity(r.s_pos, r.s_sym, gamma) for r in _last_scores(scores) if r.head == 0}


def task_evidence(run: RunDir) -> TaskEvidence:
    """A run's tables; the length curve at the best checkpoint (as the authors evaluated), the final one beside."""
    steps = run.checkpoint_steps()
    final = steps[-1] if steps else None
    best = run.best() if steps else None
    curve, beside, curve_step = _curves(run.read("lengthgen", LengthRecord), best, final)
    scores = run.read("scores", ScoreRecord)
    table1 = run.read("table1", Table1Record)
    cfg = run.config
    hops = {r.query for r in scores} - {"last"}
    return TaskEvidence(
        n_layers=cfg.model.n_layers, seed=run_seed(cfg), chance=chance(cfg), n_planes=cfg.model.n_planes,
        metrics=run.metrics_log(), table1=table1, lengthgen=curve, lengthgen_final=beside, best_step=best,
        eval_every=cfg.train.eval_every, lengthgen_step=_label(run, curve_step),
        scores_step=_label(run, max((r.step for r in scores), default=None)),
        table1_step=_label(run, table1[0].step if table1 else None),
        history=history_from_scores(scores), hop_history=history_from_scores(scores, hops) if hops else PurityHistory(),
        history_005=history_from_scores(scores, gamma=0.05), preset=cfg.preset or "",
        final_scores=_last_scores(scores))


def load_evidence(runs: Mapping[str, Sequence[RunDir]], theory_dir: Path | None) -> Evidence:
    """Per task, every run's evidence in seed order, and the theory's tables from ``theory_dir`` (None: none)."""
    tasks = {task: sorted((task_evidence(r) for r in dirs), key=lambda te: te.seed)
             for task, dirs in runs.items() if dirs}
    if theory_dir is None:
        return Evidence(tasks=tasks)
    return Evidence(tasks=tasks, bounds=read_records(theory_dir / "bounds.csv", BoundCheckRecord),
                    verification=read_records(theory_dir / "verification.csv", VerificationRecord),
                    fig5a=read_records(theory_dir / "fig5a.csv", Fig5aRecord))


# ---- a reproduction's committed tables -----------------------------------------------------------------------


def stacked_kind(key: str) -> type[Record]:
    """The row type of a run's table artifact ``key`` stacked over a reproduction's runs (``mechanisms/KEY.csv``):
    its spec line's columns with ``task`` and ``seed`` first (:func:`possym.report.mechanisms.collect_tables`)."""
    return table_record(f"mechanisms/{key}.csv", f"task:str seed:int {ARTIFACTS[key].columns}")


def _seed_table(tables: Path, task: str, seed: int, name: str) -> Path:
    return tables / f"{task}_s{seed}_{name}.csv"


def scored_at_hops(tables: Path) -> bool:
    """Whether a committed tables directory's experiment scored every checkpoint at the hop queries
    (``score: {hops: true}`` in its ``experiment.yaml``)."""
    path = tables / "experiment.yaml"
    spec = yaml.safe_load(path.read_text("utf-8")) if path.exists() else None
    score = ((spec or {}).get("stages") or {}).get("score") or {}
    return bool(score.get("hops", False))


def _tallies(tables: Path) -> dict[tuple[str, int], dict[str, frozenset[int]]]:
    """Per (task, seed), the layers the sustained tally counts per kind (``mechanisms/l0_tally.csv``; empty: none)."""
    out: dict[tuple[str, int], dict[str, frozenset[int]]] = {}
    for r in read_records(tables / "mechanisms" / "l0_tally.csv", stacked_kind("l0_tally")):
        out.setdefault((r.task, r.seed), {})[r.kind] = frozenset(int(x) for x in r.layers_counted.split())  # type: ignore[attr-defined]
    return out


def table_evidence(tables: Path, task: str, seed: int,
                   tally: Mapping[str, frozenset[int]] | None = None) -> TaskEvidence:
    """One seed's evidence from a reproduction's committed tables (``docs/reproduce_paper``: ``learning.csv``,
    ``final_scores.csv``, ``{task}_s{seed}_{purity,table1,lengthgen}.csv``, and ``{task}_s{seed}_scores.csv`` where
    every checkpoint's scores were exported), for grading it once its runs are gone. Its history comes from the
    scores of every checkpoint where they were exported, else from the purity table and ``tally``."""
    from possym.config import load_config
    from possym.errors import PossymError

    purity_rows = read_records(_seed_table(tables, task, seed, "purity"), PurityRecord)
    every = read_records(_seed_table(tables, task, seed, "scores"), ScoreRecord)
    if not purity_rows and not every:
        raise PossymError(f"{_seed_table(tables, task, seed, 'purity')}: no purity table for {task} seed {seed}")
    table1 = read_records(_seed_table(tables, task, seed, "table1"), Table1Record)
    learning = [r for r in read_records(tables / "learning.csv", LearningRecord) if (r.task, r.seed) == (task, seed)]
    finals = [ScoreRecord(r.step, "last", r.layer, r.head, r.s_pos, r.s_sym, entropy=math.nan, n_inputs=0)
              for r in read_records(tables / "final_scores.csv", FinalScoreRecord) if (r.task, r.seed) == (task, seed)]
    points = read_records(_seed_table(tables, task, seed, "lengthgen"), LengthRecord)
    best = purity_rows[0].best_step if purity_rows else None
    final = max((p.step for p in points if p.step is not None), default=None)
    preset = yaml.safe_load((tables / "experiment.yaml").read_text("utf-8")).get("preset", "paper")
    cfg = load_config(task, preset)
    curve, beside, step = _curves(points, best, final)
    hops = {r.query for r in every} - {"last"}
    if every:
        history = history_from_scores(every)
        history_005 = history_from_scores(every, gamma=0.05)
    else:
        history = history_from_table(purity_rows, tally=tally, finals=finals)
        history_005 = history_from_table(purity_rows, gamma=0.05, finals=finals)
    return TaskEvidence(
        n_layers=cfg.model.n_layers, seed=seed, chance=chance(cfg), n_planes=cfg.model.n_planes, table1=table1,
        lengthgen=curve, lengthgen_final=beside, best_step=best, eval_every=cfg.train.eval_every,
        solved={r.accuracy: r.first_step for r in learning},
        trained_steps=cfg.total_steps,
        lengthgen_step="" if step is None else f"{'best' if step == best else 'final'} {step}",
        scores_step=f"final {max(r.step for r in every or finals)}" if every or finals else "",
        table1_step=f"step {table1[0].step}" if table1 else "",
        history=history, hop_history=history_from_scores(every, hops) if hops else PurityHistory(),
        history_005=history_005, preset=preset, final_scores=_last_scores(every) if every else finals)


def tables_evidence(tables: Path) -> Evidence:
    """Every seed of a reproduction's committed tables (the seeds ``learning.csv`` lists), with the theory's tables
    (``theory_{bounds,verification,fig5a,witnesses}.csv``), pooled length accuracies of seeds kept without their
    curves (``length_seeds.csv``), the length protocol's readings (``length_protocol_values.csv``), Fig. 3's and
    Fig. 4B's tables and the cliff's plane margins and landings (``mechanisms/fp32_retrain``)."""
    if not (tables / "learning.csv").exists() and (tables / HOP_FLOW).exists():
        # Fig. 3's and Fig. 4B's tables over many inputs (possym.scores.flow), read from trained checkpoints.
        return Evidence(hop_flow=read_records(tables / HOP_FLOW, HopFlowRecord),
                        geometry=read_records(tables / PLANE_GEOMETRY, PlaneGeometryRecord))
    tallies = _tallies(tables)
    seeds = sorted({(r.task, r.seed) for r in read_records(tables / "learning.csv", LearningRecord)})
    tasks: dict[str, list[TaskEvidence]] = {}
    for task, seed in seeds:
        tasks.setdefault(task, []).append(table_evidence(tables, task, seed, tallies.get((task, seed))))
    if scored_at_hops(tables):
        # Runs trained again to be scored at the hop queries: their seed labels may repeat the reproduction's.
        return Evidence(hop_queries=tasks)
    cliff = tables / "mechanisms" / "fp32_retrain"
    return Evidence(tasks=tasks,
                    bounds=read_records(tables / "theory_bounds.csv", BoundCheckRecord),
                    verification=read_records(tables / "theory_verification.csv", VerificationRecord),
                    fig5a=read_records(tables / "theory_fig5a.csv", Fig5aRecord),
                    length_seeds=read_records(tables / "length_seeds.csv", LengthSeedRecord),
                    protocol=read_records(tables / "length_protocol_values.csv", ProtocolValueRecord),
                    witnesses=read_records(tables / "theory_witnesses.csv", WitnessRecord),
                    cliff_margins=_stacked(cliff / CLIFF_MARGINS, "cliff_plane_margins"),
                    cliff_landing=_stacked(cliff / CLIFF_LANDING, "cliff_landing_summary"))


def _stacked(path: Path, key: str) -> list[dict[str, Any]]:
    """A mechanism table stacked over runs (its run artifact's columns with ``task`` and ``seed`` first), as rows
    typed by its spec line."""
    return [r.to_dict() for r in read_records(path, stacked_kind(key))]