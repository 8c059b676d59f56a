"""Hook points, TransformerLens-style: named identity modules that analysis reads or patches.

A TransformerLens user's habits work unchanged on a possym model:

- a hook is called as ``fn(activation, hook)``, where ``hook`` is the :class:`HookPoint` and
  ``hook.name`` its full name (``"blocks.0.attn.hook_pattern"``); a hook that returns a tensor
  replaces the activation, one that returns None only reads it;
- :meth:`HookedRoot.run_with_hooks` takes ``fwd_hooks=[(name, fn), ...]``, where a name may also
  be a predicate on names (``lambda name: name.endswith("hook_pattern")``);
- :meth:`HookedRoot.run_with_cache` returns ``(logits, cache)``, and the cache is indexed by full
  name or by TransformerLens's shorthand, ``cache["pattern", 0]`` (:func:`act_name`).

:meth:`HookedRoot.hooks` is the context manager beneath both; hooks are always removed on exit,
also when the forward pass raises.

Example:
    >>> import torch
    >>> from possym.config import ModelConfig
    >>> from possym.model.gptj import GPTJ
    >>> model = GPTJ(ModelConfig(n_layers=2, d_model=16, d_mlp=32, d_vocab=10), torch.Generator().manual_seed(0))
    >>> tokens = torch.tensor([[1, 2, 3]])
    >>> logits, cache = model.run_with_cache(tokens)
    >>> cache["pattern", 1].shape                        # [batch, head, query_pos, key_pos]
    torch.Size([1, 1, 3, 3])
    >>> def ablate(z, hook):                             # zero head 0's output of layer 0
    ...     z[:, :, 0] = 0.0
    ...     return z
    >>> model.run_with_hooks(tokens, fwd_hooks=[("blocks.0.attn.hook_z", ablate)]).shape
    torch.Size([1, 3, 10])
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, TypeAlias

import torch
from torch import Tensor, nn
from torch.nn.modules.module import _global_forward_hooks, _global_forward_pre_hooks

HookFn: TypeAlias = Callable[..., Tensor | None]
"""``fn(activation, hook) -> Tensor | None``: a tensor replaces the activation, None reads it."""
NamesFilter: TypeAlias = str | Callable[[str], bool] | Iterable[str] | None


class HookPoint(nn.Module):
    """Identity module at a named point of the forward pass (``name`` is set by :class:`HookedRoot`)."""

    def __init__(self) -> None:
        super().__init__()
        self.name: str | None = None

    def forward(self, x: Tensor) -> Tensor:
        return x

    @property
    def observed(self) -> bool:
        """Whether anything can see or change what passes through this point: a forward hook or pre-hook
        (its own, as :meth:`HookedRoot.hooks` and TransformerLens-style tools register, or torch's global
        ones), or a ``forward`` put on the instance in place of the class's, which is how nnsight's envoys
        (0.5 and later) intercept a module's ``.output``: a handoff installed on every module they wrap.

        A model may skip work that nothing observes (:class:`possym.model.gptj.Attention` computes no
        explicit pattern then), so every observer must count here.
        """
        return bool(self._forward_hooks or self._forward_pre_hooks or "forward" in self.__dict__
                    or _global_forward_hooks or _global_forward_pre_hooks)

    def layer(self) -> int:
        """The block index of a ``blocks.{layer}...`` hook point."""
        if self.name is None or not self.name.startswith("blocks."):
            raise ValueError(f"hook point {self.name!r} is not inside a block")
        return int(self.name.split(".")[1])


_ATTN = ("k", "v", "q", "z", "rot_k", "rot_q", "result", "pattern", "attn_scores")
_MLP = ("pre", "post", "mid", "pre_linear")
_LAYER_TYPES = {"a": "attn", "m": "mlp", "b": "", "block": "", "blocks": "", "attention": "attn"}
_ALIASES = {"attn": "pattern", "attn_logits": "attn_scores", "key": "k", "query": "q", "value": "v",
            "mlp_pre": "pre", "mlp_mid": "mid", "mlp_post": "post"}  # fmt: skip


def act_name(name: str, layer: int | None = None, layer_type: str | None = None) -> str:
    """A hook's full name from TransformerLens's shorthand (``transformer_lens.utils.get_act_name``).

    A full name is returned as it is; ``"pattern", 0`` names the attention pattern of block 0, and
    ``"k6"`` is ``"k", 6``. Attention activations (q, k, v, z, rot_q, rot_k, attn_scores, pattern)
    live under ``blocks.{layer}.attn``, MLP ones (pre, post) under ``blocks.{layer}.mlp``, the rest
    (resid_pre, resid_post, attn_out, mlp_out) on the block itself.

    >>> act_name("pattern", 0), act_name("resid_post", 1), act_name("k6"), act_name("embed")
    ('blocks.0.attn.hook_pattern', 'blocks.1.hook_resid_post', 'blocks.6.attn.hook_k', 'hook_embed')
    """
    if ("." in name or name.startswith("hook_")) and layer is None and layer_type is None:
        return name
    match = re.match(r"([a-z]+)(\d+)([a-z]?.*)", name)
    if match is not None:
        name, digits, layer_type = match.groups()
        layer = int(digits)
    name = _ALIASES.get(name, name)
    if name in _ATTN:
        layer_type = "attn"
    elif name in _MLP:
        layer_type = "mlp"
    elif layer_type in _LAYER_TYPES:
        layer_type = _LAYER_TYPES[layer_type]
    full = "" if layer is None else f"blocks.{layer}."
    full += f"{layer_type}.hook_{name}" if layer_type else f"hook_{name}"
    if name in ("scale", "normalized") and layer is None:
        full = f"ln_final.{full}"
    return full


class ActivationCache(Mapping[str, Tensor]):
    """Activations by hook name, as TransformerLens's ``ActivationCache`` indexes them.

    ``cache[name]`` takes a full name or a shorthand (:func:`act_name`); ``cache["pattern", layer]``
    a shorthand and a layer, negative layers counting from the end.
    """

    def __init__(self, activations: dict[str, Tensor], n_layers: int) -> None:
        self._acts = activations
        self.n_layers = n_layers

    def __getitem__(self, key: str | tuple) -> Tensor:
        if isinstance(key, str) and key in self._acts:
            return self._acts[key]
        if isinstance(key, tuple):
            name, *rest = key
            if rest and rest[0] is not None and rest[0] < 0:
                rest[0] += self.n_layers
            full = act_name(name, *rest)
        else:
            full = act_name(key)
        if full not in self._acts:
            raise KeyError(f"{key!r} ({full}) is not in the cache; it holds {len(self._acts)} names, e.g. "
                           f"{next(iter(self._acts), None)!r}")  # fmt: skip
        return self._acts[full]

    def __iter__(self) -> Iterator[str]:
        return iter(self._acts)

    def __len__(self) -> int:
        return len(self._acts)

    def __repr__(self) -> str:
        return f"ActivationCache({len(self)} activations: {list(self._acts)[:3]}...)"

    def stack_activation(self, name: str) -> Tensor:
        """One activation of every layer, stacked: ``stack_activation("pattern")`` -> [layer, batch, head, ...]."""
        return torch.stack([self[name, layer] for layer in range(self.n_layers)])


class HookedRoot(nn.Module):
    """A module whose :class:`HookPoint` submodules are named and can be hooked (TransformerLens's
    ``HookedRootModule``). Subclasses call :meth:`setup` at the end of ``__init__``."""

    def setup(self, n_layers: int) -> None:
        """Give every hook point its full name; record the hook points in forward order (``hook_dict``)."""
        self.n_layers = n_layers
        self.hook_dict: dict[str, HookPoint] = {}
        for name, module in self.named_modules():
            if isinstance(module, HookPoint):
                module.name = name
                self.hook_dict[name] = module

    def _resolve(self, fwd_hooks: Iterable[tuple[str | Callable[[str], bool], HookFn]] | Mapping[str, HookFn]):
        pairs = list(fwd_hooks.items()) if isinstance(fwd_hooks, Mapping) else list(fwd_hooks)
        out: list[tuple[HookPoint, HookFn]] = []
        for name, fn in pairs:
            if callable(name):
                out += [(hp, fn) for n, hp in self.hook_dict.items() if name(n)]
            elif name in self.hook_dict:
                out.append((self.hook_dict[name], fn))
            else:
                raise ValueError(f"unknown hook point {name!r}; e.g. blocks.0.attn.hook_pattern (see hook_dict)")
        return out

    @contextmanager
    def hooks(
        self, fwd_hooks: Iterable[tuple[str | Callable[[str], bool], HookFn]] | Mapping[str, HookFn] = ()
    ) -> Iterator[HookedRoot]:
        """Attach forward hooks, ``(name, fn)`` pairs or a ``{name: fn}`` dict, each called as
        ``fn(activation, hook=hook_point)``; they are always removed on exit."""
        handles = [
            hp.register_forward_hook(lambda module, _inputs, out, fn=fn: fn(out, hook=module))
            for hp, fn in self._resolve(fwd_hooks)
        ]
        try:
            yield self
        finally:
            for handle in handles:
                handle.remove()

    def run_with_hooks(
        self, *args: Any, fwd_hooks: Iterable[tuple[str | Callable[[str], bool], HookFn]] = (), **kwargs: Any
    ) -> Tensor:
        """The forward pass (``self(*args, **kwargs)``) with ``fwd_hooks`` attached for its duration."""
        with self.hooks(fwd_hooks):
            return self(*args, **kwargs)

    def run_with_cache(
        self, tokens: Tensor, names_filter: NamesFilter = None, **kwargs: Any
    ) -> tuple[Tensor, ActivationCache]:
        """The forward pass ``self(tokens, **kwargs)`` and the activations ``names_filter`` selects
        (detached): all by default, one name, a list of names, or a predicate on names."""
        if names_filter is None:
            names = list(self.hook_dict)
        elif isinstance(names_filter, str):
            names = [names_filter]
        elif callable(names_filter):
            names = [n for n in self.hook_dict if names_filter(n)]
        else:
            names = list(names_filter)
        acts: dict[str, Tensor] = {}

        def keep(t: Tensor, hook: HookPoint) -> None:
            acts[str(hook.name)] = t.detach()

        with self.hooks([(n, keep) for n in names]):
            logits = self(tokens, **kwargs)
        return logits, ActivationCache(acts, self.n_layers)
