"""Where trials run: a local process pool, Ray, or Slurm through submitit. Existing engines, thin adapters.

Every engine has one method, ``map(fn, items)``, yielding ``(item, result, error)`` as each call
finishes (``error`` is a short message, ``None`` on success), in completion order. The sweep
(:mod:`possym.sweep.run`) owns retries, markers and progress, so the engines stay interchangeable.

- ``local`` (default, nothing to install): ``concurrent.futures.ProcessPoolExecutor`` with ``spawn``
  workers, one fresh process per trial (torch state never leaks from one trial into the next).
  A worker exits within a second of the sweep's death (even by SIGKILL), so a killed sweep leaves
  no trial running behind it; the trial's markers let the next call resume it.
- ``ray`` (``pip install 'possym[ray]'``): a task per trial on the running Ray instance, on
  ``--address``, or on a new local one of ``workers`` CPUs; each task asks for 1 CPU and, where the
  cluster has GPUs, 1 GPU.
- ``slurm`` (``pip install 'possym[slurm]'``): a submitit job per trial with the partition, time
  limit and GPUs given; ``cluster="local"`` runs the jobs as local processes (submitit's own test
  executor).

Example:
    >>> engine = LocalEngine(workers=2)
    >>> sorted(r for _, r, _ in engine.map(abs, [-1, 2]))   # doctest: +SKIP
    [1, 2]
"""

from __future__ import annotations

import multiprocessing
import os
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from possym.errors import PossymError

ENGINES = ("local", "ray", "slurm")
Outcome = tuple[Any, Any, str | None]


class MissingExtra(ImportError):
    """An optional engine's package is not installed; the message names the extra."""


def _require_extra(module: str, extra: str) -> Any:
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError:
        raise MissingExtra(f"the {extra} engine needs the '{module}' package: pip install 'possym[{extra}]'") from None


def _error(exc: BaseException) -> str:
    """The exception's last line and where it came from, short enough for a report."""
    lines = traceback.format_exception(exc)
    return "".join(lines[-3:]).strip()[-1500:]


def _exit_with_parent(parent: int) -> None:
    """Pool initializer: end this worker once its parent is gone (it is then re-parented)."""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(1)

    threading.Thread(target=watch, daemon=True).start()


@dataclass
class LocalEngine:
    workers: int = 1

    def map(self, fn: Callable[[Any], Any], items: list[Any]) -> Iterator[Outcome]:
        ctx = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(
            self.workers, mp_context=ctx, max_tasks_per_child=1, initializer=_exit_with_parent, initargs=(os.getpid(),)
        ) as pool:
            pending = {pool.submit(fn, item): item for item in items}
            try:
                while pending:
                    done, _ = wait(pending, return_when=FIRST_COMPLETED)
                    for fut in done:
                        item = pending.pop(fut)
                        exc = fut.exception()
                        yield (item, None, _error(exc)) if exc else (item, fut.result(), None)
            finally:  # interrupted: drop what has not started; running trials keep their markers
                pool.shutdown(wait=False, cancel_futures=True)


@dataclass
class RayEngine:
    workers: int = 1
    address: str | None = None

    def map(self, fn: Callable[[Any], Any], items: list[Any]) -> Iterator[Outcome]:
        ray = _require_extra("ray", "ray")
        started = not ray.is_initialized()
        if started:
            if self.address:
                ray.init(address=self.address)
            else:
                ray.init(num_cpus=self.workers, include_dashboard=False)
        pending: dict[Any, Any] = {}
        try:
            gpus = 1 if ray.cluster_resources().get("GPU", 0) >= 1 else 0
            remote = ray.remote(num_cpus=1, num_gpus=gpus, max_retries=0)(fn)
            pending = {remote.remote(item): item for item in items}
            while pending:
                done, _ = ray.wait(list(pending), num_returns=1)
                for ref in done:
                    item = pending.pop(ref)
                    try:
                        yield item, ray.get(ref), None
                    except Exception as exc:  # RayTaskError wraps the trial's own exception
                        yield item, None, _error(exc)
        finally:
            for ref in pending:  # interrupted: stop what is still running
                ray.cancel(ref, force=True)
            if started:
                ray.shutdown()


@dataclass
class SlurmEngine:
    folder: Path
    partition: str | None = None
    time_min: int = 240
    gpus: int = 0
    cpus: int = 1
    cluster: str | None = None  # None: Slurm; "local" or "debug": submitit's own local executors
    poll_s: float = 2.0

    def map(self, fn: Callable[[Any], Any], items: list[Any]) -> Iterator[Outcome]:
        submitit = _require_extra("submitit", "slurm")
        executor = submitit.AutoExecutor(folder=str(self.folder), cluster=self.cluster)
        params: dict[str, Any] = {"timeout_min": self.time_min, "cpus_per_task": self.cpus, "name": "possym"}
        if self.gpus:
            params["gpus_per_node"] = self.gpus
        if self.partition:
            params["slurm_partition"] = self.partition
        executor.update_parameters(**params)
        pending = {executor.submit(fn, item): item for item in items}
        try:
            while pending:
                for job in [j for j in pending if j.done()]:
                    item = pending.pop(job)
                    try:
                        yield item, job.result(), None
                    except Exception as exc:  # submitit re-raises the job's exception (or a FailedJobError)
                        yield item, None, _error(exc)
                if pending:
                    time.sleep(self.poll_s)
        finally:
            for job in pending:
                job.cancel(check=False)


def make_engine(
    name: str,
    *,
    workers: int,
    out: Path,
    address: str | None = None,
    partition: str | None = None,
    time_min: int = 240,
    gpus: int = 0,
    cluster: str | None = None,
):
    """The engine called ``name`` (one of :data:`ENGINES`)."""
    if name == "local":
        return LocalEngine(workers)
    if name == "ray":
        _require_extra("ray", "ray")
        return RayEngine(workers, address)
    if name == "slurm":
        _require_extra("submitit", "slurm")
        return SlurmEngine(out / "submitit", partition, time_min, gpus, cluster=cluster)
    raise PossymError(f"--engine {name!r} is not an engine; allowed: {ENGINES}")
