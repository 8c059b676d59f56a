"""GPT-J decoder on one screen (paper App. C.2), with TransformerLens-style hook points.

Architecture, as facts:
- token embedding ``W_E``, no position embedding (RoPE inside attention), embedding dropout
  (``embd_dropout``, separate from the attention and residual ``dropout``, as HF's ``embd_pdrop``);
- per block: ONE LayerNorm feeds attention and MLP in parallel, ``x + attn(ln(x)) + mlp(ln(x))``;
- attention: no biases, GPT-J interleaved RoPE on ``rot_dim`` dims, scale 1/sqrt(d_head), causal;
  the plane options of :class:`~possym.config.ModelConfig` (p-RoPE, NoPE layers, frequency gating)
  live in the attention module, so anything that re-runs a block gets them too;
- MLP: Linear(d_model, d_mlp) -> GELU -> Linear, biases; the GELU is exact (HF ``gelu``) or the
  tanh approximation (HF ``gelu_new``), by ``activation``; ``mlp=False`` leaves the MLP out;
- final LayerNorm, untied unembedding *with* bias (HF GPT-J's ``lm_head``).

Hook points (read or patch with :meth:`GPTJ.hooks` or :meth:`GPTJ.run_with_cache`):
``blocks.{l}.hook_resid_pre`` [batch, pos, d_model] (the residual stream entering block l),
``blocks.{l}.attn.hook_rot_q`` / ``hook_rot_k`` [batch, pos, head, d_head] (after RoPE),
``blocks.{l}.attn.hook_attn_scores`` [batch, head, query_pos, key_pos] (pre-softmax, masked),
``blocks.{l}.attn.hook_pattern`` [batch, head, query_pos, key_pos] (post-softmax).
When no hook reads the scores or the pattern, attention runs through fused SDPA.

Key-value cache: ``forward_kv`` also returns each layer's rotated keys and values, and ``past=`` feeds
them back, so a prefix shared by many inputs is computed once (:mod:`possym.evaluate.lengthgen`).
In a causal model a prefix's keys and values do not depend on what follows it, so this is exact.
A past of batch 1 is broadcast over the batch without being copied.

Example:
    >>> cfg = ModelConfig(n_layers=2, d_model=16, d_mlp=32, d_vocab=10)
    >>> model = GPTJ(cfg, torch.Generator().manual_seed(0))
    >>> logits, cache = model.run_with_cache(torch.tensor([[1, 2, 3]]), ["blocks.1.attn.hook_pattern"])
    >>> logits.shape, cache["blocks.1.attn.hook_pattern"].shape
    (torch.Size([1, 3, 10]), torch.Size([1, 1, 3, 3]))
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from possym.config import ModelConfig
from possym.model.rope import apply_rope, rope_cos_sin

KV = tuple[Tensor, Tensor]
"""One layer's rotated keys and values, each [batch, head, pos, d_head] (batch 1 = shared)."""


class HookPoint(nn.Module):
    """Identity module whose forward hooks read (or, by returning a value, replace) an activation."""

    def forward(self, x: Tensor) -> Tensor:
        return x


class Attention(nn.Module):
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
        self.hook_rot_q, self.hook_rot_k = HookPoint(), HookPoint()
        self.hook_attn_scores, self.hook_pattern = HookPoint(), HookPoint()

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
        return bool(self.hook_attn_scores._forward_hooks or self.hook_pattern._forward_hooks)

    def forward(self, h: Tensor, cos: Tensor, sin: Tensor, past: KV | None = None) -> tuple[Tensor, KV]:
        """h: [batch, pos, d_model] -> ([batch, pos, d_model], this call's (k, v)).

        With ``past``, the ``pos`` new queries attend to the past keys and, causally, to each other.
        """
        c = self.cfg
        q, k, v = self.qkv(h).unflatten(-1, (3, c.n_heads, c.d_head)).unbind(-3)
        if self.static_planes is not None:  # NoPE planes: angle 0 at every position
            cos, sin = cos.masked_fill(self.static_planes, 1.0), sin.masked_fill(self.static_planes, 0.0)
        if self.gate is not None:  # gated planes: zero in q and k, so they add nothing to any logit
            q, k = q * self.gate, k * self.gate
        q = self.hook_rot_q(apply_rope(q, cos, sin))
        k = self.hook_rot_k(apply_rope(k, cos, sin))
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))  # [batch, head, pos, d_head]
        p_drop = self.attn_dropout if self.training else 0.0
        if past is None and not self._pattern_wanted():
            z = F.scaled_dot_product_attention(q, k, v, dropout_p=p_drop, is_causal=True)
        else:
            n = q.shape[-2]
            causal = torch.ones(n, n, dtype=torch.bool, device=h.device).tril()
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
        return self.out(z.transpose(1, 2).flatten(-2)), (k, v)


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


