"""The training step of :class:`~possym.model.gptj.GPTJ`, forward and backward written by hand.

Same parameters, same maths as the module (which stays the reference: a test holds the two equal to
1e-10 in float64, dropout masks included), but shaped for a small model on a CPU:

- ``W_Q, W_K, W_V`` are one matmul ``h @ W_QKV^T`` forward, and one each for ``dh`` and ``dW``
  backward, with d(q | k | v) written in place rather than concatenated;
- RoPE is one complex multiply: GPT-J's adjacent pairs read as complex numbers times a per-layer
  rotor ``e^{i p θ_k}`` that also folds the plane options (1 for a NoPE plane, 0 for a gated one);
  its backward multiplies by the conjugate;
- the loss reads the last position only, so the last block computes that one row (from every
  position's keys and values) and the final LayerNorm and unembedding run on B rows;
- no autograd graph: only the tensors the backward needs are kept;
- dropout masks come from a passed-in :class:`torch.Generator`, four 16-bit uniforms per 64-bit
  draw (:func:`draw_bits`), 2.5x cheaper than ``bernoulli_``, thresholded inside the step;
- ``precision="bf16"`` runs the six big matmuls per layer with bfloat16 inputs and float32
  accumulation (oneDNN), everything else in float32; weights and optimiser state stay float32;
  ``precision="fp16"`` does the same in float16, the paper's mixed precision, whose narrow exponent
  needs a loss scale (``loss_scale``: the backward starts from the scaled loss's gradient and the
  gradients are unscaled before they reach ``.grad``; the loop's :class:`~possym.train.loop.LossScaler`
  picks the scale);
- ``compiled=True`` runs the same function through ``torch.compile`` (Inductor, which needs a C++
  compiler), fusing the elementwise work between the matmuls (the dropout threshold included,
  and GELU's tanh spelled with one exp); the rotors are then real
  ``[..., (cos, sin)]`` pairs, as Inductor generates no complex code.

The maths per block (rows r = batch x pos, dropout masks m already scaled by 1/(1-p)):
    h = LN(x);  [q k v u] = h W1^T + [0 0 0 b_in];  q, k = rope(q), rope(k)
    P = softmax(q k^T / sqrt(d_head) + causal);  z = (P * m_P) v;  g = gelu(u)   (exact or tanh)
    x' = x + (z W_O^T) * m_a + (g W_out^T + b_out) * m_f      (no last term when ``mlp=False``)
and its backward, given dx':
    da = dx' * m_a, df = dx' * m_f;  dW_O = da^T z, dz = da W_O;  dW_out = df^T g, dg = df W_out
    du = gelu'(u) dg;  dP = (dz v^T) * m_P;  ds = P * (dP - rowsum(dP * P)) / sqrt(d_head)
    dq = ds k, dk = ds^T q, dv = (P * m_P)^T dz  (then un-rotated);  dy1 = [dq dk dv du]
    dW1 = dy1^T h,  dh = dy1 W1;  dx = dx' + LN_backward(dh)

Example (gradients land in ``.grad``, ready for ``optimizer.step()``):
    >>> cfg = ModelConfig(n_layers=2, d_model=16, d_mlp=32, d_vocab=10, dropout=0.1)
    >>> model = GPTJ(cfg, torch.Generator().manual_seed(0))
    >>> tokens, answers = torch.randint(0, 10, (4, 5)), torch.randint(0, 10, (4,))
    >>> masks = draw_masks(cfg, 4, 5, torch.Generator().manual_seed(1))
    >>> loss = loss_and_grads(model, tokens, answers, masks)
    >>> model.unembed.weight.grad.shape
    torch.Size([10, 16])
"""

from __future__ import annotations

import functools
import itertools
import math
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import torch
import torch.nn.functional as F
from torch import Tensor

