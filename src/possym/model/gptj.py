"""GPT-J decoder on one screen (paper App. C.2), with TransformerLens-style hook points.

Token embedding and embedding dropout, no position embedding; per block ONE LayerNorm feeds attention and MLP
in parallel, ``x + attn(ln(x)) + mlp(ln(x))``; attention without biases, GPT-J interleaved RoPE on ``rot_dim``
dims (with the plane options of :class:`~possym.config.ModelConfig`), scale 1/sqrt(d_head), causal; MLP
Linear -> GELU (exact or tanh, by ``activation``) -> Linear, or none (``mlp=False``); final LayerNorm, untied
unembedding with bias. Hook points as TransformerLens names them (:mod:`possym.model.hooks`): ``hook_embed``,
``blocks.{l}.hook_resid_pre``, ``attn.hook_q/k/v`` [batch, pos, head, d_head] (before RoPE and gating),
``hook_rot_q/k``, ``hook_attn_scores`` [batch, head, query_pos, key_pos] (pre-softmax, masked), ``hook_pattern``,
``hook_z``, ``hook_attn_out``,
``mlp.hook_pre/post``, ``hook_mlp_out``, ``hook_resid_post``; fused SDPA runs when nothing observes the scores
or pattern (:attr:`HookPoint.observed`). Weights stacked per layer as TransformerLens does (``W_Q`` [layer,
head, d_model, d_head], ...; views of the parameters). ``forward_kv`` / ``past=`` reuse a shared prefix's keys
and values exactly (a past of batch 1 is broadcast, not copied). Why each choice: docs/choices.md, "Model".

Example:
    >>> cfg = ModelConfig(n_layers=2, d_model=16, d_mlp=32, d_vocab=10)
    >>> model = GPTJ(cfg, torch.Generator().manual_seed(0))
    >>> logits, cache = model.run_with_cache(torch.tensor([[1, 2, 3]]))
    >>> logits.shape, cache["pattern", 1].shape, model.W_Q.shape
    (torch.Size([1, 3, 10]), torch.Size([1, 1, 3, 3]), torch.Size([2, 1, 16, 16]))"""

from __future__ import annotations

import math
from typing import cast

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from possym.config import ModelConfig
from possym.errors import PossymError
from possym.model.hooks import HookedRoot, HookPoint
from possym.model.rope import apply_rope, rope_cos_sin

KV = tuple[Tensor, Tensor]
"""One layer's rotated keys and values, each [batch, head, pos, d_head] (batch 1 = shared)."""


