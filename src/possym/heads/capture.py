"""The rotated queries and keys of a Hugging Face causal LM, read from its own attention modules.

Every modern ``transformers`` attention module computes q and k, applies its QK-norm (Qwen3,
Gemma-3) and RoPE, and then hands ``query [batch, head, pos, d_head]`` and
``key [batch, kv_head, pos, d_head]`` to an *attention function* looked up by name in
``ALL_ATTENTION_FUNCTIONS``. :func:`capture_attention` registers one more name, ``possym_capture``,
whose function records those tensors (with the logit scale, the soft-cap and the mask it was given)
and then runs the model's own eager attention, so the forward pass is unchanged. Reading q and k
there, rather than recomputing them from weights, gets QK-norm, partial rotary, rope scaling
(YaRN's attention factor is inside the rotated q and k) and grouped-query attention right for free.

Pitfall: the causal mask is built *outside* the attention function, by a mask function looked up
under the same name in ``ALL_MASK_ATTENTION_FUNCTIONS``. A name registered only as an attention
function gets ``attention_mask=None``, and eager attention then silently attends to the future.
So the name is registered in both registries, with the eager mask (an additive float mask that also
carries Gemma's sliding windows); ``test_capture_keeps_the_causal_mask`` fails if it is not.

The RoPE frequencies of each layer come from the model's rotary module (:func:`rope_spec`):
``inv_freq``, or ``{layer_type}_inv_freq`` for per-layer bases (Gemma-3's local layers use base 1e4
and its global layers 1e6). All families here pair the halves of the rotated dims (NeoX,
"rotate half"), except GPT-J, which pairs adjacent dims and fixes its base at 1e4.

Example:
    >>> with capture_attention(model, layers=[0]) as records:      # doctest: +SKIP
    ...     model(input_ids)
    >>> records[0].query.shape, records[0].key.shape                 # doctest: +SKIP
    (torch.Size([1, 9, 12, 64]), torch.Size([1, 3, 12, 64]))
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import torch
from torch import Tensor, nn

from possym.errors import PossymError
from possym.scores.swaps import Pairing

if TYPE_CHECKING:
    from transformers import PreTrainedModel

CAPTURE = "possym_capture"  # the name registered in both transformers registries

# The first transformers release whose GPT-J attention dispatches through the attention interface
# (read from the 5.23 and 5.24 wheels' modeling_gptj.py); Llama, Qwen, Gemma, ... did so long before.
# Older GPT-J attention calls its own _attn, the capture records nothing, and possym's exports
# (possym.model.hf) cannot be scored. pyproject.toml's transformers floor is this version.
TRANSFORMERS_NEEDED = "5.24"

# id(attention module) -> that layer's record list; filled only inside capture_attention.
_ACTIVE: dict[int, list[AttentionRecord]] = {}


@dataclass(frozen=True)
class AttentionRecord:
    """What one attention module handed to its attention function in one forward pass."""

    query: Tensor  # [batch, head, pos, d_head], after QK-norm and RoPE
    key: Tensor  # [batch, kv_head, pos, d_head], after QK-norm and RoPE
    scale: float  # logits = scale · q·k
    softcap: float | None  # Gemma-2: logits -> softcap · tanh(logits / softcap)
    mask: Tensor | None  # [batch, 1, pos, key_pos] additive mask as given (None: no mask was built)
    last_row: Tensor | None = None  # [batch, head, key_pos] the model's own attention at the last query, if known
    pattern: Tensor | None = None  # [batch, head, pos, key_pos] the model's own attention weights, if known

    @property
    def n_rep(self) -> int:
        """Query heads per key head (grouped-query attention); head h reads key head h // n_rep."""
        return self.query.shape[1] // self.key.shape[1]

    def head(self, head: int) -> AttentionRecord:
        """The record of query head ``head`` alone (and of the key head it reads)."""
        kv = head // self.n_rep
        row = None if self.last_row is None else self.last_row[:, head : head + 1]
        pattern = None if self.pattern is None else self.pattern[:, head : head + 1]
        return replace(self, query=self.query[:, head : head + 1], key=self.key[:, kv : kv + 1], last_row=row,
                       pattern=pattern)

    def keys_per_head(self) -> Tensor:
        """The keys each query head sees: [batch, head, pos, d_head] (HF's ``repeat_kv``)."""
        return self.key.repeat_interleave(self.n_rep, dim=1)

    def mask_row(self, query: int) -> Tensor:
        """The additive mask of the query's row over keys 0..query, float64, −inf where masked: [batch, key_pos]."""
        if self.mask is None:
            return torch.zeros(self.query.shape[0], query + 1, dtype=torch.float64, device=self.query.device)
        row = self.mask[:, 0, query, : query + 1]
        if row.dtype == torch.bool:
            return torch.where(row, 0.0, -math.inf).double()
        # eager masks use the dtype's most negative number for "masked"; make it exact
        return torch.where(row > torch.finfo(row.dtype).min / 2, row.double(), -math.inf)


def decoder_layers(model: PreTrainedModel) -> nn.ModuleList:
    """The model's list of decoder layers (``model.layers``, ``gpt_neox.layers``, ``transformer.h``, ...)."""
    n = model.config.num_hidden_layers if hasattr(model.config, "num_hidden_layers") else model.config.n_layer
    for module in model.modules():
        if isinstance(module, nn.ModuleList) and len(module) == n:
            return module
    raise PossymError(f"{type(model).__name__} has no ModuleList of its {n} decoder layers")


