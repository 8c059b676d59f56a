"""The training step of :class:`~possym.model.gptj.GPTJ`, forward and backward written by hand, for S
models at once: a single run is a group of one.

Same parameters, same maths as the module, whose autograd stays the reference (a test holds the two
equal to 1e-10 in float64, dropout masks included). Per block (rows r = batch x pos, masks m scaled by 1/(1-p)):
    h = LN(x);  [q k v u] = h W1^T + [0 0 0 b_in];  q, k = rope(q), rope(k)
    P = softmax(q k^T / sqrt(d_head) + causal);  z = (P * m_P) v;  g = gelu(u)   (exact or tanh)
    x' = x + (z W_O^T) * m_a + (g W_out^T + b_out) * m_f      (no last term when ``mlp=False``)
and its backward, given dx':
    da = dx' * m_a, df = dx' * m_f;  dW_O = da^T z, dz = da W_O;  dW_out = df^T g, dg = df W_out
    du = gelu'(u) dg;  dP = (dz v^T) * m_P;  ds = P * (dP - rowsum(dP * P)) / sqrt(d_head)
    dq = ds k, dk = ds^T q, dv = (P * m_P)^T dz  (then un-rotated);  dy1 = [dq dk dv du]
    dW1 = dy1^T h,  dh = dy1 W1;  dx = dx' + LN_backward(dh)
Every weight carries a leading member dimension S; what differs per member (weights, batch, dropout
bits, RoPE rotors, fp16 loss scale) rides along as data, and LayerNorm applies each member's affine
weights apart. What makes it fast, why batched matmuls and not ``vmap``, precision, ``compiled=True``,
resume and :data:`STEP_VERSION`: docs/choices.md, "Training" and "Many seeds at once: the group step".

Example (gradients land in ``.grad``, ready for ``optimizer.step()``; a group's in each member's):
    >>> cfg = ModelConfig(n_layers=2, d_model=16, d_mlp=32, d_vocab=10, dropout=0.1)
    >>> model = GPTJ(cfg, torch.Generator().manual_seed(0))
    >>> tokens, answers = torch.randint(0, 10, (4, 5)), torch.randint(0, 10, (4,))
    >>> loss = loss_and_grads(model, tokens, answers, draw_bits(cfg, 4, 5, torch.Generator().manual_seed(1)))
    >>> model.unembed.weight.grad.shape
    torch.Size([10, 16])
    >>> group = ModelGroup([GPTJ(cfg, torch.Generator().manual_seed(s)) for s in (0, 1)])
    >>> tokens, answers = torch.randint(0, 10, (2, 4, 5)), torch.randint(0, 10, (2, 4))
    >>> bits = GroupBits.stack([draw_bits(cfg, 4, 5, torch.Generator().manual_seed(s)) for s in (0, 1)])
    >>> group.loss_and_grads(tokens, answers, bits).shape, group.members[1].unembed.weight.grad.shape
    (torch.Size([2]), torch.Size([10, 16]))"""

from __future__ import annotations

import contextlib
import functools
import itertools
import math
import os
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

import torch
import torch.nn.functional as F
from torch import Tensor

from possym.config import ModelConfig
from possym.model.gptj import GPTJ
from possym.model.rope import rope_cos_sin

# The version of the step's arithmetic, recorded in every resumable state: a state resumes bitwise only
# on the arithmetic that wrote it. 1: the single-model step (no member dimension), whose kernels round
# differently from a group of one; 2: the member-batched step, for one model or many.
STEP_VERSION = 2

Precision = Literal["fp32", "bf16", "fp16"]
# The input dtype of the big matmuls per precision (fp32: the model's own dtype).
MATMUL_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}
# Dropout keeps an element when its 16-bit uniform is >= this many of 65,536: p is met to within
# 2^-17 (p = 0.1 becomes 6,554 / 65,536 = 0.100006).
_UNIFORMS = 1 << 16


@dataclass(frozen=True)
class DropoutMasks:
    """Every dropout mask of one training step, already scaled: each entry is 0 or 1/(1-p).

    ``embed`` [batch, pos, d_model] (rate ``embd_p``); per layer ``pattern`` [batch, head, pos, pos]
    (attention weights), ``attn`` and ``mlp`` [batch, pos, d_model] (each branch's output; rate
    ``dropout``). ``None`` where the rate is 0, and for the MLP of an attention-only block. Inside
    the step every mask leads with the member dimension S (:meth:`GroupBits.masks`, :meth:`stacked`).
    """

    embed: Tensor | None
    layers: tuple[tuple[Tensor | None, Tensor | None, Tensor | None], ...]

    @classmethod
    def none(cls, n_layers: int) -> DropoutMasks:
        """No dropout anywhere (p = 0, or evaluation)."""
        return cls(None, tuple((None, None, None) for _ in range(n_layers)))

    def stacked(self) -> DropoutMasks:
        """One model's masks as the step reads them: a group of one, [1, batch, ...]."""
        def one(m: Tensor | None) -> Tensor | None:
            return None if m is None else m[None]

        return DropoutMasks(one(self.embed), tuple((one(p), one(a), one(f)) for p, a, f in self.layers))


