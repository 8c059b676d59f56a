"""The answer store (keys, WAL, one transaction per answer) and the backoff / rate-limit arithmetic."""

from __future__ import annotations

import random
import sqlite3

import pytest

from possym.llm.retry import RateLimiter, RetryPolicy, call_with_retries
from possym.llm.store import AnswerStore, answer_key, canonical_params


def _put(store: AnswerStore, key: str, status: str = "ok", reply: str | None = "y", attempts: int = 1) -> None:
    store.put(
        key=key, provider="p", model="m", params={"t": 0}, prompt=f"prompt {key}", status=status,
        reply=reply, error=None if status == "ok" else "boom", attempts=attempts, latency_s=0.1,
        task="number", length=12, run=1, idx=0, target="y",
    )  # fmt: skip


def test_the_key_depends_on_provider_model_params_and_prompt_but_not_on_param_order():
    base = answer_key("openai", "m", {"a": 1, "b": 2}, "hi")
    assert base == answer_key("openai", "m", {"b": 2, "a": 1}, "hi")
    others = {
        answer_key("anthropic", "m", {"a": 1, "b": 2}, "hi"),
        answer_key("openai", "m2", {"a": 1, "b": 2}, "hi"),
        answer_key("openai", "m", {"a": 1, "b": 3}, "hi"),
        answer_key("openai", "m", {"a": 1, "b": 2}, "hi!"),
    }
    assert base not in others and len(others) == 4
    assert canonical_params({"b": 2, "a": 1}) == '{"a":1,"b":2}'


def test_the_store_uses_wal_and_reopens_with_its_rows(tmp_path):
    path = tmp_path / "a.sqlite"
    with AnswerStore(path) as store:
        assert store.journal_mode == "wal"
        _put(store, "k1")
        _put(store, "k2", status="error", reply=None)
    with AnswerStore(path) as store:
        assert store.count() == 2 and store.count("ok") == 1
        assert store.ok_keys(["k1", "k2", "k3"]) == {"k1"}
        row = store.get("k2")
        assert row is not None and row.status == "error" and row.error == "boom" and row.reply is None
        assert store.integrity_check() == "ok"


def test_each_answer_is_committed_on_its_own(tmp_path):
    path = tmp_path / "a.sqlite"
    store = AnswerStore(path)
    _put(store, "k1")
    # A second connection sees the row at once: put() left no transaction open.
    other = sqlite3.connect(path)
    assert other.execute("SELECT COUNT(*) FROM answers").fetchone()[0] == 1
    assert not store._conn.in_transaction
    other.close()
    store.close()


def test_a_failure_never_overwrites_a_stored_reply_and_attempts_accumulate(tmp_path):
    with AnswerStore(tmp_path / "a.sqlite") as store:
        _put(store, "k", status="error", reply=None, attempts=3)
        _put(store, "k", status="ok", reply="y", attempts=2)
        row = store.get("k")
        assert row is not None and row.ok and row.reply == "y" and row.attempts == 5
        _put(store, "k", status="error", reply=None, attempts=1)
        assert store.get("k").reply == "y"  # type: ignore[union-attr]


def test_get_many_handles_more_keys_than_one_sql_statement_takes(tmp_path):
    with AnswerStore(tmp_path / "a.sqlite") as store:
        for i in range(1200):
            _put(store, f"k{i}")
        assert len(store.get_many(f"k{i}" for i in range(0, 1300))) == 1200


class Flaky:
    def __init__(self, failures: list[BaseException]) -> None:
        self.failures = list(failures)
        self.calls = 0

    def __call__(self) -> str:
        self.calls += 1
        if self.failures:
            raise self.failures.pop(0)
        return "ok"


class Transient(Exception):
    pass


def test_transient_errors_are_retried_until_success_with_capped_jittered_waits():
    sleeps: list[float] = []
    policy = RetryPolicy(max_attempts=5, base_delay=1.0, max_delay=3.0)
    fn = Flaky([Transient(), Transient(), Transient()])
    out = call_with_retries(fn, policy, lambda e: isinstance(e, Transient), rng=random.Random(0), sleep=sleeps.append)
    assert out.value == "ok" and out.error is None and out.attempts == 4 and fn.calls == 4
    assert len(sleeps) == 3
    for k, s in enumerate(sleeps, start=1):
        assert 0 <= s <= min(3.0, 2 ** (k - 1))


def test_after_the_cap_the_last_error_is_returned_not_raised():
    policy = RetryPolicy(max_attempts=3, base_delay=0.0, max_delay=0.0)
    out = call_with_retries(
        Flaky([Transient()] * 10), policy, lambda e: True, rng=random.Random(0), sleep=lambda s: None
    )
    assert out.value is None and isinstance(out.error, Transient) and out.attempts == 3


def test_a_permanent_error_is_not_retried():
    fn = Flaky([ValueError("bad request")])
    out = call_with_retries(fn, RetryPolicy(), lambda e: False, rng=random.Random(0), sleep=lambda s: None)
    assert fn.calls == 1 and out.attempts == 1 and isinstance(out.error, ValueError)


def test_backoff_caps_grow_exponentially_to_the_maximum_and_retry_after_is_honoured():
    policy = RetryPolicy(base_delay=0.5, max_delay=4.0)
    assert [policy.cap(k) for k in range(1, 7)] == [0.5, 1.0, 2.0, 4.0, 4.0, 4.0]
    draws = [policy.delay(3, random.Random(s)) for s in range(200)]
    assert 0 <= min(draws) and max(draws) <= 2.0 and len(set(draws)) > 100  # jittered, not fixed
    assert policy.delay(1, random.Random(0), retry_after=3.0) >= 3.0
    assert policy.delay(1, random.Random(0), retry_after=100.0) <= 4.0


def test_policy_validation_names_the_field():
    with pytest.raises(ValueError, match="max_attempts"):
        RetryPolicy(max_attempts=0)


def test_the_rate_limiter_spaces_requests_at_the_rate():
    now = [0.0]

    def sleep(s: float) -> None:
        now[0] += s

    limiter = RateLimiter(2.0, burst=1, clock=lambda: now[0], sleep=sleep)
    for _ in range(5):
        limiter.acquire()
    assert now[0] == pytest.approx(2.0)  # 5 requests at 2/s with a burst of 1: the last at t = 2 s
    RateLimiter(None).acquire()  # unlimited: returns at once
