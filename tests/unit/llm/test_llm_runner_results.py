"""The grid runner with an in-process provider, and the Table 3 pivot, screening and plot built on its records."""

from __future__ import annotations

import math
import threading
import zlib

import pytest

from possym.llm.plots import load_paper_table3, plot_accuracy
from possym.llm.results import CellResult, cell_results, pivot, screen, table3_markdown
from possym.llm.retry import RetryPolicy
from possym.llm.run import LLMGridConfig, RunnerConfig, run_llm_grid
from possym.llm.store import AnswerStore
from possym.one_hop import load_templates, one_hop_answer

TEMPLATES = load_templates()


class Transient(Exception):
    pass


class OracleProvider:
    """Answers with the oracle; ``wrong_on`` answers wrongly, ``fail`` maps a prompt to failures to raise first."""

    name = "oracle"
    model = "oracle-1"

    def __init__(self, batch_size: int = 1, fail=None, permanent=lambda prompt: False, wrong_on=lambda p: False):
        self.batch_size = batch_size
        self.fail = fail or (lambda prompt, attempt: None)
        self.permanent = permanent
        self.wrong_on = wrong_on
        self.calls: list[list[str]] = []
        self.attempts: dict[str, int] = {}
        self._lock = threading.Lock()

    def params(self):
        return {"max_tokens": 16, "secret_free": True}

    def complete(self, prompts):
        with self._lock:
            self.calls.append(list(prompts))
        out = []
        for p in prompts:
            with self._lock:
                self.attempts[p] = self.attempts.get(p, 0) + 1
                attempt = self.attempts[p]
            if self.permanent(p):
                raise ValueError("permanent failure, key sk-SECRET-123 leaked in message")
            exc = self.fail(p, attempt)
            if exc is not None:
                raise exc
            sequence = p.rsplit('Input: "', 1)[1].split('"', 1)[0]
            task = "number" if sequence.split()[-1].isdigit() else "letter"
            answer = one_hop_answer(task, sequence)
            out.append("wrong" if self.wrong_on(p) else f' "{answer}"\n')
        return out

    def is_retryable(self, exc):
        return isinstance(exc, Transient)

    def retry_after(self, exc):
        return None

    def secrets(self):
        return ("sk-SECRET-123",)


def _window_length(prompt: str) -> int:
    return len(prompt.rsplit('Input: "', 1)[1].split('"', 1)[0].split()) - 1


FAST = RunnerConfig(concurrency=3, retry=RetryPolicy(max_attempts=4, base_delay=0.0, max_delay=0.0))
GRID = LLMGridConfig(lengths=(12, 24), runs=2, n=3)


def test_every_prompt_is_answered_scored_and_stored_once(tmp_path):
    provider = OracleProvider(batch_size=2)
    with AnswerStore(tmp_path / "a.sqlite") as store:
        result = run_llm_grid(provider, store, GRID, TEMPLATES, FAST)
        assert store.count("ok") == GRID.size == 24
    assert result.n_sent == 24 and result.n_skipped == 0
    assert all(r.correct and r.single_token for r in result.records)
    # Batches never mix cells, and respect the batch size.
    assert all(len(batch) <= 2 for batch in provider.calls)
    cells = cell_results(result.records, provider="oracle", model="oracle-1")
    assert len(cells) == 2 * 2 * 2 and all(c.accuracy == 1.0 and c.n == 3 and c.n_failed == 0 for c in cells)


def test_a_rerun_sends_nothing_and_a_larger_grid_sends_only_the_new_prompts(tmp_path):
    path = tmp_path / "a.sqlite"
    with AnswerStore(path) as store:
        run_llm_grid(OracleProvider(), store, GRID, TEMPLATES, FAST)
    again = OracleProvider()
    with AnswerStore(path) as store:
        result = run_llm_grid(again, store, GRID, TEMPLATES, FAST)
    assert again.calls == [] and result.n_skipped == 24 and len(result.records) == 24
    bigger = LLMGridConfig(lengths=(12, 24), runs=2, n=5)
    more = OracleProvider()
    with AnswerStore(path) as store:
        result = run_llm_grid(more, store, bigger, TEMPLATES, FAST)
    assert sum(len(c) for c in more.calls) == 2 * 2 * 2 * 2 and result.n_skipped == 24


def test_progress_callbacks_count_stored_and_new_answers(tmp_path):
    seen: list[tuple[str, int, int]] = []
    with AnswerStore(tmp_path / "a.sqlite") as store:
        run_llm_grid(
            OracleProvider(batch_size=3), store, GRID, TEMPLATES, FAST,
            on_start=lambda total, stored: seen.append(("start", total, stored)),
            on_advance=lambda k: seen.append(("advance", k, 0)),
        )  # fmt: skip
    assert seen[0] == ("start", 24, 0)
    assert sum(k for tag, k, _ in seen if tag == "advance") == 24


