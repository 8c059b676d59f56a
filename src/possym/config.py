"""Frozen, validated configuration: task, model, training, and the run that binds them.

Every config is a frozen dataclass that checks itself on construction and names the field and what
is allowed when something is wrong. Overrides merge in one order only:
defaults < preset file (``possym/configs/NAME.yaml``, package data) < command line (``train.lr=3e-4``).
The defaults are the ``paper`` preset's, the authors' effective recipe (docs/choices.md); the task
section's fields are those of the task named (:mod:`possym.tasks`: each task declares its own).

Example:
    >>> cfg = load_config(task="number", preset=None, overrides=["train.lr=3e-4", "model.n_layers=4"])
    >>> cfg.train.lr, cfg.model.n_layers, cfg.task.name
    (0.0003, 4, 'number')
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from possym.errors import ConfigError, EarlierLayoutError, did_you_mean, require
from possym.settings import check_overrides, from_dict, keyword_overrides, parse_override
from possym.tasks.base import TaskConfig
from possym.tasks.registry import PAPER_TASKS, TASKS, get_task, task_config

__all__ = ["EXECUTION_KEYS", "ConfigError", "ModelConfig", "RunConfig", "Seeds", "TaskConfig", "TrainConfig",
           "load_config", "config_from_dict", "config_from_saved"]

_require = require

# HF's activation_function names -> torch's gelu(approximate=...): "gelu" is the exact (erf) GELU.
ACTIVATIONS = {"gelu_new": "tanh", "gelu": "none"}
# Where a model runs (possym.devices resolves "auto" to the best this machine has).
DEVICES = ("auto", "cpu", "cuda", "mps")
TRACKERS = ("none", "tensorboard", "wandb")  # train.log (possym.train.tracking)
ON_NONFINITE = ("stop", "continue")  # train.on_nonfinite: what a non-finite loss does (possym.train.loop)
# Keys that say where and how a run or a stage runs, not what it computes: a run's identity
# (possym.runs.config_differences) and the memo of stages (possym.stages.registry) leave them out,
# so work goes on with other threads, on another device, compiled or not (each changes float rounding at
# most, as a thread count does), mirrored to a tracker or not and how often (train.log, train.log_every), saving
# its resumable state more or less often (train.state_every), with or without a progress bar. docs/choices.md,
# "A run's identity".
EXECUTION_KEYS = ("threads", "device", "compile", "log", "log_every", "state_every", "progress")
# Presets and sweep specs are package data, so a plain `pip install` (no -e) ships them.
PRESET_DIR = Path(__file__).resolve().parent / "configs"
SWEEP_DIR = PRESET_DIR / "sweeps"


@dataclass(frozen=True)
class ModelConfig:
    """GPT-J decoder (paper App. C.2): parallel attention+MLP per block, one LayerNorm, RoPE.

    ``rotary_dim=None`` rotates the whole head (the paper: 64 planes of a 128-dim head);
    ``rotary_dim=0`` is NoPE. ``d_vocab`` is filled in from the task at build time.

    The recipe's knobs, named as HF ``GPTJConfig`` names them:

    - ``dropout`` is attention-weight and residual dropout (HF ``attn_pdrop`` and ``resid_pdrop``);
      ``embd_dropout`` is dropout on the token embeddings (HF ``embd_pdrop``); ``None`` means "as
      ``dropout``" (the earlier recipe ``paper_v1``). The authors' scripts passed ``embed_pdrop=0.1``,
      a key ``GPTJConfig`` silently ignores, so their embedding dropout was HF's default 0.0, the
      default here (docs/choices.md).
    - ``activation``: the MLP's GELU, ``"gelu"`` (exact, erf; the authors', the default) or
      ``"gelu_new"`` (the tanh approximation; ``paper_v1``).
    - ``mlp=False`` drops every block's MLP (attention-only blocks, the metric paper's toy heads).

    Three options steer which RoPE planes a layer uses (the paper's future work). Plane k
    (1-based frequency ID k) rotates by θ_k = base^(−2(k−1)/rot_dim) per position. Defaults keep
    plain RoPE bit for bit.

    - ``p_rope`` (Barbero et al. 2024): the fastest ⌊p_rope · rot_dim/2⌋ planes rotate at their
      usual θ_k; the lowest-frequency rest become NoPE dimensions (θ = 0). 1.0 is RoPE, 0.0 NoPE.
    - ``nope_from_layer=L``: every plane of layers L.. is NoPE (θ = 0).
    - ``freq_gate``: the planes each layer may use at all; the others are zeroed in q and k, so they
      add nothing to the attention logits. Syntax ``LAYERS@IDS`` joined by ``;``, each a
      comma-separated list of ``a`` or ``a-b`` (inclusive), layers 0-based, IDs 1-based; unlisted
      layers use every plane. ``"0-2@9-16;5@1"``: layers 0..2 use IDs 9..16, layer 5 only ID 1.

    Example:
        >>> cfg = ModelConfig(n_layers=3, d_model=8, p_rope=0.5, nope_from_layer=2, freq_gate="0@2-4")
        >>> cfg.plane_rotates(0), cfg.plane_rotates(2), cfg.plane_allowed(0), cfg.plane_allowed(1)
        ((True, True, False, False), (False, False, False, False), (False, True, True, True), (True, True, True, True))
    """

    n_layers: int = 12
    d_model: int = 128
    n_heads: int = 1
    d_mlp: int = 512
    rotary_dim: int | None = None
    rope_base: float = 10_000.0
    dropout: float = 0.1
    ln_eps: float = 1e-5
    init_range: float = 0.02
    d_vocab: int = 0
    p_rope: float = 1.0
    nope_from_layer: int | None = None
    freq_gate: str | None = None
    embd_dropout: float | None = 0.0
    activation: str = "gelu"
    mlp: bool = True

    def __post_init__(self) -> None:
        _require(self.n_layers >= 1, f"model.n_layers={self.n_layers} must be >= 1")
        _require(self.n_heads >= 1, f"model.n_heads={self.n_heads} must be >= 1")
        _require(self.d_model >= 2, f"model.d_model={self.d_model} must be >= 2 (a head needs one RoPE plane)")
        _require(
            self.d_model % self.n_heads == 0,
            f"model.d_model={self.d_model} must be divisible by model.n_heads={self.n_heads}",
        )
        _require(self.d_mlp >= 1, f"model.d_mlp={self.d_mlp} must be >= 1")
        rd = self.rot_dim
        _require(
            0 <= rd <= self.d_head and rd % 2 == 0,
            f"model.rotary_dim={self.rotary_dim} must be an even number in 0..d_head={self.d_head}",
        )
        _require(self.rope_base > 1, f"model.rope_base={self.rope_base} must be > 1")
        _require(0.0 <= self.dropout < 1.0, f"model.dropout={self.dropout} must lie in [0, 1)")
        _require(
            self.embd_dropout is None or 0.0 <= self.embd_dropout < 1.0,
            f"model.embd_dropout={self.embd_dropout} must lie in [0, 1), or be null (as model.dropout)",
        )
        _require(
            self.activation in ACTIVATIONS,
            f"model.activation={self.activation!r} is not a GELU possym knows; allowed: {tuple(ACTIVATIONS)}",
        )
        _require(isinstance(self.mlp, bool), f"model.mlp={self.mlp!r} must be true or false")
        _require(self.ln_eps > 0, f"model.ln_eps={self.ln_eps} must be > 0")
        _require(self.init_range > 0, f"model.init_range={self.init_range} must be > 0")
        _require(self.d_vocab >= 0, f"model.d_vocab={self.d_vocab} must be >= 0")
        _require(0.0 <= self.p_rope <= 1.0, f"model.p_rope={self.p_rope} must lie in [0, 1] (1 = RoPE, 0 = NoPE)")
        _require(
            self.nope_from_layer is None or 0 <= self.nope_from_layer < self.n_layers,
            f"model.nope_from_layer={self.nope_from_layer} must be null (no NoPE layer) or a layer in "
            f"0..n_layers-1={self.n_layers - 1}",
        )
        if self.freq_gate is not None:
            parse_freq_gate(self.freq_gate, self.n_layers, self.n_planes)

    @property
    def d_head(self) -> int:
        return self.d_model // self.n_heads

    @property
    def embd_p(self) -> float:
        """Embedding dropout rate, ``embd_dropout`` resolved (None: as ``dropout``)."""
        return self.dropout if self.embd_dropout is None else self.embd_dropout

    @property
    def gelu_approximate(self) -> str:
        """The ``approximate=`` argument of ``torch.nn.functional.gelu`` for ``activation``."""
        return ACTIVATIONS[self.activation]

    @property
    def rot_dim(self) -> int:
        """Rotated dimensions per head (``rotary_dim`` resolved)."""
        return self.d_head if self.rotary_dim is None else self.rotary_dim

    @property
    def n_planes(self) -> int:
        """RoPE planes per head: rot_dim / 2 (frequency IDs 1..n_planes)."""
        return self.rot_dim // 2

    def plane_rotates(self, layer: int) -> tuple[bool, ...]:
        """Per plane of ``layer``: does it rotate with position (False: a NoPE plane, θ = 0)?"""
        kept = int(self.p_rope * self.n_planes)  # Barbero et al.: the fastest planes keep rotating
        if self.nope_from_layer is not None and layer >= self.nope_from_layer:
            kept = 0
        return tuple(k < kept for k in range(self.n_planes))

    def plane_allowed(self, layer: int) -> tuple[bool, ...]:
        """Per plane of ``layer``: may it contribute to the attention logits (``freq_gate``)?"""
        gate = parse_freq_gate(self.freq_gate, self.n_layers, self.n_planes) if self.freq_gate else {}
        ids = gate.get(layer)
        return tuple(ids is None or k + 1 in ids for k in range(self.n_planes))

    @property
    def plain_rope(self) -> bool:
        """True when every layer rotates every plane and none is gated: today's GPT-J."""
        return self.p_rope == 1.0 and self.nope_from_layer is None and self.freq_gate is None


def _int_ranges(text: str, where: str) -> list[int]:
    """``"0-2,5"`` -> [0, 1, 2, 5]; a ConfigError naming ``where`` otherwise."""
    out: list[int] = []
    for part in text.split(","):
        lo, sep, hi = part.strip().partition("-")
        try:
            a, b = int(lo), int(hi) if sep else int(lo)
        except ValueError:
            raise ConfigError(f"{where}: {part.strip()!r} is not an integer or a range a-b") from None
        _require(a <= b, f"{where}: range {a}-{b} is empty")
        out += range(a, b + 1)
    return out


def parse_freq_gate(spec: str, n_layers: int, n_planes: int) -> dict[int, frozenset[int]]:
    """``model.freq_gate`` -> {layer: allowed 1-based frequency IDs}; see :class:`ModelConfig`.

    >>> parse_freq_gate("0-1@3-4;2@1", n_layers=3, n_planes=4)
    {0: frozenset({3, 4}), 1: frozenset({3, 4}), 2: frozenset({1})}
    """
    where = f"model.freq_gate={spec!r}"
    gate: dict[int, frozenset[int]] = {}
    for entry in spec.split(";"):
        layers, sep, ids = entry.partition("@")
        _require(
            bool(sep) and bool(layers.strip()) and bool(ids.strip()),
            f"{where}: entry {entry.strip()!r} must look like LAYERS@IDS, e.g. 0-2@9-16",
        )
        allowed = frozenset(_int_ranges(ids, where))
        bad_ids = sorted(i for i in allowed if not 1 <= i <= n_planes)
        _require(not bad_ids, f"{where}: frequency IDs {bad_ids} do not exist; allowed: 1..{n_planes} (rot_dim/2)")
        for layer in _int_ranges(layers, where):
            _require(0 <= layer < n_layers, f"{where}: layer {layer} does not exist; allowed: 0..{n_layers - 1}")
            _require(layer not in gate, f"{where}: layer {layer} is listed twice")
            gate[layer] = allowed
    return gate


@dataclass(frozen=True)
class TrainConfig:
    """AdamW with linear warm-up then linear decay (paper App. C.2), last-token loss.

    ``steps=None`` means one epoch of the training split. Evaluation and checkpoints happen every
    ``eval_every`` / ``checkpoint_every`` steps and at the last step; the resumable state (weights,
    AdamW, scheduler, dropout generator; 29 MB for the paper's model) every ``state_every`` steps
    (None: with every checkpoint) and at the last step, so a resumed run replays at most
    ``state_every - 1`` steps, to the same bits. ``eval_size`` validation rows are evaluated (the
    paper's HF Trainer evaluated all 2,400). ``grad_clip=1.0`` and no weight decay on biases and
    LayerNorms are HF Trainer defaults, which the paper's code ran under.
    ``random_extra=K > 0`` puts k ~ U{0..K} random prefix tokens before every window of each
    training batch, a fresh k per step (:mod:`possym.train.augment`; only for a task whose windows
    may follow any prefix, the number task); 0 trains as the paper.
    ``precision="bf16"`` feeds the big matmuls of the training step bfloat16 (float32 accumulation,
    weights and optimiser state stay float32; :mod:`possym.train.fused`); the evaluations and the
    final test run at the same precision, as HF Trainer evaluates a mixed-precision run.
    ``precision="auto"`` is ``bf16`` where the device computes bfloat16 natively and ``fp32`` elsewhere
    (:mod:`possym.hardware`). The config keeps ``"auto"``, so one file is one run on every machine; the
    trainer resolves it when the run's training starts, on the machine that trains it, and records the
    answer in ``meta.json`` (``precision``), where a resumed run reads it back: a run continues in the
    precision it started in, wherever it resumes.
    ``precision="fp16"`` is the same in float16, the paper's setting, with a dynamic loss scale
    (:class:`possym.train.loop.LossScaler`; a step whose gradients overflow is skipped).
    ``compile=True`` runs that step through ``torch.compile`` (Inductor, which needs a C++ compiler),
    the same maths with the elementwise work fused, and the evaluations through one compiled graph
    per block; the first evaluation and the first step compile them (about 70 s on 2 cores).
    ``device`` runs the step (:func:`possym.devices.resolve_device`): ``auto`` (CUDA, else MPS, else
    the CPU), ``cpu``, ``cuda`` or ``mps``. Dropout bits are drawn on the CPU whatever the device, so
    a run draws the same masks everywhere and resumes on another device.
    ``log`` mirrors ``metrics.jsonl`` live to an experiment tracker: ``none``, ``tensorboard`` or
    ``wandb`` (offline unless ``WANDB_MODE`` says otherwise; :mod:`possym.train.tracking`), with the
    training loss and learning rate every ``log_every`` steps.
    ``on_nonfinite``: what a non-finite training loss (or non-finite weights) does. ``stop`` (the default)
    ends that run's training there with an error naming the step, keeps its last finite checkpoint and marks
    the run diverged in ``meta.json``; ``continue`` trains on, as an older possym did, and the run says
    from which step its loss was non-finite wherever it is shown (:mod:`possym.train.loop`).
    """

    lr: float = 1e-4
    beta1: float = 0.95
    beta2: float = 0.999
    weight_decay: float = 1e-4
    warmup_steps: int = 750
    batch_size: int = 64
    grad_clip: float | None = 1.0
    steps: int | None = None
    eval_every: int = 50
    eval_size: int = 2_400
    checkpoint_every: int = 50
    state_every: int | None = 500
    threads: int | None = None
    random_extra: int = 0
    precision: str = "fp32"
    compile: bool = False
    device: str = "auto"
    log: str = "none"
    log_every: int = 10
    on_nonfinite: str = "stop"

    def __post_init__(self) -> None:
        _require(self.lr > 0 and math.isfinite(self.lr), f"train.lr={self.lr} must be a positive number")
        _require(self.on_nonfinite in ON_NONFINITE,
                 f"train.on_nonfinite={self.on_nonfinite!r}; allowed: {', '.join(ON_NONFINITE)}")
        _require(self.log in TRACKERS, f"train.log={self.log!r}; allowed: {', '.join(TRACKERS)}")
        _require(self.log_every >= 1, f"train.log_every={self.log_every} must be >= 1 (steps between the training "
                                      "loss and learning rate a tracker receives)")
        for name in ("beta1", "beta2"):
            v = getattr(self, name)
            _require(0.0 <= v < 1.0, f"train.{name}={v} must lie in [0, 1)")
        _require(self.weight_decay >= 0, f"train.weight_decay={self.weight_decay} must be >= 0")
        _require(self.warmup_steps >= 0, f"train.warmup_steps={self.warmup_steps} must be >= 0")
        _require(self.batch_size >= 1, f"train.batch_size={self.batch_size} must be >= 1")
        _require(self.grad_clip is None or self.grad_clip > 0, f"train.grad_clip={self.grad_clip} must be > 0 or null")
        _require(self.steps is None or self.steps >= 1, f"train.steps={self.steps} must be >= 1 or null")
        for name in ("eval_every", "eval_size", "checkpoint_every"):
            _require(getattr(self, name) >= 1, f"train.{name}={getattr(self, name)} must be >= 1")
        _require(
            self.state_every is None or self.state_every >= 1,
            f"train.state_every={self.state_every} must be >= 1 or null (null: with every checkpoint)",
        )
        _require(self.threads is None or self.threads >= 1, f"train.threads={self.threads} must be >= 1")
        _require(self.random_extra >= 0, f"train.random_extra={self.random_extra} must be >= 0 (0: no extra tokens)")
        _require(
            self.precision in ("fp32", "bf16", "fp16", "auto"),
            f"train.precision={self.precision!r} must be 'fp32', 'bf16', 'fp16' or 'auto'",
        )
        _require(
            isinstance(self.device, str) and self.device.split(":")[0] in DEVICES,
            f"train.device={self.device!r}; allowed: {DEVICES} (cuda:N for one GPU of several)",
        )
        _require(isinstance(self.compile, bool), f"train.compile={self.compile!r} must be true or false")
        _require(
            not (self.compile and self.random_extra),
            "train.compile=true needs batches of one length, and train.random_extra varies it: set one of them off",
        )

    @property
    def state_interval(self) -> int:
        """Steps between resumable states: ``state_every``, or ``checkpoint_every`` when that is None."""
        return self.state_every or self.checkpoint_every


@dataclass(frozen=True)
class Seeds:
    """Named seeds; only entry points turn them into generators (STYLE.md principle 4)."""

    data: int = 0
    init: int = 0
    order: int = 0
    dropout: int = 0

    def __post_init__(self) -> None:
        for name in ("data", "init", "order", "dropout"):
            value = getattr(self, name)
            # numpy's and torch's generators take seeds 0 .. 2^64-1; a negative one fails deep inside them
            whole = isinstance(value, numbers.Integral) and not isinstance(value, bool)
            _require(whole and 0 <= int(value) < 2**64, f"seeds.{name}={value!r} must be a whole number >= 0")


@dataclass(frozen=True)
class RunConfig:
    """Everything a training run needs; written resolved into the run directory. The defaults are the
    paper's number task under the authors' recipe (:func:`load_config` ``("number")``).

    >>> RunConfig() == load_config("number")
    True
    """

    task: TaskConfig = field(default_factory=lambda: task_config(PAPER_TASKS[0]))
    model: ModelConfig = field(default_factory=ModelConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    seeds: Seeds = field(default_factory=Seeds)
    preset: str | None = None

    def __post_init__(self) -> None:
        # Training evaluates on validation rows from step 0 and on test rows at the end: both must exist.
        for split in ("n_val", "n_test"):
            _require(getattr(self.task, split) >= 1,
                     f"task.{split}={getattr(self.task, split)} must be >= 1: a run evaluates on it")
        _require(
            self.train.eval_size <= self.task.n_val,
            f"train.eval_size={self.train.eval_size} must be <= task.n_val={self.task.n_val}",
        )
        _require(self.task.n_train >= 1, f"task.n_train={self.task.n_train} must be >= 1 to train")
        _require(
            self.train.random_extra == 0 or get_task(self.task.name).random_prefix is not None,
            f"train.random_extra={self.train.random_extra} needs a task whose windows may follow any prefix "
            f"(the number task); {self.task.name!r} has none (its extra tokens depend on each instance), "
            "so allowed: 0",
        )

    @property
    def total_steps(self) -> int:
        if self.train.steps is not None:
            return self.train.steps
        return max(1, self.task.n_train // self.train.batch_size)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


_SECTIONS: dict[str, type] = {"task": TaskConfig, "model": ModelConfig, "train": TrainConfig, "seeds": Seeds}


def _section_class(name: str, values: dict[str, Any]) -> type:
    """The dataclass of a config section; the task section's is the named task's own config class."""
    if name != "task":
        return _SECTIONS[name]
    _require("name" in values, f"the task section must name its task (task.name); allowed: {tuple(TASKS)}")
    return get_task(values["name"]).config


def config_from_dict(data: dict[str, Any]) -> RunConfig:
    """Build a validated RunConfig from nested plain data (a preset file or a saved config)."""
    _require(isinstance(data, dict), f"a config must be a mapping, got {type(data).__name__}")
    allowed = set(_SECTIONS) | {"preset"}
    unknown = sorted(set(data) - allowed)
    _require(not unknown, f"unknown config section(s) {unknown}; known: {sorted(allowed)}")
    parts: dict[str, Any] = {}
    for name in _SECTIONS:
        section = data.get(name) or ({"name": "number"} if name == "task" else {})
        _require(isinstance(section, dict), f"config section {name!r} must be a mapping")
        parts[name] = from_dict(_section_class(name, section), section, name)
    return RunConfig(**parts, preset=data.get("preset"))


def config_from_saved(data: dict[str, Any]) -> RunConfig:
    """A RunConfig from a config possym saved (``config.yaml``, ``meta.json``, a checkpoint's header).

    A saved config is a complete dump, so one that lacks a key was written by an earlier possym, before the key
    existed: it is refused (:class:`~possym.errors.EarlierLayoutError`, naming the keys), since today's default
    may not be the value it ran with; ``possym migrate DIR`` rewrites it once with that value.

    >>> config_from_saved(load_config("number", "quick").to_dict()) == load_config("number", "quick")
    True
    >>> old = load_config("number", "quick").to_dict()
    >>> del old["model"]["activation"]
    >>> config_from_saved(old)
    Traceback (most recent call last):
    ...
    possym.errors.EarlierLayoutError: an earlier possym saved it (it lacks model.activation)
    """
    _require(isinstance(data, dict), f"a config must be a mapping, got {type(data).__name__}")
    missing = []
    for name, section in data.items():
        if name in _SECTIONS and isinstance(section, dict) and (name != "task" or section.get("name") in TASKS):
            fields = dataclasses.fields(_section_class(name, section))
            missing += [f"{name}.{f.name}" for f in fields if f.name not in section]
    if missing:
        raise EarlierLayoutError(f"an earlier possym saved it (it lacks {', '.join(missing[:4])}"
                                 f"{' and more' if len(missing) > 4 else ''})")
    return config_from_dict(data)


def changed_keys(before: dict[str, Any], now: dict[str, Any]) -> list[str]:
    """The keys of ``now`` (``section.key``, or a top-level name such as ``preset``) whose value differs
    from ``before``'s, sorted; a key ``before`` lacks counts as None there (configs saved before it existed).

    >>> changed_keys(load_config("number", "paper").to_dict(), load_config("number", "paper_v1").to_dict())
    ['model.activation', 'model.embd_dropout', 'preset', 'train.eval_size']
    """
    changed = []
    for name, value in now.items():
        if isinstance(value, dict):
            old = before.get(name) or {}
            changed += [f"{name}.{key}" for key in value if value[key] != old.get(key)]
        elif value != before.get(name):
            changed.append(name)
    return sorted(changed)


def apply_overrides(data: dict[str, Any], overrides: list[str], keys: dict[str, Any] | None = None) -> dict[str, Any]:
    """Apply ``section.key=value`` overrides, then keyword ones (``section__key=value``), to nested plain data;
    :func:`config_from_dict` then checks every key and value (:mod:`possym.settings`)."""
    check_overrides(overrides)
    out = {k: dict(v) if isinstance(v, dict) else v for k, v in data.items()}
    for section, name, value in [*map(parse_override, overrides), *keyword_overrides(keys or {})]:
        _require(section in _SECTIONS,
                 f"override key '{section}.{name}' must be section.key with section in {sorted(_SECTIONS)}"
                 f"{did_you_mean(section, _SECTIONS)}")
        out.setdefault(section, {})[name] = value
    return out


def preset_names() -> list[str]:
    return sorted(p.stem for p in PRESET_DIR.glob("*.yaml"))


def load_preset(name: str) -> dict[str, Any]:
    path = PRESET_DIR / f"{name}.yaml"
    _require(path.is_file(), f"unknown preset {name!r}; available: {preset_names()}")
    data = yaml.safe_load(path.read_text()) or {}
    _require(isinstance(data, dict), f"preset {path} must be a mapping")
    return data


def load_config(task: str, preset: str | None = None, overrides: list[str] | None = None,
                **keys: Any) -> RunConfig:
    """Resolve defaults < preset < ``overrides`` (``"train.lr=3e-4"``) < ``keys`` into a validated RunConfig for
    ``task``, where the keyword ``section__key=value`` is the override ``section.key=value``.

    A preset may hold shared sections and per-task sections under ``tasks: {number: ..., letter: ...}``.

    >>> load_config("number", "quick", ["train.steps=500"]) == load_config("number", "quick", train__steps=500)
    True
    """
    _require(isinstance(task, str) and task in TASKS, f"task {task!r} is not a task; allowed: {tuple(TASKS)}")
    check_overrides(overrides or [])
    data: dict[str, Any] = {"task": {"name": task}}
    if preset is not None:
        raw = load_preset(preset)
        per_task = raw.pop("tasks", {}) or {}
        _require(isinstance(per_task, dict), f"preset {preset!r}: 'tasks' must be a mapping")
        for layer in (raw, per_task.get(task) or {}):
            for section, values in layer.items():
                _require(section in _SECTIONS, f"preset {preset!r}: unknown section {section!r}")
                data.setdefault(section, {}).update(values or {})
        data["task"]["name"] = task
        data["preset"] = preset
    data = apply_overrides(data, overrides or [], keys)
    _require(data["task"].get("name") == task, "task.name cannot be overridden; use --task")
    return config_from_dict(data)