from possym.config import ModelConfig
from possym.model.gptj import GPTJ, Block
from possym.model.rope import rope_cos_sin

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
    ``dropout``). ``None`` where the rate is 0, and for the MLP of an attention-only block.
    """

    embed: Tensor | None
    layers: tuple[tuple[Tensor | None, Tensor | None, Tensor | None], ...]

    @classmethod
    def none(cls, n_layers: int) -> DropoutMasks:
        """No dropout anywhere (p = 0, or evaluation)."""
        return cls(None, tuple((None, None, None) for _ in range(n_layers)))


@dataclass(frozen=True)
class DropoutBits:
    """A step's dropout randomness before it becomes masks: one uniform int16 per mask entry.

    :meth:`masks` thresholds and scales them. :func:`loss_and_grads` does that inside the step, so
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
        """Keep an entry when its uniform is >= p * 2^16 (of [-2^15, 2^15)); scale kept ones by 1/(1-p).

        Runs of masks with one rate are thresholded as one tensor (with every rate equal, the whole
        step's bits at once, as before the embedding got a rate of its own).
        """
        n_layers = (len(self.shapes) - 1) // 3
        parts: list[Tensor | None] = []
        start = 0
        for p, group in itertools.groupby(zip(self.rates, self.shapes, strict=True), key=lambda rs: rs[0]):
            shapes = [s for _, s in group]
            if p == 0.0:
                parts += [None] * len(shapes)
                continue
            assert self.uniforms is not None
            sizes = [math.prod(s) for s in shapes]
            bits = self.uniforms[start : start + sum(sizes)]
            start += sum(sizes)
            # The scale is rounded to float32 whatever the dtype, so a float64 step multiplies the very
            # numbers a float32 one does (the tests hold the two equal).
            keep = bits >= round(p * _UNIFORMS) - _UNIFORMS // 2
            scaled = torch.where(keep, 1.0 / (1.0 - p), 0.0).to(dtype)
            parts += [t.view(s) for t, s in zip(scaled.split(sizes), shapes, strict=True)]
        layers = tuple((parts[1 + 3 * i], parts[2 + 3 * i], parts[3 + 3 * i]) for i in range(n_layers))
        return DropoutMasks(parts[0], layers)


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


def _mul(x: Tensor, mask: Tensor | None) -> Tensor:
    return x if mask is None else x * mask


def _heads(t: Tensor, B: int, H: int) -> Tensor:
    """[B, n, D] -> [B*H, n, d_head]."""
    return t.view(B, t.shape[1], H, -1).transpose(1, 2).reshape(B * H, t.shape[1], -1)


def _unheads(t: Tensor, B: int, H: int) -> Tensor:
    """[B*H, n, d_head] -> [B, n, D]."""
    return t.view(B, H, t.shape[1], -1).transpose(1, 2).reshape(B, t.shape[1], -1)


def _block_params(block: Block) -> tuple[Tensor | None, ...]:
    """A block's weights in :func:`_block`'s order: LN (w, b), W_QKV, MLP in (W, b), W_O, MLP out (W, b);
    the MLP's are None in an attention-only block."""
    mlp = block.mlp
    W_in, b_in, W_out, b_out = (
        (None,) * 4 if mlp is None else (mlp.fc_in.weight, mlp.fc_in.bias, mlp.fc_out.weight, mlp.fc_out.bias)
    )
    return (block.ln.weight, block.ln.bias, block.attn.qkv.weight, W_in, b_in,
            block.attn.out.weight, W_out, b_out)  # fmt: skip


