"""A possym GPT-J as a TransformerLens ``HookedTransformer``, with exactly its weights and its RoPE.

The config is the checkpoint's own in TransformerLens's words (``rotary_adjacent_pairs=True``,
``parallel_attn_mlp=True`` with ``ln2`` tied to ``ln1``, zero attention biases frozen so that a model
fine-tuned there stays a GPT-J for :func:`from_transformer_lens`); the weights are not processed, so every
activation equals possym's; ``freq_gate`` and ``p_rope`` convert exactly, ``nope_from_layer`` is refused;
the rotary tables are possym's float64-angle ones for all ``n_ctx`` positions. Weight mapping: ``blocks[l].attn.W_Q``
etc. are already TransformerLens-shaped views; ``mlp.0`` -> ``W_in``/``b_in``, ``mlp.2`` -> ``W_out``/``b_out``,
``embed`` -> ``W_E``, ``unembed`` -> ``W_U``/``b_U``. :func:`to_hooked_transformer` needs transformer-lens 3.x
(``possym[tl3]``); :func:`to_transformer_bridge` runs on 3.9 and 4.x, over the exact Hugging Face export
(:func:`possym.model.hf.to_hf`). The mapping table, versions and tests: docs/heads.md, "TransformerLens 3 and 4".

Example:
    >>> import torch
    >>> from possym.config import ACTIVATIONS, ModelConfig
    >>> model = GPTJ(ModelConfig(n_layers=2, d_model=16, d_mlp=32, d_vocab=10), torch.Generator().manual_seed(0))
    >>> ht = to_hooked_transformer(model.eval())                      # doctest: +SKIP
    >>> tokens = torch.tensor([[1, 2, 3]])
    >>> torch.allclose(ht(tokens), model(tokens), atol=1e-5)          # doctest: +SKIP
    True"""

from __future__ import annotations

import copy
import warnings
from typing import TYPE_CHECKING, Any, cast

import torch
from torch import Tensor

from possym.config import ACTIVATIONS, ModelConfig
from possym.errors import PossymError
from possym.model.gptj import GPTJ, Block
from possym.model.hf import HF_POSITIONS, to_hf
from possym.model.rope import layer_frequencies

if TYPE_CHECKING:
    from transformer_lens import HookedTransformer, HookedTransformerConfig
    from transformer_lens.model_bridge import TransformerBridge

N_CTX = HF_POSITIONS  # as the HF export: covers the paper's +5,000-token length grid


def _transformer_lens() -> Any:
    try:
        import transformer_lens
    except ImportError as e:
        raise PossymError('TransformerLens 3.x is not installed: pip install "possym[tl3]"') from e
    try:
        transformer_lens.HookedTransformer  # noqa: B018 (4.x raises ImportError on the attribute)
    except (ImportError, AttributeError) as e:
        raise PossymError(
            f"transformer-lens {_version()} has no HookedTransformer (4.0 removed it): install 3.x with "
            'pip install "possym[tl3]", or convert with possym.to_transformer_bridge(model), which runs on 4.x'
        ) from e
    return transformer_lens


def _version() -> str:
    from importlib.metadata import version

    return version("transformer-lens")


def kept_planes(cfg: ModelConfig) -> int:
    """How many RoPE planes rotate (the same in every layer; raises for ``nope_from_layer``)."""
    if cfg.nope_from_layer is not None:
        raise PossymError(
            f"model.nope_from_layer={cfg.nope_from_layer} has no TransformerLens equivalent: a HookedTransformer "
            "rotates every layer alike; conversion allows nope_from_layer=null only (p_rope and freq_gate convert)"
        )
    return sum(cfg.plane_rotates(0))


