"""Where runs run: a local process pool, Ray, or Slurm through submitit. Existing engines, thin adapters.

Every engine has one method, ``map(fn, items)``, yielding ``(item, result, error)`` as each call
finishes (``error`` is a short message, ``None`` on success), in completion order. The executor
(:mod:`possym.experiment.executor`) owns retries, the memo and progress, so the engines stay
interchangeable; an item is a unit of work (one run's stages), and a worker lost with its process,
job or node comes back as an error, which the executor retries from the run's last state.

- ``local`` (default, nothing to install): ``concurrent.futures.ProcessPoolExecutor`` with ``spawn``
  workers, one fresh process per unit (torch state never leaks from one run into the next).
  A worker exits within a second of the sweep's death (even by SIGKILL), so a killed sweep leaves
  no run training behind it; the memo lets the next call resume it.
- ``ray`` (``pip install 'possym[ray]'``): a task per unit on the running Ray instance, on
  ``engine.address``, or on a new local one of ``engine.workers`` CPUs; each task asks for the run's CPUs and,
  where the cluster has GPUs, 1 GPU. Ray does not retry a task lost with its node: it fails here,
  and the executor's next round resubmits it, so the retry is the executor's, counted and reported.
- ``slurm`` (``pip install 'possym[slurm]'``): one submitit job array per round, a task per unit,
  with the partition, time limit, GPUs, array parallelism and any other sbatch setting given;
  ``cluster="local"`` runs the jobs as local processes (submitit's own test executor). Jobs are
  followed through ``squeue``, not only ``sacct``, so a job that dies is seen to end on a cluster
  without accounting storage too. Jobs are named after their folder, so a call first cancels the
  jobs a killed earlier call left running, and no run trains in two jobs at once.

Example:
    >>> engine = LocalEngine(workers=2)
    >>> sorted(r for _, r, _ in engine.map(abs, [-1, 2]))   # doctest: +SKIP
    [1, 2]
"""

from __future__ import annotations

import hashlib
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
            finally:  # interrupted: drop what has not started; running units keep their memo entries
                pool.shutdown(wait=False, cancel_futures=True)


@dataclass
class RayEngine:
    workers: int = 1
    address: str | None = None
    cpus: int = 1  # per unit of work (a run)

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
            # max_retries=0: a unit lost with its node comes back as an error, for the executor to retry.
            remote = ray.remote(num_cpus=self.cpus, num_gpus=gpus, max_retries=0)(fn)
            pending = {remote.remote(item): item for item in items}
            while pending:
                done, _ = ray.wait(list(pending), num_returns=1)
                for ref in done:
                    item = pending.pop(ref)
                    try:
                        yield item, ray.get(ref), None
                    except Exception as exc:  # RayTaskError wraps the stage's own exception
                        yield item, None, _error(exc)
        finally:
            for ref in pending:  # interrupted: stop what is still running
                ray.cancel(ref, force=True)
            if started:
                ray.shutdown()


# Slurm job states after which a job never runs again (squeue's names; PREEMPTED may be requeued).
SLURM_ENDED = frozenset({"BOOT_FAIL", "CANCELLED", "COMPLETED", "DEADLINE", "FAILED", "NODE_FAIL", "OUT_OF_MEMORY",
                         "TIMEOUT", "SPECIAL_EXIT", "REVOKED"})


def squeue_states(job_ids: list[str], env: dict[str, str] | None = None) -> dict[str, str] | None:
    """Each job's state as squeue reports it (``GONE`` for a job it no longer knows), or None if squeue failed.

    submitit follows jobs through ``sacct``, which answers only where accounting storage is on; many
    small clusters run without it, and then submitit never sees a killed job end. squeue answers on
    every cluster, for running jobs and for finished ones during the cluster's ``MinJobAge`` (300 s by
    default); a job it has forgotten has ended long ago.
    """
    import subprocess

    cmd = ["squeue", "--noheader", "--array", "--states=all", "--format=%i %T", f"--jobs={','.join(job_ids)}"]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=env)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if done.returncode != 0:
        # One unknown id alone is an error ("Invalid job id specified"); among others it is left out.
        return dict.fromkeys(job_ids, "GONE") if "Invalid job id" in done.stderr else None
    seen = dict(line.split(None, 1) for line in done.stdout.splitlines() if line.strip())
    return {j: seen.get(j, "GONE").strip() for j in job_ids}


# What submitit's FailedJobError puts above and below the unit's own traceback.
_RULE = "----------------------\n"