class Attention(nn.Module):
    # The plane buffers, declared so that they type as what they hold (nn.Module's __getattr__
    # would type them Tensor | Module): [rot_dim/2] bool, the planes held at angle 0; [head, d_head] gate.
    static_planes: Tensor | None
    gate: Tensor | None

    def __init__(self, cfg: ModelConfig, layer: int = 0) -> None:
        super().__init__()
        self.cfg = cfg
        # Plane options as non-persistent buffers (checkpoints are unchanged); None = plain RoPE, untouched.
        static = ~torch.tensor(cfg.plane_rotates(layer), dtype=torch.bool)
        allowed = torch.tensor(cfg.plane_allowed(layer), dtype=torch.float32)
        gate = torch.ones(cfg.d_head).index_put_((torch.arange(cfg.rot_dim),), allowed.repeat_interleave(2))
        self.register_buffer("static_planes", static if static.any() else None, persistent=False)
        self.register_buffer("gate", gate.repeat(cfg.n_heads).view(cfg.n_heads, cfg.d_head)
                             if not allowed.all() else None, persistent=False)
        # One fused projection for speed; W_Q, W_K, W_V below are TransformerLens-shaped views of it.
        self.qkv = nn.Linear(cfg.d_model, 3 * cfg.d_model, bias=False)
        self.out = nn.Linear(cfg.d_model, cfg.d_model, bias=False)
        self.attn_dropout = cfg.dropout
        self.hook_q, self.hook_k, self.hook_v = HookPoint(), HookPoint(), HookPoint()
        self.hook_rot_q, self.hook_rot_k = HookPoint(), HookPoint()
        self.hook_attn_scores, self.hook_pattern = HookPoint(), HookPoint()
        self.hook_z = HookPoint()

    def _w(self, i: int) -> Tensor:
        c = self.cfg
        return self.qkv.weight[i * c.d_model : (i + 1) * c.d_model].view(c.n_heads, c.d_head, c.d_model).mT

    @property
    def W_Q(self) -> Tensor:  # [head, d_model, d_head]
        return self._w(0)

    @property
    def W_K(self) -> Tensor:  # [head, d_model, d_head]
        return self._w(1)

    @property
    def W_V(self) -> Tensor:  # [head, d_model, d_head]
        return self._w(2)

    @property
    def W_O(self) -> Tensor:  # [head, d_head, d_model]
        c = self.cfg
        return self.out.weight.mT.view(c.n_heads, c.d_head, c.d_model)

    def _pattern_wanted(self) -> bool:
        """Whether anything observes the scores or the pattern (a hook, an nnsight envoy: :attr:`HookPoint.observed`);
        if not, attention runs fused and never forms them."""
        return self.hook_attn_scores.observed or self.hook_pattern.observed

    def forward(self, h: Tensor, cos: Tensor, sin: Tensor, past: KV | None = None,
                last: bool = False) -> tuple[Tensor, KV]:
        """h: [batch, pos, d_model] -> ([batch, pos, d_model], this call's (k, v)).

        With ``past``, the ``pos`` new queries attend to the past keys and, causally, to each other.
        With ``last``, only the last position queries (from every position's keys and values): [batch, 1, d_model].
        """
        c = self.cfg
        q, k, v = self.qkv(h).unflatten(-1, (3, c.n_heads, c.d_head)).unbind(-3)
        q, k, v = self.hook_q(q), self.hook_k(k), self.hook_v(v)
        if self.static_planes is not None:  # NoPE planes: angle 0 at every position
            cos, sin = cos.masked_fill(self.static_planes, 1.0), sin.masked_fill(self.static_planes, 0.0)
        if self.gate is not None:  # gated planes: zero in q and k, so they add nothing to any logit
            q, k = q * self.gate, k * self.gate
        q = self.hook_rot_q(apply_rope(q, cos, sin))
        k = self.hook_rot_k(apply_rope(k, cos, sin))
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))  # [batch, head, pos, d_head]
        if last:
            q = q[:, :, -1:]  # the last query sees every key: no causal mask is left to apply
        p_drop = self.attn_dropout if self.training else 0.0
        hooked = self._pattern_wanted()
        if past is None and not hooked:
            z = F.scaled_dot_product_attention(q, k, v, dropout_p=p_drop, is_causal=not last)
        elif past is not None and not hooked and p_drop == 0.0:
            z = _attend_after(q, k, v, past)
        else:
            causal = _causal(q.shape[-2], k.shape[-2], h.device)
            scores = (q @ k.mT).masked_fill(~causal, float("-inf"))
            if past is not None:
                scores = torch.cat((_matmul_past(q, past[0].mT), scores), dim=-1)
            scores = self.hook_attn_scores(scores / math.sqrt(c.d_head))
            pattern = F.dropout(self.hook_pattern(scores.softmax(dim=-1)), p_drop, self.training)
            if past is None:
                z = pattern @ v
            else:
                n_past = past[1].shape[-2]
                z = _matmul_past(pattern[..., :n_past], past[1]) + pattern[..., n_past:] @ v
        return self.out(self.hook_z(z.transpose(1, 2)).flatten(-2)), (k, v)


