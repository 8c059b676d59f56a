"""The hand-written training step of :mod:`possym.train.fused` for S models at once.

A group of S :class:`~possym.model.gptj.GPTJ` members that share a shape (layers, widths, heads,
vocabulary, LayerNorm eps, GELU, MLP or not) and a batch shape trains as one step: every weight and
gradient carries a leading model dimension ``S``, and each of the six big matmuls per layer (and the
attention's two) becomes one batched matmul over the members. The maths per member is
:mod:`possym.train.fused`'s, term for term; what differs per member rides along as data:

- the weights (``[S, ...]`` per parameter name; :class:`ModelGroup` makes each member's own
  parameters views into them, so a member module, its optimiser and its checkpoints see them live);
- each member's batch (``tokens [S, batch, pos]``), so each keeps its own data order;
- each member's dropout bits, drawn from its own generator exactly as its single run draws them, at
  its own rates (:class:`GroupBits`; a member whose rate is 0 at a site another member drops gets
  a mask of ones there, which multiplies exactly);
- each member's RoPE rotors (p-RoPE, ``nope_from_layer``, ``freq_gate``, ``rotary_dim`` and
  ``rope_base`` are all per-layer rotor tables, stacked ``[S, pos, d_model / 2]``);
- each member's loss scale (fp16), and so each member's gradients' unscaling.

LayerNorm runs without affine weights (they differ per member) and applies them as
``xhat * w + b``; its backward is ``dw = sum(dh * xhat)``, ``db = sum(dh)``, and aten's backward of the
plain normalisation on ``dh * w``. Precision is one per group: a batched matmul has one input dtype,
so bf16, fp16 and fp32 members cannot share a step.

Why batched matmuls and not ``torch.func.stack_module_state`` + ``vmap``: the ``vmap`` recipe batches
the module's autograd (the path the hand-written step replaced, 2.5x slower per model) and draws
dropout from one stream for all members (``randomness="different"``), so no member could draw its
single run's masks, and it leaves the gradients outside ``.grad``, away from each member's AdamW.
Measured on the paper model (S = 4, one thread, eager fp32, batch 64 x 17, a busy 2-core CPU,
medians of 5 interleaved windows, both without dropout and without the optimiser step): vmap over
the module's autograd took 1.30x the batched step's time (427 against 328 ms a member-step; four
single steps one after another, 316); ``benchmarks/bench_seeds.py --eager --precision fp32 --sizes 4
--vmap`` repeats it with dropout and AdamW in the batched step. On that
CPU neither gains over single runs (the step is matmul-bound: see docs/results.md); the batched step
is kept because it is the faster of the two, draws each member's own masks, and fills an
accelerator that one model leaves idle.

Each member's arithmetic touches no other member's numbers (a batched matmul multiplies each
member's matrices on their own; every reduction runs within one member), so a member's step does not
depend on what the other members hold. Eager, it does not depend on S either (tested bitwise);
compiled, Inductor's kernels depend on the group's layout (S, and each slot's rates and planes), so
equal layouts give equal bits (tested) and a member records its layout to resume in it
(:mod:`possym.train.group`).

Example (two members; their gradients land in each member's ``.grad``):
    >>> from possym.train.fused import draw_bits
    >>> cfg = ModelConfig(n_layers=2, d_model=16, d_mlp=32, d_vocab=10, dropout=0.1)
    >>> group = ModelGroup([GPTJ(cfg, torch.Generator().manual_seed(s)) for s in (0, 1)])
    >>> tokens, answers = torch.randint(0, 10, (2, 4, 5)), torch.randint(0, 10, (2, 4))
    >>> bits = GroupBits.stack([draw_bits(cfg, 4, 5, torch.Generator().manual_seed(s)) for s in (0, 1)])
    >>> group.loss_and_grads(tokens, answers, bits).shape, group.members[1].unembed.weight.grad.shape
    (torch.Size([2]), torch.Size([10, 16]))
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from possym.config import ModelConfig
from possym.model.gptj import GPTJ
from possym.train.fused import (
    _INDUCTOR_OPTIONS,
    _UNIFORMS,
    MATMUL_DTYPES,
    DropoutBits,
    DropoutMasks,
    Precision,
    _conj,
    _mul,
    _rotate,
    bit_layout,
    step_rotors,
)

# What members of one group must share: everything that sets a tensor's shape or a kernel's maths.
SHAPE_FIELDS = ("n_layers", "d_model", "n_heads", "d_mlp", "d_vocab", "ln_eps", "activation", "mlp")


def shape_key(cfg: ModelConfig) -> tuple:
    """The fields of ``cfg`` that members of one group share (:data:`SHAPE_FIELDS`); the rest (dropout
    rates, RoPE plane options, ``rotary_dim``, ``rope_base``, ``init_range``) may differ per member."""
    return tuple(getattr(cfg, f) for f in SHAPE_FIELDS)


@dataclass(frozen=True)
class GroupBits:
    """A group step's dropout bits: each member's :class:`~possym.train.fused.DropoutBits`, side by side.

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
        """The members' bits (drawn by :func:`~possym.train.fused.draw_bits` from each one's generator)."""
        shapes = bits[0].shapes
        if any(b.shapes != shapes for b in bits):
            raise ValueError(f"members' dropout sites differ in shape: {sorted({b.shapes for b in bits})}")
        rates = tuple(zip(*(b.rates for b in bits), strict=True))
        used = [any(p > 0 for p in site) for site in rates]
        if not any(used):
            return cls(None, rates, shapes)
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
                    parts.append(torch.zeros(size, dtype=torch.int16, device=rows[0].device if rows else None))
            rows.append(torch.cat(parts))
        return cls(torch.stack([r.to(rows[0].device) for r in rows]), rates, shapes)

    def to(self, device: torch.device) -> GroupBits:
        return self if self.uniforms is None else GroupBits(self.uniforms.to(device, non_blocking=True),
                                                            self.rates, self.shapes)

    def masks(self, dtype: torch.dtype = torch.float32) -> DropoutMasks:
        """Each member's masks, as its single run makes them (:meth:`DropoutBits.masks`), stacked
        [S, ...]: keep where the uniform is >= p * 2^16 - 2^15, scale kept entries by 1/(1-p)
        (rounded to float32, as there)."""
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
            # p = 0 beside a member that drops: threshold -2^15 keeps every entry, scale 1.0 is exact.
            threshold = bits.new_tensor([round(p * _UNIFORMS) - _UNIFORMS // 2 for p in rates], dtype=torch.int32)
            scale = bits.new_tensor([1.0 / (1.0 - p) for p in rates], dtype=torch.float32)
            keep = bits >= threshold.view(S, 1)
            scaled = torch.where(keep, scale.view(S, 1), 0.0).to(dtype)
            parts += [t.view(S, *s) for t, s in zip(scaled.split(sizes, dim=1), shapes, strict=True)]
        layers = tuple((parts[1 + 3 * i], parts[2 + 3 * i], parts[3 + 3 * i]) for i in range(n_layers))
        return DropoutMasks(parts[0], layers)


def idle_bits(cfg: ModelConfig, batch: int, pos: int, device: torch.device | None = None) -> DropoutBits:
    """Bits of the layout :func:`~possym.train.fused.draw_bits` gives ``cfg``, all zero, drawn from no
    generator: what a member that sits a step out feeds the group step (its results are dropped)."""
    rates, shapes, n = bit_layout(cfg, batch, pos)
    return DropoutBits(torch.zeros(n, dtype=torch.int16, device=device) if n else None, rates, shapes)


def stacked_rotors(cfgs: Sequence[ModelConfig], pos: int, dtype: torch.dtype, real: bool = False,
                   device: torch.device | None = None) -> tuple[Tensor, ...]:
    """Per layer, the members' :func:`~possym.train.fused.rope_rotors` stacked: [S, pos, d_model / 2]
    (complex), or [S, pos, d_model / 2, 2] with ``real``."""
    per_member = [step_rotors(c, pos, dtype, real, device) for c in cfgs]
    return tuple(torch.stack(layer) for layer in zip(*per_member, strict=True))


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


def _group_block(
    x: Tensor,
    params: tuple[Tensor | None, ...],
    rotor: Tensor,
    masks: tuple[Tensor | None, Tensor | None, Tensor | None],
    cfg: ModelConfig,
    mm: torch.dtype,
    last: bool,
    keep: bool,
) -> tuple[Tensor, tuple | None]:
    """:func:`possym.train.fused._block` for S members: x [S, B, T, D] -> [S, B, n, D] (n = 1 in the
    ``last`` block); weights [S, ...], rotor [S, T, D/2] (complex, or real pairs), masks [S, B, ...]."""
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
    y = (h.view(S, r, D) @ W[0].mT).to(dtype)  # [S, r, 3D]: q | k | v
    qk = _rotate(y[..., : 2 * D].view(S, B, T, 2, D), rotor[:, None, :, None])
    q, k = _heads(qk[:, :, o, 0], H), _heads(qk[:, :, :, 1], H)
    v = _heads(y[..., 2 * D :].view(S, B, T, D), H)
    causal = torch.full((n, T), float("-inf"), dtype=dtype, device=x.device).triu(T - n + 1)
    P = torch.baddbmm(causal, q, k.mT, alpha=1.0 / math.sqrt(cfg.d_head)).softmax(-1)
    Pd = P if m_p is None else P * m_p.reshape(S * B * H, n, T)
    z = _unheads(Pd @ v, S, B, H).reshape(S, B * n, D).to(mm)
    a = (z @ W[2].mT).to(dtype).view(S, B, n, D)
    x_next = x[:, :, o] + a if m_a is None else torch.addcmul(x[:, :, o], a, m_a)
    u = g = None
    if W[1] is not None:  # the MLP branch (absent in an attention-only block)
        assert b_in is not None and b_out is not None and W[3] is not None
        u = torch.add(h_o @ W[1].mT, b_in[:, None])  # promotes to the model dtype in the same pass
        g = F.gelu(u, approximate=cfg.gelu_approximate).to(mm)
        f = torch.add(g @ W[3].mT, b_out[:, None]).view(S, B, n, D)
        x_next = x_next.add_(f) if m_f is None else x_next.addcmul_(f, m_f)
    saved = (o, x, xhat, mean, rstd, h, h_o, W, rotor, q, k, v, P, Pd, z, u, g, m_p, m_a, m_f) if keep else None
    return x_next, saved


def _forward(params: dict[str, Tensor], cfg: ModelConfig, tokens: Tensor, masks: DropoutMasks, mm: torch.dtype,
             rotors: tuple[Tensor, ...], saved: list | None, block_fn: Callable = _group_block) -> Tensor:
    """Embedding and blocks: the residual stream after the last block at the last position [S, B, D]."""
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


def _group_grads(
    params: dict[str, Tensor],
    cfg: ModelConfig,
    tokens: Tensor,
    answers: Tensor,
    bits: GroupBits,
    rotors: tuple[Tensor, ...],
    precision: Precision,
    loss_scale: Tensor,
) -> tuple[Tensor, dict[str, Tensor]]:
    """Each member's loss [S] and every parameter's gradient [S, ...] (scaled by ``loss_scale`` [S])."""
    dtype = params["embed.weight"].dtype
    masks = bits.masks(dtype)
    mm = MATMUL_DTYPES.get(precision, dtype)
    S, B, T = tokens.shape
    D, H, r, scale = cfg.d_model, cfg.n_heads, B * T, 1.0 / math.sqrt(cfg.d_head)

    def matmul(a: Tensor, b: Tensor) -> Tensor:  # in the matmul dtype, back to the model's
        return (a.to(mm) @ b).to(dtype)

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
    grads["unembed.weight"] = dlogits.mT @ hf
    grads["unembed.bias"] = dlogits.sum(1)
    dhf = dlogits @ W_U
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
            du = torch.ops.aten.gelu_backward(df @ W[3], u, approximate=cfg.gelu_approximate)
            grads[name + "mlp.0.bias"] = du.sum(1)
        dz = _heads(matmul(da, W[2]).view(S, B, n, D), H)
        dP = dz @ v.mT
        ds = torch._softmax_backward_data(dP if m_p is None else dP * m_p.reshape(S * B * H, n, T), P, -1, dtype)
        ds *= scale
        dy = (torch.empty if n == T else torch.zeros)(S, B, T, 3 * D, dtype=dtype, device=x.device)  # d(q|k|v)
        back = _conj(rotor)[:, None]
        _rotate(_unheads(ds @ k, S, B, H), back[:, :, o], out=dy[:, :, o, :D])
        _rotate(_unheads(ds.mT @ q, S, B, H), back, out=dy[..., D : 2 * D])
        dy[..., 2 * D :] = _unheads(Pd.mT @ dz, S, B, H)
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
    # A one-hot product rather than a scatter-add, as in the single step: a fixed summation order.
    onehot = F.one_hot(tokens.view(S, r), cfg.d_vocab).to(dtype)
    grads["embed.weight"] = onehot.mT @ _mul(dx, masks.embed).view(S, r, D)
    return loss, {k: g.contiguous() for k, g in grads.items()}


# A group compiles one graph per group size S and shape (the blocks: two per S and batch shape), and
# evaluating a few members at a time adds more; Dynamo's default of 8 graphs per function would send
# the rest back to eager kernels, silently. Raised only around the group's own calls.
_RECOMPILE_LIMIT = 256


@functools.cache
def _compiled_group_grads() -> Callable:
    # Built on first use (importing possym must not import Inductor); static shapes, one graph per S.
    return torch.compile(_group_grads, dynamic=False, options={**_INDUCTOR_OPTIONS})


@functools.cache
def _compiled_group_block() -> Callable:
    return torch.compile(_group_block, dynamic=False, options={**_INDUCTOR_OPTIONS})


def _graphs(compiled: bool) -> contextlib.AbstractContextManager:
    if not compiled:
        return contextlib.nullcontext()
    import torch._dynamo

    return torch._dynamo.config.patch(recompile_limit=_RECOMPILE_LIMIT)


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
        for name, _ in members[0].named_parameters():
            own = [dict(m.named_parameters())[name] for m in members]
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
        """Each member's :func:`possym.train.fused.loss_and_grads` at once: ``tokens`` [S, batch, pos],
        ``answers`` [S, batch]; returns the losses [S] and sets every member parameter's ``.grad`` (a
        view of the stacked gradient), unscaled by that member's ``loss_scales[s]``. ``active``: the
        members whose ``.grad`` to set (the others sit this step out: their results are dropped)."""
        S, T = len(self), tokens.shape[-1]
        if tokens.shape[0] != S or answers.shape[0] != S:
            raise ValueError(f"tokens {tuple(tokens.shape)} and answers {tuple(answers.shape)} must lead with S={S}")
        rotors = stacked_rotors([m.cfg for m in self.members], T, self.dtype, real=compiled, device=self.device)
        scales = [1.0] * S if loss_scales is None else list(loss_scales)
        scale = torch.tensor(scales, dtype=self.dtype, device=self.device)  # a tensor: no recompile per scale
        fn = _compiled_group_grads() if compiled else _group_grads
        with _graphs(compiled):
            loss, grads = fn(self.params, self.cfg, tokens, answers, bits.to(self.device), rotors, precision, scale)
        if any(s != 1.0 for s in scales):
            grads = {k: g / scale.view(S, *([1] * (g.dim() - 1))) for k, g in grads.items()}
        for s, member in enumerate(self.members):
            if active is None or active[s]:
                for name, param in member.named_parameters():
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
        """[S', batch, pos] -> [S', batch, d_vocab]: the :func:`possym.train.fused.last_token_logits`
        (eval mode, no dropout) of each of ``members`` (default: all S) in one pass; ``params``: their
        :meth:`params_of`, when the caller already holds them.

        A member's logits do not depend on which others run beside it (each member's arithmetic is
        its own, and no reduction crosses the batch), which the tests check bitwise, compiled too.
        """
        idx = list(range(len(self))) if members is None else list(members)
        if tokens.shape[0] != len(idx):
            raise ValueError(f"tokens {tuple(tokens.shape)} must lead with one row per member ({len(idx)})")
        params = self.params_of(idx) if params is None else params
        cfg, T = self.cfg, tokens.shape[-1]
        mm = MATMUL_DTYPES.get(precision, self.dtype)
        rotors = stacked_rotors([self.members[i].cfg for i in idx], T, self.dtype, real=compiled, device=tokens.device)
        block_fn = _compiled_group_block() if compiled else _group_block
        with _graphs(compiled):
            last = _forward(params, cfg, tokens, DropoutMasks.none(cfg.n_layers), mm, rotors, None, block_fn)
        hf = _final_ln(params, last, cfg.ln_eps)[0]
        return torch.baddbmm(params["unembed.bias"][:, None], hf, params["unembed.weight"].mT)