def hooked_transformer_config(
    cfg: ModelConfig, n_ctx: int = N_CTX, dtype: torch.dtype = torch.float32, device: str = "cpu"
) -> HookedTransformerConfig:
    """The ``HookedTransformerConfig`` of a possym model config (see the module docstring)."""
    tl = _transformer_lens()
    kept = kept_planes(cfg)
    if kept == 0:
        raise PossymError(
            f"model.rotary_dim={cfg.rotary_dim}, model.p_rope={cfg.p_rope}: a model with no rotating plane (NoPE) "
            "has no rotary HookedTransformer; conversion needs at least one RoPE plane"
        )
    return tl.HookedTransformerConfig(
        n_layers=cfg.n_layers,
        d_model=cfg.d_model,
        n_heads=cfg.n_heads,
        d_head=cfg.d_head,
        d_mlp=cfg.d_mlp if cfg.mlp else None,
        d_vocab=cfg.d_vocab,
        n_ctx=n_ctx,
        act_fn=cfg.activation if cfg.mlp else None,
        attn_only=not cfg.mlp,
        normalization_type="LN",
        eps=cfg.ln_eps,
        positional_embedding_type="rotary",
        rotary_dim=2 * kept,
        rotary_base=cfg.rope_base ** (2 * kept / cfg.rot_dim),  # = rope_base when every plane rotates
        rotary_adjacent_pairs=True,
        parallel_attn_mlp=cfg.mlp,  # attention-only: nothing to run in parallel (TransformerLens would look for ln2)
        original_architecture="GPTJForCausalLM",
        default_prepend_bos=False,  # possym's tasks have no BOS token
        init_weights=False,
        dtype=dtype,
        device=device,
    )


def to_transformer_lens_state_dict(model: GPTJ) -> dict[str, Tensor]:
    """TransformerLens names -> tensors (copies); a ``freq_gate``'s gated planes become zero columns of W_Q, W_K."""
    out = {"embed.W_E": model.W_E, "ln_final.w": model.ln_final.weight, "ln_final.b": model.ln_final.bias,
           "unembed.W_U": model.W_U, "unembed.b_U": model.b_U}  # fmt: skip
    zeros = model.W_E.new_zeros(model.cfg.n_heads, model.cfg.d_head)
    for layer, module in enumerate(model.blocks):
        block = cast(Block, module)  # nn.ModuleList iterates as plain Modules
        p, attn = f"blocks.{layer}.", block.attn
        gate = attn.gate.to(zeros.dtype) if isinstance(attn.gate, Tensor) else torch.ones_like(zeros)  # [head, d_head]
        for ln in ("ln1", "ln2") if block.mlp is not None else ("ln1",):  # GPT-J's one LayerNorm, tied
            out |= {p + ln + ".w": block.ln.weight, p + ln + ".b": block.ln.bias}
        out |= {p + "attn.W_Q": attn.W_Q * gate[:, None], p + "attn.W_K": attn.W_K * gate[:, None],
                p + "attn.W_V": attn.W_V, p + "attn.W_O": attn.W_O}  # fmt: skip
        out |= {p + f"attn.b_{n}": zeros for n in "QKV"} | {p + "attn.b_O": zeros.new_zeros(model.cfg.d_model)}
        if block.mlp is not None:
            mlp = block.mlp
            out |= {p + "mlp.W_in": mlp.W_in, p + "mlp.b_in": mlp.b_in, p + "mlp.W_out": mlp.W_out,
                    p + "mlp.b_out": mlp.b_out}  # fmt: skip
    return {k: v.detach().clone() for k, v in out.items()}


def exact_rotary_tables(cfg: ModelConfig, n_positions: int, dtype: torch.dtype) -> tuple[Tensor, Tensor]:
    """TransformerLens's (sin, cos) tables [pos, rotary_dim] in its adjacent-pair layout (each angle
    twice), from float64 angles at RoPE's own frequencies of the kept planes."""
    thetas = layer_frequencies(cfg, 0)[: kept_planes(cfg)]
    angles = torch.arange(n_positions, dtype=torch.float64)[:, None] * thetas.repeat_interleave(2)
    return angles.sin().to(dtype), angles.cos().to(dtype)