def test_transient_failures_are_retried_and_the_attempts_recorded(tmp_path):
    provider = OracleProvider(fail=lambda p, attempt: Transient("429") if attempt <= 2 else None)
    with AnswerStore(tmp_path / "a.sqlite") as store:
        result = run_llm_grid(provider, store, GRID, TEMPLATES, FAST)
    assert all(r.ok and r.correct and r.attempts == 3 for r in result.records)
    assert len(provider.calls) == 3 * 24


def test_failures_after_the_cap_are_counted_not_scored_and_secrets_are_redacted(tmp_path):
    # Half the prompts fail for good; the accuracy of the rest stays 1.0: a failure is not a wrong answer.
    provider = OracleProvider(permanent=lambda p: zlib.crc32(p.encode()) % 2 == 0)
    with AnswerStore(tmp_path / "a.sqlite") as store:
        result = run_llm_grid(provider, store, GRID, TEMPLATES, FAST)
        raw = list(store._conn.execute("SELECT error FROM answers WHERE status = 'error'"))
    failed = [r for r in result.records if not r.ok]
    assert 0 < len(failed) < 24 and result.n_failed_now == len(failed) == len(raw)
    assert all(r.correct is None and r.single_token is None and r.attempts == 1 for r in failed)
    assert all("sk-SECRET-123" not in row[0] and "***" in row[0] for row in raw)
    cells = cell_results(result.records, provider="oracle", model="oracle-1")
    assert sum(c.n_failed for c in cells) == len(failed)
    assert all(c.accuracy == 1.0 or (c.n == 0 and math.isnan(c.accuracy)) for c in cells)


def test_failed_prompts_are_retried_on_the_next_run(tmp_path):
    path = tmp_path / "a.sqlite"
    with AnswerStore(path) as store:
        run_llm_grid(OracleProvider(permanent=lambda p: _window_length(p) == 12), store, GRID, TEMPLATES, FAST)
        n_ok = store.count("ok")
    assert n_ok == 12
    healed = OracleProvider()
    with AnswerStore(path) as store:
        result = run_llm_grid(healed, store, GRID, TEMPLATES, FAST)
        assert store.count("ok") == 24
    assert sum(len(c) for c in healed.calls) == 24 - n_ok and all(r.ok for r in result.records)


def _cells(task: str, length: int, accs: list[float], invalid: int = 0) -> list[CellResult]:
    return [CellResult("p", "m", task, length, run, a, 10, round(a * 10), invalid, 0) for run, a in enumerate(accs, 1)]


def test_the_pivot_gives_mean_and_sample_sd_over_runs():
    table = pivot(_cells("number", 12, [0.2, 0.4, 0.6]) + _cells("letter", 12, [1.0]))
    number = next(p for p in table if p.task == "number")
    assert number.mean == pytest.approx(0.4) and number.sd == pytest.approx(0.2) and number.runs == 3
    letter = next(p for p in table if p.task == "letter")
    assert letter.mean == 1.0 and math.isnan(letter.sd)
    md = table3_markdown(table, title="m")
    assert "| 12 | 0.40 (0.20) | 1.00 (-) |" in md


def test_screening_needs_085_on_the_letter_task_at_16_and_one_token_replies():
    good = screen(_cells("letter", 16, [0.9, 0.85]) + _cells("number", 300, [0.0]))
    assert good.passes and good.letter_accuracy_at_16 == pytest.approx(0.875)
    weak = screen(_cells("letter", 16, [0.8, 0.85]))
    assert weak.passes is False and not weak.flagged_reasoning
    chatty = screen(_cells("letter", 16, [0.9]) + _cells("number", 300, [0.0], invalid=5))
    assert chatty.flagged_reasoning and chatty.passes is False and "FLAGGED" in chatty.verdict()
    undecided = screen(_cells("letter", 12, [1.0]))
    assert undecided.passes is None and "not measured" in undecided.verdict()


def test_the_plot_draws_our_curves_beside_the_paper_s_three_models():
    table = pivot(_cells("number", 12, [0.5, 0.7]) + _cells("letter", 12, [0.9, 1.0]))
    fig = plot_accuracy({"ours": table}, load_paper_table3())
    number_ax, letter_ax = fig.axes[:2]
    labels = [line.get_label() for line in number_ax.get_lines()]
    assert sum("(paper)" in label for label in labels) == 3
    paper = load_paper_table3()
    assert paper["models"]["GPT 5.4"]["number"]["mean"][0] == 0.98 and paper["length"][-1] == 300
    assert letter_ax.get_title() == "1-hop letter task"
