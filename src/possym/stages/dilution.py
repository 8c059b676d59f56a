"""Is a letter model's multi-hop loss at length softmax dilution? Three tables of one run at one checkpoint
(Sec. 3.6), in RUN/dilution/:

- ``attention.csv``: :func:`possym.evaluate.window_attention.hop_attention`, each hop's attention mass on
  the key it should read against the mass on the extra window, per (K, hop count, layer, head, hop);
- ``knockout.csv``: :func:`possym.evaluate.window_interventions.knockout_accuracy`, accuracy by hop count
  with the extra window knocked out one layer at a time (and in every layer at once);
- ``sharpen.csv``: :func:`possym.evaluate.window_interventions.sharpened_accuracy`, accuracy by hop count
  with the logits of the symbolic layers (and of every layer) times β, for each β of ``betas``;
- ``settings.json``: the settings, the checkpoint and the layers that were sharpened, written by the executor
  (:attr:`~possym.stages.registry.Stage.record`; whether the stage is done is the run's memo's to say,
  :func:`possym.experiment.run_stage`).

Reading them: dilution predicts that ``next_hop`` falls as ``extra_mass`` grows, that knocking the window
out restores the K = 0 accuracy, and that a β near 1.3–1.5 recovers it. Mass on the window that stays
small while accuracy falls, or a knock-out that does not restore it, is a mechanism, not logit scale.

The symbolic layers are those whose scores at the checkpoint (``scores.csv``, the "last" query, head 0;
the nearest scored step) lean symbolic, s_SYM > s_POS; a run with no scores sharpens every layer only.
The stage measures letter runs (``tasks``); on a run of another task it writes nothing and says so in
its result. Defaults are small (64 windows per point, 4 prefixes: minutes on a CPU); the paper-scale
reading is ``n: 500, n_prefixes: 8``.

Example:
    >>> from possym.experiment import run_stage                                     # doctest: +SKIP
    >>> run = RunDir.open("runs/paper3/runs/letter-s0")                             # doctest: +SKIP
    >>> run_stage(run, "dilution", STAGE.from_overrides(["dilution.n=500", "dilution.n_prefixes=8"]))  # doctest: +SKIP
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from possym.config import ConfigError
from possym.evaluate.lengthgen import LengthGenConfig
from possym.evaluate.window_attention import hop_attention
from possym.evaluate.window_interventions import knockout_accuracy, sharpened_accuracy
from possym.records import ScoreRecord
from possym.runs import RunDir, StepSpec
from possym.stages.registry import Execution, Stage, StageContext

SUBDIR = "dilution"
LAYER_SETS = ("symbolic", "all", "each", "not_symbolic")  # the named sets of layers sharpened
TABLES = ("attention", "knockout", "sharpen")  # run artifacts dilution_{name}, written through their records


@dataclass(frozen=True)
class DilutionConfig(Execution):
    """Settings of the dilution stage (module docstring).

    curve: the windows, the length protocol's (:class:`~possym.evaluate.lengthgen.LengthGenConfig`: grid, n,
    n_prefixes, seed, extra_tokens, token_budget, ...; flat in the words, ``dilution.n=500``); hops: the hop
    counts measured; betas: the sharpening grid;
    sharpen: the layer sets sharpened, each "symbolic" (by the run's scores), "all", layers "2,3", "each" (every
    layer alone, sets "L0", "L1", ...) or "not_symbolic" (the layers whose scores do not lean symbolic; where
    every layer leans symbolic, the half of them that leans least, and dilution.json says so);
    step: the checkpoint ("best", "final" or a number); tasks: the tasks measured (others are skipped).
    """

    curve: LengthGenConfig = field(default_factory=lambda: LengthGenConfig(grid=(0, 100, 300, 800, 2000), n=64,
                                                                           n_prefixes=4))
    hops: tuple[int, ...] = (3, 4)
    betas: tuple[float, ...] = (1.0, 1.2, 1.3, 1.4, 1.5, 2.0)
    sharpen: tuple[str, ...] = ("symbolic", "all")
    step: StepSpec = "best"
    tasks: tuple[str, ...] = ("letter",)

    def __post_init__(self) -> None:
        if not self.hops or any(h < 1 for h in self.hops):
            raise ConfigError(f"dilution hops={list(self.hops)}: give at least one hop count >= 1")
        if not self.betas or any(not b > 0 for b in self.betas):
            raise ConfigError(f"dilution betas={list(self.betas)}: give at least one β, each > 0")
        for entry in self.sharpen:
            if entry not in LAYER_SETS and not _is_layer_list(entry):
                raise ConfigError(f"dilution sharpen: {entry!r}; allowed: {', '.join(repr(x) for x in LAYER_SETS)} "
                                  "or layers such as '2,3'")
        if not (isinstance(self.step, int) or self.step in ("best", "final")):
            raise ConfigError(f"dilution step={self.step!r}; allowed: a checkpoint step number, 'best', 'final'")


def _is_layer_list(text: str) -> bool:
    return bool(text) and all(part.strip().isdigit() for part in text.split(","))


@dataclass(frozen=True)
class DilutionResult:
    """What the stage did on one run: the checkpoint, the layer sets sharpened, the files (empty when skipped)."""

    run: str
    step: int | None
    sharpened: dict[str, tuple[int, ...]]
    files: tuple[str, ...]
    skipped: str = ""


def symbolic_lean(run: RunDir, step: int) -> dict[int, float] | None:
    """Layer -> s_SYM − s_POS (the "last" query, head 0) at the scored step nearest ``step``; None if the run
    has no scores."""
    if not run.artifact("scores").is_file():
        return None
    rows = [r for r in run.read("scores", ScoreRecord) if r.query == "last" and r.head == 0]
    if not rows:
        return None
    nearest = min({r.step for r in rows}, key=lambda s: (abs(s - step), s))
    return {r.layer: r.s_sym - r.s_pos for r in rows if r.step == nearest}


def symbolic_layers(run: RunDir, step: int) -> tuple[int, ...] | None:
    """The layers whose scores lean symbolic (s_SYM > s_POS; the "last" query, head 0) at the scored step
    nearest ``step``; None if the run has no scores."""
    lean = symbolic_lean(run, step)
    return None if lean is None else tuple(sorted(layer for layer, d in lean.items() if d > 0))


def _layer_sets(run: RunDir, step: int, cfg: DilutionConfig, n_layers: int
                ) -> tuple[dict[str, tuple[int, ...]], dict[str, str]]:
    """The sets to sharpen by name, and why a set is not what its name says (the nearest the run allows)."""
    out: dict[str, tuple[int, ...]] = {}
    reasons: dict[str, str] = {}
    for entry in cfg.sharpen:
        if entry == "all":
            out[entry] = tuple(range(n_layers))
        elif entry == "each":  # the single-layer control
            out.update({f"L{layer}": (layer,) for layer in range(n_layers)})
        elif entry == "symbolic":
            layers = symbolic_layers(run, step)
            if layers:  # no scores, or no symbolic layer: nothing to sharpen under this name
                out[entry] = layers
        elif entry == "not_symbolic":  # the control that leaves the symbolic layers alone
            lean = symbolic_lean(run, step)
            if lean is None:
                continue
            rest = tuple(sorted(layer for layer, d in lean.items() if d <= 0))
            if not rest:
                rest = tuple(sorted(sorted(lean, key=lambda layer: (lean[layer], layer))[: max(1, len(lean) // 2)]))
                reasons[entry] = (f"every layer leans symbolic (s_SYM > s_POS); the {len(rest)} that lean least "
                                  "were sharpened instead")
            out[entry] = rest
        else:
            layers = tuple(sorted({int(x) for x in entry.split(",")}))
            if max(layers) >= n_layers:
                raise ConfigError(f"dilution sharpen {entry!r}: the model has layers 0..{n_layers - 1}")
            out[entry] = layers
    return out, reasons


def dilution_run(ctx: StageContext, cfg: DilutionConfig) -> DilutionResult:
    """The three tables of the run at ``cfg.step`` (module docstring), measured and written."""
    run = ctx.run
    task = run.config.task
    if task.name not in cfg.tasks:
        why = f"task {task.name!r} is not one of {list(cfg.tasks)}"
        return DilutionResult(str(run.path), None, {}, (), skipped=why)
    bad = [h for h in cfg.hops if h not in task.hops]
    if bad:
        raise ConfigError(f"dilution hops {bad}: the run's task has hop counts {list(task.hops)}")
    at = run.resolve_step(cfg.step)
    model = ctx.model(at)
    sets, reasons = _layer_sets(run, at, cfg, model.cfg.n_layers)
    attention = hop_attention(model, task, cfg.curve, cfg.hops)
    knockout = knockout_accuracy(model, task, cfg.curve, cfg.hops, together=True)
    sharpen = pd.concat([sharpened_accuracy(model, task, cfg.curve, cfg.betas, cfg.hops, layers)
                         .assign(set=name) for name, layers in sets.items()], ignore_index=True)
    files = tuple(str(ctx.write_table(f"dilution_{name}", table.assign(step=at)))
                  for name, table in zip(TABLES, (attention, knockout, sharpen), strict=True))
    ctx.record(step=at, sharpened={k: list(v) for k, v in sets.items()}, reasons=reasons)
    return DilutionResult(str(run.path), at, sets, files)


def read_dilution(run: RunDir) -> dict[str, pd.DataFrame]:
    """The tables the stage wrote into ``run``, by name ("attention", "knockout", "sharpen"), as frames of their
    records."""
    missing = [f"{name}.csv" for name in TABLES if not run.artifact(f"dilution_{name}").is_file()]
    if missing:
        raise ConfigError(f"{run.path / SUBDIR}: no {missing}; run the dilution stage first "
                          "(possym.experiment.run_stage(run, 'dilution'))")
    return {name: run.read_table(f"dilution_{name}") for name in TABLES}


STAGE = Stage("dilution", DilutionConfig, dilution_run, scope="run", record=SUBDIR,
              summary="a letter run's hop attention vs the extra window, knock-outs and sharpening by hop count "
                      "(is the multi-hop length loss dilution?)")
