"""Which device runs a model: the ``device`` option of training, scoring, length curves and heads.

The device is a config value chosen at the entry point (``train.device``, ``score.device``, ...); library
code never picks one, it makes its tensors on the device of the tensors they meet. ``auto`` means
CUDA when there is one, else Apple's MPS, else the CPU.

Example:
    >>> resolve_device("cpu")
    device(type='cpu')
    >>> resolve_device("tpu")
    Traceback (most recent call last):
    ...
    possym.errors.ConfigError: device='tpu' is not a device possym knows; allowed: ('auto', 'cpu', 'cuda', 'mps')
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch

from possym.config import DEVICES, ConfigError

__all__ = ["ACCELERATOR_BATCH_FACTOR", "DEVICES", "available_memory", "batch_size_on", "model_device", "resolve_device",
           "torch_threads"]
# CPU batches are sized to stay in cache (256 rows: 2048 was 1.6x slower); an accelerator wants
# many more rows in flight to fill its cores. Evaluation, scoring and length-curve batches are this
# many times larger on one. The meta device stands in for an accelerator in the tests.
ACCELERATOR_BATCH_FACTOR = 16


def resolve_device(name: str | torch.device) -> torch.device:
    """``auto``, ``cpu``, ``cuda`` (``cuda:1``), ``mps`` or ``meta`` as a :class:`torch.device`.

    A device that this machine lacks is an error that says so, before any work starts.
    """
    if isinstance(name, torch.device):
        return name
    kind = name.split(":")[0]
    if kind not in DEVICES and kind != "meta":
        raise ConfigError(f"device={name!r} is not a device possym knows; allowed: {DEVICES}")
    if name == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        if torch.backends.mps.is_available():
            return torch.device("mps")
        return torch.device("cpu")
    if kind == "cuda" and not torch.cuda.is_available():
        raise ConfigError(f"device={name!r}, but this torch sees no CUDA device (torch {torch.__version__})")
    if kind == "mps" and not torch.backends.mps.is_available():
        raise ConfigError(f"device={name!r}, but this machine has no MPS device")
    return torch.device(name)


def available_memory(device: torch.device) -> int | None:
    """Bytes that ``device`` can still give: a CUDA device's free memory, else the host's available memory
    (Linux's ``MemAvailable``, which counts the page cache it can drop); None where it cannot be known."""
    if device.type == "cuda":
        return int(torch.cuda.mem_get_info(device)[0])
    if device.type == "meta":
        return None
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        import os

        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):
        return None


def batch_size_on(device: torch.device, cpu_size: int) -> int:
    """A batch size (rows, or tokens) on ``device``: ``cpu_size`` on the CPU, :data:`ACCELERATOR_BATCH_FACTOR`
    times that on an accelerator."""
    return cpu_size if device.type == "cpu" else cpu_size * ACCELERATOR_BATCH_FACTOR


def model_device(model: torch.nn.Module) -> torch.device:
    """The device of ``model``'s first parameter or buffer; the CPU for a module that holds none."""
    tensor: torch.Tensor | None = next(model.parameters(), None)
    if tensor is None:
        tensor = next(model.buffers(), None)
    return torch.device("cpu") if tensor is None else tensor.device


@contextlib.contextmanager
def torch_threads(threads: int | None) -> Iterator[None]:
    """Run the block with ``threads`` torch threads and give the caller's count back after it, however it
    ends; ``None`` leaves the count alone. The one place a library call may change the thread count.

    >>> before = torch.get_num_threads()
    >>> with torch_threads(1):
    ...     torch.get_num_threads()
    1
    >>> torch.get_num_threads() == before
    True
    """
    if threads is None:
        yield
        return
    if threads < 1:
        raise ConfigError(f"threads={threads} must be >= 1, or None to keep the caller's")
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)
