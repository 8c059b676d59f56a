"""The paper's 1-hop LLM experiment (Section 3.7, Appendix H) against one provider and model.

Writes into ``out``:
  answers.sqlite   every request and reply (the store; a rerun sends only what it lacks)
  results.csv      one row per (task, length, run): accuracy, n, n_correct, n_invalid, n_failed
  table.csv/.md    the Table 3 pivot: mean and sd over runs
  screening.json   the paper's two screens
  llm_accuracy.png accuracy against length, with the paper's Table 3 drawn beside it (``plot=True``)
  config.json      the settings and the environment (never an API key)

Example:
    >>> provider = make_provider("hf", "SmolLM2-135M-Instruct", GenerationSettings())        # doctest: +SKIP
    >>> result = llm_experiment(provider, Path("llm"), LLMGridConfig(n=10), load_templates(None))  # doctest: +SKIP
    >>> result.screening.verdict()                                                             # doctest: +SKIP
"""

from __future__ import annotations

import io
import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from possym.llm.results import pivot, screen, summarise, table3_markdown
from possym.llm.run import LLMGridConfig, RunnerConfig, run_llm_grid
from possym.llm.store import AnswerStore
from possym.runs import atomic_write_bytes, atomic_write_text, csv_text, environment


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

    cells = summarise(result.records, provider=provider.name, model=provider.model)
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