class Block(nn.Module):
    def __init__(self, cfg: ModelConfig, layer: int = 0) -> None:
        super().__init__()
        self.ln = nn.LayerNorm(cfg.d_model, eps=cfg.ln_eps)
        self.attn = Attention(cfg, layer)
        self.mlp = (
            nn.Sequential(
                nn.Linear(cfg.d_model, cfg.d_mlp),
                nn.GELU(approximate=cfg.gelu_approximate),
                nn.Linear(cfg.d_mlp, cfg.d_model),
            )
            if cfg.mlp
            else None
        )
        self.drop = nn.Dropout(cfg.dropout)
        self.hook_resid_pre = HookPoint()

    def forward(self, x: Tensor, cos: Tensor, sin: Tensor, past: KV | None = None) -> tuple[Tensor, KV]:
        x = self.hook_resid_pre(x)
        h = self.ln(x)  # GPT-J: one LayerNorm feeds both branches
        a, kv = self.attn(h, cos, sin, past)
        if self.mlp is None:  # attention-only block
            return x + self.drop(a), kv
        return x + self.drop(a) + self.drop(self.mlp(h)), kv  # parallel residual


class GPTJ(nn.Module):
    def __init__(self, cfg: ModelConfig, generator: torch.Generator | None = None) -> None:
        super().__init__()
        if cfg.d_vocab < 1:
            raise ValueError(f"model.d_vocab={cfg.d_vocab}: set it from the task vocabulary before building")
        self.cfg = cfg
        self.embed = nn.Embedding(cfg.d_vocab, cfg.d_model)
        self.drop = nn.Dropout(cfg.embd_p)
        self.blocks = nn.ModuleList(Block(cfg, layer) for layer in range(cfg.n_layers))
        self.ln_final = nn.LayerNorm(cfg.d_model, eps=cfg.ln_eps)
        self.unembed = nn.Linear(cfg.d_model, cfg.d_vocab)
        self.reset_parameters(generator)

    @torch.no_grad()
    def reset_parameters(self, generator: torch.Generator | None = None) -> None:
        """HF GPT-J's init: N(0, init_range) weights, zero biases, unit LayerNorms."""
        for module in self.modules():
            if isinstance(module, nn.Linear | nn.Embedding):
                module.weight.normal_(0.0, self.cfg.init_range, generator=generator)
                if getattr(module, "bias", None) is not None:
                    module.bias.zero_()
            elif isinstance(module, nn.LayerNorm):
                module.weight.fill_(1.0)
                module.bias.zero_()

    @property
    def W_E(self) -> Tensor:  # [d_vocab, d_model]
        return self.embed.weight

    @property
    def W_U(self) -> Tensor:  # [d_model, d_vocab]
        return self.unembed.weight.mT

    def forward(self, tokens: Tensor, positions: Tensor | None = None, past: list[KV] | None = None) -> Tensor:
        """tokens: [batch, pos] -> logits [batch, pos, d_vocab]; positions default to 0..pos-1 after the past."""
        return self.forward_kv(tokens, positions, past)[0]

    def forward_kv(
        self, tokens: Tensor, positions: Tensor | None = None, past: list[KV] | None = None
    ) -> tuple[Tensor, list[KV]]:
        """Logits and every layer's (k, v) for ``tokens``, continuing ``past`` (one KV per layer) if given.

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
        x = self.drop(self.embed(tokens))
        cos, sin = rope_cos_sin(positions, self.cfg.rot_dim, self.cfg.rope_base, x.dtype)
        present = []
        for i, block in enumerate(self.blocks):
            x, kv = block(x, cos, sin, None if past is None else past[i])
            present.append(kv)
        return self.unembed(self.ln_final(x)), present

    @contextmanager
    def hooks(self, fwd: dict[str, Callable[[Tensor], Tensor | None]]) -> Iterator[GPTJ]:
        """Attach ``name -> fn(activation)`` hooks; they are always removed on exit.

        A hook that returns a tensor replaces the activation (patching); one that returns None reads it.
        """
        modules = dict(self.named_modules())
        unknown = sorted(set(fwd) - {n for n, m in modules.items() if isinstance(m, HookPoint)})
        if unknown:
            raise ValueError(f"unknown hook point(s) {unknown}; e.g. blocks.0.attn.hook_pattern")
        handles = [modules[n].register_forward_hook(lambda _m, _i, out, f=f: f(out)) for n, f in fwd.items()]
        try:
            yield self
        finally:
            for handle in handles:
                handle.remove()

    def run_with_cache(
        self, tokens: Tensor, names: list[str], positions: Tensor | None = None, past: list[KV] | None = None
    ) -> tuple[Tensor, dict[str, Tensor]]:
        """Forward pass that also returns the named activations (detached)."""
        cache: dict[str, Tensor] = {}

        def keep(name: str) -> Callable[[Tensor], None]:
            return lambda t: cache.__setitem__(name, t.detach())

        with self.hooks({n: keep(n) for n in names}):
            logits = self(tokens, positions, past)
        return logits, cache


def hook_names(cfg: ModelConfig) -> list[str]:
    """Every hook point name, in forward order."""
    out = []
    for layer in range(cfg.n_layers):
        out.append(f"blocks.{layer}.hook_resid_pre")
        attn = ("hook_rot_q", "hook_rot_k", "hook_attn_scores", "hook_pattern")
        out += [f"blocks.{layer}.attn.{h}" for h in attn]
    return out