def _attend_after(q: Tensor, k: Tensor, v: Tensor, past: KV) -> Tensor:
    """softmax([q past_k^T, causal(q k^T)] / sqrt(d)) @ [past_v; v] -> [batch, head, n, d_head], the
    attention of ``n`` new queries that continue ``past``, without concatenating the two parts.

    The two blocks of scores are exponentiated against their common row maximum m, and the softmax's
    normaliser is the sum of both blocks' sums: z = (exp(S_p - m) V_p + exp(S_w - m) V) / l. The largest
    tensor, the [batch, n, K] past scores, is then written once (by its matmul) and walked four times
    in place, where concatenating, scaling, normalising and slicing it walked it about twelve times.
    With ``last=True`` as well, the cached windows' forward pass is 1.7x faster at K = 5,000 and 1.3x
    at K = 1,000 on one CPU thread (benchmarks/bench_lengthgen.py, part 3). The same sums in another
    order: equal to the concatenated softmax to float rounding (tests/unit/model/test_gptj.py).
    """
    scale = math.sqrt(q.shape[-1])
    causal = _causal(q.shape[-2], k.shape[-2], q.device)
    own = (q @ k.mT).masked_fill(~causal, float("-inf")).div_(scale)  # [batch, head, n, n]
    before = _matmul_past(q, past[0].mT).div_(scale)                  # [batch, head, n, K]
    m = torch.maximum(before.amax(-1, keepdim=True), own.amax(-1, keepdim=True))
    before.sub_(m).exp_()
    own.sub_(m).exp_()
    norm = before.sum(-1, keepdim=True) + own.sum(-1, keepdim=True)
    return (_matmul_past(before, past[1]) + own @ v).div_(norm)


def _causal(queries: int, keys: int, device: torch.device) -> Tensor:
    """[queries, keys] bool, True where the query may attend: the last ``queries`` of ``keys`` positions."""
    return torch.ones(queries, keys, dtype=torch.bool, device=device).tril(keys - queries)


def _matmul_past(x: Tensor, past: Tensor) -> Tensor:
    """x [batch, head, n, a] @ past [b, head, a, c] -> [batch, head, n, c], for b = batch or b = 1.

    With b = 1 the batch is folded into the rows, so the shared past is never expanded into a copy
    (``torch.matmul`` would materialise it: 1.3 GB per layer for 512 inputs on a 5,000-token prefix).
    """
    if past.shape[0] != 1:
        return x @ past
    batch, head, n, a = x.shape
    rows = x.transpose(0, 1).reshape(head, batch * n, a)
    return (rows @ past[0]).view(head, batch, n, -1).transpose(0, 1)


class MLP(nn.Sequential):
    """Linear(d_model, d_mlp) -> GELU -> Linear(d_mlp, d_model), as ``mlp.0`` and ``mlp.2`` (the
    checkpoint names), with ``hook_pre`` before the GELU and ``hook_post`` after it."""

    def __init__(self, cfg: ModelConfig) -> None:
        gelu = nn.GELU(approximate=cfg.gelu_approximate)
        super().__init__(nn.Linear(cfg.d_model, cfg.d_mlp), gelu, nn.Linear(cfg.d_mlp, cfg.d_model))
        self.hook_pre, self.hook_post = HookPoint(), HookPoint()

    def forward(self, h: Tensor) -> Tensor:
        return self[2](self.hook_post(self[1](self.hook_pre(self[0](h)))))

    def _linear(self, i: int) -> nn.Linear:
        return cast(nn.Linear, self[i])

    @property
    def fc_in(self) -> nn.Linear:  # ``mlp.0``: the Linear itself (W_in is a transposed view of its weight)
        return self._linear(0)

    @property
    def fc_out(self) -> nn.Linear:  # ``mlp.2``
        return self._linear(2)

    @property
    def W_in(self) -> Tensor:  # [d_model, d_mlp]
        return self._linear(0).weight.mT

    @property
    def b_in(self) -> Tensor:  # [d_mlp]
        return self._linear(0).bias

    @property
    def W_out(self) -> Tensor:  # [d_mlp, d_model]
        return self._linear(2).weight.mT

    @property
    def b_out(self) -> Tensor:  # [d_model]
        return self._linear(2).bias