@dataclass(frozen=True)
class DropoutBits:
    """A step's dropout randomness before it becomes masks: one uniform int16 per mask entry.

    :meth:`masks` thresholds and scales them. The step does that itself (:class:`GroupBits`), so
    under ``compiled=True`` Inductor fuses it into the kernels that apply the masks: one pass fewer
    over 3.5M entries a step, and 2 bytes read per entry instead of 4 (about 4% of a paper step).
    ``uniforms`` is [n] int16, one per entry of the masks whose rate is above 0, in order (None
    when every rate is 0); ``rates`` and ``shapes`` give each mask's rate and shape in
    :class:`DropoutMasks` order (embedding, then pattern, attention, MLP per layer).
    """

    uniforms: Tensor | None
    rates: tuple[float, ...]
    shapes: tuple[tuple[int, ...], ...]

    def masks(self, dtype: torch.dtype = torch.float32) -> DropoutMasks:
        """Keep an entry when its uniform is >= p * 2^16 (of [-2^15, 2^15)); scale kept ones by 1/(1-p):
        :meth:`GroupBits.masks` of a group of one, without its member dimension."""
        stacked = GroupBits.stack([self]).masks(dtype)

        def own(m: Tensor | None) -> Tensor | None:
            return None if m is None else m[0]

        return DropoutMasks(own(stacked.embed), tuple((own(p), own(a), own(f)) for p, a, f in stacked.layers))


def bit_layout(cfg: ModelConfig, batch: int, pos: int) -> tuple[tuple[float, ...], tuple[tuple[int, ...], ...], int]:
    """The rates and shapes of a step's masks in :class:`DropoutMasks` order, and how many uniforms they take."""
    d, h = cfg.d_model, cfg.n_heads
    per_layer = ((batch, h, pos, pos), (batch, pos, d), (batch, pos, d))  # pattern, attention out, MLP out
    shapes = ((batch, pos, d),) + tuple(s for _ in range(cfg.n_layers) for s in per_layer)
    mlp_p = cfg.dropout if cfg.mlp else 0.0
    rates = (cfg.embd_p,) + (cfg.dropout, cfg.dropout, mlp_p) * cfg.n_layers
    return rates, shapes, sum(math.prod(s) for s, p in zip(shapes, rates, strict=True) if p > 0)