def _job_error(exc: BaseException) -> str:
    """A failed job's error with the unit's traceback last, where a report reads an error's last line
    (a run that is being written by another process names it there): submitit's message puts the log
    paths after the traceback."""
    parts = str(exc).split(_RULE)
    if len(parts) != 3:  # not submitit's layout
        return _error(exc)
    header, trace, paths = parts
    return f"{header.strip()} {paths.strip()}\n{trace.strip()}"[-1500:]


def _log_tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


@dataclass
class SlurmEngine:
    """One job-array task per unit (a run), through submitit; ``folder`` holds the jobs' pickles and logs.

    A job's end is read from its result file (written by submitit when the unit returns or raises)
    and from ``squeue``, so a job cancelled, killed, out of time or on a failed node is reported as
    that run's error, with its log, on clusters with accounting storage and without.
    """

    folder: Path
    partition: str | None = None
    time_min: int = 240
    gpus: int = 0
    cpus: int = 1
    cluster: str = "slurm"  # "local" or "debug": submitit's own local executors
    poll_s: float = 2.0
    array_parallelism: int = 256  # array tasks running at once (sbatch --array=0-N%P)
    extra: dict[str, Any] | None = None  # more submitit parameters for Slurm: account, qos, mem_gb, constraint ...
    result_wait_s: float = 30.0  # a COMPLETED job's result file may reach a network filesystem late

    @property
    def job_name(self) -> str:
        """``possym-`` and a digest of the folder: the jobs of one sweep directory, found again by a later call."""
        if self.extra and self.extra.get("name"):
            return str(self.extra["name"])
        return "possym-" + hashlib.sha1(str(Path(self.folder).resolve()).encode()).hexdigest()[:10]

    def _executor(self) -> Any:
        submitit = _require_extra("submitit", "slurm")
        executor = submitit.AutoExecutor(folder=str(self.folder), cluster=self.cluster)
        params: dict[str, Any] = {"timeout_min": self.time_min, "cpus_per_task": self.cpus, "name": self.job_name,
                                  "slurm_array_parallelism": self.array_parallelism}
        if self.gpus:
            params["gpus_per_node"] = self.gpus
        if self.partition:
            params["slurm_partition"] = self.partition
        generic = {"mem_gb", "nodes", "tasks_per_node", "stderr_to_stdout", "name"}  # submitit's own names
        for key, value in (self.extra or {}).items():
            params[key if key in generic else f"slurm_{key}"] = value
        try:
            executor.update_parameters(**params)
        except (NameError, ValueError) as exc:  # submitit lists the parameters it knows
            raise PossymError(f"engine.slurm: {exc}") from None
        return executor

    def _ended(self, jobs: list[Any]) -> dict[Any, str]:
        """The jobs that will not run again, each with its last state ("" when its result file is there)."""
        ended = {j: "" for j in jobs if j.paths.result_pickle.exists()}
        rest = [j for j in jobs if j not in ended]
        if not rest:
            return ended
        if self.cluster != "slurm":  # submitit's local executors know their processes
            return {**ended, **{j: "" for j in rest if j.done()}}
        states = squeue_states([j.job_id for j in rest]) or {}
        return {**ended, **{j: states[j.job_id] for j in rest if states.get(j.job_id) in SLURM_ENDED | {"GONE"}}}

    def _outcome(self, job: Any, state: str) -> tuple[Any, str | None]:
        if state == "COMPLETED":  # the job's script ended well: its result file is on its way
            deadline = time.monotonic() + self.result_wait_s
            while not job.paths.result_pickle.exists() and time.monotonic() < deadline:
                time.sleep(0.5)
        if state == "" or job.paths.result_pickle.exists():
            try:
                return job.result(), None
            except Exception as exc:  # submitit re-raises the unit's exception (a FailedJobError)
                return None, _job_error(exc)
        # The log first and the verdict last: a report shows an error's last line.
        return None, (f"{job.paths.stderr} ends:\n{_log_tail(job.paths.stderr)}\n"
                      f"slurm job {job.job_id} ended {state} without a result (cancelled, killed, out of time or "
                      "memory, or its node failed); its next run resumes it from its last saved state")

    def end_leftovers(self, timeout_s: float = 180) -> list[str]:
        """Cancel this folder's jobs that an earlier call left running, and wait until they have ended; return them.

        A sweep killed hard (SIGKILL, a lost login session) cannot cancel its jobs, and they train on;
        resubmitting their runs beside them would train each twice, into one directory. Cancelling
        loses at most the steps since their last resumable state, which the new jobs redo.
        """
        import subprocess

        user = ["--user", str(os.getuid())]
        query = ["squeue", "--noheader", "--array", "--name", self.job_name, *user, "--format=%i"]

        def alive() -> list[str]:
            done = subprocess.run(query, capture_output=True, text=True, timeout=60)
            if done.returncode != 0:
                raise PossymError(f"{' '.join(query)} failed: {done.stderr.strip()[-300:]}")
            return done.stdout.split()

        left = alive()
        if left:
            subprocess.run(["scancel", *left], capture_output=True, text=True, timeout=60)
            deadline = time.monotonic() + timeout_s
            while alive():
                if time.monotonic() > deadline:
                    raise PossymError(f"slurm jobs {', '.join(left)} of an earlier call into {self.folder} did not end "
                                      f"{timeout_s:.0f} s after scancel; they would train their runs beside new "
                                      "jobs. Wait for them (squeue), then rerun")
                time.sleep(self.poll_s)
        return left

    def map(self, fn: Callable[[Any], Any], items: list[Any]) -> Iterator[Outcome]:
        if not items:
            return
        executor = self._executor()
        if self.cluster == "slurm":
            self.end_leftovers()
        jobs = executor.map_array(fn, items)  # one sbatch for the lot: schedulers limit submissions
        pending = dict(zip(jobs, items, strict=True))
        try:
            while pending:
                for job, state in self._ended(list(pending)).items():
                    item = pending.pop(job)
                    result, error = self._outcome(job, state)
                    yield item, result, error
                if pending:
                    time.sleep(self.poll_s)
        finally:  # interrupted: cancel what has not ended
            for job in pending:
                job.cancel(check=False)


