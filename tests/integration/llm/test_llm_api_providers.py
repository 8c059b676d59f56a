"""The official openai and anthropic clients, end to end through ``possym llm``, against a local fake API.

The fake answers correctly, so accuracy 1.0 checks the whole chain: prompt, request, reply,
store, scoring, CSV. Its failure schedules check the retries and the failure accounting; its
request log checks that what was sent is what the paper asks (temperature 0, reasoning off).
"""

from __future__ import annotations

import csv
import json
import sqlite3
import zlib
from pathlib import Path

import pytest

pytest.importorskip("openai", reason="the openai client is in the llm extra: pip install -e '.[llm]'")
pytest.importorskip("anthropic", reason="the anthropic client is in the llm extra: pip install -e '.[llm]'")

from llm_fake_api import FakeAPI  # noqa: E402

from possym.cli import main  # noqa: E402

SECRET = "sk-test-0123456789-SECRET-abcdef"
FAST = ["llm.backoff=0.01", "llm.max_backoff=0.05", "--no-progress", "llm.plot=false"]
TINY = ["llm.lengths=[12,16]", "llm.runs=1", "llm.n=3"]  # 2 tasks x 2 lengths x 3 = 12 prompts


def _llm(provider: str, api: FakeAPI, out: Path, *extra: str, model: str | None = None) -> int:
    base = api.url if provider == "anthropic" else f"{api.url}/v1"
    model = model or ("claude-sonnet-3-7" if provider == "anthropic" else "gpt-5.4")
    return main(["llm", "--provider", provider, "--model", model, f"llm.base_url={base}", "--out", str(out), *TINY,
                 *FAST, *extra])  # fmt: skip


def _results(out: Path) -> list[dict[str, str]]:
    with open(out / "results.csv", newline="") as f:
        return list(csv.DictReader(f))


