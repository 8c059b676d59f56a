"""The run directory: the unit of reproducibility (STYLE.md principle 5).

Layout (written before the first training step; every write is atomic: temp file + ``os.replace``)::

    RUN/
      config.yaml     resolved RunConfig, under a comment naming the run's identity
      meta.json       identity, the config it was made from, history, seeds, versions, commit, command, host;
                      diverged or nonfinite once training met a non-finite loss
      metrics.jsonl   one JSON line per evaluation and the final test (possym.records.MetricsLog)
      checkpoints/step_000050.safetensors   weights only (fp32); step, config and identity in the header
      state.pt        latest full training state for exact resume, with the identity, config and history
      best.json       written when training ends: the best step (:meth:`RunDir.best`)

Weights-only checkpoints (~9.6 MB for the paper model) make the 50-step grid ~1.3 GB a run instead of ~4 GB
with optimiser state; only the newest resumable state is kept. A run trusts nothing it did not write (STYLE.md
principle 24: :func:`identity_of`, :meth:`RunDir.train_on`, :meth:`RunDir.writing`): docs/choices.md, "A run
trusts nothing it did not write". The analyses' files are listed once in :data:`ARTIFACTS`, through which
:meth:`RunDir.read` and :meth:`RunDir.write` go.

Example:
    >>> run = RunDir.open("runs/number")           # doctest: +SKIP
    >>> model = run.load_model(step="best")        # doctest: +SKIP"""

from __future__ import annotations

import contextlib
import copy
import csv
import dataclasses
import hashlib
import io
import itertools
import json
import logging
import numbers
import os
import platform
import re
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

from possym.config import EXECUTION_KEYS, ConfigError, RunConfig, config_from_saved
from possym.errors import DivergedError, EarlierLayoutError, IdentityError, PossymError, RecordError, RunError
from possym.locks import LOCK_FILE, writer_lock
from possym.records import (
    DiscrepancyAccuracyRecord,
    DiscrepancyHeadRecord,
    DiscrepancySummaryRecord,
    FrequencyUseRecord,
    LengthRecord,
    MetricsLog,
    MetricsRecord,
    PurityRecord,
    R,
    Record,
    ScoreRecord,
    Table1Record,
    TallyRecord,
    frame,
    read_records,
    records_csv,
    table_csv,
    table_record,
)

if TYPE_CHECKING:
    import pandas as pd

    from possym.config import ModelConfig
    from possym.model.gptj import GPTJ

__all__ = ["ARTIFACTS", "Artifact", "RunDir", "RunError", "StepSpec", "atomic_write_text", "config_differences",
           "ensure_run", "identity_of", "remove_orphans", "value_changes"]

CONFIG, META, METRICS, STATE, CKPT_DIR = "config.yaml", "meta.json", "metrics.jsonl", "state.pt", "checkpoints"
BEST = "best.json"
STATE_RUN = "run"  # the key of a resumable state that holds the run's identity, config, history and precision

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Artifact:
    """A file an analysis writes into a run directory: its path inside RUN and, for a table, its row type: a record
    class where code reads the rows by field, else the table's spec line, ``columns`` (its columns and their types,
    :func:`~possym.records.table_record`)."""

    name: str
    record: type[Record] | None = None
    columns: str = ""

    def __post_init__(self) -> None:
        if self.columns:
            object.__setattr__(self, "record", table_record(self.name, self.columns))