def _block(
    x: Tensor,
    params: tuple[Tensor, ...],
    rotor: Tensor,
    masks: tuple[Tensor | None, Tensor | None, Tensor | None],
    cfg: ModelConfig,
    mm: torch.dtype,
    last: bool,
    keep: bool,
) -> tuple[Tensor, tuple | None]:
    """One block's forward: x [B, T, D] -> x' [B, n, D], n = 1 for the ``last`` block, else T.

    The loss reads the last position only, so the last block computes that row alone (its keys and
    values still span every position). Tensors only, so one compiled graph serves every block
    (:func:`_compiled_block`). With ``keep``, also returns what the backward needs.
    """
    ln_w, ln_b, W_qkv, W_in, b_in, W_O, W_out, b_out = params  # the MLP's four are None without one
    dtype, (B, T, D), H = x.dtype, x.shape, cfg.n_heads
    r, o = B * T, slice(T - 1, T) if last else slice(0, T)
    n = o.stop - o.start
    m_p, m_a, m_f = (None if m is None else m[:, :, o] if m.dim() == 4 else m[:, o] for m in masks)
    W = [None if w is None else w.to(mm) for w in (W_qkv, W_in, W_O, W_out)]
    h, mean, rstd = torch.native_layer_norm(x, [D], ln_w, ln_b, cfg.ln_eps)
    h = h.to(mm)
    h_o = h[:, o].reshape(B * n, D)
    y = (h.view(r, D) @ W[0].mT).to(dtype)  # [r, 3D]: q | k | v
    qk = _rotate(y[:, : 2 * D].view(B, T, 2, D), rotor[:, None])
    q, k = _heads(qk[:, o, 0], B, H), _heads(qk[:, :, 1], B, H)
    v = _heads(y[:, 2 * D :].view(B, T, D), B, H)
    causal = torch.full((n, T), float("-inf"), dtype=dtype, device=x.device).triu(T - n + 1)
    P = torch.baddbmm(causal, q, k.mT, alpha=1.0 / math.sqrt(cfg.d_head)).softmax(-1)
    Pd = P if m_p is None else P * m_p.reshape(B * H, n, T)
    z = _unheads(Pd @ v, B, H).view(B * n, D).to(mm)
    a = (z @ W[2].mT).to(dtype).view(B, n, D)
    x_next = x[:, o] + a if m_a is None else torch.addcmul(x[:, o], a, m_a)
    u = g = None
    if W[1] is not None:  # the MLP branch (absent in an attention-only block)
        u = torch.add(h_o @ W[1].mT, b_in)  # promotes to float32 in the same pass
        g = F.gelu(u, approximate=cfg.gelu_approximate).to(mm)
        f = torch.add(g @ W[3].mT, b_out).view(B, n, D)
        x_next = x_next.add_(f) if m_f is None else x_next.addcmul_(f, m_f)
    saved = (o, x, mean, rstd, h, h_o, W, rotor, q, k, v, P, Pd, z, u, g, m_p, m_a, m_f) if keep else None
    return x_next, saved


def _forward(
    model: GPTJ,
    tokens: Tensor,
    masks: DropoutMasks,
    mm: torch.dtype,
    rotors: tuple[Tensor, ...],
    saved: list | None,
    block_fn: Callable = _block,
) -> Tensor:
    """Embedding and blocks: the residual stream after the last block, at the last position [B, D].

    Appends what the backward needs, per block, to ``saved``. ``block_fn``: :func:`_block` or its
    compiled graph.
    """
    cfg = model.cfg
    x = _mul(model.embed.weight[tokens], masks.embed)
    for layer, rotor in zip(range(len(model.blocks)), rotors, strict=True):
        last = layer == cfg.n_layers - 1
        params = _block_params(model.block(layer))
        x, kept = block_fn(x, params, rotor, masks.layers[layer], cfg, mm, last, saved is not None)
        if saved is not None:
            saved.append(kept)
    return x[:, -1]


