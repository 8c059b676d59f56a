"""Exponential backoff with full jitter, and a thread-safe request-rate limiter.

Backoff (the "full jitter" scheme): after the k-th failed attempt (k = 1, 2, ...) wait a time drawn
uniformly from [0, min(max_delay, base_delay * 2**(k-1))]. A server's ``Retry-After`` header, when
the error carries one, raises the wait to at least that value (still capped by ``max_delay``).
After ``max_attempts`` attempts the last error is returned, not raised: the caller records it as a
failure and carries on.

Clock and sleep are arguments, so tests run the schedule without waiting.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from possym.errors import PossymError

T = TypeVar("T")


@dataclass(frozen=True)
class RetryPolicy:
    max_attempts: int = 6
    base_delay: float = 1.0
    max_delay: float = 60.0

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise PossymError(f"max_attempts={self.max_attempts} must be >= 1")
        if not 0 <= self.base_delay <= self.max_delay:
            raise PossymError(f"need 0 <= base_delay={self.base_delay} <= max_delay={self.max_delay}")

    def cap(self, failures: int) -> float:
        """The upper end of the wait after ``failures`` failed attempts (failures >= 1)."""
        return min(self.max_delay, self.base_delay * 2.0 ** (failures - 1))

    def delay(self, failures: int, rng: random.Random, retry_after: float | None = None) -> float:
        wait = rng.uniform(0.0, self.cap(failures))
        if retry_after is not None:
            wait = max(wait, min(retry_after, self.max_delay))
        return wait


@dataclass(frozen=True)
class Outcome(Generic[T]):
    """The result of ``call_with_retries``: a value or the last error, and how many attempts it took."""

    value: T | None
    error: BaseException | None
    attempts: int
    seconds: float


def call_with_retries(
    fn: Callable[[], T],
    policy: RetryPolicy,
    is_retryable: Callable[[BaseException], bool],
    *,
    rng: random.Random,
    retry_after: Callable[[BaseException], float | None] = lambda exc: None,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> Outcome[T]:
    """Call ``fn`` until it succeeds, fails with a non-retryable error, or uses up the attempts."""
    start = clock()
    for attempt in range(1, policy.max_attempts + 1):
        try:
            return Outcome(fn(), None, attempt, clock() - start)
        except Exception as exc:  # noqa: BLE001 - every error is recorded, none is swallowed silently
            if not is_retryable(exc) or attempt == policy.max_attempts:
                return Outcome(None, exc, attempt, clock() - start)
            sleep(policy.delay(attempt, rng, retry_after(exc)))
    raise AssertionError("unreachable")  # pragma: no cover - the loop always returns


class RateLimiter:
    """At most ``rate`` acquisitions per second on average, with bursts of at most ``burst`` (token bucket).

    ``rate=None`` means unlimited. Thread-safe: worker threads call ``acquire`` before each request.
    """

    def __init__(
        self,
        rate: float | None,
        burst: int = 1,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if rate is not None and rate <= 0:
            raise PossymError(f"rate={rate} must be > 0 requests per second, or None for no limit")
        self.rate = rate
        self.burst = max(1, burst)
        self._clock = clock
        self._sleep = sleep
        self._tokens = float(self.burst)
        self._last = clock()
        self._lock = threading.Lock()

    def acquire(self) -> None:
        if self.rate is None:
            return
        while True:
            with self._lock:
                now = self._clock()
                self._tokens = min(self.burst, self._tokens + (now - self._last) * self.rate)
                self._last = now
                if self._tokens >= 1.0:
                    self._tokens -= 1.0
                    return
                wait = (1.0 - self._tokens) / self.rate
            self._sleep(wait)