def to_hooked_transformer(model: GPTJ, n_ctx: int = N_CTX, tokenizer: Any = None) -> HookedTransformer:
    """A ``HookedTransformer`` computing exactly what ``model`` computes (same dtype and device, eval mode).

    ``tokenizer`` (optional, e.g. :func:`possym.model.hf.hf_tokenizer` of the task vocabulary) lets
    TransformerLens's string methods (``to_tokens``, ``to_str_tokens``) read the task's tokens.
    Raises :class:`~possym.errors.PossymError` for ``nope_from_layer`` and for a model with no RoPE plane.
    """
    tl = _transformer_lens()
    param = next(model.parameters())
    cfg = hooked_transformer_config(model.cfg, n_ctx, param.dtype, str(param.device))
    with warnings.catch_warnings():  # 3.x announces HookedTransformer's removal in 4.0 on every construction
        warnings.filterwarnings("ignore", message="HookedTransformer is deprecated", category=DeprecationWarning)
        ht = tl.HookedTransformer(cfg, tokenizer=tokenizer)
    state = ht.state_dict()
    ours = to_transformer_lens_state_dict(model)
    buffers = ("mask", "IGNORE", "rotary_sin", "rotary_cos")  # TransformerLens's own, set below or kept
    missing = sorted(k for k in state if k not in ours and not k.endswith(buffers))
    unknown = sorted(set(ours) - set(state))
    if missing or unknown:
        raise RuntimeError(f"TransformerLens mapping incomplete: missing={missing} unknown={unknown}")
    ht.load_state_dict(state | {k: v.to(param.device) for k, v in ours.items()})
    sin, cos = (t.to(param.device) for t in exact_rotary_tables(model.cfg, n_ctx, param.dtype))
    for block in ht.blocks:  # all n_ctx rows, so that TransformerLens never extends them with its own float32 angles
        block.attn.rotary_sin, block.attn.rotary_cos = sin.clone(), cos.clone()
        if model.cfg.mlp:  # GPT-J's one LayerNorm: ln2 IS ln1, so training it in TransformerLens keeps them one
            block.ln2.w, block.ln2.b = block.ln1.w, block.ln1.b
        for name in ("b_Q", "b_K", "b_V", "b_O"):  # GPT-J has no attention biases: fine-tuning leaves them zero
            getattr(block.attn, name).requires_grad_(False)
    return ht.eval()


def _check_hooked(model: Any) -> None:
    """Refuse a HookedTransformer that is not a GPT-J possym can hold, naming what differs."""
    c = model.cfg
    why = []
    if c.positional_embedding_type != "rotary":
        why.append(f"positional_embedding_type={c.positional_embedding_type!r} (possym's GPT-J rotates: 'rotary')")
    elif not c.rotary_adjacent_pairs:
        why.append("rotary_adjacent_pairs=False (NeoX's halves; GPT-J pairs adjacent dims)")
    if not c.attn_only and not c.parallel_attn_mlp:
        why.append("parallel_attn_mlp=False (a sequential block; GPT-J runs attention and MLP in parallel)")
    if c.normalization_type != "LN":
        why.append(f"normalization_type={c.normalization_type!r} (processed weights, e.g. fold_ln: load with "
                   "HookedTransformer.from_pretrained_no_processing, or fold_ln=False, center_writing_weights=False, "
                   "center_unembed=False)")
    if c.n_key_value_heads not in (None, c.n_heads):
        why.append(f"n_key_value_heads={c.n_key_value_heads} (grouped-query attention)")
    if c.d_head * c.n_heads != c.d_model:
        why.append(f"d_head={c.d_head} x n_heads={c.n_heads} != d_model={c.d_model}")
    if not c.attn_only and c.act_fn not in ACTIVATIONS:
        why.append(f"act_fn={c.act_fn!r} (possym runs {' or '.join(ACTIVATIONS)})")
    if why:
        raise PossymError(f"this HookedTransformer is not a GPT-J possym can hold: {'; '.join(why)}")
    for layer, block in enumerate(model.blocks):
        biases = [n for n in ("b_Q", "b_K", "b_V", "b_O") if getattr(block.attn, n).abs().max() > 0]
        if biases:
            why.append(f"block {layer} has attention biases {', '.join(biases)} (GPT-J has none: processed weights, "
                       "e.g. fold_ln, put them there, or training did; freeze them with requires_grad_(False), as "
                       "possym.to_hooked_transformer does)")
        if not c.attn_only and not (torch.equal(block.ln1.w, block.ln2.w) and torch.equal(block.ln1.b, block.ln2.b)):
            differ = float((block.ln1.w - block.ln2.w).detach().abs().max())
            why.append(f"block {layer}'s ln2 differs from its ln1 by {differ:.2g} (GPT-J has one LayerNorm per block, "
                       "feeding both branches; tie them before training: block.ln2.w, block.ln2.b = block.ln1.w, "
                       "block.ln1.b, as possym.to_hooked_transformer does)")
    if why:
        raise PossymError(f"this HookedTransformer is not a GPT-J possym can hold: {'; '.join(why[:3])}"
                          + (f" (and {len(why) - 3} more)" if len(why) > 3 else ""))