@torch.no_grad()
def last_token_logits(model: GPTJ, tokens: Tensor, precision: Precision = "fp32", compiled: bool = False) -> Tensor:
    """[batch, pos] -> [batch, d_vocab]: eval-mode logits at the last position (no dropout).

    With fp32, equal to ``model(tokens)[:, -1]`` (tested) at about 0.8x its cost; bf16 runs the big
    matmuls as the training step does (HF Trainer likewise evaluates a mixed-precision run under
    autocast). ``compiled``: each block through :func:`_compiled_block`; on the paper model 1.7x
    faster in bf16 (1.2x in fp32) for about 15 s of compiling (two graphs, the inner blocks' and
    the last block's; a new batch shape compiles them again).
    """
    cfg, dtype = model.cfg, model.embed.weight.dtype
    mm = MATMUL_DTYPES.get(precision, dtype)
    rotors = step_rotors(cfg, tokens.shape[1], dtype, real=compiled, device=tokens.device)
    block_fn = _compiled_block() if compiled else _block
    last = _forward(model, tokens, DropoutMasks.none(cfg.n_layers), mm, rotors, None, block_fn)
    return model.unembed(model.ln_final(last))


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
    """Mean last-token cross-entropy of ``tokens`` [batch, pos] against ``answers`` [batch].

    Writes every parameter's ``.grad`` (replacing what was there) and returns the loss (0-d, the
    model's dtype). ``masks`` from :func:`draw_masks`, or the :func:`draw_bits` they are made of
    (the training loop's choice: thresholded inside the step); p = 0 gives the eval-mode function.
    ``compiled``: the same maths through ``torch.compile`` (module docstring); the first call per
    batch shape compiles (tens of seconds), later ones reuse the kernels. ``loss_scale``: the
    backward runs on ``loss_scale`` times the loss, and ``.grad`` gets the gradients divided by it
    again; where the scaled gradients overflowed (fp16), some ``.grad`` is not finite.
    """
    dtype = model.embed.weight.dtype
    rotors = step_rotors(model.cfg, tokens.shape[1], dtype, real=compiled, device=tokens.device)
    scale = torch.tensor(loss_scale, dtype=dtype, device=tokens.device)  # a tensor: no recompile per scale
    loss, grads = (_compiled_grads() if compiled else _grads)(model, tokens, answers, masks, rotors, precision, scale)
    for name, param in model.named_parameters():
        param.grad = grads[name] if loss_scale == 1.0 else grads[name] / scale
    return loss


def cxx_compiler() -> str | None:
    """The C++ compiler Inductor would find (``$CXX``, else g++, c++ or clang++ on PATH), or None:
    ``compiled=True`` needs one."""
    return next((p for c in (os.environ.get("CXX"), "g++", "c++", "clang++") if c and (p := shutil.which(c))), None)


# GELU's tanh as 2 / (1 + exp(-2y)) - 1: half the cost of Sleef's tanh (GELU's kernels were 15% of
# a paper step). Its absolute error is float rounding, which GELU scales by u/2; its relative error
# near 0, why Inductor leaves it off by default (pytorch#148241), never reaches GELU's output.
_INDUCTOR_OPTIONS: dict[str, str | int | bool | Callable] = {"cpp.use_decompose_tanh": True}


@functools.cache
def _compiled_block() -> Callable:
    # One block per graph: compiling the 12-layer forward whole took 34 s and saved less than that.
    return torch.compile(_block, dynamic=False, options=_INDUCTOR_OPTIONS)


@functools.cache
def _compiled_grads() -> Callable:
    # Built on first use: importing possym must not import Inductor. Shapes are static (a training
    # run's batches all have one shape); a new model config or shape compiles once more.
    return torch.compile(_grads, dynamic=False, options=_INDUCTOR_OPTIONS)


