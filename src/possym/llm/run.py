"""The grid runner: every (task, length, run, index) prompt through a provider, into the store, back as records.

For each prompt the runner computes the store key; prompts whose key already holds a successful
answer are skipped, so a rerun (after a crash, a kill -9, or with a larger grid) sends only what is
missing. The rest are sent in batches of ``provider.batch_size`` (one cell per batch), by at most
``concurrency`` worker threads, each request first passing a shared rate limiter. A failed request
is retried with exponential backoff and jitter while the error is transient (429, 5xx, time-out);
after the cap, or at once for a permanent error, the failure is *stored as a failure* and counted,
never scored as a wrong answer. Replies are written from the calling thread, one transaction each.

The grid is the paper's (Appendix H): lengths 12..300, runs 1..5 with run r seeded by r, and
``n`` prompts per cell (the paper does not give its n).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field

from possym.errors import PossymError
from possym.llm.providers import Provider
from possym.llm.retry import Outcome, RateLimiter, RetryPolicy, call_with_retries
from possym.llm.store import AnswerStore, answer_key
from possym.one_hop import (
    PAPER_LENGTHS,
    PROMPT_TASKS,
    OneHopInstance,
    Templates,
    is_correct,
    is_single_token,
    make_grid,
)

MAX_ERROR_CHARS = 2000


@dataclass(frozen=True)
class LLMGridConfig:
    """Which prompts to send: tasks x lengths x runs 1..runs x n prompts per cell."""

    tasks: tuple[str, ...] = PROMPT_TASKS
    lengths: tuple[int, ...] = PAPER_LENGTHS
    runs: int = 5
    n: int = 100

    def __post_init__(self) -> None:
        unknown = [t for t in self.tasks if t not in PROMPT_TASKS]
        if unknown or not self.tasks:
            raise PossymError(f"tasks={self.tasks}; allowed: a non-empty subset of {PROMPT_TASKS}")
        if not self.lengths or any(length < 1 for length in self.lengths):
            raise PossymError(f"lengths={self.lengths} must be a non-empty list of positive window sizes")
        if self.runs < 1 or self.n < 1:
            raise PossymError(f"runs={self.runs} and n={self.n} must both be >= 1")

    @property
    def run_ids(self) -> tuple[int, ...]:
        """Run numbers 1..runs; run r's prompts are drawn from generators seeded by r."""
        return tuple(range(1, self.runs + 1))

    @property
    def size(self) -> int:
        return len(self.tasks) * len(self.lengths) * self.runs * self.n

    def instances(self) -> list[OneHopInstance]:
        return make_grid(self.tasks, self.lengths, self.run_ids, self.n)


@dataclass(frozen=True)
class RunnerConfig:
    """How to send: parallel workers, requests per second (None: unlimited), and the retry policy."""

    concurrency: int = 4
    rate: float | None = None
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    seed: int = 0

    def __post_init__(self) -> None:
        if self.concurrency < 1:
            raise PossymError(f"concurrency={self.concurrency} must be >= 1")


@dataclass(frozen=True)
class AnswerRecord:
    """One prompt's outcome. ``correct`` and ``single_token`` are None when the request failed."""

    task: str
    length: int
    run: int
    index: int
    target: str
    status: str
    reply: str | None
    error: str | None
    attempts: int
    latency_s: float

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def correct(self) -> bool | None:
        return None if self.reply is None or not self.ok else is_correct(self.reply, self.target)

    @property
    def single_token(self) -> bool | None:
        return None if self.reply is None or not self.ok else is_single_token(self.reply)


@dataclass(frozen=True)
class GridResult:
    records: list[AnswerRecord]
    n_total: int
    n_skipped: int
    n_sent: int
    n_failed_now: int


ProgressStart = Callable[[int, int], None]
ProgressAdvance = Callable[[int], None]


def _redact(text: str, secrets: Sequence[str]) -> str:
    for secret in secrets:
        if secret:
            text = text.replace(secret, "***")
    return text


def _chunks(items: Sequence[OneHopInstance], size: int) -> Iterator[list[OneHopInstance]]:
    """Batches of at most ``size`` prompts, never mixing cells (so a batch shares its length)."""
    batch: list[OneHopInstance] = []
    for item in items:
        if batch and (
            (item.task, item.length, item.run) != (batch[0].task, batch[0].length, batch[0].run) or len(batch) == size
        ):
            yield batch
            batch = []
        batch.append(item)
    if batch:
        yield batch