# Every analysis file of a run directory, by a stable name; nothing else spells these file names.
ARTIFACTS: dict[str, Artifact] = {
    "scores": Artifact("scores.csv", ScoreRecord),
    "purity": Artifact("purity.csv", PurityRecord),
    "purity_tally": Artifact("purity_tally.csv", TallyRecord),
    "frequency_use": Artifact("frequency_use.csv", FrequencyUseRecord),
    "table1": Artifact("table1.csv", Table1Record),
    # s_POS, s_SYM of the projection head of one RoPE plane, at the table step
    "plane_scores": Artifact("plane_scores.csv", columns="step:int layer:int head:int frequency_id:int s_pos:float "
                                                         "s_sym:float"),
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
    "dilution": Artifact("dilution"),  # a letter run's hop attention, knock-outs, sharpening (possym.stages.dilution)
    "length_protocol": Artifact("length_protocol"),  # length curves under every reading (stages.length_protocol)
    # The mechanism stages' tables, "{stage}_{table}": written from the library's DataFrames by RunDir.write_table and
    # read back as frames, never by field: a spec line each, its columns and their types (? : a blank is None).
    "cliff_accuracy": Artifact("cliff/accuracy.csv", columns=(
        "extra:int n_hops:int answer_pos:int n:int correct:int accuracy:float ci_low:float ci_high:float")),
    "cliff_accuracy_hops": Artifact("cliff/accuracy_hops.csv", columns=(
        "extra:int n_hops:int n:int correct:int accuracy:float ci_low:float ci_high:float")),
    "cliff_accuracy_first_key": Artifact("cliff/accuracy_first_key.csv", columns=(
        "extra:int n_hops:int first_key_pos:int n:int correct:int accuracy:float ci_low:float ci_high:float")),
    "cliff_landing": Artifact("cliff/landing.csv", columns=(
        "input:int extra:int n_hops:int answer_pos:int correct:bool query:int query_pos:int right_key:int layer:int "
        "head:int argmax_key:int offset:int p_max:float p_right:float alias_exists:bool p_alias:float prefix:int")),
    "cliff_landing_summary": Artifact("cliff/landing_summary.csv", columns=(
        "layer:int head:int query:int correct:bool alias_exists:bool n:int share_right:float share_alias:float "
        "share_alias_any:float share_other:float mode_offset:int mode_share:float top_offsets:str mean_p_right:float "
        "mean_p_alias:float n_alias_exists:int alias:int plane:int")),
    "cliff_plane_margins": Artifact("cliff/plane_margins.csv", columns=(
        "layer:int head:int query:int on_alias:bool plane:int n:int mean_margin:float mean_abs_margin:float")),
    "cliff_gated": Artifact("cliff/gated.csv", columns=(
        "layer:int plane:int extra:int n_hops:int n:int correct:int accuracy:float ci_low:float ci_high:float")),
    "cliff_evidence": Artifact("cliff/evidence.csv", columns=(
        "layer:int plane:int alias:int n_fail_alias:int share_alias_fail:float share_alias_pass:float acc_below:float "
        "acc_above:float acc_below_gated:float acc_above_gated:float landing_supports:bool gate_supports:bool "
        "supported:bool")),
    "dilution_attention": Artifact("dilution/attention.csv", columns=(
        "extra:int seq_len:int n_hops:int layer:int head:int query_hop:int n:int next_hop:float next_hop_sd:float "
        "chain:float answer:float extra_mass:float extra_mass_sd:float extra_max:float rest:float next_is_max:float "
        "step:int")),
    "dilution_knockout": Artifact("dilution/knockout.csv", columns=(
        "knocked_out:str extra:int seq_len:int n_hops:int accuracy:float correct:int n:int ci_low:float ci_high:float "
        "step:int")),
    "dilution_sharpen": Artifact("dilution/sharpen.csv", columns=(
        "beta:float layers:str extra:int seq_len:int n_hops:int accuracy:float correct:int n:int ci_low:float "
        "ci_high:float set:str step:int")),
    "l0_per_input": Artifact("l0/per_input.csv", columns=(
        "input:int n_hops:int query:str query_pos:int layer:int head:int s_pos:float s_sym:float entropy:float "
        "step:int")),
    "l0_split": Artifact("l0/split.csv", columns=(
        "step:int query:str n_hops:int layer:int head:int n:int s_pos:float s_sym:float s_pos_sd:float s_pos_low:float "
        "s_pos_high:float s_sym_sd:float s_sym_low:float s_sym_high:float share_positional:float "
        "share_symbolic:float")),
    "l0_split_position": Artifact("l0/split_position.csv", columns=(
        "step:int query_pos:int layer:int head:int n:int s_pos:float s_sym:float s_pos_sd:float s_pos_low:float "
        "s_pos_high:float s_sym_sd:float s_sym_low:float s_sym_high:float share_positional:float "
        "share_symbolic:float")),
    "l0_modality": Artifact("l0/modality.csv", columns=(
        "step:int layer:int head:int query:str score:str n:int critical_bandwidth:float p_value:float n_boot:int "
        "antimode:float share_above:float mean_below:float mean_above:float mixture:bool")),
    "l0_sustained": Artifact("l0/sustained.csv", columns=(
        "layer:int head:int kind:str gamma:float min_run:int ever_point:bool longest_run:int first_sustained:int? "
        "share_ever:float share_sustained:float counted:bool")),
    "l0_tally": Artifact("l0/tally.csv", columns=(
        "kind:str gamma:float min_run:int level:float ever_point:int counted:int layers_ever_point:str "
        "layers_counted:str")),
    "dilution_controls_margins": Artifact("dilution_controls/margins.csv", columns=(
        "extra:int layer:int head:int n_hops:int query_hop:int margin:float window:float mass:float extra_mass:float "
        "checkpoint:str step:int")),
    "dilution_controls_prediction": Artifact("dilution_controls/prediction.csv", columns=(
        "layer:int head:int n_hops:int query_hop:int n_extra:int n:int margin:float reference_margin:float "
        "measured:float predicted:float residual:float checkpoint:str step:int")),
    "dilution_controls_knockouts": Artifact("dilution_controls/knockouts.csv", columns=(
        "extra:int n_hops:int query_hop:int chosen:str fraction:float draw:int n_knocked:int layer:int head:int "
        "n:float mass:float extra_mass:float predicted:float accuracy:float")),
    "length_protocol_curves": Artifact("length_protocol/curves.csv", columns=(
        "extra:int n_hops:int seq_len:int accuracy:float n:int correct:int ci_low:float ci_high:float n_prefixes:int "
        "prefix_sd:float cluster_low:float cluster_high:float mode:str extra_tokens:str hop_mix:str checkpoint:str "
        "step:int")),
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




# ---- a run's identity (STYLE.md principle 24) ------------------------------------------------------------

def _computed(data: dict[str, Any]) -> dict[str, Any]:
    """A run config's plain data less what does not change what it computes: the preset's name and the
    execution keys (:data:`possym.config.EXECUTION_KEYS`)."""
    out = {k: dict(v) if isinstance(v, dict) else v for k, v in data.items()}
    out.pop("preset", None)
    for key in EXECUTION_KEYS:
        out.get("train", {}).pop(key, None)
    return out


def identity_of(config: RunConfig) -> str:
    """The identity of a run of ``config``: the first 16 hex digits of the SHA-256 of its resolved config and
    seeds as canonical JSON, less the preset's name and the execution keys (threads, device, ...: they do not
    change what a run computes; :func:`config_differences`). Computed once, when the run is created, and
    recorded in ``meta.json``; every file the run writes carries it (:class:`RunDir`).

    >>> from possym.config import load_config
    >>> quick = load_config("number", "quick")
    >>> len(identity_of(quick)), identity_of(quick) == identity_of(load_config("number", "quick", ["seeds.init=1"]))
    (16, False)
    >>> identity_of(quick) == identity_of(load_config("number", "quick", ["train.threads=4"]))
    True
    """
    text = json.dumps(_computed(config.to_dict()), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _value(data: dict[str, Any], key: str) -> Any:
    section, _, name = key.partition(".")
    return data.get(section, {}).get(name) if name else data.get(section)


def value_changes(before: RunConfig, now: RunConfig) -> list[tuple[str, Any, Any]]:
    """``(section.key, before's value, now's value)`` for each key on which two run configs differ as runs
    (:func:`config_differences`).

    >>> from possym.config import load_config
    >>> value_changes(load_config("number", "quick"), load_config("number", "quick", ["train.lr=0.01"]))
    [('train.lr', 0.001, 0.01)]
    """
    a, b = before.to_dict(), now.to_dict()
    return [(key, _value(a, key), _value(b, key)) for key in config_differences(before, now)]


def _shown(value: Any) -> str:
    return json.dumps(value) if not isinstance(value, str) else repr(value)


def changes_text(changes: Sequence[tuple[str, Any, Any]], most: int = 6) -> str:
    """``train.lr 0.001 -> 0.01, task.n_train 2000 -> 3000`` (the first ``most``, and how many more)."""
    shown = [f"{key} {_shown(old)} -> {_shown(new)}" for key, old, new in changes[:most]]
    more = f" and {len(changes) - most} more" if len(changes) > most else ""
    return ", ".join(shown) + more


def config_text(config: RunConfig, identity: str) -> str:
    """``config.yaml``'s text: the config as YAML, under a comment that names the run's identity."""
    return (f"# possym run {identity}: its identity, a hash of this config as it was made (meta.json records both).\n"
            "# The run refuses an edited config; train on with `possym train --resume RUN train.steps=N`.\n"
            + yaml.safe_dump(config.to_dict(), sort_keys=False))


def safetensors_metadata(data: bytes) -> dict[str, str]:
    """The metadata of a safetensors file's bytes (its header's ``__metadata__``; a checkpoint's step, config
    and identity); ValueError where the header is torn."""
    if len(data) < 8:
        raise ValueError("shorter than a safetensors header")
    size = int.from_bytes(data[:8], "little")
    if size > len(data) - 8:
        raise ValueError("its header runs past the end of the file")
    head = json.loads(data[8 : 8 + size])
    meta = head.get("__metadata__") if isinstance(head, dict) else None
    return dict(meta) if isinstance(meta, dict) else {}


def checkpoint_header(path: Path) -> dict[str, str] | None:
    """A checkpoint file's metadata, read from its header alone; None where it is not a readable checkpoint."""
    try:
        with open(path, "rb") as f:
            size = int.from_bytes(f.read(8), "little")
            if not 0 < size < 100_000_000:
                return None
            return safetensors_metadata(size.to_bytes(8, "little") + f.read(size))
    except (OSError, ValueError):
        return None


def _read_meta(path: Path) -> tuple[dict[str, Any], str | None]:
    """``meta.json``'s content, or ({}, what is wrong with it)."""
    file = path / META
    if not file.exists():
        return {}, "missing"
    if not file.is_file():
        return {}, "a directory where a file belongs"
    try:
        data = json.loads(file.read_text())
    except (ValueError, UnicodeDecodeError) as exc:
        return {}, f"not valid JSON ({exc})"
    if not isinstance(data, dict):
        return {}, f"not a JSON object (it holds a {type(data).__name__})"
    return data, None


def _earlier(file: Path, run: Path, exc: Exception) -> str:
    """The one line that refuses a run an earlier possym wrote, naming the file and the command that upgrades it."""
    return f"{file}: {exc}; upgrade the run once with `possym migrate {run}` (or the experiment directory holding it)"


# The temporary files of atomic_write_bytes (tempfile.mkstemp: prefix ".NAME.", 8 random characters, ".tmp").
_ORPHAN = re.compile(r"^\..+\.[a-z0-9_]{8}\.tmp$")


def remove_orphans(directory: str | Path, skip: tuple[str, ...] = ()) -> list[Path]:
    """Delete the temporary files that interrupted atomic writes left in ``directory`` and below it (not under
    a folder named in ``skip``); returns them. Only the holder of the directory's writer lock may call it: no
    other process writes there then, so every such file is an orphan."""
    root = Path(directory)
    removed = []
    for path in root.rglob(".*.tmp"):
        if skip and any(part in skip for part in path.relative_to(root).parts[:-1]):
            continue
        if _ORPHAN.match(path.name) and path.is_file() and not path.is_symlink():
            path.unlink(missing_ok=True)
            removed.append(path)
    return removed


class RunDir:
    """A training run on disk. Create it with :meth:`create`, reopen it with :meth:`open`."""

    def __init__(self, path: Path, config: RunConfig, allow_unfinished: bool = False, *,
                 identity: str | None = None) -> None:
        self.path = Path(path)
        self.config = config
        # Whether "final" may name the last checkpoint of a run whose training has not ended (resolve_step).
        self.allow_unfinished = allow_unfinished
        self._identity = identity
        # meta.json's content rebuilt from the run's other files, while the file is missing or damaged
        self._fallback: dict[str, Any] | None = None
        # the config as config.yaml holds it (session execution keys aside), and whether the file was empty
        self._file_config = config
        self._config_empty = False

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
        identity = identity_of(config)
        meta = {
            "created": datetime.now(UTC).isoformat(timespec="seconds"),
            "identity": identity,
            "seeds": config.to_dict()["seeds"],
            "command": argv if argv is not None else sys.argv,
            **environment(),
            "config": config.to_dict(),  # what config.yaml must hold (execution keys aside): an edit is refused
            "history": [],  # each change asked for since: train.steps extended (RunDir.train_on)
        }
        # A kill between the two leaves a run without meta.json: the next writer writes it from config.yaml.
        atomic_write_text(path / CONFIG, config_text(config, identity))
        atomic_write_text(path / META, json.dumps(meta, indent=2) + "\n")
        (path / CKPT_DIR).mkdir(exist_ok=True)
        return cls(path, config, identity=identity)

    @classmethod
    def open(cls, path: str | Path, allow_unfinished: bool = False) -> RunDir:
        """The run directory at ``path``; ``allow_unfinished`` lets ``"final"`` (and ``None``) name the last
        checkpoint of a run whose training has not ended (:meth:`resolve_step`).

        ``config.yaml`` is checked against the config the run recorded (``meta.json``; for a run made before
        identities, its newest checkpoint's): an edit is refused (:class:`~possym.errors.IdentityError`),
        naming each changed key with its old and new values. A missing or damaged ``meta.json`` is read from
        the run's other files (``state.pt``, a checkpoint's header) and an empty ``config.yaml`` from the
        recorded config, each with a warning; the next writer writes them back (:meth:`writing`). Nothing is
        written here: a reader may open a run in a read-only directory."""
        if not isinstance(path, str | os.PathLike):
            raise PossymError(f"a run directory is a path (str or pathlib.Path), not {type(path).__name__} {path!r}")
        if not isinstance(allow_unfinished, bool):
            raise PossymError(f"allow_unfinished={allow_unfinished!r}: give True or False")
        path = Path(path)
        if not path.is_dir():
            raise RunError(f"{path} is not a directory; expected a run directory made by `possym train`")
        cfg_file = path / CONFIG
        if cfg_file.is_dir():
            raise RunError(f"{cfg_file} is a directory where the run's config file belongs; move it away and put "
                           f"the run's config.yaml back")
        if not cfg_file.is_file():
            inside = sorted(str(c.parent) for c in (path / "runs").glob(f"*/{CONFIG}"))
            hint = f"; it holds an experiment's runs: {', '.join(inside)}" if inside else ""
            if not inside and (path / META).is_file():
                hint = f"; its {META} remains: put the run's {CONFIG} back"
            raise RunError(f"{path} is not a run directory: it has no {CONFIG}{hint}")
        run = cls(path, RunConfig(), allow_unfinished)
        meta, problem = _read_meta(path)
        if problem is not None:
            run._fallback = run._rebuilt_meta(problem)
            meta = run._fallback or {}
        recorded, source = run._recorded_config(meta)
        try:
            data = yaml.safe_load(cfg_file.read_text())
        except (yaml.YAMLError, UnicodeDecodeError) as exc:
            raise RunError(f"{cfg_file} is not valid YAML ({' '.join(str(exc).split())}); fix it"
                           f"{run._values_hint(source)}") from exc
        if data is None and recorded is not None:
            config = recorded
            run._config_empty = True
            log.warning("possym: %s is empty; read the run's config from %s (the next writer writes it back)",
                        cfg_file, source)
        elif data is None:
            raise RunError(f"{cfg_file} is empty, and the run recorded its config nowhere else; put the run's "
                           f"config.yaml back")
        else:
            try:
                config = config_from_saved(data)
            except EarlierLayoutError as exc:
                raise EarlierLayoutError(_earlier(cfg_file, path, exc)) from None
            except ConfigError as exc:
                raise RunError(f"{cfg_file} is not a run config ({exc}); fix it{run._values_hint(source)}") from None
        if recorded is not None and not run._config_empty:
            changes = value_changes(recorded, config)
            if changes:
                raise IdentityError(run._edited(changes, source))
        run.config = run._file_config = config
        if problem is not None:
            if run._fallback is None:  # nothing else records it: the run's identity from its config
                run._fallback = run._meta_from(config.to_dict(), identity_of(config), f"{cfg_file}", problem)
            log.warning("possym: %s is %s; read the run's identity (%s) from %s (the next writer writes it back)",
                        path / META, problem, run._fallback["identity"], run._fallback["rebuilt"]["from"])
        return run

    def _recorded_config(self, meta: dict[str, Any]) -> tuple[RunConfig | None, str]:
        """The config the run recorded, and where: ``meta.json``'s, else (a run made before identities) the
        newest checkpoint's header's."""
        if isinstance(meta.get("config"), dict):
            source = str(self.path / META) if self._fallback is None else self._fallback["rebuilt"]["from"]
            try:
                return config_from_saved(meta["config"]), source
            except EarlierLayoutError as exc:
                raise EarlierLayoutError(_earlier(Path(source), self.path, exc)) from None
            except ConfigError as exc:
                raise RunError(f"{source}: its recorded config does not read ({exc}); the file is damaged") from None
        for step in reversed(self._steps_on_disk()):
            header = checkpoint_header(self.checkpoint_path(step))
            if header and "config" in header:
                try:
                    return config_from_saved(json.loads(header["config"])), str(self.checkpoint_path(step))
                except EarlierLayoutError as exc:
                    raise EarlierLayoutError(_earlier(self.checkpoint_path(step), self.path, exc)) from None
                except (ValueError, ConfigError):
                    continue
        return None, ""

    def _values_hint(self, source: str) -> str:
        return f" (the run's own values are recorded in {source})" if source else ""

    def _edited(self, changes: list[tuple[str, Any, Any]], source: str) -> str:
        steps = next((new for key, _, new in changes if key == "train.steps"), None)
        more = ""
        if steps is not None and len(changes) == 1:
            more = (f"; to train on to {steps} steps, put train.steps back and run `possym train --resume "
                    f"{self.path} train.steps={steps}`")
        return (f"{self.path / CONFIG} was edited after the run was made: {changes_text(changes)}; the run "
                f"computed with the values recorded in {source}, so it refuses to resume or be analysed with "
                f"these: put those values back, or train a new run with them (`possym train --out NEW ...`){more}")

    def _meta_from(self, config: dict[str, Any], identity: str, source: str, problem: str,
                   history: list[Any] | None = None, precision: str | None = None) -> dict[str, Any]:
        meta: dict[str, Any] = {"identity": identity, "seeds": config.get("seeds"), "config": config,
                                "history": list(history or [])}
        if precision is not None:
            meta["precision"] = precision
        meta["rebuilt"] = {"time": datetime.now(UTC).isoformat(timespec="seconds"), "from": source, "was": problem}
        return meta

    def _rebuilt_meta(self, problem: str) -> dict[str, Any] | None:
        """``meta.json`` as the run's other files record it: the resumable state's entry (identity, config,
        history, precision), else the newest checkpoint's header (identity, config); None where neither does."""
        state = self.path / STATE
        if state.is_file():
            try:
                entry = torch.load(state, weights_only=False, map_location="cpu").get(STATE_RUN)
            except Exception:  # a torn state: the checkpoints may still tell
                entry = None
            if isinstance(entry, dict) and "identity" in entry and isinstance(entry.get("config"), dict):
                return self._meta_from(entry["config"], entry["identity"], str(state), problem, entry.get("history"),
                                       entry.get("precision"))
        for step in reversed(self._steps_on_disk()):
            header = checkpoint_header(self.checkpoint_path(step))
            if header and "identity" in header and "config" in header:
                try:
                    config = json.loads(header["config"])
                except ValueError:
                    continue
                return self._meta_from(config, header["identity"], str(self.checkpoint_path(step)), problem)
        return None

    def session(self, config: RunConfig) -> RunDir:
        """This run with ``config``'s execution keys (threads, device, ...) for this session (:func:`ensure_run`)."""
        how = {k: getattr(config.train, k) for k in EXECUTION_KEYS if hasattr(config.train, k)}
        out = copy.copy(self)
        out.config = dataclasses.replace(self.config, train=dataclasses.replace(self.config.train, **how))
        return out

    def writing(self) -> contextlib.AbstractContextManager[None]:
        """Hold the run's writer lock (:func:`possym.locks.writer_lock`): a second writer is refused,
        naming this process, until the ``with`` block ends.

        The writer's open puts the run directory in order first: it removes the temporary files an
        interrupted write left (:func:`remove_orphans`), writes back a missing or damaged ``meta.json`` (a
        damaged one is kept as ``meta.json.damaged``) and an empty ``config.yaml`` from what the run's other
        files record, and records the identity of a run made before identities existed."""
        return writer_lock(self.path, "run", on_acquire=self._writer_opened)

    def _writer_opened(self) -> None:
        removed = remove_orphans(self.path)
        if removed:
            log.info("possym: removed %d temporary file(s) that an interrupted write left in %s: %s", len(removed),
                     self.path, ", ".join(str(p.relative_to(self.path)) for p in removed))
        file = self.path / META
        data, problem = _read_meta(self.path)
        if problem is not None:
            if file.is_dir():
                raise RunError(f"{file} is a directory where the run's {META} belongs; move it away, and this "
                               "writer rebuilds the file")
            if file.is_file():
                os.replace(file, file.with_name(f"{META}.damaged"))
            atomic_write_text(file, json.dumps(self.meta, indent=2) + "\n")
            log.warning("possym: wrote %s back from %s (it was %s)", file, self.meta["rebuilt"]["from"], problem)
            self._fallback = None
        elif "identity" not in data or not isinstance(data.get("config"), dict):
            # A run made before identities: its identity from its config, which matched its checkpoints at open.
            data |= {"identity": self.identity, "config": self._file_config.to_dict(),
                     "history": data.get("history", []),
                     "identity_recorded": datetime.now(UTC).isoformat(timespec="seconds")}
            atomic_write_text(file, json.dumps(data, indent=2) + "\n")
            log.info("possym: recorded the identity %s of %s, a run made before identities", self.identity, self.path)
        if self._config_empty:
            atomic_write_text(self.path / CONFIG, config_text(self._file_config, self.identity))
            log.warning("possym: wrote %s back from the config the run recorded", self.path / CONFIG)
            self._config_empty = False

    @property
    def identity(self) -> str:
        """The run's identity (:func:`identity_of` of its config when it was made), as ``meta.json`` records it;
        a run made before identities has the identity of its config."""
        if self._identity is None:
            self._identity = str(self.meta.get("identity") or identity_of(self._file_config))
        return self._identity

    @property
    def meta(self) -> dict[str, Any]:
        """``meta.json``'s content; while the file is missing or damaged, what the run's other files record of it."""
        data, problem = _read_meta(self.path)
        if problem is None:
            return data
        if self._fallback is None:
            self._fallback = self._rebuilt_meta(problem) or self._meta_from(
                self._file_config.to_dict(), identity_of(self._file_config), str(self.path / CONFIG), problem)
        return copy.deepcopy(self._fallback)

    def record_meta(self, **facts: Any) -> None:
        """Add ``facts`` to ``meta.json``: what the run found when it ran (the precision ``auto`` chose)."""
        atomic_write_text(self.path / META, json.dumps({**self.meta, **facts}, indent=2) + "\n")

    @property
    def history(self) -> list[dict[str, Any]]:
        """The changes asked of the run since it was made (:meth:`train_on`), oldest first."""
        return list(self.meta.get("history") or [])

    # ---- training on ---------------------------------------------------------------------------
    def train_on(self, steps: int, argv: list[str] | None = None) -> RunDir:
        """Ask the run to train on to ``steps`` optimiser steps (more than it has): ``train.steps`` becomes
        ``steps`` in ``config.yaml`` and ``meta.json``, and the change goes into the run's history with the step
        its resumable state holds, from which training goes on (``possym train --resume RUN train.steps=N``
        calls this, then trains). The steps taken keep what they computed; from that step on the learning
        rate follows the schedule of the new total (:func:`possym.train.schedule.lr_factor` with ``total =
        steps``): the run equals one trained on from the same checkpoint with that total. Returns the run with
        its new config; ``steps`` equal to the run's own changes nothing."""
        if isinstance(steps, bool) or not isinstance(steps, numbers.Integral) or steps < 1:
            raise ConfigError(f"train.steps={steps!r} must be a whole number of steps >= 1")
        steps = int(steps)
        with self.writing():
            if self.diverged:
                raise DivergedError(f"{self.path} {self.status()}, and from its last state it would diverge again at "
                                    "the same step; train a new run with other settings (a lower train.lr, a longer "
                                    "train.warmup_steps)", (str(self.path),))
            before = self._file_config.total_steps
            if steps == before:
                return self
            if steps < before:
                raise ConfigError(f"train.steps={steps} is fewer than the {before} steps {self.path} trains; a run "
                                  f"trains on, never back: give more than {before}, or train a new run")
            state = self.load_state()
            at = 0 if state is None else int(state["step"])
            train = dataclasses.replace(self._file_config.train, steps=steps)
            config = dataclasses.replace(self._file_config, train=train)
            meta = self.meta
            meta["config"] = config.to_dict()
            meta["history"] = [*self.history, {"time": datetime.now(UTC).isoformat(timespec="seconds"), "step": at,
                                               "changed": {"train.steps": [before, steps]},
                                               "command": argv if argv is not None else sys.argv}]
            atomic_write_text(self.path / CONFIG, config_text(config, self.identity))
            atomic_write_text(self.path / META, json.dumps(meta, indent=2) + "\n")
            out = copy.copy(self)
            out._file_config = config
            out.config = dataclasses.replace(self.config, train=dataclasses.replace(self.config.train, steps=steps))
            return out

    # ---- what a run is: finished, unfinished, diverged ------------------------------------------
    @property
    def diverged(self) -> dict[str, Any] | None:
        """Where training stopped on a non-finite loss (``train.on_nonfinite=stop``): ``{step, loss, cause,
        last_checkpoint}``, or None."""
        return self.meta.get("diverged")

    @property
    def nonfinite(self) -> dict[str, Any] | None:
        """Where a run trained with ``train.on_nonfinite=continue`` first met a non-finite loss (``{step,
        loss}``), or None."""
        return self.meta.get("nonfinite")

    def status(self) -> str:
        """How the run stands, the words every place that shows a run uses: ``finished``, ``unfinished at
        step 140 of 400``, ``diverged at step 2 (loss nan; last finite checkpoint: step 0)``, with
        ``, its loss non-finite from step 2 (train.on_nonfinite=continue)`` where that holds."""
        diverged, nonfinite = self.diverged, self.nonfinite
        if diverged is not None:
            return (f"diverged at step {diverged['step']} (loss {diverged.get('loss')}; last finite checkpoint: "
                    f"step {diverged.get('last_checkpoint')})")
        steps = self.checkpoint_steps()
        last = steps[-1] if steps else 0
        text = "finished" if self.finished else f"unfinished at step {last} of {self.config.total_steps}"
        if nonfinite is not None:
            text += f", its loss non-finite from step {nonfinite['step']} (train.on_nonfinite=continue)"
        return text

    # ---- metrics -------------------------------------------------------------------------------
    def log(self, record: MetricsRecord) -> None:
        """Append ``record``, stamped with the run's identity, to the metrics log as one JSON line, written
        whole and fsynced, so a kill never splits it."""
        if record.identity is None:
            record = dataclasses.replace(record, identity=self.identity)
        with _naming(self.path / METRICS), open(self.path / METRICS, "a") as f:
            f.write(json.dumps(record.to_json()) + "\n")
            f.flush()
            os.fsync(f.fileno())

    def metrics_log(self) -> MetricsLog:
        """The metrics log (``metrics.jsonl``): its records in order, each evaluation once.

        Refused (:class:`RunError`, naming the file and line): a missing or empty file once the run has
        checkpoints (a run not yet started has no records; :meth:`rebuild_advice` says how to get them back), a
        line that is not a metrics record, a line of another run (its identity) and a second record of one
        ``(event, step)``. A last line that is not JSON is a record torn by a kill: it is dropped with a note,
        and the step is logged again on resume.
        """
        file = self.path / METRICS
        if file.is_dir():
            raise RunError(f"{file} is a directory where the run's metrics log belongs; move it away, then "
                           f"{self.rebuild_advice}")
        text = file.read_text() if file.exists() else None
        if text is None or not text.strip():
            if self.checkpoint_steps():
                what = "missing" if text is None else "empty"
                raise RunError(f"{file} is {what} although the run has checkpoints; {self.rebuild_advice}")
            return MetricsLog()
        lines = text.splitlines()
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
            if record.identity is not None and record.identity != self.identity:
                raise IdentityError(f"{file}, line {number} belongs to another run: its identity is "
                                    f"{record.identity}, this run's is {self.identity}; {self.rebuild_advice}")
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
    def rebuild_advice(self) -> str:
        """What to do about a lost metrics log: rebuild its evaluations from the checkpoints, or retrain."""
        return (f"rebuild its evaluations from the checkpoints with `possym train --rebuild-metrics {self.path}`, or "
                f"{self._retrain}")

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

    def _steps_on_disk(self) -> list[int]:
        folder = self.path / CKPT_DIR
        if not folder.is_dir():
            return []
        return sorted(int(f.stem[5:]) for f in folder.glob("step_*.safetensors") if f.stem[5:].isdigit())

    def checkpoint_steps(self) -> list[int]:
        """The steps that have a checkpoint (a directory in a checkpoint's place counts, so that reading it
        says what it is). A file where the checkpoint folder belongs is refused, naming it."""
        folder = self.path / CKPT_DIR
        if folder.exists() and not folder.is_dir():
            raise RunError(f"{folder} is a file where the run's checkpoint folder belongs; move it away, then "
                           f"`possym train --resume {self.path}` re-creates the last checkpoint from {STATE} (the "
                           f"others need the run trained again: delete {STATE} first)")
        return self._steps_on_disk()

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
        header = {"step": str(step), "config": json.dumps(self._file_config.to_dict()), "identity": self.identity}
        path = self.checkpoint_path(step)
        atomic_write_bytes(path, st_save(tensors, metadata=header))
        return path

    def _damaged_checkpoint(self, path: Path, step: int, foreign: bool = False) -> str:
        """What to do about the checkpoint of ``step`` at ``path``, damaged (``foreign``: another run's)."""
        if step == self.config.total_steps:  # the last resumable state holds these weights
            first = "move it away, then run" if foreign else "run"  # a resume never writes over another run's file
            return f"{first} `possym train --resume {self.path}`, which re-creates it from {STATE}"
        return f"delete it to analyse the other checkpoints, or {self._retrain} to re-create it"

    def read_checkpoint(self, step: int) -> tuple[dict[str, str], dict[str, torch.Tensor]]:
        """The header and tensors of the checkpoint of ``step``, unchecked; :class:`RunError` naming the file
        where it is absent, a directory or torn."""
        path = self.checkpoint_path(step)
        if path.is_dir():
            raise RunError(f"{path} is a directory where a checkpoint file belongs; move it away, then "
                           f"{self._damaged_checkpoint(path, step).replace('delete it to ', '')}")
        if not path.is_file():
            available = step_list(self.checkpoint_steps())
            raise RunError(f"no checkpoint for step {step} in {self.path}; available: {available}")
        try:
            data = path.read_bytes()
            return safetensors_metadata(data), st_load(data)
        except (SafetensorError, ValueError, RuntimeError) as exc:
            raise RunError(f"checkpoint {path} is truncated or corrupt ({exc}); "
                           f"{self._damaged_checkpoint(path, step)}") from exc

    def check_header(self, step: int, header: dict[str, str] | None = None, finite: bool = True) -> None:
        """Refuse a checkpoint that is not this run's at ``step``, naming the file: its header's identity (a
        checkpoint from before identities: its header's config) and step. Read from the header alone (cheap:
        a stage checks every checkpoint it will read before it writes anything); an unreadable header is left
        to the read, which names it. ``finite``: also refuse a checkpoint written after the run's loss went
        non-finite (``train.on_nonfinite=continue``), whose weights are not finite."""
        path = self.checkpoint_path(step)
        header = checkpoint_header(path) if header is None else header
        if header is None:
            return
        theirs = header.get("identity")
        config = header.get("config")
        if theirs is not None and theirs != self.identity:
            raise IdentityError(f"{path} belongs to another run: its identity is {theirs}{self._which(config)}, this "
                                f"run's is {self.identity}; {self._damaged_checkpoint(path, step, foreign=True)}")
        if theirs is None and config is not None:
            changes = [c for c in self._legacy_changes(config) if c[0] not in self._extended()]
            if changes:
                raise IdentityError(f"{path} belongs to another run: its header's config differs from this run's "
                                    f"({changes_text(changes)}); {self._damaged_checkpoint(path, step, foreign=True)}")
        if header.get("step", str(step)) != str(step):
            raise IdentityError(f"{path} holds the weights of step {header['step']}, not {step} (renamed?); "
                                f"{self._damaged_checkpoint(path, step, foreign=True)}")
        nonfinite = self.nonfinite if finite else None
        if nonfinite is not None and step >= int(nonfinite["step"]):
            raise RunError(f"{path} holds non-finite weights: {self._nonfinite_why(step)}")

    def check_checkpoint(self, step: int, header: dict[str, str], tensors: dict[str, torch.Tensor]) -> None:
        """Refuse a checkpoint that is not this run's at ``step`` (:meth:`check_header`) or whose weights are not
        finite, naming the file."""
        path = self.checkpoint_path(step)
        self.check_header(step, header)
        bad = [k for k, t in tensors.items() if t.is_floating_point() and not bool(torch.isfinite(t).all())]
        if bad:
            raise RunError(f"{path} holds non-finite weights ({bad[0]}{' and more' if len(bad) > 1 else ''}): "
                           f"{self._nonfinite_why(step)}")

    def _which(self, config: str | None) -> str:
        """`` (seeds.init=1, ...)``: how another run's recorded config differs from this one's, where known."""
        if config is None:
            return ""
        changes = self._legacy_changes(config)
        return f" ({', '.join(f'{k}={_shown(new)}' for k, new, _ in changes[:4])})" if changes else ""

    def _legacy_changes(self, config: str) -> list[tuple[str, Any, Any]]:
        """``(key, theirs, ours)`` where a recorded config (a checkpoint header's JSON) differs from this run's."""
        try:
            other = config_from_saved(json.loads(config))
        except (ValueError, ConfigError):
            return [("config", "unreadable", "this run's")]
        return [(k, old, new) for k, old, new in value_changes(other, self._file_config)]

    def _extended(self) -> set[str]:
        """The keys the run's history changed (train.steps): an older checkpoint rightly holds their old values."""
        return {key for entry in self.history for key in entry.get("changed", {})}

    def _nonfinite_why(self, step: int) -> str:
        diverged, nonfinite = self.diverged, self.nonfinite
        if diverged is not None:
            return (f"the run {self.status()}; analyse an earlier checkpoint by number")
        if nonfinite is not None:
            return (f"the run's loss was non-finite from step {nonfinite['step']} (train.on_nonfinite=continue); "
                    f"analyse a checkpoint before step {nonfinite['step']}")
        return "the run diverged; analyse an earlier checkpoint by number"

    def load_state_dict(self, step: int) -> dict[str, torch.Tensor]:
        """The weights of the checkpoint of ``step``, checked (:meth:`check_checkpoint`)."""
        header, tensors = self.read_checkpoint(step)
        self.check_checkpoint(step, header, tensors)
        return tensors

    def load_model(
        self, step: StepSpec = None, dtype: torch.dtype | str = torch.float32, device: torch.device | str | None = None
    ) -> GPTJ:
        """The model at ``step`` (a number, ``"best"`` or ``"final"``; default: the last checkpoint, of a
        finished run unless opened with ``allow_unfinished``), in eval mode, as ``dtype`` (a torch floating dtype
        or its name: ``"float32"``, ``"float64"``, ``"bfloat16"``, ``"float16"``), on ``device`` (default: the
        CPU; see :func:`possym.devices.resolve_device`)."""
        from possym.model.gptj import GPTJ

        dtype = model_dtype(dtype)
        model = GPTJ(self.model_config)
        model.load_state_dict(self.load_state_dict(self.resolve_step(step)))
        return model.to(device=device, dtype=dtype).eval()

    def resume_damage(self, state_step: int) -> list[int]:
        """Before a resume from the state of ``state_step``: refuse a checkpoint place the training would have to
        write but cannot (a directory), naming it; return the grid's missing checkpoints that the state cannot
        give back (those before its step: it holds only its own step's weights, which resume re-creates)."""
        self.checkpoint_steps()  # the folder a file: refused, naming it
        blocked = [s for s in self._steps_on_disk() if self.checkpoint_path(s).is_dir()]
        if blocked:
            raise RunError(f"{self.checkpoint_path(blocked[0])} is a directory where a checkpoint file belongs"
                           f"{f' (and {len(blocked) - 1} more)' if len(blocked) > 1 else ''}; move it away, then "
                           f"`possym train --resume {self.path}` re-creates what its state holds")
        return [s for s in self.missing_checkpoints() if s < state_step]

    # ---- which checkpoint: a number, "best" or "final" ----------------------------------------
    def resolve_step(self, step: StepSpec = None) -> int:
        """The checkpoint step that ``step`` names: ``"final"`` the last one of a finished run, ``None`` the
        last one (of a finished run too), ``"best"`` the earliest at the maximum validation accuracy
        (:meth:`best`), or a number that has a checkpoint. ``"final"`` and ``None`` on an unfinished run
        (:attr:`finished`) or a diverged one are refused, naming its last step, unless the run was opened with
        ``allow_unfinished``."""
        steps = self.checkpoint_steps()
        if not steps:
            raise RunError(f"{self.path} has no checkpoints yet")
        if step is None or step == "final":
            if not self.allow_unfinished and self.diverged:
                raise DivergedError(f"{self.path} {self.status()}, so it has no final checkpoint; analyse a "
                                    f"checkpoint by number (e.g. --step {steps[-1]}, score.table_step={steps[-1]}), "
                                    "or its last with --allow-unfinished (allow_unfinished=True)")
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
        ``"step 140 (unfinished, of 400)"`` for the last checkpoint of a run that has not, ``"step 0 (diverged
        at step 2)"`` for the last of a diverged run, ``(..., non-finite loss)`` past a non-finite loss."""
        total = self.config.total_steps
        diverged, nonfinite = self.diverged, self.nonfinite
        if diverged is not None:
            last = self.checkpoint_steps()[-1:] == [step]
            return f"step {step} (diverged at step {diverged['step']})" if last else f"step {step} of {total}"
        late = ", non-finite loss" if nonfinite is not None and step >= int(nonfinite["step"]) else ""
        if self.finished and step == total:
            return f"step {step} (final{late})"
        if not self.finished and self.checkpoint_steps()[-1:] == [step]:
            return f"step {step} (unfinished, of {total}{late})"
        return f"step {step} of {total}" + (f" ({late[2:]})" if late else "")

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
        """Save the resumable ``state``, with the run's identity, config, history and precision beside it
        (:data:`STATE_RUN`): what rebuilds ``meta.json`` if it is lost."""
        meta = self.meta
        entry = {"identity": self.identity, "config": self._file_config.to_dict(), "history": meta.get("history", []),
                 "precision": meta.get("precision")}
        buf = io.BytesIO()
        torch.save({**state, STATE_RUN: entry}, buf)
        atomic_write_bytes(self.path / STATE, buf.getvalue())

    def load_state(self) -> dict[str, Any] | None:
        file = self.path / STATE
        if file.is_dir():
            raise RunError(f"{file} is a directory where the run's resumable state belongs; move it away (without "
                           f"it `possym train --resume {self.path}` trains the run again from step 0)")
        if not file.exists():
            return None
        try:
            # On the CPU: the training loop moves the state to its own device, which may not be the saving one.
            state = torch.load(file, weights_only=False, map_location="cpu")
        except Exception as exc:  # torch raises many types for a torn pickle/zip
            raise RunError(f"{file} is truncated or corrupt ({exc}); delete it to restart from scratch") from exc
        entry = state.get(STATE_RUN) if isinstance(state, dict) else None
        if not isinstance(state, dict):
            raise RunError(f"{file} is not a resumable state of possym; delete it to restart from scratch")
        if isinstance(entry, dict) and entry.get("identity") != self.identity:
            config = json.dumps(entry["config"]) if isinstance(entry.get("config"), dict) else None
            raise IdentityError(f"{file} belongs to another run: its identity is {entry.get('identity')}"
                                f"{self._which(config)}, this run's is {self.identity}; put this run's own back, or "
                                f"move it away: `possym train --resume {self.path}` then trains the run again from "
                                "step 0, to the same weights")
        return state

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
        atomic_write_text(path, table_csv(table, table_kind(key), f"{self.path.name}/{ARTIFACTS[key].name}"))
        return path

    def read_table(self, key: str) -> pd.DataFrame:
        """Table artifact ``key`` as a DataFrame of its records (:func:`~possym.records.frame`; none: no rows)."""
        kind = table_kind(key)
        return frame(read_records(self.artifact(key), kind), kind)


DTYPES = {"float32": torch.float32, "float64": torch.float64, "bfloat16": torch.bfloat16, "float16": torch.float16}


def model_dtype(dtype: Any) -> torch.dtype:
    """A model's floating dtype from a torch dtype or its name (``"float16"``, ``"torch.float16"``); anything
    else is a :class:`~possym.errors.PossymError` naming the allowed ones.

    >>> model_dtype("bfloat16"), model_dtype(torch.float64)
    (torch.bfloat16, torch.float64)
    """
    if isinstance(dtype, torch.dtype) and dtype in DTYPES.values():
        return dtype
    if isinstance(dtype, str) and dtype.removeprefix("torch.") in DTYPES:
        return DTYPES[dtype.removeprefix("torch.")]
    raise PossymError(f"dtype={dtype!r} is not a dtype a model takes; allowed: "
                      f"{', '.join(f'torch.{n}' for n in DTYPES)}, or their names ({', '.join(map(repr, DTYPES))})")


def table_kind(key: str) -> type[Record]:
    """The row type of table artifact ``key`` (a record class, or the one its spec line makes)."""
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
    a run that exists keep its precision. Asked the other way (``bf16`` of a run saved as ``auto``) it is
    another request.

    >>> from possym.config import load_config
    >>> paper = load_config("number", "paper")
    >>> config_differences(paper, load_config("number", "paper", ["train.lr=3e-4", "train.threads=4"]))
    ['train.lr']
    """
    from possym.config import changed_keys

    a, b = _computed(before.to_dict()), _computed(now.to_dict())
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
        more = " (it was trained on with `possym train --resume RUN train.steps=N`)" if run.history else ""
        if differ == ["train.steps"] and config.total_steps > run.config.total_steps:
            more = (f"; to train it on to {config.total_steps} steps: `possym train --resume {path} "
                    f"train.steps={config.total_steps}` (possym.open_run(...).train_on({config.total_steps}))")
        raise RunError(f"{path} holds a run with another config ({', '.join(differ)} differ){more}; "
                       "use a new output directory, or delete this run to start it again")
    return run.session(config)


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