@pytest.fixture
def keys(monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", SECRET)
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_a_correct_api_scores_one_and_the_outputs_are_written(provider, tmp_path, keys, capsys):
    with FakeAPI() as api:
        status = main(["llm", "--provider", provider, "--model", "m", "--out", str(tmp_path), *TINY, "--no-progress",
                       "llm.base_url=" + (api.url if provider == "anthropic" else f"{api.url}/v1")])  # fmt: skip
        assert status == 0 and api.count() == 12
    rows = _results(tmp_path)
    assert len(rows) == 4
    assert {k for k in rows[0]} >= {"model", "task", "length", "run", "accuracy", "n", "n_invalid", "n_failed"}
    assert all(float(r["accuracy"]) == 1.0 and r["n"] == "3" and r["n_invalid"] == "0" for r in rows)
    for name in ("table.csv", "table.md", "screening.json", "config.json", "llm_accuracy.png", "answers.sqlite"):
        assert (tmp_path / name).is_file(), name
    assert (tmp_path / "llm_accuracy.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert json.loads((tmp_path / "screening.json").read_text())["passes"] is True
    assert "| 16 | 1.00 (-) | 1.00 (-) |" in capsys.readouterr().out


def test_anthropic_requests_ask_for_temperature_zero_few_tokens_and_no_thinking(tmp_path, keys):
    with FakeAPI() as api:
        _llm("anthropic", api, tmp_path)
    body = api.requests[0]["body"]
    assert api.requests[0]["path"] == "/v1/messages"
    assert body["model"] == "claude-sonnet-3-7" and body["max_tokens"] == 16 and body["temperature"] == 0
    assert body["thinking"] == {"type": "disabled"}
    assert len(body["messages"]) == 1 and body["messages"][0]["role"] == "user"
    assert body["messages"][0]["content"].startswith("You will be given a sequence")


def test_openai_requests_ask_for_temperature_zero_and_reasoning_none(tmp_path, keys):
    with FakeAPI() as api:
        _llm("openai", api, tmp_path)
    body = api.requests[0]["body"]
    assert api.requests[0]["path"] == "/v1/chat/completions"
    assert body["temperature"] == 0 and body["max_completion_tokens"] == 16 and body["reasoning_effort"] == "none"


def test_a_rerun_sends_nothing_that_is_stored(tmp_path, keys):
    with FakeAPI() as api:
        _llm("anthropic", api, tmp_path)
        assert _llm("anthropic", api, tmp_path) == 0
        assert api.count() == 12
        # Another model is another key: everything is sent again.
        _llm("anthropic", api, tmp_path, model="claude-other")
        assert api.count() == 24


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_429_then_500_then_success_is_retried_to_a_full_score(provider, tmp_path, keys):
    with FakeAPI(schedule=[429, 500]) as api:
        assert _llm(provider, api, tmp_path) == 0
        assert api.count() == 3 * 12
    assert all(float(r["accuracy"]) == 1.0 and r["n_failed"] == "0" for r in _results(tmp_path))
    attempts = sqlite3.connect(tmp_path / "answers.sqlite").execute("SELECT DISTINCT attempts FROM answers")
    assert [a for (a,) in attempts] == [3]


def test_a_time_out_is_retried(tmp_path, keys):
    with FakeAPI(schedule=["slow"], slow_s=1.5) as api:
        assert _llm("anthropic", api, tmp_path, "llm.timeout=0.5", "llm.tasks=[letter]") == 0
    assert all(float(r["accuracy"]) == 1.0 for r in _results(tmp_path))


def test_permanent_failures_are_counted_not_scored_and_the_run_goes_on(tmp_path, keys, capsys):
    # Half the prompts get a 503 on every attempt; the other half must still score 1.0.
    def half(prompt: str) -> int | None:
        return 503 if zlib.crc32(prompt.encode()) % 2 else None

    with FakeAPI(permanent=half) as api:
        status = _llm("anthropic", api, tmp_path, "llm.max_attempts=3")
    rows = _results(tmp_path)
    failed = sum(int(r["n_failed"]) for r in rows)
    answered = sum(int(r["n"]) for r in rows)
    assert status == 1 and failed > 0 and answered > 0 and failed + answered == 12
    assert all(float(r["accuracy"]) == 1.0 for r in rows if int(r["n"]) > 0)
    assert api.count() == answered + 3 * failed  # each failure used all three attempts
    assert "failed" in capsys.readouterr().err
    db = sqlite3.connect(tmp_path / "answers.sqlite")
    errors = db.execute("SELECT error, attempts, reply FROM answers WHERE status = 'error'").fetchall()
    assert len(errors) == failed and all("503" in e and a == 3 and r is None for e, a, r in errors)


def test_a_bad_request_is_not_retried(tmp_path, keys):
    with FakeAPI(permanent=lambda prompt: 400) as api:
        assert _llm("openai", api, tmp_path) == 1
        assert api.count() == 12


@pytest.mark.parametrize(("provider", "env"), [("anthropic", "ANTHROPIC_API_KEY"), ("openai", "OPENAI_API_KEY")])
def test_a_missing_key_is_a_clear_error_before_any_request(provider, env, tmp_path, monkeypatch, capsys):
    monkeypatch.delenv(env, raising=False)
    with FakeAPI() as api:
        assert _llm(provider, api, tmp_path / "out") == 2
        assert api.count() == 0
    err = capsys.readouterr().err
    assert env in err and "not set" in err and "no request was sent" in err
    assert not (tmp_path / "out").exists()


def test_the_key_reaches_the_api_but_never_a_file_or_a_log(tmp_path, keys, capsys):
    # The fake echoes the key in its error messages; the stored errors must not carry it.
    with FakeAPI(schedule=[429], permanent=lambda p: 500 if 'Input: "a' in p else None, echo_key_in_errors=True) as api:
        main(["llm", "--provider", "anthropic", "--model", "m", f"llm.base_url={api.url}", "--out", str(tmp_path),
              *TINY, "llm.backoff=0.01", "llm.max_attempts=2"])  # fmt: skip
        _llm("openai", api, tmp_path, "llm.max_attempts=2")
    assert {r["key"] for r in api.requests} == {SECRET}
    captured = capsys.readouterr()
    assert SECRET not in captured.out and SECRET not in captured.err
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert any(p.name == "answers.sqlite" for p in files)
    for path in files:  # the database, its WAL, the CSVs, the config, the plot
        assert SECRET.encode() not in path.read_bytes(), path
    errors = sqlite3.connect(tmp_path / "answers.sqlite").execute("SELECT error FROM answers WHERE error IS NOT NULL")
    assert all("***" in e for (e,) in errors)


def test_openai_compatible_sends_no_openai_key_and_asks_templates_to_skip_thinking(tmp_path, keys):
    with FakeAPI() as api:
        assert _llm("openai-compatible", api, tmp_path, model="local-model") == 0
    assert all(r["key"] != SECRET for r in api.requests)
    assert api.requests[0]["body"]["chat_template_kwargs"] == {"enable_thinking": False}
    assert api.requests[0]["body"]["max_tokens"] == 16


def test_the_progress_bar_shows_the_request_rate(tmp_path, keys, capsys):
    with FakeAPI() as api:
        main(["llm", "--provider", "anthropic", "--model", "m", f"llm.base_url={api.url}", "--out", str(tmp_path),
              *TINY, "llm.plot=false"])  # fmt: skip
    err = capsys.readouterr().err
    assert "12/12" in err and "req/s" in err
