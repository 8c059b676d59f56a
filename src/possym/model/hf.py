"""One-to-one weight mapping between possym's GPTJ and ``transformers.GPTJForCausalLM``.

possym fuses q, k and v into one ``qkv`` matrix; HF keeps ``q_proj``, ``k_proj``, ``v_proj``.
Everything else maps by name. HF GPT-J hard-codes RoPE base 10,000 and needs a position table of
``n_positions`` rows; possym has neither limit, so export picks a table long enough for the
length-generalisation grid.

The plane options of :class:`~possym.config.ModelConfig`: frequency gating exports exactly (a gated
plane's q and k are zero, which is the same as zero rows of ``q_proj`` and ``k_proj``, since GPT-J's
attention has no biases). p-RoPE and NoPE layers do not: HF GPT-J rotates the first ``rotary_dim``
dims of every layer with frequencies computed from ``rotary_dim`` itself, so export refuses them.

Example:
    >>> cfg = ModelConfig(n_layers=1, d_model=8, d_mlp=16, d_vocab=5)
    >>> hf = to_hf(GPTJ(cfg))
    >>> type(hf).__name__
    'GPTJForCausalLM'
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
from torch import Tensor

from possym.config import ACTIVATIONS, ModelConfig
from possym.model.gptj import GPTJ
from possym.model.rope import rope_frequencies

if TYPE_CHECKING:
    from transformers import GPTJConfig, GPTJForCausalLM, PreTrainedTokenizerFast

HF_POSITIONS = 8192  # covers the paper's +5,000-token length grid with room to spare


def hf_config(cfg: ModelConfig, n_positions: int = HF_POSITIONS, pad_id: int = 0) -> GPTJConfig:
    from transformers import GPTJConfig

    if cfg.rope_base != 10_000.0:
        raise ValueError(f"model.rope_base={cfg.rope_base}: HF GPT-J hard-codes base 10000")
    if cfg.rot_dim == 0:
        raise ValueError("model.rotary_dim=0 (NoPE) has no HF GPT-J equivalent without patching transformers")
    if int(cfg.p_rope * cfg.n_planes) < cfg.n_planes:
        raise ValueError(
            f"model.p_rope={cfg.p_rope} has no HF GPT-J equivalent: HF's rotary_dim would rotate the kept planes "
            "at frequencies computed from rotary_dim, not RoPE's; export allows p_rope=1 only"
        )
    if not cfg.mlp:
        raise ValueError(
            "model.mlp=false (attention-only blocks) has no HF GPT-J equivalent; export allows mlp=true only"
        )
    if cfg.nope_from_layer is not None:
        raise ValueError(
            f"model.nope_from_layer={cfg.nope_from_layer} has no HF GPT-J equivalent: HF applies one rotary_dim to "
            "every layer; export allows nope_from_layer=null only (model.freq_gate exports exactly)"
        )
    return GPTJConfig(
        vocab_size=cfg.d_vocab,
        n_positions=n_positions,
        n_embd=cfg.d_model,
        n_layer=cfg.n_layers,
        n_head=cfg.n_heads,
        rotary_dim=cfg.rot_dim,
        n_inner=cfg.d_mlp,
        activation_function=cfg.activation,
        resid_pdrop=cfg.dropout,
        embd_pdrop=cfg.embd_p,
        attn_pdrop=cfg.dropout,
        layer_norm_epsilon=cfg.ln_eps,
        initializer_range=cfg.init_range,
        tie_word_embeddings=False,
        use_cache=False,
        bos_token_id=pad_id,
        eos_token_id=pad_id,
        pad_token_id=pad_id,
    )


def _name_pairs(n_layers: int) -> list[tuple[str, str]]:
    """(possym name, HF name) for every tensor except the fused qkv, which maps onto three."""
    pairs = [("embed.weight", "transformer.wte.weight")]
    for layer in range(n_layers):
        p, q = f"blocks.{layer}.", f"transformer.h.{layer}."
        pairs += [(p + "ln." + w, q + "ln_1." + w) for w in ("weight", "bias")]
        pairs += [(p + "attn.out.weight", q + "attn.out_proj.weight")]
        for i, name in ((0, "fc_in"), (2, "fc_out")):
            pairs += [(p + f"mlp.{i}.{w}", q + f"mlp.{name}.{w}") for w in ("weight", "bias")]
    pairs += [("ln_final." + w, "transformer.ln_f." + w) for w in ("weight", "bias")]
    pairs += [("unembed." + w, "lm_head." + w) for w in ("weight", "bias")]
    return pairs


def to_hf_state_dict(model: GPTJ) -> dict[str, Tensor]:
    """HF names -> tensors; a ``freq_gate``'s gated planes become zero rows of ``q_proj`` and ``k_proj``."""
    sd, d = model.state_dict(), model.cfg.d_model
    out = {theirs: sd[ours] for ours, theirs in _name_pairs(model.cfg.n_layers)}
    for layer in range(model.cfg.n_layers):
        q, k, v = sd[f"blocks.{layer}.attn.qkv.weight"].split(d)
        gate = model.block(layer).attn.gate  # [head, d_head] or None
        if gate is not None:
            rows = gate.reshape(-1, 1).to(q.dtype)  # output dim h*d_head + i of W_Q / W_K
            q, k = q * rows, k * rows
        out |= {f"transformer.h.{layer}.attn.{n}_proj.weight": w for n, w in zip("qkv", (q, k, v), strict=True)}
    return {k: v.clone() for k, v in out.items()}


