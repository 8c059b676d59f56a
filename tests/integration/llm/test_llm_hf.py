"""The hf provider on a real model (SmolLM2-135M-Instruct): batched, prefix-cached greedy decoding against
``model.generate`` on each full prompt alone, the exact early stop, and a tiny grid through the store."""

from __future__ import annotations

import pytest

from possym.llm.providers import HFProvider
from possym.llm.run import LLMGridConfig, RunnerConfig, run_llm_grid
from possym.llm.store import AnswerStore
from possym.one_hop import is_correct, is_single_token, load_templates, make_cell

# The second tier (`make test-long`): loading SmolLM2 alone takes half a minute; the providers' logic has fast
# tests against fake APIs (test_llm_api_providers.py, tests/unit/llm).
pytestmark = pytest.mark.long

TEMPLATES = load_templates()


def _prompts(cells: list[tuple[str, int, int]]) -> list[tuple[str, str]]:
    return [(TEMPLATES.render(i), i.target) for task, length, n in cells for i in make_cell(task, length, 1, n)]


def test_batched_prefix_cached_decoding_matches_generate_on_each_prompt_alone(smol):
    # A batch of one cell, a batch mixing lengths, then another task: the cached prefix is cropped
    # and extended on the way, and the padding between prefix and suffix differs per row.
    batches = [
        _prompts([("number", 12, 2)]),
        _prompts([("number", 16, 1), ("number", 24, 1)]),
        _prompts([("letter", 12, 2)]),
    ]
    for batch in batches:
        prompts = [p for p, _ in batch]
        assert smol.complete(prompts) == [smol.reference_complete(p) for p in prompts]
    assert len(smol._prefix.ids) > 150  # the shared instruction prefix is what gets cached


def test_stopping_when_decided_keeps_both_scores_and_cuts_only_the_tail(smol):
    early = HFProvider(smol.model, smol._lm, smol._tokenizer, smol.settings, batch_size=4, stop_when_decided=True)
    assert early.params()["stop"] == "when decided" and "stop" not in smol.params()
    batch = _prompts([("number", 12, 2), ("letter", 16, 2)])
    prompts = [p for p, _ in batch]
    full, cut = smol.complete(prompts), early.complete(prompts)
    for (_, target), f, c in zip(batch, full, cut, strict=True):
        assert f.startswith(c)
        assert is_correct(c, target) == is_correct(f, target)
        assert is_single_token(c) == is_single_token(f)


def test_a_tiny_grid_runs_through_the_store_and_a_rerun_reuses_it(smol, tmp_path):
    grid = LLMGridConfig(lengths=(12,), runs=1, n=2)
    with AnswerStore(tmp_path / "a.sqlite") as store:
        first = run_llm_grid(smol, store, grid, TEMPLATES, RunnerConfig(concurrency=4))
    with AnswerStore(tmp_path / "a.sqlite") as store:
        again = run_llm_grid(smol, store, grid, TEMPLATES, RunnerConfig(concurrency=4))
        assert store.integrity_check() == "ok"
    assert first.n_sent == 4 and again.n_sent == 0 and again.n_skipped == 4
    assert [r.reply for r in first.records] == [r.reply for r in again.records]
    assert all(r.ok and isinstance(r.reply, str) for r in first.records)


def test_a_lazy_provider_has_the_same_key_and_loads_only_when_asked(smol):
    lazy = HFProvider.lazy("SmolLM2-135M-Instruct", smol.settings, batch_size=4)
    assert lazy._loaded is None and lazy.params() == smol.params()