def draw_bits(cfg: ModelConfig, batch: int, pos: int, generator: torch.Generator) -> DropoutBits:
    """The random bits of all of a step's masks at the model's dropout rates, from ``generator`` only.

    Each 64-bit draw is four uniform 16-bit integers, one per mask entry (a quarter of the random
    bits ``bernoulli_`` spends on a float each). A mask of rate 0 draws nothing, so with
    ``embd_dropout`` = ``dropout`` the stream is the one drawn before the embedding had a rate of
    its own.
    """
    rates, shapes, n = bit_layout(cfg, batch, pos)
    if n == 0:
        return DropoutBits(None, rates, shapes)
    words = torch.empty(-(-n // 4), dtype=torch.int64).random_(-(2**63), None, generator=generator)
    return DropoutBits(words.view(torch.int16)[:n], rates, shapes)  # int16 is signed: uniform on [-2^15, 2^15)


def draw_masks(cfg: ModelConfig, batch: int, pos: int, generator: torch.Generator) -> DropoutMasks:
    """All of a step's masks, scaled, at the model's dropout rate: :func:`draw_bits`, thresholded."""
    return draw_bits(cfg, batch, pos, generator).masks()


def rope_rotors(cfg: ModelConfig, layer: int, pos: int, dtype: torch.dtype) -> Tensor:
    """Complex [pos, d_model / 2]: RoPE of ``layer`` is ``x -> x * rotor`` on x's adjacent pairs read as complex.

    GPT-J rotates dims (2k, 2k+1) as one complex number by ``e^{i p θ_k}``; each head repeats the
    planes. Planes past rot_dim and NoPE planes (p-RoPE, ``nope_from_layer``) get 1, gated planes 0
    (they are zeroed in q and k). The backward of ``x * w`` is ``d * conj(w)``.
    """
    cos, sin = rope_cos_sin(torch.arange(pos), cfg.rot_dim, cfg.rope_base, torch.float64)
    rotates = torch.tensor(cfg.plane_rotates(layer), dtype=torch.bool)
    gate = torch.tensor(cfg.plane_allowed(layer), dtype=torch.float64)
    rotor = torch.complex(torch.where(rotates, cos, 1.0), torch.where(rotates, sin, 0.0)) * gate
    free = torch.ones(pos, (cfg.d_head - cfg.rot_dim) // 2, dtype=torch.complex128)
    return torch.cat((rotor, free), dim=1).repeat(1, cfg.n_heads).to(torch.promote_types(dtype, torch.complex64))


def step_rotors(
    cfg: ModelConfig, pos: int, dtype: torch.dtype, real: bool = False, device: torch.device | None = None
) -> tuple[Tensor, ...]:
    """Each layer's :func:`rope_rotors` (layers with the same planes share one tensor), on ``device``;
    with ``real``, as [pos, d_model / 2, 2] (cos, sin) pairs, the form :func:`_rotate` spells in real
    arithmetic."""
    built: dict[tuple, Tensor] = {}
    rotors = []
    for layer in range(cfg.n_layers):
        key = (cfg.plane_rotates(layer), cfg.plane_allowed(layer))
        if key not in built:
            rotor = rope_rotors(cfg, layer, pos, dtype)
            built[key] = (torch.view_as_real(rotor).contiguous() if real else rotor).to(device)
        rotors.append(built[key])
    return tuple(rotors)


def _rotate(x: Tensor, rotor: Tensor, out: Tensor | None = None) -> Tensor:
    """x [..., pos, d] (real, pairs adjacent) times rotor [pos, d/2]; real, into ``out`` if given.

    A complex rotor multiplies x's pairs as complex numbers (one eager kernel); a real [pos, d/2, 2]
    rotor is the same product written out, (x0 c - x1 s, x0 s + x1 c), which Inductor fuses.
    """
    if not rotor.is_complex():
        c, s = rotor.unbind(-1)
        x0, x1 = x.unflatten(-1, (-1, 2)).unbind(-1)
        product = torch.stack((x0 * c - x1 * s, x0 * s + x1 * c), -1).flatten(-2)
        return product if out is None else out.copy_(product)
    pairs = torch.view_as_complex(x.unflatten(-1, (-1, 2)))
    if out is None:
        return torch.view_as_real(pairs * rotor).flatten(-2)
    torch.mul(pairs, rotor, out=torch.view_as_complex(out.unflatten(-1, (-1, 2))))
    return out


def _conj(rotor: Tensor) -> Tensor:
    """The inverse rotation of :func:`_rotate`'s rotor, in either form."""
    return rotor.conj() if rotor.is_complex() else rotor * rotor.new_tensor([1.0, -1.0])


def _stack(tensors: Sequence[Tensor]) -> Tensor:
    """``torch.stack(tensors)``; for one tensor (a group of one) a view of it, as the copy would hold the
    same numbers (a step's 3.5M dropout bits took 2% of a paper step to copy)."""
    return tensors[0][None] if len(tensors) == 1 else torch.stack(list(tensors))


def _mul(x: Tensor, mask: Tensor | None) -> Tensor:
    return x if mask is None else x * mask


# What members of one group must share: everything that sets a tensor's shape or a kernel's maths.
SHAPE_FIELDS = ("n_layers", "d_model", "n_heads", "d_mlp", "d_vocab", "ln_eps", "activation", "mlp")


def shape_key(cfg: ModelConfig) -> tuple:
    """The fields of ``cfg`` that members of one group share (:data:`SHAPE_FIELDS`); the rest (dropout
    rates, RoPE plane options, ``rotary_dim``, ``rope_base``, ``init_range``) may differ per member."""
    return tuple(getattr(cfg, f) for f in SHAPE_FIELDS)


@dataclass(frozen=True)
class GroupBits:
    """A step's dropout bits: each member's :class:`DropoutBits`, side by side.

    ``uniforms`` [S, n] int16 (None when every member's every rate is 0): member s's row holds its own
    bits in :class:`DropoutMasks` order over the sites where any member's rate is above 0; where its
    own rate is 0 it holds zeros, which a threshold of -2^15 always keeps (a mask of ones). ``rates``
    is per site the members' rates, ``shapes`` per site its shape without the model dimension.
    """

    uniforms: Tensor | None
    rates: tuple[tuple[float, ...], ...]
    shapes: tuple[tuple[int, ...], ...]

    @classmethod
    def stack(cls, bits: Sequence[DropoutBits]) -> GroupBits:
        """The members' bits (drawn by :func:`draw_bits` from each one's generator)."""
        shapes = bits[0].shapes
        if any(b.shapes != shapes for b in bits):
            raise ValueError(f"members' dropout sites differ in shape: {sorted({b.shapes for b in bits})}")
        rates = tuple(zip(*(b.rates for b in bits), strict=True))
        used = [any(p > 0 for p in site) for site in rates]
        if not any(used):
            return cls(None, rates, shapes)
        # The members' bits lie on their device already (the loop moves each as it draws); a member whose
        # layout is not the group's is padded with zeros there, whichever member comes first.
        device = next(b.uniforms.device for b in bits if b.uniforms is not None)
        rows: list[Tensor] = []
        for b in bits:
            assert b.uniforms is not None or not any(p > 0 for p in b.rates)
            if b.uniforms is not None and all((p > 0) == u for p, u in zip(b.rates, used, strict=True)):
                rows.append(b.uniforms)  # the common case: this member's layout is the group's
                continue
            parts, start = [], 0
            for p, shape, u in zip(b.rates, shapes, used, strict=True):
                size = math.prod(shape)
                if p > 0:
                    assert b.uniforms is not None
                    parts.append(b.uniforms[start : start + size])
                    start += size
                elif u:
                    parts.append(torch.zeros(size, dtype=torch.int16, device=device))
            rows.append(torch.cat(parts))
        return cls(_stack(rows), rates, shapes)

    def to(self, device: torch.device) -> GroupBits:
        return self if self.uniforms is None else GroupBits(self.uniforms.to(device, non_blocking=True),
                                                            self.rates, self.shapes)

    def masks(self, dtype: torch.dtype = torch.float32) -> DropoutMasks:
        """Each member's masks, stacked [S, ...]: keep where the uniform is >= p * 2^16 - 2^15, scale kept
        entries by 1/(1-p).

        Runs of sites with one rate per member are thresholded as one tensor (with every rate equal, the
        whole step's bits at once). The scale is rounded to float32 whatever the dtype, so a float64
        step multiplies the very numbers a float32 one does (the tests hold the two equal).
        """
        n_layers = (len(self.shapes) - 1) // 3
        parts: list[Tensor | None] = []
        start = 0
        for rates, group in itertools.groupby(zip(self.rates, self.shapes, strict=True), key=lambda rs: rs[0]):
            shapes = [s for _, s in group]
            if not any(p > 0 for p in rates):
                parts += [None] * len(shapes)
                continue
            assert self.uniforms is not None
            sizes = [math.prod(s) for s in shapes]
            bits = self.uniforms[:, start : start + sum(sizes)]
            start += sum(sizes)
            S = len(rates)
            # p = 0 beside a member that drops: threshold -2^15 keeps every entry, scale 1.0 is exact. The
            # thresholds lie in [-2^15, 2^15): int16, as the bits, compares without a widened copy of them.
            threshold = bits.new_tensor([round(p * _UNIFORMS) - _UNIFORMS // 2 for p in rates], dtype=torch.int16)
            scale = bits.new_tensor([1.0 / (1.0 - p) for p in rates], dtype=torch.float32)
            keep = bits >= threshold.view(S, 1)
            scaled = torch.where(keep, scale.view(S, 1), 0.0).to(dtype)
            parts += [t.view(S, *s) for t, s in zip(scaled.split(sizes, dim=1), shapes, strict=True)]
        layers = tuple((parts[1 + 3 * i], parts[2 + 3 * i], parts[3 + 3 * i]) for i in range(n_layers))
        return DropoutMasks(parts[0], layers)


def idle_bits(cfg: ModelConfig, batch: int, pos: int, device: torch.device | None = None) -> DropoutBits:
    """Bits of the layout :func:`draw_bits` gives ``cfg``, all zero, drawn from no generator: what a
    member that sits a step out feeds the step (its results are dropped)."""
    rates, shapes, n = bit_layout(cfg, batch, pos)
    return DropoutBits(torch.zeros(n, dtype=torch.int16, device=device) if n else None, rates, shapes)


def stacked_rotors(cfgs: Sequence[ModelConfig], pos: int, dtype: torch.dtype, real: bool = False,
                   device: torch.device | None = None) -> tuple[Tensor, ...]:
    """Per layer, the members' :func:`rope_rotors` stacked: [S, pos, d_model / 2]
    (complex), or [S, pos, d_model / 2, 2] with ``real``. Built once per layout and kept (a few dozen
    kilobytes): building them took about 1% of a paper step, every step."""
    return _stacked_rotors(tuple(cfgs), pos, dtype, real, None if device is None else torch.device(device))


@functools.lru_cache(maxsize=32)
def _stacked_rotors(cfgs: tuple[ModelConfig, ...], pos: int, dtype: torch.dtype, real: bool,
                    device: torch.device | None) -> tuple[Tensor, ...]:
    per_member = [step_rotors(c, pos, dtype, real, device) for c in cfgs]
    return tuple(_stack(layer) for layer in zip(*per_member, strict=True))


def _heads(t: Tensor, H: int) -> Tensor:
    """[S, B, n, D] -> [S*B*H, n, d_head]."""
    S, B, n, D = t.shape
    return t.reshape(S * B, n, H, D // H).transpose(1, 2).reshape(S * B * H, n, D // H)


def _unheads(t: Tensor, S: int, B: int, H: int) -> Tensor:
    """[S*B*H, n, d_head] -> [S, B, n, D]."""
    n, d = t.shape[1], t.shape[2]
    return t.view(S * B, H, n, d).transpose(1, 2).reshape(S, B, n, H * d)


BLOCK_PARAMS = ("ln.weight", "ln.bias", "attn.qkv.weight", "mlp.0.weight", "mlp.0.bias", "attn.out.weight",
                "mlp.2.weight", "mlp.2.bias")


def _block_params(params: dict[str, Tensor], layer: int) -> tuple[Tensor | None, ...]:
    return tuple(params.get(f"blocks.{layer}.{name}") for name in BLOCK_PARAMS)


def _block(
    x: Tensor,
    params: tuple[Tensor | None, ...],
    rotor: Tensor,
    masks: tuple[Tensor | None, Tensor | None, Tensor | None],
    cfg: ModelConfig,
    mm: torch.dtype,
    last: bool,
    keep: bool,
) -> tuple[Tensor, tuple | None]:
    """One block's forward for S members: x [S, B, T, D] -> x' [S, B, n, D], n = 1 in the ``last`` block,
    else T; weights [S, ...], rotor [S, T, D/2] (complex, or real pairs), masks [S, B, ...].

    The loss reads the last position only, so the last block computes that row alone (its keys and
    values still span every position). Tensors only, so one compiled graph serves every block
    (:func:`_compiled_block`). With ``keep``, also returns what the backward needs.
    """
    ln_w, ln_b, W_qkv, W_in, b_in, W_O, W_out, b_out = params
    assert ln_w is not None and ln_b is not None and W_qkv is not None and W_O is not None
    dtype, (S, B, T, D), H = x.dtype, x.shape, cfg.n_heads
    r, o = B * T, slice(T - 1, T) if last else slice(0, T)
    n = o.stop - o.start
    m_p, m_a, m_f = (None if m is None else m[:, :, :, o] if m.dim() == 5 else m[:, :, o] for m in masks)
    W = [None if w is None else w.to(mm) for w in (W_qkv, W_in, W_O, W_out)]
    assert W[0] is not None and W[2] is not None
    xhat, mean, rstd = torch.native_layer_norm(x, [D], None, None, cfg.ln_eps)
    h = torch.addcmul(ln_b[:, None, None], xhat, ln_w[:, None, None]).to(mm)
    h_o = h[:, :, o].reshape(S, B * n, D)
    y = torch.bmm(h.view(S, r, D), W[0].mT).to(dtype)  # [S, r, 3D]: q | k | v
    qk = _rotate(y[..., : 2 * D].view(S, B, T, 2, D), rotor[:, None, :, None])
    q, k = _heads(qk[:, :, o, 0], H), _heads(qk[:, :, :, 1], H)
    v = _heads(y[..., 2 * D :].view(S, B, T, D), H)
    causal = torch.full((n, T), float("-inf"), dtype=dtype, device=x.device).triu(T - n + 1)
    P = torch.baddbmm(causal, q, k.mT, alpha=1.0 / math.sqrt(cfg.d_head)).softmax(-1)
    Pd = P if m_p is None else P * m_p.reshape(S * B * H, n, T)
    z = _unheads(torch.bmm(Pd, v), S, B, H).reshape(S, B * n, D).to(mm)
    a = torch.bmm(z, W[2].mT).to(dtype).view(S, B, n, D)
    x_next = x[:, :, o] + a if m_a is None else torch.addcmul(x[:, :, o], a, m_a)
    u = g = None
    if W[1] is not None:  # the MLP branch (absent in an attention-only block)
        assert b_in is not None and b_out is not None and W[3] is not None
        u = torch.add(torch.bmm(h_o, W[1].mT), b_in[:, None])  # promotes to the model dtype in the same pass
        g = F.gelu(u, approximate=cfg.gelu_approximate).to(mm)
        f = torch.add(torch.bmm(g, W[3].mT), b_out[:, None]).view(S, B, n, D)
        x_next = x_next.add_(f) if m_f is None else x_next.addcmul_(f, m_f)
    saved = (o, x, xhat, mean, rstd, h, h_o, W, rotor, q, k, v, P, Pd, z, u, g, m_p, m_a, m_f) if keep else None
    return x_next, saved


def _forward(params: dict[str, Tensor], cfg: ModelConfig, tokens: Tensor, masks: DropoutMasks, mm: torch.dtype,
             rotors: tuple[Tensor, ...], saved: list | None, block_fn: Callable = _block) -> Tensor:
    """Embedding and blocks: the residual stream after the last block at the last position [S, B, D].

    Appends what the backward needs, per block, to ``saved``. ``block_fn``: :func:`_block` or its
    compiled graph.
    """
    S, V = tokens.shape[0], cfg.d_vocab
    offsets = torch.arange(S, device=tokens.device).view(S, 1, 1) * V  # member s's rows of the stacked W_E
    x = _mul(params["embed.weight"].reshape(S * V, -1)[tokens + offsets], masks.embed)
    for layer in range(cfg.n_layers):
        last = layer == cfg.n_layers - 1
        x, kept = block_fn(x, _block_params(params, layer), rotors[layer], masks.layers[layer], cfg, mm, last,
                           saved is not None)
        if saved is not None:
            saved.append(kept)
    return x[:, :, -1]


def _final_ln(params: dict[str, Tensor], x: Tensor, eps: float) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """x [S, B, D] -> (LN(x) with each member's affine, xhat, mean, rstd)."""
    xhat, mean, rstd = torch.native_layer_norm(x, [x.shape[-1]], None, None, eps)
    return torch.addcmul(params["ln_final.bias"][:, None], xhat, params["ln_final.weight"][:, None]), xhat, mean, rstd


def _grads(
    params: dict[str, Tensor],
    cfg: ModelConfig,
    tokens: Tensor,
    answers: Tensor,
    masks: GroupBits | DropoutMasks,
    rotors: tuple[Tensor, ...],
    precision: Precision,
    loss_scale: Tensor,
) -> tuple[Tensor, dict[str, Tensor]]:
    """Each member's loss [S] and every parameter's gradient [S, ...] (scaled by ``loss_scale`` [S]).

    ``masks``: the bits, thresholded here (so that Inductor fuses the threshold into the kernels that
    apply the masks), or masks already made, [S, batch, ...].
    """
    dtype = params["embed.weight"].dtype
    if isinstance(masks, GroupBits):
        masks = masks.masks(dtype)
    mm = MATMUL_DTYPES.get(precision, dtype)
    S, B, T = tokens.shape
    D, H, r, scale = cfg.d_model, cfg.n_heads, B * T, 1.0 / math.sqrt(cfg.d_head)

    # Every product is between [S, ...] stacks: torch.bmm itself, the kernel `@` would reach after its
    # broadcasting checks (five more ops a call, about 1% of a paper step at S = 1).
    def matmul(a: Tensor, b: Tensor) -> Tensor:  # in the matmul dtype, back to the model's
        return torch.bmm(a.to(mm), b).to(dtype)

    saved: list = []
    grads: dict[str, Tensor] = {}
    last = _forward(params, cfg, tokens, masks, mm, rotors, saved)
    hf, hf_hat, mean_f, rstd_f = _final_ln(params, last, cfg.ln_eps)
    W_U = params["unembed.weight"]
    logits = torch.baddbmm(params["unembed.bias"][:, None], hf, W_U.mT)  # [S, B, V]
    logp = logits.log_softmax(-1)
    loss = -logp.gather(2, answers[..., None]).squeeze(-1).mean(-1)

    # ---- backward ----
    dlogits = logp.exp()
    member = torch.arange(S, device=tokens.device)[:, None]
    row = torch.arange(B, device=tokens.device)[None]
    dlogits[member, row, answers] -= 1.0
    dlogits /= B
    dlogits *= loss_scale.view(S, 1, 1)  # exact at 1; fp16's scale keeps small gradients above its underflow
    grads["unembed.weight"] = torch.bmm(dlogits.mT, hf)
    grads["unembed.bias"] = dlogits.sum(1)
    dhf = torch.bmm(dlogits, W_U)
    grads["ln_final.weight"], grads["ln_final.bias"] = (dhf * hf_hat).sum(1), dhf.sum(1)
    dlast = torch.ops.aten.native_layer_norm_backward(
        dhf * params["ln_final.weight"][:, None], last, [D], mean_f, rstd_f, None, None, [True, False, False]
    )[0]
    dx = dlast[:, :, None]  # gradient of the last block's output rows [S, B, 1, D]
    for layer in reversed(range(cfg.n_layers)):
        name = f"blocks.{layer}."
        o, x, xhat, mean, rstd, h, h_o, W, rotor, q, k, v, P, Pd, z, u, g, m_p, m_a, m_f = saved[layer]
        n = o.stop - o.start
        da = _mul(dx, m_a).reshape(S, B * n, D).to(mm)
        grads[name + "attn.out.weight"] = matmul(da.mT, z)
        if u is not None:  # the MLP branch
            df = _mul(dx, m_f).reshape(S, B * n, D)
            grads[name + "mlp.2.bias"] = df.sum(1)
            df = df.to(mm)
            grads[name + "mlp.2.weight"] = matmul(df.mT, g)
            du = torch.ops.aten.gelu_backward(torch.bmm(df, W[3]), u, approximate=cfg.gelu_approximate)
            grads[name + "mlp.0.bias"] = du.sum(1)
        dz = _heads(matmul(da, W[2]).view(S, B, n, D), H)
        dP = torch.bmm(dz, v.mT)
        ds = torch._softmax_backward_data(dP if m_p is None else dP * m_p.reshape(S * B * H, n, T), P, -1, dtype)
        ds *= scale
        dy = (torch.empty if n == T else torch.zeros)(S, B, T, 3 * D, dtype=dtype, device=x.device)  # d(q|k|v)
        back = _conj(rotor)[:, None]
        _rotate(_unheads(torch.bmm(ds, k), S, B, H), back[:, :, o], out=dy[:, :, o, :D])
        _rotate(_unheads(torch.bmm(ds.mT, q), S, B, H), back, out=dy[..., D : 2 * D])
        dy[..., 2 * D :] = _unheads(torch.bmm(Pd.mT, dz), S, B, H)
        dy = dy.view(S, r, 3 * D).to(mm)
        grads[name + "attn.qkv.weight"] = matmul(dy.mT, h.view(S, r, D))
        d_h = matmul(dy, W[0]).view(S, B, T, D)
        if u is not None:
            du = du.to(mm)
            grads[name + "mlp.0.weight"] = matmul(du.mT, h_o)
            d_h[:, :, o] += matmul(du, W[1]).view(S, B, n, D)
        ln_w = params[name + "ln.weight"]
        grads[name + "ln.weight"], grads[name + "ln.bias"] = (d_h * xhat).sum((1, 2)), d_h.sum((1, 2))
        dx_in = torch.ops.aten.native_layer_norm_backward(
            d_h * ln_w[:, None, None], x, [D], mean, rstd, None, None, [True, False, False]
        )[0]
        dx_in[:, :, o] += dx  # the residual path
        dx = dx_in
    # A one-hot product rather than index_add_: Inductor turns a scatter-add into atomic adds, whose
    # order (so the float sum) changes from run to run with 2+ threads; a matmul sums in a fixed order.
    onehot = F.one_hot(tokens.view(S, r), cfg.d_vocab).to(dtype)
    grads["embed.weight"] = torch.bmm(onehot.mT, _mul(dx, masks.embed).view(S, r, D))
    return loss, {k: g.contiguous() for k, g in grads.items()}


def cxx_compiler() -> str | None:
    """The C++ compiler Inductor would find (``$CXX``, else g++, c++ or clang++ on PATH), or None:
    ``compiled=True`` needs one."""
    return next((p for c in (os.environ.get("CXX"), "g++", "c++", "clang++") if c and (p := shutil.which(c))), None)


# GELU's tanh as 2 / (1 + exp(-2y)) - 1: half the cost of Sleef's tanh (GELU's kernels were 15% of
# a paper step). Its absolute error is float rounding, which GELU scales by u/2; its relative error
# near 0, why Inductor leaves it off by default (pytorch#148241), never reaches GELU's output.
_INDUCTOR_OPTIONS: dict[str, str | int | bool | Callable] = {"cpp.use_decompose_tanh": True}


# A group compiles one graph per group size S and shape (the blocks: two per S and batch shape), and
# evaluating a few members at a time adds more; Dynamo's default of 8 graphs per function would send
# the rest back to eager kernels, silently. Raised only around the group's own calls.
_RECOMPILE_LIMIT = 256


@functools.cache
def _compiled_grads() -> Callable:
    # Built on first use (importing possym must not import Inductor); static shapes, one graph per S.
    return torch.compile(_grads, dynamic=False, options={**_INDUCTOR_OPTIONS})


@functools.cache
def _compiled_block() -> Callable:
    return torch.compile(_block, dynamic=False, options={**_INDUCTOR_OPTIONS})


def _graphs(compiled: bool) -> contextlib.AbstractContextManager:
    if not compiled:
        return contextlib.nullcontext()
    import torch._dynamo

    return torch._dynamo.config.patch(recompile_limit=_RECOMPILE_LIMIT)


def _loss_and_grads(params: dict[str, Tensor], cfgs: Sequence[ModelConfig], tokens: Tensor, answers: Tensor,
                    masks: GroupBits | DropoutMasks, precision: Precision, compiled: bool,
                    loss_scales: Sequence[float] | None) -> tuple[Tensor, dict[str, Tensor]]:
    """The losses [S] and the gradients [S, ...] of the members whose stacked ``params`` and configs
    ``cfgs`` are given, each unscaled by its ``loss_scales[s]`` (``tokens`` [S, batch, pos])."""
    S, T = len(cfgs), tokens.shape[-1]
    if tokens.shape[0] != S or answers.shape[0] != S:
        raise ValueError(f"tokens {tuple(tokens.shape)} and answers {tuple(answers.shape)} must lead with S={S}")
    dtype, device = params["embed.weight"].dtype, params["embed.weight"].device
    rotors = stacked_rotors(cfgs, T, dtype, real=compiled, device=device)
    scales = [1.0] * S if loss_scales is None else list(loss_scales)
    scale = torch.tensor(scales, dtype=dtype, device=device)  # a tensor: no recompile per scale
    if isinstance(masks, GroupBits):
        masks = masks.to(device)
    fn = _compiled_grads() if compiled else _grads
    with _graphs(compiled):
        loss, grads = fn(params, cfgs[0], tokens, answers, masks, rotors, precision, scale)
    if any(s != 1.0 for s in scales):
        grads = {k: g / scale.view(S, *([1] * (g.dim() - 1))) for k, g in grads.items()}
    return loss, grads


def stacked_last_token_logits(params: dict[str, Tensor], cfgs: Sequence[ModelConfig], tokens: Tensor,
                              precision: Precision = "fp32", compiled: bool = False) -> Tensor:
    """[S, batch, pos] -> [S, batch, d_vocab]: eval-mode logits (no dropout) at the last position of the
    members whose stacked ``params`` and configs ``cfgs`` are given."""
    dtype, T = params["embed.weight"].dtype, tokens.shape[-1]
    mm = MATMUL_DTYPES.get(precision, dtype)
    rotors = stacked_rotors(cfgs, T, dtype, real=compiled, device=tokens.device)
    block_fn = _compiled_block() if compiled else _block
    with _graphs(compiled):
        last = _forward(params, cfgs[0], tokens, DropoutMasks.none(cfgs[0].n_layers), mm, rotors, None, block_fn)
    hf = _final_ln(params, last, cfgs[0].ln_eps)[0]
    return torch.baddbmm(params["unembed.bias"][:, None], hf, params["unembed.weight"].mT)


def member_params(model: GPTJ) -> dict[str, Tensor]:
    """One model's parameters as a group of one: [1, ...] views, nothing copied, the model left as it is."""
    return {name: p.detach()[None] for name, p in model.named_parameters()}


@torch.no_grad()
def loss_and_grads(
    model: GPTJ,
    tokens: Tensor,
    answers: Tensor,
    masks: DropoutMasks | DropoutBits,
    precision: Precision = "fp32",
    compiled: bool = False,
    loss_scale: float = 1.0,
) -> Tensor:
    """Mean last-token cross-entropy of ``tokens`` [batch, pos] against ``answers`` [batch]: the step of
    a group of one.

    Writes every parameter's ``.grad`` (replacing what was there) and returns the loss (0-d, the
    model's dtype). ``masks`` from :func:`draw_masks`, or the :func:`draw_bits` they are made of
    (the training loop's choice: thresholded inside the step); p = 0 gives the eval-mode function.
    ``compiled``: the same maths through ``torch.compile`` (module docstring); the first call per
    batch shape compiles (tens of seconds), later ones reuse the kernels. ``loss_scale``: the
    backward runs on ``loss_scale`` times the loss, and ``.grad`` gets the gradients divided by it
    again; where the scaled gradients overflowed (fp16), some ``.grad`` is not finite.
    """
    stacked = GroupBits.stack([masks]) if isinstance(masks, DropoutBits) else masks.stacked()
    loss, grads = _loss_and_grads(member_params(model), [model.cfg], tokens[None], answers[None], stacked, precision,
                                  compiled, [loss_scale])
    for name, param in model.named_parameters():
        param.grad = grads[name][0]
    return loss[0]


@torch.no_grad()
def last_token_logits(model: GPTJ, tokens: Tensor, precision: Precision = "fp32", compiled: bool = False) -> Tensor:
    """[batch, pos] -> [batch, d_vocab]: eval-mode logits at the last position (no dropout), the forward
    of the training step (a group of one).

    With fp32, equal to ``model(tokens)[:, -1]`` (tested) at about 0.8x its cost; bf16 runs the big
    matmuls as the training step does (HF Trainer likewise evaluates a mixed-precision run under
    autocast). ``compiled``: each block through :func:`_compiled_block`; on the paper model 1.7x
    faster in bf16 (1.2x in fp32) for about 15 s of compiling (two graphs, the inner blocks' and
    the last block's; a new batch shape compiles them again).
    """
    return stacked_last_token_logits(member_params(model), [model.cfg], tokens[None], precision, compiled)[0]


class ModelGroup:
    """S GPTJ members whose parameters live in stacked [S, ...] tensors, one per parameter name.

    Each member's own parameters become views of row s of those tensors, so each member module is
    always current: its ``state_dict()`` is its checkpoint, its optimiser steps it in place,
    ``load_state_dict`` writes into the stack. Build the members on their device (and in their dtype)
    first; moving a member afterwards would detach it from the stack. A member may sit in two groups
    one after the other (the later one re-stacks it), never in two at once.
    """

    def __init__(self, members: Sequence[GPTJ]) -> None:
        if not members:
            raise ValueError("a group needs at least one member")
        key = shape_key(members[0].cfg)
        odd = [i for i, m in enumerate(members) if shape_key(m.cfg) != key]
        if odd:
            shape = dict(zip(SHAPE_FIELDS, key, strict=True))
            raise ValueError(f"members {odd} differ in shape from member 0 ({shape}); a group shares {SHAPE_FIELDS}")
        self.members = tuple(members)
        self.cfg = members[0].cfg
        self.params: dict[str, Tensor] = {}
        # Each member's parameters by name, walked once: a walk of the paper model's modules is 229 us on a
        # CPU, about 5% of a member's step on an H200, where a step is short.
        self._named = [dict(m.named_parameters()) for m in members]
        for name in self._named[0]:
            own = [named[name] for named in self._named]
            stacked = torch.stack([p.detach() for p in own])
            for s, p in enumerate(own):
                p.data = stacked[s]
            self.params[name] = stacked

    def __len__(self) -> int:
        return len(self.members)

    @property
    def dtype(self) -> torch.dtype:
        return self.params["embed.weight"].dtype

    @property
    def device(self) -> torch.device:
        return self.params["embed.weight"].device

    @torch.no_grad()
    def loss_and_grads(
        self,
        tokens: Tensor,
        answers: Tensor,
        bits: GroupBits,
        precision: Precision = "fp32",
        compiled: bool = False,
        loss_scales: Sequence[float] | None = None,
        active: Sequence[bool] | None = None,
    ) -> Tensor:
        """Each member's :func:`loss_and_grads` at once: ``tokens`` [S, batch, pos], ``answers`` [S, batch];
        returns the losses [S] and sets every member parameter's ``.grad`` (a view of the stacked
        gradient), unscaled by that member's ``loss_scales[s]``. ``active``: the members whose ``.grad``
        to set (the others sit this step out: their results are dropped)."""
        cfgs = [m.cfg for m in self.members]
        loss, grads = _loss_and_grads(self.params, cfgs, tokens, answers, bits, precision, compiled, loss_scales)
        for s, named in enumerate(self._named):
            if active is None or active[s]:
                for name, param in named.items():
                    param.grad = grads[name][s]
        return loss

    def params_of(self, members: Sequence[int] | None = None) -> dict[str, Tensor]:
        """The stacked parameters of ``members`` (default: all, the live tensors; a subset is a copy)."""
        if members is None or list(members) == list(range(len(self))):
            return self.params
        idx = torch.as_tensor(list(members), device=self.device)
        return {k: v.index_select(0, idx) for k, v in self.params.items()}

    @torch.no_grad()
    def last_token_logits(self, tokens: Tensor, precision: Precision = "fp32", compiled: bool = False,
                          members: Sequence[int] | None = None, params: dict[str, Tensor] | None = None) -> Tensor:
        """[S', batch, pos] -> [S', batch, d_vocab]: the :func:`last_token_logits`
        (eval mode, no dropout) of each of ``members`` (default: all S) in one pass; ``params``: their
        :meth:`params_of`, when the caller already holds them.

        A member's logits do not depend on which others run beside it (each member's arithmetic is
        its own, and no reduction crosses the batch), which the tests check bitwise, compiled too.
        """
        idx = list(range(len(self))) if members is None else list(members)
        if tokens.shape[0] != len(idx):
            raise ValueError(f"tokens {tuple(tokens.shape)} must lead with one row per member ({len(idx)})")
        params = self.params_of(idx) if params is None else params
        return stacked_last_token_logits(params, [self.members[i].cfg for i in idx], tokens, precision, compiled)
