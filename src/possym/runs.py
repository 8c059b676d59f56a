"""The run directory: the unit of reproducibility (STYLE.md principle 5).

Layout (written before the first training step; every write is atomic: temp file + ``os.replace``)::

    RUN/
      config.yaml                 resolved RunConfig
      meta.json                   seeds, package versions, git commit, command line, threads, host
      metrics.jsonl               one JSON line per evaluation and the final test (possym.records.MetricsLog)
      checkpoints/step_000050.safetensors   weights only (fp32), config + step in the header
      state.pt                    latest full training state (model, optimiser, RNG) for exact resume
      best.json                   written when training ends: the best step (:meth:`RunDir.best`)

Analysis checkpoints keep only weights (~9.6 MB for the paper model), so the paper's 50-step grid
costs ~1.3 GB per run instead of ~4 GB with optimiser state; only the newest resumable state is kept.

The analyses' files (scores.csv, lengthgen.csv, ...) are listed once, with their row types, in
:data:`ARTIFACTS`; :meth:`RunDir.read` and :meth:`RunDir.write` go through it.

Example:
    >>> run = RunDir.open("runs/number")           # doctest: +SKIP
    >>> model = run.load_model(step="best")        # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import io
import itertools
import json
import logging
import numbers
import os
import platform
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
import yaml
from safetensors import SafetensorError
from safetensors.torch import load as st_load
from safetensors.torch import save as st_save

from possym.config import EXECUTION_KEYS, RunConfig, config_from_saved
from possym.errors import PossymError, RecordError, RunError
from possym.locks import LOCK_FILE, writer_lock
from possym.records import (
    AliasEvidenceRecord,
    CliffAccuracyFirstKeyRecord,
    CliffAccuracyHopsRecord,
    CliffAccuracyRecord,
    DilutionPredictionRecord,
    DiscrepancyAccuracyRecord,
    DiscrepancyHeadRecord,
    DiscrepancySummaryRecord,
    FrequencyUseRecord,
    GatedAccuracyRecord,
    HopAttentionRecord,
    HopMarginRecord,
    InputScoreRecord,
    KnockoutRecord,
    LandingRecord,
    LandingSummaryRecord,
    LengthRecord,
    MetricsLog,
    MetricsRecord,
    ModalityRecord,
    PlaneMarginRecord,
    PlaneScoreRecord,
    PositionScoreRecord,
    ProtocolCurveRecord,
    PurityRecord,
    R,
    Record,
    ScoreRecord,
    SharpenRecord,
    SplitScoreRecord,
    SustainedRecord,
    SustainedTallyRecord,
    Table1Record,
    TallyRecord,
    WindowKnockoutRecord,
    frame,
    read_records,
    records_csv,
    table_csv,
)

if TYPE_CHECKING:
    import pandas as pd

    from possym.config import ModelConfig
    from possym.model.gptj import GPTJ

__all__ = ["ARTIFACTS", "Artifact", "RunDir", "RunError", "StepSpec", "atomic_write_text", "ensure_run",
           "config_differences"]

CONFIG, META, METRICS, STATE, CKPT_DIR = "config.yaml", "meta.json", "metrics.jsonl", "state.pt", "checkpoints"
BEST = "best.json"

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Artifact:
    """A file an analysis writes into a run directory: its path inside RUN and, for a table, its row type."""

    name: str
    record: type[Record] | None = None


# Every analysis file of a run directory, by a stable name; nothing else spells these file names.
ARTIFACTS: dict[str, Artifact] = {
    "scores": Artifact("scores.csv", ScoreRecord),
    "purity": Artifact("purity.csv", PurityRecord),
    "purity_tally": Artifact("purity_tally.csv", TallyRecord),
    "frequency_use": Artifact("frequency_use.csv", FrequencyUseRecord),
    "table1": Artifact("table1.csv", Table1Record),
    "plane_scores": Artifact("plane_scores.csv", PlaneScoreRecord),
    "lengthgen": Artifact("lengthgen.csv", LengthRecord),
    "discrepancy_heads": Artifact("theory/discrepancy_heads.csv", DiscrepancyHeadRecord),
    "discrepancy_accuracy": Artifact("theory/discrepancy_accuracy.csv", DiscrepancyAccuracyRecord),
    "discrepancy_summary": Artifact("theory/discrepancy_summary.csv", DiscrepancySummaryRecord),
    "canonical": Artifact("canonical.json"),  # a canonical grid cell's analysis (possym.canonical.grid)
    "best": Artifact(BEST),
    "figures": Artifact("figures"),
    "cliff": Artifact("cliff"),  # the number model's cliff: CSV tables and settings.json (possym.stages.cliff)
    "l0": Artifact("l0"),  # scores split by hops and query, modality, sustained purity (possym.stages.l0)
    # dilution's prediction beside the measured mass per hop; the window knock-outs (stages.dilution_controls)
    "dilution_controls": Artifact("dilution_controls"),
    # The mechanism stages' tables, "{stage}_{table}": written from the library's DataFrames by RunDir.write_table.
    "cliff_accuracy": Artifact("cliff/accuracy.csv", CliffAccuracyRecord),
    "cliff_accuracy_hops": Artifact("cliff/accuracy_hops.csv", CliffAccuracyHopsRecord),
    "cliff_accuracy_first_key": Artifact("cliff/accuracy_first_key.csv", CliffAccuracyFirstKeyRecord),
    "cliff_landing": Artifact("cliff/landing.csv", LandingRecord),
    "cliff_landing_summary": Artifact("cliff/landing_summary.csv", LandingSummaryRecord),
    "cliff_plane_margins": Artifact("cliff/plane_margins.csv", PlaneMarginRecord),
    "cliff_gated": Artifact("cliff/gated.csv", GatedAccuracyRecord),
    "cliff_evidence": Artifact("cliff/evidence.csv", AliasEvidenceRecord),
    "dilution_attention": Artifact("dilution/attention.csv", HopAttentionRecord),
    "dilution_knockout": Artifact("dilution/knockout.csv", KnockoutRecord),
    "dilution_sharpen": Artifact("dilution/sharpen.csv", SharpenRecord),
    "l0_per_input": Artifact("l0/per_input.csv", InputScoreRecord),
    "l0_split": Artifact("l0/split.csv", SplitScoreRecord),
    "l0_split_position": Artifact("l0/split_position.csv", PositionScoreRecord),
    "l0_modality": Artifact("l0/modality.csv", ModalityRecord),
    "l0_sustained": Artifact("l0/sustained.csv", SustainedRecord),
    "l0_tally": Artifact("l0/tally.csv", SustainedTallyRecord),
    "dilution_controls_margins": Artifact("dilution_controls/margins.csv", HopMarginRecord),
    "dilution_controls_prediction": Artifact("dilution_controls/prediction.csv", DilutionPredictionRecord),
    "dilution_controls_knockouts": Artifact("dilution_controls/knockouts.csv", WindowKnockoutRecord),
    "length_protocol_curves": Artifact("length_protocol/curves.csv", ProtocolCurveRecord),
}

# A checkpoint named as the CLI and the API name it: a step number, "best" or "final".
StepSpec = int | str | None


_UMASK = os.umask(0)
os.umask(_UMASK)


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` so that ``path`` holds either the old or the new content, never a mix."""
    path = Path(path)
    with _naming(path):
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.chmod(tmp, 0o666 & ~_UMASK)  # mkstemp makes 0600; give the file the permissions open() would
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise


@contextlib.contextmanager
def _naming(path: Path) -> Iterator[None]:
    """An OS error while writing ``path`` names ``path``: not the temporary file beside it, nor nothing
    (a full disk's error comes from ``write``, which names no file)."""
    try:
        yield
    except OSError as exc:
        ours = exc.filename is None or Path(exc.filename).name.startswith(f".{path.name}.")  # the temporary file
        if exc.errno is None or not ours:
            raise  # a parent that is a file, say: the error names the right path already
        raise OSError(exc.errno, exc.strerror, str(path)) from exc


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write_bytes(path, text.encode())


def csv_text(rows: list[dict[str, Any]]) -> str:
    buf = io.StringIO()
    if rows:
        fields = list(dict.fromkeys(k for row in rows for k in row))
        writer = csv.DictWriter(buf, fieldnames=fields, lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    return buf.getvalue()


def read_csv(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def typed_row(row: dict[str, str]) -> dict[str, Any]:
    """A CSV row with numbers turned back into ints and floats ('' and other text stay as they are)."""
    out: dict[str, Any] = {}
    for key, value in row.items():
        for cast in (int, float):
            try:
                out[key] = cast(value)
                break
            except (TypeError, ValueError):
                continue
        else:
            out[key] = value
    return out


def git_commit() -> str | None:
    try:
        here = Path(__file__).resolve().parent
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=here, capture_output=True, text=True, timeout=5, check=True
        )
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"], cwd=here, capture_output=True, text=True
        ).stdout.strip()
        return out.stdout.strip() + ("-dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return None


def environment() -> dict[str, Any]:
    """Versions and machine facts that a result depends on."""
    versions: dict[str, str | None] = {}
    for pkg in ("possym", "torch", "numpy", "transformers", "safetensors"):
        try:
            versions[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            versions[pkg] = None
    return {
        "versions": versions,
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "git_commit": git_commit(),
        "torch_threads": torch.get_num_threads(),
    }


def step_list(steps: Sequence[int], most: int = 8) -> str:
    """Checkpoint steps for a message: all of them when few, else how many, their range and their spacing.

    >>> step_list([0, 10, 20])
    'steps [0, 10, 20]'
    >>> step_list(range(0, 4001, 50))
    '81 checkpoints, steps 0 to 4000 every 50'
    >>> step_list([*range(0, 400, 50), 420])
    '9 checkpoints, steps 0 to 420'
    """
    steps = list(steps)
    if len(steps) <= most:
        return f"steps {steps}"
    gaps = {b - a for a, b in itertools.pairwise(steps)}
    every = f" every {gaps.pop()}" if len(gaps) == 1 else ""
    return f"{len(steps)} checkpoints, steps {steps[0]} to {steps[-1]}{every}"


class RunDir:
    """A training run on disk. Create it with :meth:`create`, reopen it with :meth:`open`."""

    def __init__(self, path: Path, config: RunConfig, allow_unfinished: bool = False) -> None:
        self.path = Path(path)
        self.config = config
        # Whether "final" may name the last checkpoint of a run whose training has not ended (resolve_step).
        self.allow_unfinished = allow_unfinished

    # ---- creation and reopening -------------------------------------------------------------
    @classmethod
    def create(cls, path: str | Path, config: RunConfig, argv: list[str] | None = None) -> RunDir:
        path = Path(path)
        if path.exists() and not path.is_dir():
            raise RunError(f"{path} is a file, not a directory; choose a new --out directory")
        if (path / CONFIG).exists():
            raise RunError(f"{path} already holds a run; resume it with `possym train --resume {path}`")
        if path.exists() and any(p.name != LOCK_FILE for p in path.iterdir()):
            raise RunError(f"{path} exists and is not empty; choose a new --out directory")
        missing = [p for p in (path, *path.parents) if not p.exists()]  # what this call makes, deepest first
        try:
            # Under the run's lock, so that of two creators at once the second finds the first's config.
            with writer_lock(path, "run"):
                if (path / CONFIG).exists():
                    raise RunError(f"{path} already holds a run; resume it with `possym train --resume {path}`")
                return cls._write_new(path, config, argv)
        except BaseException:
            for folder in missing:  # a refused or failed create leaves the filesystem as it found it
                if folder.is_dir() and not any(folder.iterdir()):
                    folder.rmdir()
            raise

    @classmethod
    def _write_new(cls, path: Path, config: RunConfig, argv: list[str] | None) -> RunDir:
        atomic_write_text(path / CONFIG, yaml.safe_dump(config.to_dict(), sort_keys=False))
        meta = {
            "created": datetime.now(UTC).isoformat(timespec="seconds"),
            "seeds": config.to_dict()["seeds"],
            "command": argv if argv is not None else sys.argv,
            **environment(),
        }
        atomic_write_text(path / META, json.dumps(meta, indent=2) + "\n")
        (path / CKPT_DIR).mkdir(exist_ok=True)
        return cls(path, config)

    @classmethod
    def open(cls, path: str | Path, allow_unfinished: bool = False) -> RunDir:
        """The run directory at ``path``; ``allow_unfinished`` lets ``"final"`` name the last checkpoint of a
        run whose training has not ended (:meth:`resolve_step`)."""
        if not isinstance(allow_unfinished, bool):
            raise PossymError(f"allow_unfinished={allow_unfinished!r}: give True or False")
        path = Path(path)
        if not path.is_dir():
            raise RunError(f"{path} is not a directory; expected a run directory made by `possym train`")
        cfg_file = path / CONFIG
        if not cfg_file.is_file():
            inside = sorted(str(c.parent) for c in (path / "runs").glob(f"*/{CONFIG}"))
            hint = f"; it holds an experiment's runs: {', '.join(inside)}" if inside else ""
            raise RunError(f"{path} is not a run directory: it has no {CONFIG}{hint}")
        try:
            data = yaml.safe_load(cfg_file.read_text())
        except yaml.YAMLError as exc:
            raise RunError(f"{cfg_file} is not valid YAML: {exc}") from exc
        return cls(path, config_from_saved(data), allow_unfinished)

    def writing(self) -> contextlib.AbstractContextManager[None]:
        """Hold the run's writer lock (:func:`possym.locks.writer_lock`): a second writer is refused,
        naming this process, until the ``with`` block ends."""
        return writer_lock(self.path, "run")

    @property
    def meta(self) -> dict[str, Any]:
        return json.loads((self.path / META).read_text())

    def record_meta(self, **facts: Any) -> None:
        """Add ``facts`` to ``meta.json``: what the run found when it ran (the precision ``auto`` chose)."""
        atomic_write_text(self.path / META, json.dumps({**self.meta, **facts}, indent=2) + "\n")

    # ---- metrics -------------------------------------------------------------------------------
    def log(self, record: MetricsRecord) -> None:
        """Append ``record`` to the metrics log as one JSON line, written whole and fsynced, so a kill never
        splits it."""
        with _naming(self.path / METRICS), open(self.path / METRICS, "a") as f:
            f.write(json.dumps(record.to_json()) + "\n")
            f.flush()
            os.fsync(f.fileno())

    def metrics_log(self) -> MetricsLog:
        """The metrics log (``metrics.jsonl``): its records in order, each evaluation once.

        Refused (:class:`RunError`, naming the file and line): a missing file once the run has
        checkpoints (a run not yet started has no records), a line that is not a metrics record, and a
        second record of one ``(event, step)``. A last line that is not JSON is a record torn by a kill:
        it is dropped with a note, and the step is logged again on resume.
        """
        file = self.path / METRICS
        if not file.exists():
            if self.checkpoint_steps():
                raise RunError(f"{file} is missing although the run has checkpoints; restore it, or "
                               f"{self._retrain}")
            return MetricsLog()
        lines = file.read_text().splitlines()
        out: list[MetricsRecord] = []
        seen: dict[tuple[str, int], int] = {}
        for number, line in enumerate(lines, start=1):
            try:
                data = json.loads(line)
                if not isinstance(data, dict):
                    raise ValueError("not a JSON object")
            except ValueError as exc:
                if number == len(lines):
                    log.warning("possym: dropped the torn last line %d of %s (a kill while it was written)",
                                number, file)
                    break
                raise RunError(f"{file}, line {number}: not a JSON record ({exc}); restore the file, or "
                               f"{self._retrain}") from exc
            try:
                record = MetricsRecord.from_json(data)
            except RecordError as exc:
                raise RunError(f"{file}, line {number}: {exc}; restore the file, or {self._retrain}") from None
            key = (record.event, record.step)
            if key in seen:
                raise RunError(f"{file}, line {number}: a second {key[0]!r} record of step {key[1]} (the first "
                               f"is line {seen[key]}; two writers at once?); {self._retrain}")
            seen[key] = number
            out.append(record)
        return MetricsLog(tuple(out))

    def metrics(self) -> list[dict[str, Any]]:
        """The metrics log's lines as plain JSON objects (:meth:`metrics_log`, written back as it reads)."""
        return self.metrics_log().to_json()

    @property
    def _retrain(self) -> str:
        return f"retrain the run from scratch: delete {self.path / STATE} and run `possym train --resume {self.path}`"

    @property
    def finished(self) -> bool:
        """Whether training ended: the log holds the final test evaluation (:func:`possym.train.trainee.log_final`)."""
        return self.metrics_log().finished

    def truncate_metrics(self, after_step: int) -> None:
        """Drop records past ``after_step``, any final record and ``best.json`` (they are recomputed
        identically on resume); ``after_step=-1`` empties the log, for a restart from scratch."""
        # From scratch nothing is kept, so nothing is read: a lost or corrupt log does not stop the retraining.
        kept = [] if after_step < 0 else [r for r in self.metrics_log() if r.event == "eval" and r.step <= after_step]
        atomic_write_text(self.path / METRICS, "".join(json.dumps(r.to_json()) + "\n" for r in kept))
        (self.path / BEST).unlink(missing_ok=True)

    # ---- checkpoints ---------------------------------------------------------------------------
    def checkpoint_path(self, step: int) -> Path:
        return self.path / CKPT_DIR / f"step_{step:06d}.safetensors"

    def checkpoint_steps(self) -> list[int]:
        files = (self.path / CKPT_DIR).glob("step_*.safetensors")
        return sorted(int(f.stem.split("_")[1]) for f in files)

    def missing_checkpoints(self) -> list[int]:
        """Steps of the checkpoint grid (every ``train.checkpoint_every`` steps, and the last) up to the last
        checkpoint on disk, or to the end once training finished, whose file is absent (deleted by hand)."""
        have = self.checkpoint_steps()
        if not have:
            return []
        every, total = self.config.train.checkpoint_every, self.config.total_steps
        end = total if self.finished else have[-1]
        grid = set(range(0, end + 1, every)) | ({total} if end == total else set())
        return sorted(grid - set(have))

    def save_checkpoint(self, step: int, state_dict: dict[str, torch.Tensor]) -> Path:
        tensors = {k: v.detach().to("cpu", torch.float32).contiguous() for k, v in state_dict.items()}
        header = {"step": str(step), "config": json.dumps(self.config.to_dict())}
        path = self.checkpoint_path(step)
        atomic_write_bytes(path, st_save(tensors, metadata=header))
        return path

    def load_state_dict(self, step: int) -> dict[str, torch.Tensor]:
        path = self.checkpoint_path(step)
        if not path.is_file():
            available = step_list(self.checkpoint_steps())
            raise RunError(f"no checkpoint for step {step} in {self.path}; available: {available}")
        try:
            return st_load(path.read_bytes())
        except (SafetensorError, ValueError, RuntimeError) as exc:
            if step == self.config.total_steps:  # the last resumable state holds these weights
                advice = f"run `possym train --resume {self.path}`, which re-creates it from {STATE}"
            else:
                advice = (f"delete it to analyse the other checkpoints, or {self._retrain} to re-create it")
            raise RunError(f"checkpoint {path} is truncated or corrupt ({exc}); {advice}") from exc

    def load_model(
        self, step: StepSpec = None, dtype: torch.dtype = torch.float32, device: torch.device | str | None = None
    ) -> GPTJ:
        """The model at ``step`` (a number, ``"best"`` or ``"final"``; default: the last checkpoint), in eval
        mode, on ``device`` (default: the CPU; see :func:`possym.devices.resolve_device`)."""
        from possym.model.gptj import GPTJ

        model = GPTJ(self.model_config)
        model.load_state_dict(self.load_state_dict(self.resolve_step(step)))
        return model.to(device=device, dtype=dtype).eval()

    # ---- which checkpoint: a number, "best" or "final" ----------------------------------------
    def resolve_step(self, step: StepSpec = None) -> int:
        """The checkpoint step that ``step`` names: ``None`` the last one, ``"final"`` the last one of a
        finished run, ``"best"`` the earliest at the maximum validation accuracy (:meth:`best`), or a
        number that has a checkpoint. ``"final"`` on an unfinished run (:attr:`finished`) is refused, naming
        its last step, unless the run was opened with ``allow_unfinished``."""
        steps = self.checkpoint_steps()
        if not steps:
            raise RunError(f"{self.path} has no checkpoints yet")
        if step is None:
            return steps[-1]
        if step == "final":
            if not self.allow_unfinished and not self.finished:
                raise RunError(f"{self.path} is unfinished: {self.step_label(steps[-1])}; finish it with "
                               f"`possym train --resume {self.path}`, or analyse that step with --allow-unfinished "
                               "(allow_unfinished=True)")
            return steps[-1]
        if step == "best":
            best = self.best()
            if best is None:
                raise RunError(f"{self.path} has no validation record at a checkpoint, so no best step")
            return best
        if isinstance(step, str):
            if not step.isdigit():
                raise RunError(f"step {step!r}: give a checkpoint step number, 'best' or 'final'")
            step = int(step)
        if isinstance(step, bool) or not isinstance(step, numbers.Integral):
            raise RunError(f"step {step!r}: give a checkpoint step number, 'best' or 'final'")
        step = int(step)
        if step not in steps:
            raise RunError(f"no checkpoint for step {step} in {self.path}; available: {step_list(steps)}, "
                           "'best' or 'final'")
        return step

    def step_label(self, step: int) -> str:
        """How analyses name checkpoint ``step``: ``"step 400 (final)"`` once training ended there,
        ``"step 140 (unfinished, of 400)"`` for the last checkpoint of a run that has not."""
        total = self.config.total_steps
        if self.finished:
            return f"step {step} (final)" if step == total else f"step {step} of {total}"
        last = self.checkpoint_steps()[-1:] == [step]
        return f"step {step} (unfinished, of {total})" if last else f"step {step} of {total}"

    def best(self) -> int | None:
        """The best step: as recorded in ``best.json`` at the end of training, else derived from the
        metrics log (runs trained before it was recorded, or still training)."""
        file = self.path / BEST
        if file.is_file():
            try:
                return int(json.loads(file.read_text())["step"])
            except (ValueError, KeyError, TypeError) as exc:
                raise RunError(f"{file} is corrupt ({exc}); delete it: the best step is derived again from "
                               f"{METRICS}") from exc
        return self.metrics_log().best_step(self.checkpoint_steps())

    def write_best(self) -> int | None:
        """Record the best step in ``best.json`` (with its accuracy and the rule), for analyses to read."""
        metrics = self.metrics_log()
        step = metrics.best_step(self.checkpoint_steps())
        if step is None:
            return None
        accuracy = next(r.accuracy for r in metrics.evals if r.step == step)
        record = {"step": step, "accuracy": accuracy,
                  "rule": "earliest checkpoint at the maximum validation accuracy (HF load_best_model_at_end)"}
        atomic_write_text(self.path / BEST, json.dumps(record, indent=2) + "\n")
        return step

    @property
    def model_config(self) -> ModelConfig:
        """The model's config with ``d_vocab`` resolved from the task."""
        from possym.tasks import task_vocab

        return dataclasses.replace(self.config.model, d_vocab=len(task_vocab(self.config.task)))

    # ---- full training state for exact resume ------------------------------------------------
    def save_state(self, state: dict[str, Any]) -> None:
        buf = io.BytesIO()
        torch.save(state, buf)
        atomic_write_bytes(self.path / STATE, buf.getvalue())

    def load_state(self) -> dict[str, Any] | None:
        file = self.path / STATE
        if not file.exists():
            return None
        try:
            # On the CPU: the training loop moves the state to its own device, which may not be the saving one.
            return torch.load(file, weights_only=False, map_location="cpu")
        except Exception as exc:  # torch raises many types for a torn pickle/zip
            raise RunError(f"{file} is truncated or corrupt ({exc}); delete it to restart from scratch") from exc

    # ---- analysis outputs --------------------------------------------------------------------
    def artifact(self, key: str) -> Path:
        """The path of artifact ``key`` (a name in :data:`ARTIFACTS`)."""
        if key not in ARTIFACTS:
            raise RunError(f"unknown artifact {key!r}; known: {sorted(ARTIFACTS)}")
        return self.path / ARTIFACTS[key].name

    def read(self, key: str, kind: type[R]) -> list[R]:
        """The rows of table artifact ``key`` (none if it is not written yet)."""
        if ARTIFACTS[key].record is not kind:
            raise RunError(f"artifact {key!r} holds {ARTIFACTS[key].record}, not {kind.__name__}")
        return read_records(self.artifact(key), kind)

    def write(self, key: str, rows: Sequence[Record]) -> Path:
        """Write table artifact ``key`` atomically; every row must be of its record type."""
        kind = ARTIFACTS[key].record
        wrong = {type(r).__name__ for r in rows if type(r) is not kind}
        if kind is None or wrong:
            raise RunError(f"artifact {key!r} takes {getattr(kind, '__name__', 'no')} rows, not {sorted(wrong)}")
        path = self.artifact(key)
        atomic_write_text(path, records_csv(list(rows)))
        return path

    def write_table(self, key: str, table: pd.DataFrame) -> Path:
        """Write ``table``, a DataFrame a library computed, as table artifact ``key`` through its record type
        (:func:`~possym.records.table_csv`): a column the record lacks or needs is refused, naming both."""
        path = self.artifact(key)
        atomic_write_text(path, table_csv(table, _table_kind(key), f"{self.path.name}/{ARTIFACTS[key].name}"))
        return path

    def read_table(self, key: str) -> pd.DataFrame:
        """Table artifact ``key`` as a DataFrame of its records (:func:`~possym.records.frame`; none: no rows)."""
        kind = _table_kind(key)
        return frame(read_records(self.artifact(key), kind), kind)


def _table_kind(key: str) -> type[Record]:
    kind = ARTIFACTS[key].record if key in ARTIFACTS else None
    if kind is None:
        tables = sorted(k for k, a in ARTIFACTS.items() if a.record)
        raise RunError(f"artifact {key!r} is not a table; tables: {tables}")
    return kind


def config_differences(before: RunConfig, now: RunConfig) -> list[str]:
    """The ``section.key`` names on which two run configs differ as runs: the preset's name aside (it is a
    name, not a setting: ``paper_v1`` is what ``paper`` meant before, so a run is recognised by its values),
    and the execution keys aside (``train.threads``, ``train.device``, ...: :data:`possym.config.EXECUTION_KEYS`),
    which say how a run runs, not which run it is.

    ``train.precision="auto"`` asked of a run saved as ``fp32`` or ``bf16`` names that run: ``auto`` lets
    a run that exists keep its precision, and a possym before ``auto`` was kept wrote its answer into
    ``config.yaml``. Asked the other way (``bf16`` of a run saved as ``auto``) it is another request.

    >>> from possym.config import load_config
    >>> paper = load_config("number", "paper")
    >>> config_differences(paper, load_config("number", "paper", ["train.lr=3e-4", "train.threads=4"]))
    ['train.lr']
    """
    from possym.config import changed_keys

    a, b = before.to_dict(), now.to_dict()
    for side in (a, b):
        side.pop("preset", None)
        for key in EXECUTION_KEYS:
            side["train"].pop(key, None)
    if b["train"]["precision"] == "auto" and a["train"]["precision"] in ("fp32", "bf16"):
        b["train"]["precision"] = a["train"]["precision"]
    return changed_keys(a, b)


def ensure_run(path: str | Path, config: RunConfig, argv: list[str] | None = None) -> RunDir:
    """The run directory at ``path`` for ``config``: created if absent, reopened if it holds the same
    run (:func:`config_differences`), refused (naming what differs) if it holds another. The one "open or
    create" of possym. A reopened run takes ``config``'s execution keys (threads, device, ...) for this
    session; ``config.yaml`` keeps those it was created with.

    >>> import tempfile
    >>> from possym.config import load_config
    >>> out = Path(tempfile.mkdtemp()) / "run"
    >>> cfg = load_config("number", "quick")
    >>> ensure_run(out, cfg).config == ensure_run(out, cfg).config
    True
    >>> ensure_run(out, load_config("number", "quick", ["train.lr=3e-4"]))   # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    possym.errors.RunError: ... holds a run with another config (train.lr differ); ...
    """
    path = Path(path)
    if not (path / CONFIG).is_file():
        return RunDir.create(path, config, argv=argv)
    run = RunDir.open(path)
    differ = config_differences(run.config, config)
    if differ:
        raise RunError(f"{path} holds a run with another config ({', '.join(differ)} differ); "
                       "use a new output directory, or delete this run to start it again")
    how = {k: getattr(config.train, k) for k in EXECUTION_KEYS if hasattr(config.train, k)}
    return RunDir(path, dataclasses.replace(run.config, train=dataclasses.replace(run.config.train, **how)))


def save_figure(fig, stem: str | Path, formats: tuple[str, ...] = ("png", "svg")) -> list[Path]:
    """Save a matplotlib Figure as ``stem.png`` and ``stem.svg``, each written atomically."""
    paths = []
    for fmt in formats:
        buf = io.BytesIO()
        fig.savefig(buf, format=fmt, dpi=150, bbox_inches="tight")
        path = Path(f"{stem}.{fmt}")
        atomic_write_bytes(path, buf.getvalue())
        paths.append(path)
    return paths
