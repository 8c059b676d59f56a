"""The paper's 1-hop LLM experiment (Section 3.7, Appendix H) against one provider and model.

Writes into ``out``:
  answers.sqlite   every request and reply (the store; a rerun sends only what it lacks)
  results.csv      one row per (task, length, run): accuracy, n, n_correct, n_invalid, n_failed
  table.csv/.md    the Table 3 pivot: mean and sd over runs
  screening.json   the paper's two screens
  llm_accuracy.png accuracy against length, with the paper's Table 3 drawn beside it (``plot=True``)
  config.json      the settings and the environment (never an API key)

:func:`run_llm` takes the provider's name, the model and an :class:`LLMConfig` (``possym llm``'s settings,
``llm.KEY=VALUE``); :func:`llm_experiment` takes a provider already made.

Example:
    >>> result = run_llm("hf", "SmolLM2-135M-Instruct", Path("llm"), LLMConfig(n=10))   # doctest: +SKIP
    >>> result.screening.verdict()                                                    # doctest: +SKIP
    >>> LLMConfig().runs, LLMConfig(lengths=(12, 16)).lengths
    (5, (12, 16))
"""

from __future__ import annotations

import io
import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from possym.errors import PossymError
from possym.llm.providers import REASONING_MODES, GenerationSettings, make_provider
from possym.llm.results import cell_results, pivot, screen, table3_markdown
from possym.llm.retry import RetryPolicy
from possym.llm.run import LLMGridConfig, RunnerConfig, run_llm_grid
from possym.llm.store import AnswerStore
from possym.one_hop import PAPER_LENGTHS, PROMPT_TASKS, load_templates
from possym.runs import atomic_write_bytes, atomic_write_text, csv_text, environment


@dataclass(frozen=True)
class LLMConfig:
    """``possym llm``'s settings, ``llm.KEY=VALUE`` (the provider, the model and the output directory are its
    flags: they have no default).

    Which prompts: ``tasks``, ``lengths`` (target-window sizes; default the paper's), ``runs`` (runs 1..runs, run r
    seeded by r), ``n`` prompts per (task, length, run) cell, ``templates`` (a YAML with ``number`` and ``letter``
    templates holding ``{sequence}``; None: the paper's Table 2). What is sent: ``max_tokens``, ``temperature``
    (None sends none), ``reasoning`` (``off`` asks the API to switch it off; ``default`` sends no setting),
    ``reasoning_effort`` (openai), ``base_url`` (required for openai-compatible), ``api_key_env`` (the variable
    holding the key; None: the provider's own). How: ``concurrency`` parallel requests (hf: 1), ``rate`` requests
    per second (None: no limit), ``timeout`` seconds a request, ``max_attempts`` per request, retries included,
    ``backoff`` the first backoff cap in seconds (doubling up to ``max_backoff``). The hf provider: ``batch_size``
    prompts a forward pass, ``gguf_file`` inside a model directory, ``device``, ``device_map`` (``auto``: spread
    over devices through accelerate), ``stop_when_decided`` (end a reply once it holds two words), ``threads``
    (torch CPU threads while it runs; None: the caller's). ``plot``: draw llm_accuracy.png.
    """

    tasks: tuple[str, ...] = PROMPT_TASKS
    lengths: tuple[int, ...] = PAPER_LENGTHS
    runs: int = 5
    n: int = 100
    templates: Path | None = None
    max_tokens: int = 16
    temperature: float | None = 0.0
    reasoning: str = "off"
    reasoning_effort: str | None = None
    base_url: str | None = None
    api_key_env: str | None = None
    concurrency: int = 4
    rate: float | None = None
    timeout: float = 60.0
    max_attempts: int = 6
    backoff: float = 1.0
    max_backoff: float = 60.0
    batch_size: int = 8
    gguf_file: str | None = None
    device: str = "auto"
    device_map: str | None = None
    stop_when_decided: bool = False
    threads: int | None = None
    plot: bool = True

    def __post_init__(self) -> None:
        if self.reasoning not in REASONING_MODES:
            raise PossymError(f"llm.reasoning={self.reasoning!r}; allowed: {REASONING_MODES}")
        if self.threads is not None and self.threads < 1:
            raise PossymError(f"llm.threads={self.threads} must be >= 1 (or null: the caller's)")
        self.grid()  # its own checks: tasks, lengths, runs, n
        self.runner()

    def grid(self) -> LLMGridConfig:
        return LLMGridConfig(tasks=tuple(self.tasks), lengths=tuple(self.lengths), runs=self.runs, n=self.n)

    def runner(self) -> RunnerConfig:
        return RunnerConfig(concurrency=self.concurrency, rate=self.rate,
                            retry=RetryPolicy(max_attempts=self.max_attempts, base_delay=self.backoff,
                                              max_delay=self.max_backoff))

    def generation(self) -> GenerationSettings:
        return GenerationSettings(max_tokens=self.max_tokens, temperature=self.temperature, reasoning=self.reasoning,
                                  timeout_s=self.timeout)