class Block(nn.Module):
    def __init__(self, cfg: ModelConfig, layer: int = 0) -> None:
        super().__init__()
        self.hook_resid_pre = HookPoint()  # registered in forward order, so hook_dict lists them so
        self.ln = nn.LayerNorm(cfg.d_model, eps=cfg.ln_eps)
        self.attn = Attention(cfg, layer)
        self.hook_attn_out = HookPoint()
        self.mlp = MLP(cfg) if cfg.mlp else None
        self.hook_mlp_out = HookPoint() if cfg.mlp else None
        self.drop = nn.Dropout(cfg.dropout)
        self.hook_resid_post = HookPoint()

    def forward(self, x: Tensor, cos: Tensor, sin: Tensor, past: KV | None = None,
                last: bool = False) -> tuple[Tensor, KV]:
        x = self.hook_resid_pre(x)
        h = self.ln(x)  # GPT-J: one LayerNorm feeds both branches
        a, kv = self.attn(h, cos, sin, past, last)
        if last:  # the rest of the block is per position: only the last one is wanted
            x, h = x[:, -1:], h[:, -1:]
        a = self.hook_attn_out(a)
        if self.mlp is None or self.hook_mlp_out is None:  # attention-only block
            return self.hook_resid_post(x + self.drop(a)), kv
        m = self.hook_mlp_out(self.mlp(h))
        return self.hook_resid_post(x + self.drop(a) + self.drop(m)), kv  # parallel residual