def from_hf_state_dict(sd: dict[str, Tensor], cfg: ModelConfig) -> dict[str, Tensor]:
    out = {ours: sd[theirs] for ours, theirs in _name_pairs(cfg.n_layers)}
    for layer in range(cfg.n_layers):
        q = f"transformer.h.{layer}.attn."
        out[f"blocks.{layer}.attn.qkv.weight"] = torch.cat([sd[q + f"{n}_proj.weight"] for n in "qkv"])
    return out


def exact_rotary_table(n_positions: int, rot_dim: int) -> Tensor:
    """HF GPT-J's ``[sin | cos]`` table, but from float64 angles (HF builds it in float32)."""
    angles = torch.arange(n_positions, dtype=torch.float64)[:, None] * rope_frequencies(rot_dim, 10_000.0)
    return torch.cat((angles.sin(), angles.cos()), dim=1)


def to_hf(model: GPTJ, n_positions: int = HF_POSITIONS, attn_implementation: str = "eager") -> GPTJForCausalLM:
    """An HF GPTJForCausalLM with exactly ``model``'s weights (same dtype, eval mode).

    Its rotary table is recomputed from float64 angles: HF's own float32 table drifts by ~1e-4 rad
    at position 5,000, which would make the two models differ for a reason that is not a
    convention. A folder saved from it and reloaded with ``from_pretrained`` gets HF's own table
    back. HF's eager attention computes in float32 even for float64 models; pass
    ``attn_implementation="sdpa"`` to keep float64 end to end.
    """
    from transformers import GPTJForCausalLM

    dtype = next(model.parameters()).dtype
    config = hf_config(model.cfg, n_positions)
    config._attn_implementation = attn_implementation
    hf = GPTJForCausalLM(config)
    # Through the class: PreTrainedModel.to is @wraps(nn.Module.to), which typeshed types as an
    # unbound callable, so mypy would read ``hf.to(dtype)`` as ``to(self=dtype)``. Same call.
    GPTJForCausalLM.to(hf, dtype)
    table = exact_rotary_table(n_positions, model.cfg.rot_dim)
    hf.transformer.rotary_emb.embed_positions = torch.nn.Buffer(table, persistent=False)  # as HF declares it
    missing, unexpected = hf.load_state_dict(to_hf_state_dict(model), strict=False)
    # The rotary table is a non-persistent buffer; nothing else may be missing.
    if unexpected or [k for k in missing if "embed_positions" not in k]:
        raise RuntimeError(f"HF GPT-J mapping incomplete: missing={missing} unexpected={unexpected}")
    return hf.eval()


BRIDGE_WRAPPER = "._original_component"  # TransformerLens's bridge holds each HF module under this name


def hf_state_dict(hf) -> dict[str, Tensor]:
    """``hf``'s state dict under Hugging Face's names, also when a TransformerLens bridge has wrapped its
    modules (``bridge.original_model``: ``transformer.wte._original_component.weight`` is ``transformer.wte.weight``).
    The bridge's aliases of a module (``attn.q`` beside ``attn.q_proj``) share its tensors and are left out."""
    out: dict[str, Tensor] = {}
    for name, tensor in hf.state_dict().items():
        out.setdefault(name.replace(BRIDGE_WRAPPER, ""), tensor)
    return out


def from_hf(hf) -> GPTJ:  # hf: GPTJForCausalLM, bare or inside a TransformerLens bridge (bridge.original_model)
    """A possym GPT-J with exactly ``hf``'s weights (same dtype, eval mode); ``hf`` may be a bridge's
    ``original_model`` (:func:`hf_state_dict`)."""
    c = hf.config
    if c.activation_function not in ACTIVATIONS:
        raise ValueError(
            f"activation_function={c.activation_function!r} is not a GELU possym's GPT-J runs; allowed: "
            f"{tuple(ACTIVATIONS)}"
        )
    cfg = ModelConfig(
        n_layers=c.n_layer,
        d_model=c.n_embd,
        n_heads=c.n_head,
        d_mlp=c.n_inner or 4 * c.n_embd,
        rotary_dim=c.rotary_dim,
        dropout=c.resid_pdrop,
        embd_dropout=c.embd_pdrop,
        activation=c.activation_function,
        ln_eps=c.layer_norm_epsilon,
        init_range=c.initializer_range,
        d_vocab=c.vocab_size,
    )
    model = GPTJ(cfg).to(next(hf.parameters()).dtype)
    model.load_state_dict(from_hf_state_dict(hf_state_dict(hf), cfg))
    return model.eval()


def hf_tokenizer(tokens: tuple[str, ...], pad: str) -> PreTrainedTokenizerFast:
    """A word-level tokenizer over possym's token strings, split on whitespace.

    Ids equal possym's vocabulary ids, so ``"c2 b1 fa"`` encodes exactly as the task does. Unknown
    words map to the pad token (word-level tokenizers need an unknown token; the task vocabulary has
    none of its own).
    """
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from tokenizers.pre_tokenizers import WhitespaceSplit
    from transformers import PreTrainedTokenizerFast

    core = Tokenizer(WordLevel(vocab={t: i for i, t in enumerate(tokens)}, unk_token=pad))
    core.pre_tokenizer = WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=core, pad_token=pad, unk_token=pad)