def attention_module(layer: nn.Module) -> nn.Module:
    """The self-attention module of one decoder layer."""
    for name in ("self_attn", "attention", "attn"):
        if hasattr(layer, name):
            return getattr(layer, name)
    raise PossymError(f"{type(layer).__name__} has none of the attributes self_attn, attention, attn")


def _eager(module: nn.Module):
    """The eager attention function of the module's own modeling file (it knows the family's soft-cap, sinks, ...)."""
    return importlib.import_module(type(module).__module__).eager_attention_forward


def _record_then_attend(module, query, key, value, attention_mask, **kwargs):
    output, weights = _eager(module)(module, query, key, value, attention_mask, **kwargs)
    records = _ACTIVE.get(id(module))
    if records is not None:
        scale = kwargs.get("scaling")
        records.append(
            AttentionRecord(
                query.detach(),
                key.detach(),
                float(scale) if scale is not None else query.shape[-1] ** -0.5,
                kwargs.get("softcap"),
                None if attention_mask is None else attention_mask.detach(),
                # the eager weights are the pattern the head detectors read (possym.heads.detectors)
                pattern=None if weights is None else weights.detach(),
            )
        )
    return output, weights


def _register() -> None:
    from transformers import AttentionInterface
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, AttentionMaskInterface

    AttentionInterface.register(CAPTURE, _record_then_attend)
    AttentionMaskInterface.register(CAPTURE, ALL_MASK_ATTENTION_FUNCTIONS["eager"])


def silent_capture_message(model: PreTrainedModel, layers: list[int]) -> str:
    """Why a capture recorded nothing for ``layers``, and which transformers release fixes it."""
    from importlib.metadata import version

    from packaging.version import Version

    installed = version("transformers")
    what = (f"{type(model).__name__}: the attention of layers {layers} never called transformers' attention "
            "interface, where possym reads the rotated q and k, so nothing was recorded")
    if Version(installed) < Version(TRANSFORMERS_NEEDED):
        return (f"{what}; possym needs transformers {TRANSFORMERS_NEEDED} or later (installed: {installed}), "
                f"whose {model.config.model_type} attention dispatches through it: "
                f"pip install 'transformers>={TRANSFORMERS_NEEDED}'")
    return (f"{what}; its attention module ({type(attention_module(decoder_layers(model)[layers[0]])).__name__}) "
            f"computes attention itself (transformers {installed} is recent enough), so possym cannot read it")


@contextmanager
def attention_implementation(model: PreTrainedModel, name: str) -> Iterator[None]:
    """Run ``model`` with attention implementation ``name``, restoring the previous one on exit."""
    previous = model.config._attn_implementation
    model.set_attn_implementation(name)
    try:
        yield
    finally:
        model.set_attn_implementation(previous)


@contextmanager
def capture_attention(
    model: PreTrainedModel, layers: list[int] | None = None
) -> Iterator[dict[int, list[AttentionRecord]]]:
    """Record every forward pass's attention inputs of ``layers`` (default all): yields layer -> records.

    Inside the context the model runs eager attention through ``possym_capture`` (its outputs are
    those of ``attn_implementation="eager"``); on exit the previous implementation is restored.
    """
    _register()
    modules = [attention_module(layer) for layer in decoder_layers(model)]
    layers = list(range(len(modules))) if layers is None else list(layers)
    records: dict[int, list[AttentionRecord]] = {layer: [] for layer in layers}
    for layer in layers:
        _ACTIVE[id(modules[layer])] = records[layer]
    try:
        with attention_implementation(model, CAPTURE):
            yield records
    finally:
        for layer in layers:
            _ACTIVE.pop(id(modules[layer]), None)


@dataclass(frozen=True)
class RopeSpec:
    """How one layer rotates: plane frequencies θ_k (float64), the dim pairing, and the rotated dims."""

    thetas: Tensor  # [rot_dim/2]
    pairing: Pairing
    rot_dim: int


def _rotary_module(model: PreTrainedModel) -> nn.Module:
    for module in model.modules():
        if type(module).__name__.endswith("RotaryEmbedding"):
            return module
    raise PossymError(f"{type(model).__name__} has no rotary embedding module: is it a RoPE model?")


def rope_spec(model: PreTrainedModel, layer: int) -> RopeSpec:
    """The RoPE of decoder layer ``layer``, read from the model's rotary module (after a forward pass,
    so that dynamic rope scaling has set its frequencies for this length)."""
    config = model.config
    if config.model_type == "gptj":
        attn = attention_module(decoder_layers(model)[layer])
        rot: int = config.rotary_dim or attn.head_dim  # type: ignore[assignment]  # an int attribute of the module
        # transformers' create_sinusoidal_positions: base 1e4, computed in float32
        thetas = 1.0 / (10000 ** (torch.arange(0, rot, 2, dtype=torch.int64) / rot))
        return RopeSpec(thetas.double(), "gptj", rot)
    rotary = _rotary_module(model)
    layer_type = getattr(attention_module(decoder_layers(model)[layer]), "layer_type", None)
    if layer_type is not None and hasattr(rotary, f"{layer_type}_inv_freq"):
        inv_freq = getattr(rotary, f"{layer_type}_inv_freq")
    else:
        inv_freq = rotary.inv_freq
    return RopeSpec(inv_freq.detach().double().cpu(), "neox", 2 * inv_freq.shape[-1])