class GPTJ(HookedRoot):
    def __init__(self, cfg: ModelConfig, generator: torch.Generator | None = None) -> None:
        super().__init__()
        if cfg.d_vocab < 1:
            raise ValueError(f"model.d_vocab={cfg.d_vocab}: set it from the task vocabulary before building")
        self.cfg = cfg
        self.embed = nn.Embedding(cfg.d_vocab, cfg.d_model)
        self.hook_embed = HookPoint()
        self.drop = nn.Dropout(cfg.embd_p)
        self.blocks = nn.ModuleList(Block(cfg, layer) for layer in range(cfg.n_layers))
        self.ln_final = nn.LayerNorm(cfg.d_model, eps=cfg.ln_eps)
        self.unembed = nn.Linear(cfg.d_model, cfg.d_vocab)
        self.reset_parameters(generator)
        self.setup(cfg.n_layers)

    @torch.no_grad()
    def reset_parameters(self, generator: torch.Generator | None = None) -> None:
        """HF GPT-J's init: N(0, init_range) weights, zero biases, unit LayerNorms."""
        for module in self.modules():
            if isinstance(module, nn.Linear | nn.Embedding):
                module.weight.normal_(0.0, self.cfg.init_range, generator=generator)
                bias = getattr(module, "bias", None)  # an Embedding has none, a Linear may have None
                if bias is not None:
                    bias.zero_()
            elif isinstance(module, nn.LayerNorm):
                module.weight.fill_(1.0)
                module.bias.zero_()

    def block(self, layer: int) -> Block:
        """Block ``layer`` (0-based), typed: ``self.blocks[layer]`` is a plain nn.Module to a type checker."""
        return cast(Block, self.blocks[layer])

    @property
    def W_E(self) -> Tensor:  # [d_vocab, d_model]
        return self.embed.weight

    @property
    def W_U(self) -> Tensor:  # [d_model, d_vocab]
        return self.unembed.weight.mT

    @property
    def b_U(self) -> Tensor:  # [d_vocab]
        return self.unembed.bias

    def _stack(self, part: str, name: str) -> Tensor:
        if part == "mlp" and not self.cfg.mlp:
            raise PossymError(f"model.mlp=false: an attention-only model has no {name}")
        return torch.stack([getattr(getattr(block, part), name) for block in self.blocks])

    @property
    def W_Q(self) -> Tensor:  # [layer, head, d_model, d_head]
        return self._stack("attn", "W_Q")

    @property
    def W_K(self) -> Tensor:  # [layer, head, d_model, d_head]
        return self._stack("attn", "W_K")

    @property
    def W_V(self) -> Tensor:  # [layer, head, d_model, d_head]
        return self._stack("attn", "W_V")

    @property
    def W_O(self) -> Tensor:  # [layer, head, d_head, d_model]
        return self._stack("attn", "W_O")

    @property
    def W_in(self) -> Tensor:  # [layer, d_model, d_mlp]
        return self._stack("mlp", "W_in")

    @property
    def b_in(self) -> Tensor:  # [layer, d_mlp]
        return self._stack("mlp", "b_in")

    @property
    def W_out(self) -> Tensor:  # [layer, d_mlp, d_model]
        return self._stack("mlp", "W_out")

    @property
    def b_out(self) -> Tensor:  # [layer, d_model]
        return self._stack("mlp", "b_out")

    def forward(self, tokens: Tensor, positions: Tensor | None = None, past: list[KV] | None = None,
                last: bool = False) -> Tensor:
        """tokens: [batch, pos] -> logits [batch, pos, d_vocab]; positions default to 0..pos-1 after the past.
        ``last``: the last position's logits only, [batch, 1, d_vocab] (see :meth:`forward_kv`)."""
        return self.forward_kv(tokens, positions, past, last)[0]

    @property
    def hooked(self) -> bool:
        """Whether anything observes any hook point (a hook, an nnsight envoy: :attr:`HookPoint.observed`)."""
        return any(hp.observed for hp in self.hook_dict.values())

    def forward_kv(
        self, tokens: Tensor, positions: Tensor | None = None, past: list[KV] | None = None, last: bool = False
    ) -> tuple[Tensor, list[KV]]:
        """Logits and every layer's (k, v) for ``tokens``, continuing ``past`` (one KV per layer) if given.

        ``last``: the logits of the last position only, [batch, 1, d_vocab], as an evaluation reads
        them. The last block then computes one query row (from every position's keys and values) and
        its MLP, the final LayerNorm and the unembedding one row each, as the training step's loss
        does (:mod:`possym.train.fused`): a 1/n_layers share of the work saved. With a hook attached
        every row is computed, so that hooks see the shapes they always see, and the last row returned.

        Example (a shared prefix, then two continuations; equal to the full forward pass):
            >>> cfg = ModelConfig(n_layers=2, d_model=16, d_mlp=32, d_vocab=10)
            >>> model = GPTJ(cfg, torch.Generator().manual_seed(0)).eval()
            >>> _, prefix = model.forward_kv(torch.tensor([[4, 5, 6]]))
            >>> rest = torch.tensor([[1, 2], [3, 4]])
            >>> full = model(torch.cat((torch.tensor([[4, 5, 6]]).expand(2, 3), rest), dim=1))[:, 3:]
            >>> torch.allclose(model(rest, past=prefix), full, atol=1e-6)
            True
        """
        if past is not None and len(past) != len(self.blocks):
            raise ValueError(f"past has {len(past)} layers; the model has {len(self.blocks)}")
        if positions is None:
            start = 0 if past is None else past[0][0].shape[-2]
            positions = torch.arange(start, start + tokens.shape[-1], device=tokens.device)
        x = self.drop(self.hook_embed(self.embed(tokens)))
        cos, sin = rope_cos_sin(positions, self.cfg.rot_dim, self.cfg.rope_base, x.dtype)
        present = []
        short = last and not self.hooked
        for i, block in enumerate(self.blocks):
            x, kv = block(x, cos, sin, None if past is None else past[i], short and i == len(self.blocks) - 1)
            present.append(kv)
        return self.unembed(self.ln_final(x[:, -1:] if last else x)), present


def hook_names(cfg: ModelConfig) -> list[str]:
    """Every hook point name, in forward order.

    >>> hook_names(ModelConfig(n_layers=1, mlp=False))[:3]
    ['hook_embed', 'blocks.0.hook_resid_pre', 'blocks.0.attn.hook_q']
    """
    out = ["hook_embed"]
    attn = ("hook_q", "hook_k", "hook_v", "hook_rot_q", "hook_rot_k", "hook_attn_scores", "hook_pattern", "hook_z")
    for layer in range(cfg.n_layers):
        out.append(f"blocks.{layer}.hook_resid_pre")
        out += [f"blocks.{layer}.attn.{h}" for h in attn]
        out.append(f"blocks.{layer}.hook_attn_out")
        if cfg.mlp:
            out += [f"blocks.{layer}.mlp.hook_pre", f"blocks.{layer}.mlp.hook_post", f"blocks.{layer}.hook_mlp_out"]
        out.append(f"blocks.{layer}.hook_resid_post")
    return out