@dataclass(frozen=True)
class EngineConfig:
    """Where an experiment's runs run, ``engine.KEY=VALUE`` on ``possym sweep`` and ``possym reproduce``.

    ``name``: ``local`` (a process pool), ``ray`` or ``slurm``; ``workers``: runs at once on a local pool or a
    new local Ray instance (1: one at a time; ``possym reproduce`` then runs everything in its own process).
    Ray: ``address`` of a running cluster. Slurm: ``partition``, ``time_min`` minutes a run, ``gpus`` a run,
    ``cluster`` (``slurm`` submits with sbatch; ``local``/``debug``: submitit's local executors),
    ``array_parallelism`` array tasks at once, ``log_dir`` for the jobs' pickles and logs (default
    ``OUT/submitit``, on a filesystem the nodes share), and ``slurm``, any other submitit/sbatch setting as a
    mapping (``engine.slurm={account: abc, mem_gb: 16, qos: high}``).

    >>> EngineConfig(name="slurm", partition="gpu").time_min
    240
    """

    name: str = "local"
    workers: int = 1
    address: str | None = None
    partition: str | None = None
    time_min: int = 240
    gpus: int = 0
    cluster: str = "slurm"
    array_parallelism: int = 256
    log_dir: Path | None = None
    slurm: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        from possym.errors import ConfigError

        if self.name not in ENGINES:
            raise ConfigError(f"engine.name={self.name!r} is not an engine; allowed: {list(ENGINES)}")
        if self.cluster not in ("slurm", "local", "debug"):
            raise ConfigError(f"engine.cluster={self.cluster!r}; allowed: slurm, local (jobs as local processes), "
                              "debug")
        for key in ("workers", "time_min", "array_parallelism"):
            if getattr(self, key) < 1:
                raise ConfigError(f"engine.{key}={getattr(self, key)} must be >= 1")
        if self.gpus < 0:
            raise ConfigError(f"engine.gpus={self.gpus} must be >= 0")
        if self.slurm is not None and not isinstance(self.slurm, dict):
            raise ConfigError(f"engine.slurm={self.slurm!r}: give a mapping of submitit/sbatch settings, e.g. "
                              "{account: abc, mem_gb: 16}")


def make_engine(cfg: EngineConfig, out: Path, cpus: int = 1):
    """The engine ``cfg`` names, for an experiment writing into ``out``; ``cpus`` is what each run asks of Ray or
    Slurm (the experiment's torch threads per run)."""
    if cfg.name == "local":
        return LocalEngine(cfg.workers)
    if cfg.name == "ray":
        _require_extra("ray", "ray")
        return RayEngine(cfg.workers, cfg.address, cpus=cpus)
    import shutil

    _require_extra("submitit", "slurm")
    missing = [c for c in ("sbatch", "srun", "squeue") if shutil.which(c) is None]
    if cfg.cluster == "slurm" and missing:
        raise PossymError(f"engine.name=slurm submits with sbatch, but {', '.join(missing)} is not on PATH (run it on "
                          "a Slurm login node); engine.cluster=local runs the jobs as local processes")
    return SlurmEngine(Path(cfg.log_dir) if cfg.log_dir else Path(out) / "submitit", cfg.partition, cfg.time_min,
                       cfg.gpus, cpus, cluster=cfg.cluster, array_parallelism=cfg.array_parallelism,
                       extra=dict(cfg.slurm or {}))