@dataclass(frozen=True)
class LlmResult:
    cells: list[Any]  # possym.llm.results cells: one per (task, length, run)
    markdown: str  # the Table 3 pivot
    screening: Any  # possym.llm.results screening: the paper's two screens
    n_sent: int
    n_skipped: int
    seconds: float
    out: Path
    written: list[str] = field(default_factory=list)

    @property
    def n_failed(self) -> int:
        """Requests that failed after all retries (counted, not scored; a rerun retries only those)."""
        return sum(c.n_failed for c in self.cells)


def run_llm(provider: str, model: str, out: Path, cfg: LLMConfig | None = None, *,
            recorded: dict[str, Any] | None = None, on_start: Callable[[Any, int, int], None] | None = None,
            on_advance: Callable[[int], None] | None = None) -> LlmResult:
    """The 1-hop experiment against ``provider``'s ``model`` into ``out``, with :class:`LLMConfig` ``cfg``: the
    provider made (its API key checked before ``out`` or any request exists), the prompts sent, the tables written.
    ``recorded``: more settings for config.json (the command line); ``on_start(provider, total, stored)`` and
    ``on_advance(k)`` report progress. Torch's thread count is set for the call (``threads``) and restored."""
    from possym.devices import torch_threads

    cfg = LLMConfig() if cfg is None else cfg
    with torch_threads(cfg.threads):
        made = make_provider(provider, model, cfg.generation(), base_url=cfg.base_url, api_key_env=cfg.api_key_env,
                             reasoning_effort=cfg.reasoning_effort, batch_size=cfg.batch_size,
                             gguf_file=cfg.gguf_file, device=cfg.device, device_map=cfg.device_map,
                             stop_when_decided=cfg.stop_when_decided)
        templates = str(cfg.templates) if cfg.templates else "possym/data/llm_prompts.yaml (paper Table 2)"
        plain = {k: str(v) if isinstance(v, Path) else v for k, v in asdict(cfg).items()}
        settings = {**(recorded or {}), "base_url": cfg.base_url, "templates": templates, "llm": plain}

        def started(total: int, stored: int) -> None:
            if on_start is not None:
                on_start(made, total, stored)

        return llm_experiment(made, out, cfg.grid(), load_templates(cfg.templates), cfg.runner(), plot=cfg.plot,
                              settings=settings, on_start=started, on_advance=on_advance)


def llm_experiment(provider: Any, out: Path, grid: LLMGridConfig, templates: Any, runner: RunnerConfig | None = None,
                   plot: bool = True, settings: dict[str, Any] | None = None,
                   on_start: Callable[[int, int], None] | None = None,
                   on_advance: Callable[[int], None] | None = None) -> LlmResult:
    """Send every prompt of ``grid`` that ``out``'s store lacks, score the replies, and write the tables.
    ``settings`` are recorded in config.json beside the provider's own parameters and the environment;
    ``on_start(total, stored)`` and ``on_advance(k)`` report progress."""
    from possym.llm.plots import load_paper_table3, plot_accuracy

    runner = runner or RunnerConfig()
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    config = {
        **(settings or {}),
        "provider": provider.name,
        "model": provider.model,
        "params": provider.params(),
        "grid": {**asdict(grid), "run_ids": list(grid.run_ids)},
        "runner": {"concurrency": runner.concurrency, "rate": runner.rate, "retry": asdict(runner.retry)},
        "batch_size": getattr(provider, "batch_size", 1),
        "environment": environment(),
    }
    atomic_write_text(out / "config.json", json.dumps(config, indent=2) + "\n")
    start = time.monotonic()
    with AnswerStore(out / "answers.sqlite") as store:
        result = run_llm_grid(provider, store, grid, templates, runner, on_start=on_start, on_advance=on_advance)
    seconds = time.monotonic() - start

    cells = cell_results(result.records, provider=provider.name, model=provider.model)
    table = pivot(cells)
    screening = screen(cells)
    markdown = table3_markdown(table, title=f"{provider.model} ({provider.name})")
    atomic_write_text(out / "results.csv", csv_text([asdict(c) for c in cells]))
    atomic_write_text(out / "table.csv", csv_text([{"model": provider.model, **asdict(p)} for p in table]))
    atomic_write_text(out / "table.md", markdown)
    atomic_write_text(
        out / "screening.json",
        json.dumps({**asdict(screening), "passes": screening.passes, "verdict": screening.verdict()}, indent=2) + "\n",
    )
    written = ["results.csv", "table.md"]
    if plot:
        fig = plot_accuracy({f"{provider.model} (this run)": table}, load_paper_table3(),
                            title=f"1-hop tasks: {provider.model} vs the paper's Table 3")
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=120)
        atomic_write_bytes(out / "llm_accuracy.png", buf.getvalue())
        written.append("llm_accuracy.png")
    return LlmResult(cells, markdown, screening, result.n_sent, result.n_skipped, seconds, out, written)
