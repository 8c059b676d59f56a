"""What the machine's processors compute natively, for settings that say ``auto``.

``train.precision=auto`` asks for bfloat16 matmuls only where the hardware has bfloat16 arithmetic:
a CUDA device that supports it (``torch.cuda.is_bf16_supported``), or an x86 CPU with AVX512-BF16 or
AMX-BF16 (Linux's ``/proc/cpuinfo`` flags). Elsewhere bfloat16 is emulated, and emulated it is slow:
21x slower than float32 for the paper model's training step on an AVX2-only EPYC (docs/results.md),
so ``auto`` means float32 there. The answer is the training machine's: the trainer asks it when a run's
training starts and records it in the run's ``meta.json`` (:func:`possym.train.trainee.run_precision`),
while ``config.yaml`` keeps ``auto``.

Example:
    >>> native_bf16("cpu") in (True, False)
    True
    >>> auto_precision("meta")
    'fp32'
"""

from __future__ import annotations

import functools
from pathlib import Path

CPU_BF16_FLAGS = ("avx512_bf16", "amx_bf16")


@functools.cache
def cpu_flags(cpuinfo: str = "/proc/cpuinfo") -> frozenset[str]:
    """The first CPU's feature flags (Linux's ``flags``, Arm's ``Features``); empty where the file is absent."""
    try:
        text = Path(cpuinfo).read_text()
    except OSError:
        return frozenset()
    line = next((ln for ln in text.splitlines() if ln.startswith(("flags", "Features"))), "")
    return frozenset(line.partition(":")[2].split())


def native_bf16(device: str) -> bool:
    """Whether ``device`` (``auto``, ``cpu``, ``cuda[:N]``, ``mps``, ``meta``) has bfloat16 arithmetic."""
    import torch

    kind = device.split(":")[0]
    if kind == "auto":
        kind = "cuda" if torch.cuda.is_available() else "mps" if torch.backends.mps.is_available() else "cpu"
    if kind == "cuda":
        return bool(torch.cuda.is_available() and torch.cuda.is_bf16_supported())
    if kind == "cpu":
        return any(flag in cpu_flags() for flag in CPU_BF16_FLAGS)
    return False  # MPS's bfloat16 matmuls are not faster than its float32 ones; meta computes nothing


def auto_precision(device: str) -> str:
    """``train.precision=auto`` on ``device``: ``"bf16"`` where it is native, else ``"fp32"``."""
    return "bf16" if native_bf16(device) else "fp32"