def _grads(
    model: GPTJ,
    tokens: Tensor,
    answers: Tensor,
    masks: DropoutMasks | DropoutBits,
    rotors: tuple[Tensor, ...],
    precision: Precision,
    loss_scale: Tensor,
) -> tuple[Tensor, dict[str, Tensor]]:
    """:func:`loss_and_grads`' maths: the loss and every parameter's gradient, by parameter name."""
    cfg, dtype = model.cfg, model.embed.weight.dtype
    if isinstance(masks, DropoutBits):
        masks = masks.masks(dtype)
    mm = MATMUL_DTYPES.get(precision, dtype)  # the big matmuls' input dtype
    B, T = tokens.shape
    D, H, r, scale = cfg.d_model, cfg.n_heads, tokens.numel(), 1.0 / math.sqrt(cfg.d_head)

    def heads(t: Tensor) -> Tensor:
        return _heads(t, B, H)

    def unheads(t: Tensor) -> Tensor:
        return _unheads(t, B, H)

    def matmul(a: Tensor, b: Tensor) -> Tensor:  # in the matmul dtype, back to the model's
        return (a.to(mm) @ b).to(dtype)

    saved: list = []
    grads: dict[str, Tensor] = {}
    last = _forward(model, tokens, masks, mm, rotors, saved)
    hf, mean_f, rstd_f = torch.native_layer_norm(last, [D], model.ln_final.weight, model.ln_final.bias, cfg.ln_eps)
    logits = torch.addmm(model.unembed.bias, hf, model.unembed.weight.mT)
    logp = logits.log_softmax(-1)
    loss = -logp.gather(1, answers[:, None]).mean()

    # ---- backward ----
    dlogits = logp.exp()
    dlogits[torch.arange(B, device=tokens.device), answers] -= 1.0
    dlogits /= B
    dlogits *= loss_scale  # exact at 1; fp16's scale keeps small gradients above its underflow
    grads["unembed.weight"] = dlogits.mT @ hf
    grads["unembed.bias"] = dlogits.sum(0)
    dlast, dw, db = torch.ops.aten.native_layer_norm_backward(
        dlogits @ model.unembed.weight, last, [D], mean_f, rstd_f,
        model.ln_final.weight, model.ln_final.bias, [True, True, True],
    )  # fmt: skip
    grads["ln_final.weight"], grads["ln_final.bias"] = dw, db
    dx = dlast[:, None]  # gradient of the last block's output rows
    for layer in reversed(range(cfg.n_layers)):
        block, name = model.block(layer), f"blocks.{layer}."
        o, x, mean, rstd, h, h_o, W, rotor, q, k, v, P, Pd, z, u, g, m_p, m_a, m_f = saved[layer]
        n = o.stop - o.start
        da = _mul(dx, m_a).reshape(B * n, D).to(mm)
        grads[name + "attn.out.weight"] = matmul(da.mT, z)
        if u is not None:  # the MLP branch
            df = _mul(dx, m_f).reshape(B * n, D)
            grads[name + "mlp.2.bias"] = df.sum(0)
            df = df.to(mm)
            grads[name + "mlp.2.weight"] = matmul(df.mT, g)
            du = torch.ops.aten.gelu_backward(df @ W[3], u, approximate=cfg.gelu_approximate)  # float32, as u
            grads[name + "mlp.0.bias"] = du.sum(0)
        dz = heads(matmul(da, W[2]).view(B, n, D))
        dP = dz @ v.mT
        ds = torch._softmax_backward_data(dP if m_p is None else dP * m_p.reshape(B * H, n, T), P, -1, dtype)
        ds *= scale
        dy = (torch.empty if n == T else torch.zeros)(B, T, 3 * D, dtype=dtype, device=x.device)  # d(q|k|v)
        back = _conj(rotor)
        _rotate(unheads(ds @ k), back[o], out=dy[:, o, :D])
        _rotate(unheads(ds.mT @ q), back, out=dy[..., D : 2 * D])
        dy[..., 2 * D :] = unheads(Pd.mT @ dz)
        dy = dy.view(r, 3 * D).to(mm)
        grads[name + "attn.qkv.weight"] = matmul(dy.mT, h.view(r, D))
        d_h = matmul(dy, W[0]).view(B, T, D)
        if u is not None:
            du = du.to(mm)
            grads[name + "mlp.0.weight"] = matmul(du.mT, h_o)
            d_h[:, o] += matmul(du, W[1]).view(B, n, D)
        dx_in, dw, db = torch.ops.aten.native_layer_norm_backward(
            d_h, x, [D], mean, rstd, block.ln.weight, block.ln.bias, [True, True, True]
        )
        grads[name + "ln.weight"], grads[name + "ln.bias"] = dw, db
        dx_in[:, o] += dx  # the residual path
        dx = dx_in
    # A one-hot product rather than index_add_: Inductor turns a scatter-add into atomic adds, whose
    # order (so the float sum) changes from run to run with 2+ threads; a matmul sums in a fixed order.
    onehot = F.one_hot(tokens.flatten(), cfg.d_vocab).to(dtype)
    grads["embed.weight"] = onehot.mT @ _mul(dx, masks.embed).view(r, D)
    return loss, {k: g.contiguous() for k, g in grads.items()}
