"""The library API for notebooks: a run directory in a line, its tables as pandas DataFrames.

Example (a tiny run, trained here in a few seconds)::

    >>> import tempfile, possym
    >>> cfg = possym.load_config("number", None, model__n_layers=1, model__d_model=16, model__d_mlp=32,
    ...     task__n_train=500, task__n_val=100, task__n_test=100, train__steps=4, train__eval_every=2,
    ...     train__checkpoint_every=2, train__eval_size=50, train__warmup_steps=1, train__threads=1)
    >>> run = possym.train_model(cfg, out=tempfile.mkdtemp() + "/run", progress=False)
    >>> run.checkpoint_steps(), run.step("final")
    ([0, 2, 4], 4)
    >>> list(run.metrics().columns)
    ['step', 'hop', 'accuracy', 'loss']
    >>> scores = run.scores(n_inputs=4, figures=False, frequency=False)
    >>> scores.query("step == 4 and layer == 0")[["head", "s_pos", "s_sym"]].shape
    (1, 3)
    >>> possym.load_model(run.path / "checkpoints" / "step_000004.safetensors").cfg.n_layers
    1

Names follow the paper: :meth:`Run.scores` (s_POS, s_SYM per head; :meth:`Run.head_detectors`, TransformerLens's
previous-token, duplicate-token and induction scores beside them), :meth:`Run.purity` (pure heads
at threshold γ), :meth:`Run.table1` (frequency IDs), :meth:`Run.length_curve` (Fig. 5B).
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from safetensors import SafetensorError, safe_open

from possym.config import RunConfig, config_from_saved, load_config
from possym.devices import resolve_device, torch_threads
from possym.errors import OptionError, PossymError, RunError, named_options
from possym.records import GAMMA, LengthRecord, PurityRecord, ScoreRecord, Table1Record, frame, points_at
from possym.runs import RunDir, StepSpec, ensure_run
from possym.settings import from_dict

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.figure import Figure
    from transformer_lens import HookedTransformer
    from transformer_lens.model_bridge import TransformerBridge

    from possym.experiment import StageRun
    from possym.model.gptj import GPTJ
    from possym.scores.swaps import HeadScores

__all__ = ["Run", "from_transformer_lens", "head_scores", "load_config", "load_model", "open_run",
           "to_hooked_transformer", "to_transformer_bridge", "train_model", "train_models"]


@named_options
def load_model(checkpoint: str | Path, dtype: torch.dtype | str = torch.float32, device: str | None = None) -> GPTJ:
    """A checkpoint file on its own: the config written into its safetensors header builds the model,
    as ``dtype`` (a torch floating dtype or its name, :func:`possym.runs.model_dtype`), on ``device`` (default
    the CPU; ``"auto"``: the best here).

    >>> load_model("runs/demo/number/checkpoints/step_006750.safetensors")   # doctest: +SKIP
    """
    from possym.model.gptj import GPTJ
    from possym.runs import CKPT_DIR, CONFIG, model_dtype
    from possym.tasks import task_vocab

    if not isinstance(checkpoint, str | os.PathLike):
        raise PossymError(f"load_model takes a checkpoint file's path (str or pathlib.Path), not "
                          f"{type(checkpoint).__name__} {checkpoint!r:.60}")
    dtype = model_dtype(dtype)
    path = Path(checkpoint)
    if path.is_dir():
        inside = sorted(path.glob("step_*.safetensors"))
        run = path.parent if path.name == CKPT_DIR and (path.parent / CONFIG).is_file() else path
        if inside:
            raise RunError(f"{path} is a directory; give one of its checkpoint files (e.g. {inside[-1]}), or open "
                           f"its run with possym.open_run({str(run)!r}).model(step)")
        if (path / CONFIG).is_file():
            raise RunError(f"{path} is a directory; give a checkpoint file ({path / CKPT_DIR}/step_N.safetensors "
                           f"in a run), or open a run with possym.open_run({str(path)!r}).model(step)")
        raise RunError(f"{path} is a directory and holds no checkpoint; give a checkpoint file "
                       "(RUN/checkpoints/step_N.safetensors)")
    if not path.is_file():
        raise RunError(f"checkpoint {path} does not exist")
    try:
        with safe_open(str(path), framework="pt") as f:
            header = f.metadata() or {}
            state = {k: f.get_tensor(k) for k in f.keys()}  # noqa: SIM118 (safe_open is not a mapping)
    except (SafetensorError, OSError, RuntimeError) as exc:
        raise RunError(f"checkpoint {path} is truncated or corrupt ({exc}); take another step's, or retrain") from exc
    if "config" not in header:
        raise RunError(f"{path} carries no config in its header; open its run directory instead")
    cfg = config_from_saved(json.loads(header["config"]))
    bad = [k for k, t in state.items() if t.is_floating_point() and not bool(torch.isfinite(t).all())]
    if bad:
        raise RunError(f"{path} holds non-finite weights ({bad[0]}): its run diverged; take an earlier checkpoint")
    model = GPTJ(dataclasses.replace(cfg.model, d_vocab=len(task_vocab(cfg.task))))
    model.load_state_dict(state)
    return model.to(device=None if device is None else resolve_device(device), dtype=dtype).eval()


def _check_train_args(config: Any, out: Any, monitor: Any, progress: Any) -> None:
    if not isinstance(config, RunConfig):
        raise PossymError(f"config must be a RunConfig (possym.load_config(task, preset, overrides)), not "
                          f"{type(config).__name__}")
    if not isinstance(out, str | Path):
        raise PossymError(f"out must be a directory path (str or Path), not {type(out).__name__}")
    if not isinstance(monitor, bool) or not isinstance(progress, bool):
        raise PossymError(f"monitor={monitor!r} and progress={progress!r} must be True or False")


@named_options
def train_model(config: RunConfig, out: str | Path, monitor: bool = True, progress: bool = True) -> Run:
    """Train a new run into ``out`` (or finish an interrupted one with the same config); returns it.

    Not ``possym.train``: that name is the training package (:mod:`possym.train`), which an import of
    its loop binds on ``possym`` whatever the API says.
    """
    from possym.experiment import run_stage
    from possym.stages.training import CONTINUE, TrainStageConfig
    from possym.train.tracking import require_tracker

    # The run's threads hold from before it records its environment (meta.json tells the truth) to the
    # end of training, and the caller's count comes back after.
    _check_train_args(config, out, monitor, progress)
    resolve_device(config.train.device)  # a device this machine lacks is refused before the run directory is made
    require_tracker(config.train.log)  # and so is a tracker whose package is missing
    with torch_threads(config.train.threads):
        run = ensure_run(out, config, argv=["possym.train", str(out)])
        # Through the run's memo, as `possym train --out RUN` trains: an experiment over it later trains nothing.
        run_stage(run, CONTINUE, TrainStageConfig(monitor=monitor, progress=progress))
    return Run(run)


@named_options
def train_models(configs: list[RunConfig], outs: list[str | Path], monitor: bool = True, progress: bool = True,
                 memory_budget_mb: float | None = None, group: bool = True) -> list[Run]:
    """Train new runs into ``outs`` (or finish interrupted ones with the same configs), those that can
    share a step as one group (:func:`possym.stages.training.train_runs`, up to ``memory_budget_mb`` a
    group; default :data:`~possym.stages.training.DEFAULT_MEMORY_BUDGET_MB`); returns them in order.
    Each member is the run it would have been alone, in its own run directory.

    >>> cfgs = [possym.load_config("number", "quick", [f"seeds.init={s}"]) for s in (0, 1, 2)]   # doctest: +SKIP
    >>> runs = possym.train_models(cfgs, [f"runs/seeds/seed{s}" for s in (0, 1, 2)])          # doctest: +SKIP
    """
    from possym.experiment import run_stage
    from possym.stages.training import DEFAULT_MEMORY_BUDGET_MB, STAGE, TrainStageConfig
    from possym.train.tracking import require_tracker

    if isinstance(configs, RunConfig) or isinstance(outs, str | Path):
        raise PossymError("train_models takes a list of configs and a list of output directories; for one run "
                          "use train_model(config, out)")
    for config, out in zip(configs, outs, strict=False):
        _check_train_args(config, out, monitor, progress)
        resolve_device(config.train.device)
        require_tracker(config.train.log)
    if len(configs) != len(outs):
        raise PossymError(f"train_models takes one output directory per config ({len(configs)} configs, "
                          f"{len(outs)} directories)")
    runs = []
    for config, out in zip(configs, outs, strict=True):
        with torch_threads(config.train.threads):  # meta.json records the threads the run trains with
            runs.append(ensure_run(out, config, argv=["possym.train_models", str(out)]))
    budget = DEFAULT_MEMORY_BUDGET_MB if memory_budget_mb is None else memory_budget_mb
    # Through each run's memo, as an experiment trains them: an experiment over these runs later trains nothing.
    run_stage(runs, STAGE, TrainStageConfig(monitor=monitor, progress=progress, group=group,
                                            memory_budget_mb=budget))
    return [Run(r) for r in runs]


@named_options
def open_run(path: str | Path, allow_unfinished: bool = False) -> Run:
    """A run directory made by ``possym train`` (or :func:`train_model`). ``step="final"`` names the end of
    training: on a run that has not finished it is refused, naming the last step, unless ``allow_unfinished``."""
    return Run(RunDir.open(path, allow_unfinished=allow_unfinished))


def head_scores(model: Any, inputs: Any, *, tokenizer: Any = None, progress: bool = True,
                **options: Any) -> HeadScores:
    """s_POS, s_SYM, entropy and TransformerLens's head detectors of every head of ``model`` on ``inputs``, with the
    exact swap engine: one result type for every model kind (:class:`possym.scores.swaps.HeadScores`), whose
    ``.frame()`` is a DataFrame of every head (``layer, head, kv_head, s_pos, s_sym``, their sds and 95%
    intervals, the detectors) and ``.records()`` its rows, the key-head count read from the model.

    ``model``: a possym GPT-J, a Hugging Face RoPE model, a rotary TransformerLens ``HookedTransformer``, a
    ``TransformerBridge``, or any of them in an nnsight wrapper (scored as the model it wraps). ``inputs``: a
    LongTensor [batch, pos] of token ids (the last token queries, or ``query=``; blocks of ``block_size`` tile
    the keys before it); a list of strings, as TransformerLens's ``detect_head`` takes them (``tokenizer=``, or
    the model's own: a TransformerLens model's, an nnsight ``LanguageModel``'s); a list of
    :class:`~possym.heads.prompts.HeadPrompt` or :class:`~possym.heads.layout.EncodedPrompt` (blocks where they
    say). Options: ``layers``, ``tau``, ``batch_size``, ``block_size``, ``n_blocks``, ``query`` (see
    :mod:`possym.heads.dispatch`). ``progress`` shows a bar over the inputs while it scores. An empty batch,
    or a token id outside the model's vocabulary, raises :class:`~possym.errors.PossymError`.

    >>> possym.head_scores(run.model(), tokens).frame().query("s_pos > 0.9")      # doctest: +SKIP
    >>> possym.head_scores(bridge, ["3 4 c2 b1 ...", ...]).frame()                 # doctest: +SKIP
    """
    from possym.heads.dispatch import n_inputs, score_any

    with _bar(progress, n_inputs(inputs) or 0, "head_scores", "input") as bar:
        return score_any(model, inputs, tokenizer=tokenizer, progress=bar.update, **options)


def to_hooked_transformer(model: GPTJ, **options: Any) -> HookedTransformer:
    """A possym GPT-J as a TransformerLens ``HookedTransformer`` with exactly its weights and RoPE
    (needs ``pip install "possym[tl3]"``, transformer-lens 3.x; options: ``n_ctx``, ``tokenizer``; see
    :mod:`possym.model.tl`).

    >>> ht = possym.to_hooked_transformer(run.model())              # doctest: +SKIP
    >>> logits, cache = ht.run_with_cache(tokens)                    # doctest: +SKIP
    """
    from possym.model.tl import to_hooked_transformer as convert

    return convert(model, **options)


def to_transformer_bridge(model: GPTJ, **options: Any) -> TransformerBridge:
    """A possym GPT-J as a TransformerLens ``TransformerBridge`` (transformer-lens 3.9 or 4.x) over its exact
    Hugging Face export (option: ``tokenizer``; see :func:`possym.model.tl.to_transformer_bridge`).

    >>> bridge = possym.to_transformer_bridge(run.model())          # doctest: +SKIP
    >>> logits, cache = bridge.run_with_cache(tokens)                # doctest: +SKIP
    """
    from possym.model.tl import to_transformer_bridge as convert

    return convert(model, **options)


def from_transformer_lens(model: Any) -> GPTJ:
    """The way back from TransformerLens: a possym GPT-J computing what ``model`` computes, a
    ``HookedTransformer`` (3.x) or a ``TransformerBridge`` (3.9 or 4.x) of a possym GPT-J or of a Hugging Face
    GPT-J, with its weights as they are now (edited or fine-tuned there); its logits are checked against
    ``model``'s before it is returned (:func:`possym.model.tl.from_transformer_lens`).

    >>> bridge = run.transformer_bridge()                           # doctest: +SKIP
    >>> model = possym.from_transformer_lens(bridge)                 # doctest: +SKIP
    """
    from possym.model.tl import from_transformer_lens as convert

    return convert(model)


class Run:
    """A run directory with its analyses as DataFrames; each is computed once and cached on disk."""

    def __init__(self, run: RunDir) -> None:
        self.dir = run

    def __repr__(self) -> str:
        try:
            steps: int | str = len(self.checkpoint_steps())
            state = self.dir.status()
        except RunError as exc:  # a repr must not raise; reading the run says why
            steps, state = "?", f"damaged: {str(exc)[:80]}"
        return f"Run({str(self.path)!r}, task={self.config.task.name!r}, checkpoints={steps}, {state})"

    def status(self) -> str:
        """How the run stands: ``finished``, ``unfinished at step N of M``, ``diverged at step N (...)``, with its
        non-finite loss where it trained on past one (:meth:`possym.runs.RunDir.status`)."""
        return self.dir.status()

    @property
    def history(self) -> list[dict[str, Any]]:
        """The changes asked of the run since it was made (``train.steps`` extended by :meth:`train_on`)."""
        return self.dir.history

    @named_options
    def train_on(self, steps: int, monitor: bool = True, progress: bool = True) -> Run:
        """Train the run on to ``steps`` optimiser steps, as ``possym train --resume RUN train.steps=N`` does
        (:meth:`possym.runs.RunDir.train_on`: the change goes into the run's history; from the step its
        resumable state holds, the learning rate follows the schedule of the new total); returns the run."""
        from possym.experiment import run_stage
        from possym.stages.training import CONTINUE, TrainStageConfig

        _check_train_args(self.config, self.path, monitor, progress)
        run = self.dir.train_on(steps, argv=["possym.Run.train_on", str(self.path), str(steps)])
        with torch_threads(run.config.train.threads):
            run_stage(run, CONTINUE, TrainStageConfig(monitor=monitor, progress=progress), redo=True)
        self.dir = RunDir.open(self.path, allow_unfinished=self.dir.allow_unfinished)
        return self

    @property
    def finished(self) -> bool:
        """Whether training ended (the final test evaluation is logged)."""
        return self.dir.finished

    @property
    def path(self) -> Path:
        return self.dir.path

    @property
    def config(self) -> RunConfig:
        return self.dir.config

    def checkpoint_steps(self) -> list[int]:
        return self.dir.checkpoint_steps()

    @named_options
    def step(self, step: StepSpec = "final") -> int:
        """The checkpoint step ``step`` names: a number, ``"best"`` (earliest at the maximum validation
        accuracy) or ``"final"``."""
        return self.dir.resolve_step(step)

    @named_options
    def model(self, step: StepSpec = "final", dtype: torch.dtype | str = torch.float32,
              device: str | None = None) -> GPTJ:
        """The model at ``step``, in eval mode, as ``dtype`` (a torch floating dtype or its name), on ``device``
        (default the CPU; ``"auto"``: the best here). ``step=None`` names the last checkpoint, which on a run that
        has not finished is refused, as ``"final"`` is, unless the run was opened with ``allow_unfinished``."""
        return self.dir.load_model(step, dtype, None if device is None else resolve_device(device))

    def hooked_transformer(self, step: StepSpec = "final", dtype: torch.dtype = torch.float32,
                           device: str | None = None) -> HookedTransformer:
        """The model at ``step`` as a TransformerLens ``HookedTransformer`` (:func:`to_hooked_transformer`;
        transformer-lens 3.x), with the task's vocabulary as its tokenizer, so TransformerLens's own tools
        read the task's text: ``to_str_tokens``, ``run_with_cache("3 4 c2 ...")``, ``detect_head``."""
        return to_hooked_transformer(self.model(step, dtype, device), tokenizer=self._tokenizer())

    def transformer_bridge(self, step: StepSpec = "final", dtype: torch.dtype = torch.float32,
                           device: str | None = None) -> TransformerBridge:
        """The model at ``step`` as a TransformerLens ``TransformerBridge`` (:func:`to_transformer_bridge`;
        transformer-lens 3.9 or 4.x), with the task's vocabulary as its tokenizer, as :meth:`hooked_transformer`:
        ``detect_head(run.transformer_bridge(), texts, "previous_token_head")`` works on 4.x."""
        return to_transformer_bridge(self.model(step, dtype, device), tokenizer=self._tokenizer())

    def _tokenizer(self) -> Any:
        """The task's vocabulary as a Hugging Face tokenizer (ids are the task's; words split on spaces)."""
        from possym.model.hf import hf_tokenizer
        from possym.tasks import PAD, task_vocab

        return hf_tokenizer(task_vocab(self.config.task).tokens, PAD)

    def metrics(self) -> pd.DataFrame:
        """Validation accuracy over training, long form: ``step, hop, accuracy, loss``; ``hop`` 0 is the
        accuracy over all hops (the one ``best`` maximises), ``hop`` h the h-hop inputs alone."""
        import pandas as pd

        rows = []
        for m in self.dir.metrics_log().evals:
            rows.append({"step": m.step, "hop": 0, "accuracy": m.accuracy, "loss": m.loss})
            rows += [{"step": m.step, "hop": h, "accuracy": a, "loss": None} for h, a in m.hops.items()]
        return pd.DataFrame(rows, columns=["step", "hop", "accuracy", "loss"])

    def scores(self, progress: bool = True, **settings: Any) -> pd.DataFrame:
        """s_POS, s_SYM, entropy of every head at every checkpoint (``scores.csv``), scored by the score stage
        with these settings (:class:`possym.stages.score.ScoreConfig`, its defaults those of ``possym score``,
        figures included) at the checkpoints the run's memo lacks (:func:`possym.experiment.run_stage`), the
        others read back; ``progress`` shows a bar over the checkpoints while it scores."""
        from possym.experiment import run_stage
        from possym.stages.score import STAGE, ScoreConfig

        cfg: ScoreConfig = from_dict(STAGE.config, settings, "score", error=OptionError)
        wanted = set(STAGE.steps_of(self.dir, cfg))
        with _bar(progress, len(wanted), "score", "ckpt") as bar:
            run_stage(self.dir, STAGE, cfg, progress=lambda _step: bar.update(1))
        return frame([r for r in self.dir.read("scores", ScoreRecord) if r.step in wanted], ScoreRecord)

    @named_options
    def head_detectors(self, step: StepSpec = "final", n_inputs: int = 100, seed: int = 0, *,
                       exclude_bos: bool = False, exclude_current_token: bool = False) -> pd.DataFrame:
        """TransformerLens's previous-token, duplicate-token and induction scores of every head at ``step``
        (:mod:`possym.heads.detectors`), each the mean over the ``n_inputs`` test inputs :meth:`scores`
        scores with this ``seed``; ``exclude_bos`` and ``exclude_current_token`` as TransformerLens's. Columns
        ``step, layer, head`` and :data:`~possym.heads.detectors.HEAD_NAMES`, so that
        ``run.scores().merge(run.head_detectors(), on=["step", "layer", "head"])`` puts them beside
        s_POS and s_SYM. Computed each call (one forward pass), not written to the run.
        """
        import pandas as pd

        from possym.heads.detectors import HEAD_NAMES, hooked_detector_scores
        from possym.scores.checkpoints import score_inputs

        for name, value in (("n_inputs", n_inputs), ("seed", seed)):
            if isinstance(value, bool) or not isinstance(value, int) or value < (1 if name == "n_inputs" else 0):
                raise PossymError(f"{name}={value!r} must be a whole number >= {1 if name == 'n_inputs' else 0}")
        at = self.step(step)
        model = self.model(at)
        tokens = torch.as_tensor(score_inputs(self.config.task, self.config.seeds.data, n_inputs, seed).tokens)
        scores = hooked_detector_scores(model, tokens, exclude_bos=exclude_bos,
                                        exclude_current_token=exclude_current_token).mean(0)  # [layer, head, detector]
        rows = [{"step": at, "layer": layer, "head": head, **dict(zip(HEAD_NAMES, scores[layer, head].tolist(),
                                                                       strict=True))}
                for layer in range(scores.shape[0]) for head in range(scores.shape[1])]
        return pd.DataFrame(rows, columns=["step", "layer", "head", *HEAD_NAMES])

    def purity(self, gamma: float = GAMMA, **settings: Any) -> pd.DataFrame:
        """Per head, its first passage to purity at ``gamma`` (0.1 or 0.05: ``purity.csv``); scores first if needed."""
        self.scores(**settings)
        every = self.dir.read("purity", PurityRecord)
        rows = [r for r in every if r.gamma == gamma]
        if not rows:
            raise PossymError(f"purity.csv has no rows at gamma={gamma}; it holds {sorted({r.gamma for r in every})}")
        return frame(rows, PurityRecord)

    def table1(self, **settings: Any) -> pd.DataFrame:
        """Table 1: each head's weighted mean frequency ID at the table step (``table1.csv``); scores first
        if needed."""
        self.scores(**settings)
        return frame(self.dir.read("table1", Table1Record), Table1Record)

    def plot_scores(self, query: str = "last", **settings: Any) -> Figure:
        """Fig. 6 of this run: s_POS, s_SYM and normalised entropy of every head over training (scores first
        if needed, with ``settings`` as :meth:`scores`), the best step dashed."""
        from possym.report.score_plots import fig6_layer_scores

        scores = self.scores(**settings)
        name = self.config.task.name
        return fig6_layer_scores(scores, best_step=self.dir.best(), query=query,
                                 title=f"{name} task: s_POS, s_SYM and entropy per layer")

    def plot_length_curve(self, grid: tuple[int, ...] | None = None, step: StepSpec = "final", *,
                          curve: pd.DataFrame | None = None, **settings: Any) -> Figure:
        """Fig. 5B of this run: accuracy against extra tokens K, pooled and per hop count, with the paper's
        curve dashed. ``curve``: a curve :meth:`length_curve` returned, drawn as it is (nothing is measured);
        else the curve at ``grid``, ``step`` and ``settings``, measured first if needed, as :meth:`length_curve`.

        >>> curve = run.length_curve(grid=(0, 100, 1000), step="best")     # doctest: +SKIP
        >>> run.plot_length_curve(curve=curve)                              # doctest: +SKIP
        """
        from possym.paper import paper_numbers
        from possym.report.length_plots import plot_length_curves

        if curve is None:
            curve = self.length_curve(grid, step, **settings)
        elif grid is not None or step != "final" or settings:
            raise PossymError("plot_length_curve takes a measured curve (curve=run.length_curve(...)) or the "
                              "settings to measure one (grid, step, ...), not both")
        return plot_length_curves({self.config.task.name: curve}, paper_numbers()["fig5b_length_generalisation"])

    def length_curve(self, grid: tuple[int, ...] | None = None, step: StepSpec = "final", progress: bool = True,
                     **settings: Any) -> pd.DataFrame:
        """Accuracy with K extra tokens (Fig. 5B) at checkpoint ``step``, with Wilson and per-prefix
        intervals (``lengthgen.csv``): measured by the lengthgen stage once per settings and step (the run's
        memo, :func:`possym.experiment.run_stage`), then read back; ``progress`` shows a bar over the inputs
        while it measures."""
        from possym.evaluate.lengthgen import LengthGenConfig
        from possym.experiment import run_stage
        from possym.stages.lengthgen import STAGE, LengthStageConfig

        curve = from_dict(LengthGenConfig, settings if grid is None else {"grid": grid, **settings}, "lengthgen",
                          error=OptionError)
        at = self.step(step)
        with _bar(progress, curve.windows(self.config.task), "lengthgen", "input") as bar:
            run_stage(self.dir, STAGE, LengthStageConfig(curve=curve, steps=(at,)), progress=bar.update)
        return frame(points_at(self.dir.read("lengthgen", LengthRecord), at), LengthRecord)


    def discrepancy(self, out: str | Path | None = None, *, replot: bool = False, redo: bool = False,
                    log: Any = None, **settings: Any) -> StageRun:
        """The discrepancy of the trained heads (top-minus-second attention score against extra length, Theorem
        3.2 on the trained model): measured by the discrepancy stage with these settings
        (:class:`possym.stages.theory.DiscrepancyConfig`) through the run's memo into RUN/theory, read back when
        it has them done (``redo``: measured again); ``replot``: the summary and figure drawn again from the
        tables there, under the run's lock, where the memo has them measured with these settings; ``out``: a
        directory that gets a copy of the tables and the figure. Returns what :func:`possym.experiment.run_stage`
        says, its ``result`` the tables (:class:`~possym.stages.theory.DiscrepancyResult`) in every case;
        ``log(line)`` gets a line per file written."""
        import shutil

        from possym.experiment import StageRun, run_stage, stage_done
        from possym.locks import writer_lock
        from possym.stages.registry import get_stage
        from possym.stages.theory import read_discrepancy, replot_discrepancy

        stage = get_stage("discrepancy")
        cfg: Any = from_dict(stage.config, settings, "discrepancy", error=OptionError)
        say = log or (lambda _line: None)
        if replot:
            if not stage_done(self.dir, stage, cfg):
                raise PossymError(f"replot: {self.path} has no discrepancy measured with these settings; measure it "
                                  "first (without replot)")
            with self.dir.writing():
                done = StageRun(stage.name, True, result=replot_discrepancy(self.dir, say))
        else:
            done = run_stage(self.dir, stage, cfg, redo=redo)
            if not done.ran:
                done = dataclasses.replace(done, result=read_discrepancy(self.dir))
        if out is not None:
            where, files = Path(out), sorted(done.result.out.glob("discrepancy_*"))
            with writer_lock(where, "output directory"):
                for file in files:
                    shutil.copyfile(file, where / file.name)
                    say(f"  copied {file.name} into {where}")
            done = dataclasses.replace(done, result=dataclasses.replace(done.result, out=where))
        return done


def _bar(show: bool, total: int, desc: str, unit: str):
    """A progress bar that clears itself when done (a notebook cell keeps only the table), or none."""
    from tqdm import tqdm

    if not isinstance(show, bool):
        raise PossymError(f"progress={show!r} must be True or False")
    return tqdm(total=total, desc=desc, unit=unit, disable=not show, leave=False, dynamic_ncols=True)