def _from_hooked(model: Any) -> GPTJ:
    """The possym GPT-J of a HookedTransformer: the inverse of :func:`to_transformer_lens_state_dict`."""
    _check_hooked(model)
    c = model.cfg
    cfg = ModelConfig(
        n_layers=c.n_layers, d_model=c.d_model, n_heads=c.n_heads,
        d_mlp=c.d_mlp if not c.attn_only else ModelConfig.d_mlp,
        rotary_dim=None if c.rotary_dim == c.d_head else c.rotary_dim, rope_base=float(c.rotary_base),
        dropout=0.0, ln_eps=c.eps, init_range=c.initializer_range, d_vocab=c.d_vocab,
        activation=c.act_fn if not c.attn_only else ModelConfig.activation, mlp=not c.attn_only,
    )  # fmt: skip
    sd = {k: v.detach() for k, v in model.state_dict().items()}
    out = {"embed.weight": sd["embed.W_E"], "ln_final.weight": sd["ln_final.w"], "ln_final.bias": sd["ln_final.b"],
           "unembed.weight": sd["unembed.W_U"].mT, "unembed.bias": sd["unembed.b_U"]}  # fmt: skip
    for layer in range(c.n_layers):
        p = f"blocks.{layer}."
        rows = [sd[p + f"attn.W_{n}"].transpose(1, 2).reshape(c.d_model, c.d_model) for n in "QKV"]  # [out, in]
        out |= {p + "ln.weight": sd[p + "ln1.w"], p + "ln.bias": sd[p + "ln1.b"],
                p + "attn.qkv.weight": torch.cat(rows), p + "attn.out.weight": sd[p + "attn.W_O"].reshape(
                    c.d_model, c.d_model).mT}  # fmt: skip
        if not c.attn_only:
            out |= {p + "mlp.0.weight": sd[p + "mlp.W_in"].mT, p + "mlp.0.bias": sd[p + "mlp.b_in"],
                    p + "mlp.2.weight": sd[p + "mlp.W_out"].mT, p + "mlp.2.bias": sd[p + "mlp.b_out"]}  # fmt: skip
    param = next(model.parameters())
    gptj = GPTJ(cfg).to(device=param.device, dtype=param.dtype)
    gptj.load_state_dict({k: v.clone() for k, v in out.items()})
    return gptj.eval()


LOGIT_RTOL = 1e-4  # the way back's check: max |Δlogit| <= LOGIT_RTOL · max(1, max |logit|)


