"""Score a run: positional/symbolic scores of every checkpoint, purity, frequency use and Table 1.

The library half of ``possym score RUN`` and of the ``score`` stage of ``reproduce`` and sweeps.
Writes into RUN (file names from :data:`possym.runs.ARTIFACTS`):

  scores.csv          :class:`~possym.records.ScoreRecord` per step, query, layer, head
  purity.csv          :class:`~possym.records.PurityRecord` per γ and head
  purity_tally.csv    :class:`~possym.records.TallyRecord` per γ and step (Fig. 2C, 7)
  frequency_use.csv   at the table step: use per (layer, head, frequency ID)            (Fig. 8)
  table1.csv          at the table step: weighted mean ID, its frequency, dominant ID   (Table 1)
  plane_scores.csv    at the table step: s_pos, s_sym of every plane's projection head
  figures/            fig2_dynamics, fig3_hop_attention, fig4b_geometry, fig6_scores, fig7_purity,
                      fig8_frequency_use (PNG and SVG), with ``figures=True``

A per-step stage: run through :func:`possym.experiment.run_stage` (as ``possym score`` and every experiment
do), the run's memo (``RUN/resume.json``) records the checkpoints scored with these settings, so that
asking for more scores only the new ones; ``ctx.keep`` names the checkpoints whose rows are kept.

Example:
    >>> from possym.experiment import run_stage                                               # doctest: +SKIP
    >>> result = run_stage(RunDir.open("runs/demo/number"), "score", ScoreConfig(n_inputs=30)).result  # doctest: +SKIP
    >>> [r for r in result.scores if r.step == result.table_step and r.layer == 0]      # doctest: +SKIP
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass

import torch

from possym.config import ConfigError
from possym.errors import PossymError
from possym.records import (
    GAMMAS,
    FrequencyUseRecord,
    PurityRecord,
    ScoreRecord,
    Table1Record,
    TallyRecord,
)
from possym.runs import RunDir, StepSpec, table_kind
from possym.scores.metric import COSINES, TAU
from possym.stages.registry import Execution, Stage, StageContext

log = logging.getLogger(__name__)
PLANE_SCORES = table_kind("plane_scores")  # a table written, never read by field: its spec line's row type


@dataclass(frozen=True)
class ScoreConfig(Execution):
    """How to score a run.

    n_inputs: test inputs per checkpoint (paper: 100), chosen by ``seed`` from the run's test split.
    tau: swap temperature (paper: 1e-4). block_size: tokens per swapped block (paper A: 1).
    hops: also score every hop position as a query. frequency: frequency use, Table 1 and per-plane
    scores at ``table_step`` (a number, ``"best"`` or ``"final"``). steps: checkpoints to score
    (None: all). cosine: ``"exact"`` (the paper's formula) or ``"torch"`` (the authors'
    ``F.cosine_similarity``; :mod:`possym.scores.metric`). figures: draw the figures into RUN/figures.
    Runs on the CPU with one thread unless ``device``/``threads`` say (:class:`~possym.stages.registry.Execution`;
    the engine works in float64, which MPS lacks, and on small tensors, where one thread is fastest on a busy CPU).
    """

    n_inputs: int = 100
    seed: int = 0
    tau: float = TAU
    block_size: int = 1
    hops: bool = False
    frequency: bool = True
    figures: bool = True
    table_step: StepSpec = "final"
    steps: tuple[int, ...] | None = None
    cosine: str = "exact"

    def __post_init__(self) -> None:
        if self.cosine not in COSINES:
            raise ConfigError(f"score cosine={self.cosine!r} is not a cosine possym knows; allowed: {COSINES}")
        if self.n_inputs < 1:
            raise ConfigError(f"score n_inputs={self.n_inputs} must be >= 1")
        if not self.tau > 0:
            raise ConfigError(f"score tau={self.tau} must be > 0")
        if self.block_size < 1:
            raise ConfigError(f"score block_size={self.block_size} must be >= 1")
        if self.steps is not None:
            object.__setattr__(self, "steps", tuple(sorted({int(s) for s in self.steps})))


@dataclass(frozen=True)
class ScoreResult:
    scores: list[ScoreRecord]
    purity: list[PurityRecord]
    tally: list[TallyRecord]
    table1: list[Table1Record]
    table_step: int
    best_step: int | None
    n_scored: int  # checkpoints scored by this call (the rest were reused)
    n_inputs: int


def score_run(ctx: StageContext, cfg: ScoreConfig) -> ScoreResult:
    """Score the checkpoints ``cfg.steps`` asks for (None: all), keep the rows of scores.csv at the steps
    ``ctx.keep`` (scored before with these settings: the memo knows, :func:`possym.experiment.run_stage`), write
    the score, purity and frequency tables, and the figures if asked; ``ctx.progress(step)`` after each checkpoint."""
    from possym.scores.checkpoints import purity_tables, score_checkpoints, score_inputs
    from possym.scores.dynamics import normalise_entropy

    run, keep = ctx.run, ctx.keep
    available = run.checkpoint_steps()
    if not available:
        raise PossymError(f"{run.path} has no checkpoints yet")
    steps = available if cfg.steps is None else list(cfg.steps)  # () when only the tables are redone
    missing = sorted(set(steps) - set(available))
    if missing:
        raise PossymError(f"no checkpoints for steps {missing}; available: {available}")
    table_step = run.resolve_step(cfg.table_step)
    samples = score_inputs(run.config.task, run.config.seeds.data, cfg.n_inputs, cfg.seed)

    kept = [r for r in run.read("scores", ScoreRecord) if r.step in set(keep) - set(steps)] if keep else []
    fresh = score_checkpoints(run, steps, samples, tau=cfg.tau, block_size=cfg.block_size, hops=cfg.hops,
                              progress=ctx.progress, cosine=cfg.cosine, device=ctx.device)  # type: ignore[arg-type]
    # Entropy is normalised across every step of the run, so it is recomputed over kept + fresh rows.
    rows = kept + [ScoreRecord.from_dict(r) for r in fresh]
    scores = normalise_entropy(sorted(rows, key=lambda r: (r.step, r.query, r.layer, r.head)))
    ctx.write_table("scores", scores)

    purity, tallies = purity_tables(scores, run.best(), GAMMAS)
    ctx.write_table("purity", purity)
    ctx.write_table("purity_tally", tallies)

    table1: list[Table1Record] = []
    if cfg.frequency and run.config.model.rot_dim > 0:
        table1 = frequency_tables(ctx, table_step, samples, cfg)
    result = ScoreResult(scores, purity, tallies, table1, table_step, run.best(), len(steps), len(samples))
    if cfg.figures:
        score_figures(run, result, samples, cfg)
    return result


def frequency_tables(ctx: StageContext, step: int, samples, cfg: ScoreConfig) -> list[Table1Record]:
    """Frequency use (Fig. 8), Table 1 and per-plane scores of the model at ``step``; writes all three."""
    from possym.model.rope import layer_frequencies
    from possym.scores.frequency import dominant_frequency_id, frequency_use, plane_scores, weighted_frequency_id

    model = ctx.model(step)
    tokens = torch.as_tensor(samples.tokens, device=model.embed.weight.device)
    use = frequency_use(model, tokens).cpu()  # [layer, head, plane]
    per_plane = plane_scores(model, tokens, tau=cfg.tau, block_size=cfg.block_size)
    use_rows, table, plane_rows = [], [], []
    for layer in range(use.shape[0]):
        thetas = layer_frequencies(model.cfg, layer)  # 0 where p-RoPE or a NoPE layer stops a plane turning
        for head in range(use.shape[1]):
            for k in range(use.shape[2]):
                use_rows.append(FrequencyUseRecord(step, layer, head, k + 1, float(thetas[k]),
                                                   float(use[layer, head, k])))
                plane_rows.append(PLANE_SCORES.from_dict({
                    "step": step, "layer": layer, "head": head, "frequency_id": k + 1,
                    "s_pos": float(per_plane.s_pos[:, layer, head, k].nanmean()),
                    "s_sym": float(per_plane.s_sym[:, layer, head, k].nanmean())}))
            weighted = float(weighted_frequency_id(use[layer, head]))
            rounded = min(max(round(weighted), 1), len(thetas))
            table.append(Table1Record(step, layer, head, weighted, rounded, float(thetas[rounded - 1]),
                                      int(dominant_frequency_id(use[layer, head]))))
    ctx.write_table("frequency_use", use_rows)
    ctx.write_table("table1", table)
    ctx.write_table("plane_scores", plane_rows)
    return table


def score_figures(run: RunDir, result: ScoreResult, samples, cfg: ScoreConfig) -> list[str]:
    """The run's score figures into RUN/figures; returns their stems."""
    import matplotlib.pyplot as plt

    from possym.report.score_plots import (
        fig2_dynamics,
        fig3_hop_attention,
        fig4b_geometry,
        fig6_layer_scores,
        fig7_purity,
        fig8_frequency_use,
    )
    from possym.runs import save_figure
    from possym.scores.frequency import plane_geometry
    from possym.scores.patterns import hop_attention
    from possym.tasks import task_vocab

    out = run.artifact("figures")
    out.mkdir(exist_ok=True)
    name = run.config.task.name
    rows, first, tally = result.scores, result.purity, result.tally
    best = result.best_step
    n_layers = run.config.model.n_layers
    shown = [layer for layer in (1, 5, 11) if layer < n_layers] or list(range(min(3, n_layers)))
    figs = {
        "fig2_dynamics": fig2_dynamics(rows, run.metrics_log(), [t for t in tally if t.gamma == GAMMAS[0]],
                                       [f for f in first if f.gamma == GAMMAS[0]], layers=shown,
                                       best_step=best, title=f"{name} task"),
        "fig6_scores": fig6_layer_scores(rows, best_step=best, title=f"{name} task: scores per layer"),
        "fig7_purity": fig7_purity({g: [t for t in tally if t.gamma == g] for g in GAMMAS},
                                   {g: [f for f in first if f.gamma == g] for g in GAMMAS}, title=name),
    }
    if cfg.hops:
        for q in sorted({r.query for r in rows} - {"last"}):
            figs[f"fig6_scores_{q}"] = fig6_layer_scores(rows, best_step=best, query=q,
                                                         title=f"{name} task: scores per layer, query {q}")
    # Fig. 3 and 4B: one input with the most hops, at the table step.
    model = run.load_model(result.table_step)
    i = int(samples.n_hops.argmax())
    tokens = torch.as_tensor(samples.tokens[i])
    path = [int(p) for p in samples.path[i] if p >= 0]
    words = task_vocab(run.config.task).decode(samples.tokens[i])
    figs["fig3_hop_attention"] = fig3_hop_attention(hop_attention(model, tokens, path), words, path)
    if model.cfg.rot_dim > 0:
        layer = 1 if n_layers > 1 else 0
        geo = plane_geometry(model, tokens, layer=layer)
        figs["fig4b_geometry"] = fig4b_geometry(geo, title=f"{name} task, L{layer}, frequency ID {geo.frequency_id}")
    if result.table1:
        figs["fig8_frequency_use"] = fig8_frequency_use(run.read("frequency_use", FrequencyUseRecord), result.table1,
                                                        title=f"{name} task: frequency use")
    for stem, fig in figs.items():
        save_figure(fig, out / stem)
        plt.close(fig)
    return list(figs)


def fit_inputs(run: RunDir, n_inputs: int, where: str) -> int:
    """``n_inputs`` test inputs of ``run``, or all of its test split where that holds fewer, with one line
    saying what is used (:func:`possym.scores.checkpoints.score_inputs` takes at most the split)."""
    have = run.config.task.n_test
    if n_inputs <= have:
        return n_inputs
    log.warning("possym: %s=%d is more than the %d inputs of %s's test split; using all %d (the memo records %d)",
                where, n_inputs, have, run.path, have, have)
    return have


def _check(run: RunDir, cfg: ScoreConfig, device: torch.device) -> ScoreConfig:
    """The settings as they score ``run``: ``n_inputs`` at most its test split (:func:`fit_inputs`)."""
    return dataclasses.replace(cfg, n_inputs=fit_inputs(run, cfg.n_inputs, "score.n_inputs"))


STAGE = Stage("score", ScoreConfig, score_run, scope="run", per_step=True, check=_check, threads=1, device="cpu",
              step_settings=("n_inputs", "seed", "tau", "block_size", "hops", "cosine"),
              summary="positional/symbolic scores of every checkpoint, purity, frequency use (Table 1)")