def run_llm_grid(
    provider: Provider,
    store: AnswerStore,
    grid: LLMGridConfig,
    templates: Templates,
    config: RunnerConfig | None = None,
    *,
    on_start: ProgressStart | None = None,
    on_advance: ProgressAdvance | None = None,
) -> GridResult:
    """Send every prompt of ``grid`` that the store lacks, store each answer, return all records."""
    config = config or RunnerConfig()
    instances = grid.instances()
    params = provider.params()
    prompts = {id(inst): templates.render(inst) for inst in instances}
    keys = {id(inst): answer_key(provider.name, provider.model, params, prompts[id(inst)]) for inst in instances}
    done = store.ok_keys(keys.values())
    pending = [inst for inst in instances if keys[id(inst)] not in done]
    if on_start is not None:
        on_start(len(instances), len(instances) - len(pending))

    limiter = RateLimiter(config.rate, burst=config.concurrency)
    secrets = provider.secrets()
    workers = min(config.concurrency, getattr(provider, "max_concurrency", config.concurrency))
    # One generator per batch, seeded from the runner seed: jitter is reproducible given the schedule.
    seeder = random.Random(config.seed)

    def send(batch: list[OneHopInstance], seed: int) -> tuple[list[OneHopInstance], Outcome[list[str]]]:
        def attempt() -> list[str]:
            limiter.acquire()
            replies = provider.complete([prompts[id(inst)] for inst in batch])
            if len(replies) != len(batch):
                raise RuntimeError(f"provider returned {len(replies)} replies for {len(batch)} prompts")
            return replies

        outcome = call_with_retries(
            attempt,
            config.retry,
            provider.is_retryable,
            rng=random.Random(seed),
            retry_after=provider.retry_after,
        )
        return batch, outcome

    n_failed = 0

    def record(batch: list[OneHopInstance], outcome: Outcome[list[str]]) -> None:
        nonlocal n_failed
        replies, error, message = outcome.value, outcome.error, None
        if error is not None or replies is None:
            message = _redact(f"{type(error).__name__}: {error}", secrets)[:MAX_ERROR_CHARS]
            n_failed += len(batch)
        for i, inst in enumerate(batch):
            store.put(
                key=keys[id(inst)],
                provider=provider.name,
                model=provider.model,
                params=params,
                prompt=prompts[id(inst)],
                status="error" if replies is None else "ok",
                reply=None if replies is None else replies[i],
                error=message,
                attempts=outcome.attempts,
                latency_s=outcome.seconds / len(batch),
                task=inst.task,
                length=inst.length,
                run=inst.run,
                idx=inst.index,
                target=inst.target,
            )
        if on_advance is not None:
            on_advance(len(batch))

    batches = _chunks(pending, max(1, provider.batch_size))
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="possym-llm") as pool:
        inflight: set[Future] = set()
        try:
            for batch in batches:
                inflight.add(pool.submit(send, batch, seeder.randrange(2**32)))
                # Keep the queue short: a kill loses at most the batches in flight.
                while len(inflight) >= 2 * workers:
                    finished, inflight = wait(inflight, return_when=FIRST_COMPLETED)
                    for future in finished:
                        record(*future.result())
            while inflight:
                finished, inflight = wait(inflight, return_when=FIRST_COMPLETED)
                for future in finished:
                    record(*future.result())
        except BaseException:
            for future in inflight:
                future.cancel()
            raise

    rows = store.get_many(keys.values())
    records = []
    for inst in instances:
        row = rows.get(keys[id(inst)])
        if row is None:  # pragma: no cover - every pending prompt was stored above
            raise RuntimeError(f"no stored answer for {inst.task} length {inst.length} run {inst.run} #{inst.index}")
        records.append(
            AnswerRecord(
                inst.task, inst.length, inst.run, inst.index, inst.target, row.status, row.reply, row.error,
                row.attempts, row.latency_s,
            )
        )  # fmt: skip
    return GridResult(records, len(instances), len(instances) - len(pending), len(pending), n_failed)