def from_transformer_lens(model: Any) -> GPTJ:
    """A possym GPT-J computing what a TransformerLens model computes: the way back from TransformerLens.

    ``model`` is a ``HookedTransformer`` (transformer-lens 3.x) of a GPT-J, possym's
    (:func:`to_hooked_transformer`) or Hugging Face's (by TransformerLens's own converter, without weight
    processing), or a ``TransformerBridge`` (3.9 or 4.x) of a GPT-J, possym's (:func:`to_transformer_bridge`)
    or Hugging Face's. Its weights as they are now, so a model edited or fine-tuned in TransformerLens
    comes back as it was left. The inverse of the conversion: W_Q, W_K, W_V [head, d_model, d_head] stack into
    ``qkv``, ``ln1`` is the block's one LayerNorm (``ln2`` must equal it), ``rotary_dim``/``rotary_base``
    give RoPE (a p-RoPE model comes back as the partial rotary with the same frequencies, a ``freq_gate`` as
    its zero columns of W_Q and W_K). Same dtype and device, eval mode.

    Before it is returned, both models run one batch of random tokens and their logits must agree to
    ``LOGIT_RTOL`` of the largest logit (float32 conversions agree to ~1e-6): anything the mapping does not
    model is refused rather than handed back wrong. Refused, naming why: another architecture (a bridge of a
    Llama, a NeoX pairing, a sequential block), processed weights (``fold_ln``, centring: attention biases,
    ``LNPre``), an ``ln2`` trained apart from ``ln1``.

    >>> back = from_transformer_lens(to_hooked_transformer(model))      # doctest: +SKIP
    >>> torch.equal(back.W_Q, model.W_Q)                                # doctest: +SKIP
    True
    """
    from possym.model.hf import from_hf

    if hasattr(model, "original_model"):  # a TransformerBridge, over a Hugging Face model
        hf = model.original_model
        if type(hf).__name__ != "GPTJForCausalLM":
            raise PossymError(f"this TransformerBridge wraps a {type(hf).__name__}; possym's model is a GPT-J, so "
                              "only a bridge of a GPTJForCausalLM comes back")
        back = from_hf(hf)
    elif type(model).__name__ == "HookedTransformer":
        back = _from_hooked(model)
    else:
        raise PossymError(f"from_transformer_lens takes a HookedTransformer or a TransformerBridge, not "
                          f"{type(model).__name__}")
    _check_same_logits(model, back)
    return back


def _check_same_logits(theirs: Any, back: GPTJ) -> None:
    param = next(back.parameters())
    n = min(16, getattr(theirs.cfg, "n_ctx", 16) or 16)
    tokens = torch.randint(0, back.cfg.d_vocab, (2, n), generator=torch.Generator().manual_seed(0)).to(param.device)
    with torch.no_grad():
        want, got = theirs(tokens), back(tokens)
    scale = max(1.0, float(want.abs().max()))
    err = float((got - want).abs().max())
    if not err <= LOGIT_RTOL * scale:
        raise PossymError(
            f"the possym GPT-J of this {type(theirs).__name__} gives other logits (max |Δ| {err:.2g} of "
            f"{scale:.2g}): its weights are not a plain GPT-J's (processed, e.g. folded LayerNorms or centred "
            "weights, or an architecture option possym lacks), so it is refused rather than returned wrong"
        )


def to_transformer_bridge(model: GPTJ, tokenizer: Any = None) -> TransformerBridge:
    """A ``TransformerBridge`` (transformer-lens 3.x or 4.x) over the exact Hugging Face export of ``model``.

    The bridge runs HF's GPT-J with TransformerLens's hook names (``hook_q``, ``hook_pattern``,
    ``hook_z``, ``hook_resid_post``, ...); GPT-J's bridge rotates inside HF's attention, so it has no
    ``hook_rot_q``/``hook_rot_k`` (:func:`possym.head_scores` rotates its ``hook_q``/``hook_k`` itself).
    Raises :class:`~possym.errors.PossymError` where the export does (p-RoPE, NoPE, ``nope_from_layer``,
    ``mlp=False``); :func:`to_hooked_transformer` converts those it can.
    """
    try:
        from transformer_lens.model_bridge.sources import build_bridge_from_module
    except ImportError as e:
        raise PossymError('TransformerLens (3.9 or later) is not installed: pip install "possym[tl]"') from e
    try:
        hf = to_hf(model)
    except ValueError as e:
        raise PossymError(f"no TransformerBridge of this model: {e}") from e
    # a copy: TransformerLens sets up the tokenizer it is given in place (bos and eos tokens)
    tokenizer = None if tokenizer is None else copy.deepcopy(tokenizer)
    bridge = build_bridge_from_module(hf, "GPTJForCausalLM", hf_config=hf.config, tokenizer=tokenizer)
    # possym's tasks have no BOS token: left on, TransformerLens would glue its bos string to the first word
    # of every text (``"<pad>3 4"``), which the task's word-level tokenizer reads as one unknown word
    bridge.cfg.default_prepend_bos = False
    return bridge.eval()
