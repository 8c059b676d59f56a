"""One view of a model's attention, whatever the model: where an intervention edits it and reads it.

An intervention (:mod:`possym.evaluate.interventions`) needs three places per layer: the rotated query ``q``
[batch, head, pos, d_head] (plane gating), the logits ``ℓ`` [batch, head, query_pos, key_pos], scaled,
soft-capped and masked (knock-out, sharpening), and the pattern softmax(ℓ) (what mass is read from). A
:class:`Backend` offers them per layer and runs the model; query positions are absolute (with a key-value
cache the first query sits at ``key_pos − query_pos``). :class:`PossymBackend` reads possym's hooks;
:class:`HFBackend` registers ``possym_intervene`` in transformers' attention and mask registries (as
:mod:`possym.heads.capture`; a name missing from the mask registry gets no causal mask) and computes eager
attention with the edits; :class:`TLBackend` edits a ``HookedTransformer``'s hooks and refuses a
``TransformerBridge``. Pairings, and why bridges are refused: docs/interventions.md.

Example (the three places on a possym model, unedited):
    >>> import torch
    >>> from possym.config import ModelConfig
    >>> from possym.model.gptj import GPTJ
    >>> model = GPTJ(ModelConfig(n_layers=1, d_model=16, d_mlp=32, d_vocab=10), torch.Generator().manual_seed(0))
    >>> backend = backend_for(model.eval())
    >>> seen = {}
    >>> with backend.attach({}, {}, {0: lambda pattern, first: seen.setdefault(0, pattern)}):
    ...     _ = backend.forward(torch.tensor([[1, 2, 3]]))
    >>> seen[0].shape, backend.plane_dims(0, 1)            # [batch, head, query_pos, key_pos]; plane 1's dims
    (torch.Size([1, 1, 3, 3]), (0, 1))"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import torch
from torch import Tensor

from possym.errors import PossymError

# An edit of a layer's rotated query [batch, head, pos, d_head] or of its logits [batch, head, query_pos,
# key_pos]; ``first`` is the absolute position of the first query. A reader returns nothing.
QueryEdit = Callable[[Tensor, int], Tensor]
LogitEdit = Callable[[Tensor, int], Tensor]
PatternRead = Callable[[Tensor, int], None]


class Backend:
    """A model's attention seen through :meth:`attach` (edits and readers per layer) and :meth:`forward`."""

    model: Any
    n_layers: int
    n_heads: int

    def rotary(self, layer: int) -> tuple[str, int]:
        """The layer's RoPE pairing ("gptj": adjacent dims; "neox": halves) and its rotated dims."""
        raise NotImplementedError

    def plane_dims(self, layer: int, plane: int) -> tuple[int, int]:
        """The two dims of the rotated query that plane ``plane`` (1-based frequency ID, θ_k =
        base^(−2(k−1)/rot_dim)) occupies in ``layer``: (2k−2, 2k−1) adjacent, (k−1, k−1+rot_dim/2) halves."""
        pairing, rot = self.rotary(layer)
        if not 1 <= plane <= rot // 2:
            raise PossymError(f"layer {layer}: plane {plane}; a plane ID must lie in 1..{rot // 2} "
                              f"(rotary dims {rot})")
        return (2 * plane - 2, 2 * plane - 1) if pairing == "gptj" else (plane - 1, plane - 1 + rot // 2)

    @contextmanager
    def attach(self, queries: Mapping[int, QueryEdit], logits: Mapping[int, LogitEdit],
               patterns: Mapping[int, PatternRead]) -> Iterator[None]:
        """Apply the edits and readers, by layer, to every forward pass inside the context; removed on exit."""
        raise NotImplementedError
        yield

    def forward(self, tokens: Tensor) -> Tensor:
        """The logits [batch, pos, d_vocab] of ``tokens`` [batch, pos] (no gradient)."""
        raise NotImplementedError

    def device(self) -> torch.device:
        return next(self.model.parameters()).device


def _named_hooks(queries: Mapping[int, QueryEdit], logits: Mapping[int, LogitEdit],
                 patterns: Mapping[int, PatternRead]) -> list[tuple[str, Callable[..., Any]]]:
    """The edits and reads as (hook name, fn(activation, hook)) pairs under TransformerLens's names, which a
    possym GPT-J and a HookedTransformer share (``hook_rot_q`` [batch, pos, head, d_head]; scores and pattern
    [batch, head, query, key])."""
    def query(fn: QueryEdit) -> Callable[..., Tensor]:
        # ``forward`` runs without a cache, so the first query is at 0
        return lambda q, hook: fn(q.transpose(1, 2), 0).transpose(1, 2)

    def logit(fn: LogitEdit) -> Callable[..., Tensor]:
        return lambda s, hook: fn(s, s.shape[-1] - s.shape[-2])

    def read(fn: PatternRead) -> Callable[..., None]:
        return lambda p, hook: fn(p, p.shape[-1] - p.shape[-2])

    return [*[(f"blocks.{layer}.attn.hook_rot_q", query(fn)) for layer, fn in queries.items()],
            *[(f"blocks.{layer}.attn.hook_attn_scores", logit(fn)) for layer, fn in logits.items()],
            *[(f"blocks.{layer}.attn.hook_pattern", read(fn)) for layer, fn in patterns.items()]]


class PossymBackend(Backend):
    """A possym GPT-J, through its hook points (module docstring)."""

    def __init__(self, model: Any) -> None:
        self.model = model
        self.n_layers, self.n_heads = model.cfg.n_layers, model.cfg.n_heads

    def rotary(self, layer: int) -> tuple[str, int]:
        return "gptj", self.model.cfg.rot_dim

    @contextmanager
    def attach(self, queries: Mapping[int, QueryEdit], logits: Mapping[int, LogitEdit],
               patterns: Mapping[int, PatternRead]) -> Iterator[None]:
        hooks = _named_hooks(queries, logits, patterns)
        with self.model.hooks(hooks):
            yield

    @torch.no_grad()
    def forward(self, tokens: Tensor) -> Tensor:
        return self.model(tokens.to(self.device()))


class TLBackend(Backend):
    """A TransformerLens ``HookedTransformer``, through its hook points (module docstring)."""

    def __init__(self, model: Any) -> None:
        if hasattr(model, "original_model"):
            arch = type(model.original_model).__name__
            raise PossymError(
                f"a TransformerBridge (this one of a {arch}) is not supported by the interventions: they edit the "
                "rotated queries at hook_rot_q and the logits at hook_attn_scores, which bridges do not fire alike "
                "(GPT-J's and GPT-NeoX's never fire hook_rot_q, and GPT-J's fires hook_attn_scores after the "
                f"softmax); pass the {arch} itself, built with attn_implementation='eager' (anew: the bridge has "
                "replaced its modules), or a HookedTransformer")
        if model.cfg.positional_embedding_type != "rotary":
            raise PossymError(f"positional_embedding_type={model.cfg.positional_embedding_type!r}: the interventions "
                              "take RoPE models")
        self.model = model
        self.n_layers, self.n_heads = model.cfg.n_layers, model.cfg.n_heads

    def rotary(self, layer: int) -> tuple[str, int]:
        cfg = self.model.cfg
        return ("gptj" if cfg.rotary_adjacent_pairs else "neox"), int(cfg.rotary_dim)

    @contextmanager
    def attach(self, queries: Mapping[int, QueryEdit], logits: Mapping[int, LogitEdit],
               patterns: Mapping[int, PatternRead]) -> Iterator[None]:
        hooks = _named_hooks(queries, logits, patterns)
        with self.model.hooks(fwd_hooks=hooks):
            yield

    @torch.no_grad()
    def forward(self, tokens: Tensor) -> Tensor:
        return self.model(tokens.to(self.device()))


INTERVENE = "possym_intervene"  # the name registered in both transformers registries

# id(attention module) -> (layer, the edits and readers attached to it, innermost last).
_HF_ACTIVE: dict[int, tuple[int, list[tuple[QueryEdit | None, LogitEdit | None, PatternRead | None]]]] = {}


def _hf_attend(module: Any, query: Tensor, key: Tensor, value: Tensor, attention_mask: Tensor | None,
               scaling: float | None = None, dropout: float = 0.0, softcap: float | None = None,
               **kwargs: Any) -> tuple[Tensor, Tensor]:
    """Eager attention with the attached edits: query [batch, head, pos, d], key/value [batch, kv_head, key_pos, d].
    ``dropout`` is not applied: :func:`backend_for` takes eval-mode models only, for which it is 0."""
    if getattr(module, "sinks", None) is not None:
        raise PossymError(f"{type(module).__name__} has attention sinks, which the interventions do not model")
    _, attached = _HF_ACTIVE.get(id(module), (0, []))
    first = key.shape[-2] - query.shape[-2]
    for q_edit, _, _ in attached:
        if q_edit is not None:
            query = q_edit(query, first)
    n_rep = query.shape[1] // key.shape[1]  # grouped-query attention: head h reads key head h // n_rep
    key, value = key.repeat_interleave(n_rep, dim=1), value.repeat_interleave(n_rep, dim=1)
    scale = scaling if scaling is not None else query.shape[-1] ** -0.5
    logits = torch.matmul(query, key.transpose(2, 3)) * scale
    if softcap is not None:
        logits = softcap * torch.tanh(logits / softcap)
    if attention_mask is not None:
        logits = logits + attention_mask[:, :, :, : key.shape[-2]]
    for _, l_edit, _ in attached:
        if l_edit is not None:
            logits = l_edit(logits, first)
    pattern = logits.softmax(dim=-1, dtype=torch.float32).to(query.dtype)
    for _, _, read in attached:
        if read is not None:
            read(pattern, first)
    out = torch.matmul(pattern, value).transpose(1, 2).contiguous()  # [batch, pos, head, d]
    return out, pattern


def _hf_register() -> None:
    from transformers import AttentionInterface
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, AttentionMaskInterface

    AttentionInterface.register(INTERVENE, _hf_attend)
    AttentionMaskInterface.register(INTERVENE, ALL_MASK_ATTENTION_FUNCTIONS["eager"])


class HFBackend(Backend):
    """A Hugging Face RoPE causal LM, through an attention function of possym's (module docstring)."""

    def __init__(self, model: Any) -> None:
        from possym.heads.capture import attention_module, decoder_layers

        self.model = model
        self.modules = [attention_module(layer) for layer in decoder_layers(model)]
        self.n_layers = len(self.modules)
        config = model.config
        self.n_heads = int(getattr(config, "num_attention_heads", None) or config.n_head)

    def rotary(self, layer: int) -> tuple[str, int]:
        from possym.heads.capture import rope_spec

        spec = rope_spec(self.model, layer)
        return spec.pairing, spec.rot_dim

    @contextmanager
    def attach(self, queries: Mapping[int, QueryEdit], logits: Mapping[int, LogitEdit],
               patterns: Mapping[int, PatternRead]) -> Iterator[None]:
        from possym.heads.capture import attention_implementation

        _hf_register()
        added = []
        for layer in sorted({*queries, *logits, *patterns}):
            entry = (queries.get(layer), logits.get(layer), patterns.get(layer))
            _HF_ACTIVE.setdefault(id(self.modules[layer]), (layer, []))[1].append(entry)
            added.append((layer, entry))
        try:
            # A nested attach finds INTERVENE already set and restores it on exit.
            with attention_implementation(self.model, INTERVENE):
                yield
        finally:
            for layer, entry in added:
                key = id(self.modules[layer])
                stack = _HF_ACTIVE[key][1]
                stack.remove(entry)
                if not stack:
                    del _HF_ACTIVE[key]

    @torch.no_grad()
    def forward(self, tokens: Tensor) -> Tensor:
        with self._intervening():
            return self.model(input_ids=tokens.to(self.device())).logits

    @contextmanager
    def _intervening(self) -> Iterator[None]:
        # Unedited passes run through INTERVENE as well, so that edited and unedited logits come
        # from one computation (eager attention) and differ by the edit alone.
        from possym.heads.capture import attention_implementation

        _hf_register()
        with attention_implementation(self.model, INTERVENE):
            yield


def backend_for(model: Any) -> Backend:
    """The adapter of ``model``: a possym GPTJ, a TransformerLens HookedTransformer or a Hugging Face
    causal LM (an nnsight wrapper is read as the model it wraps). The model must be in eval mode."""
    from possym.heads.tl import is_transformer_lens
    from possym.heads.wrappers import unwrap
    from possym.model.gptj import GPTJ

    model = unwrap(model)
    if getattr(model, "training", False):
        raise PossymError("interventions need a model in eval mode (dropout would perturb the attention); "
                          "call model.eval()")
    if isinstance(model, GPTJ):
        return PossymBackend(model)
    if is_transformer_lens(model):
        return TLBackend(model)
    try:
        from transformers import PreTrainedModel
    except ImportError:  # pragma: no cover - transformers is a dependency
        PreTrainedModel = ()  # type: ignore[assignment,misc]  # noqa: N806
    if isinstance(model, PreTrainedModel):
        return HFBackend(model)
    raise PossymError("interventions take a possym GPTJ, a Hugging Face causal LM or a TransformerLens "
                      f"HookedTransformer, not {type(model).__name__}")


__all__ = ["INTERVENE", "Backend", "HFBackend", "LogitEdit", "PatternRead", "PossymBackend", "QueryEdit",
           "TLBackend", "backend_for"]
