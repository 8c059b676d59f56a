"""A possym GPT-J as a TransformerLens ``HookedTransformer``, with exactly its weights and its RoPE.

The config is the checkpoint's own, stated in TransformerLens's words:

- ``positional_embedding_type="rotary"``, ``rotary_dim``, ``rotary_base`` and
  ``rotary_adjacent_pairs=True`` (GPT-J pairs dims 2k, 2k+1; TransformerLens's default is NeoX's
  halves, which would scramble every head);
- ``parallel_attn_mlp=True`` with ``ln2`` tied to ``ln1`` (GPT-J's one LayerNorm feeds both branches;
  an attention-only model has neither);
- ``act_fn`` the run's GELU (``"gelu"`` exact, ``"gelu_new"`` tanh); ``attn_only`` for ``mlp=False``;
- ``normalization_type="LN"``, untied ``W_U`` with the bias ``b_U``, zero attention biases.

The weights are not processed (no LayerNorm folding, no centring), so every activation, not only
the logits, equals possym's. Weight mapping (possym -> TransformerLens): ``blocks[l].attn.W_Q`` etc.
are already TransformerLens-shaped views; ``mlp.0`` -> ``W_in``/``b_in``, ``mlp.2`` -> ``W_out``/``b_out``,
``embed`` -> ``W_E``, ``unembed`` -> ``W_U``/``b_U``.

The plane options of :class:`~possym.config.ModelConfig`:

- ``freq_gate`` converts exactly: a gated plane's q and k are zero, which is the same as zero
  columns of ``W_Q`` and ``W_K`` (the attention has no biases), as the HF export does. Only
  ``hook_q``/``hook_k`` differ: TransformerLens's show the zeros, possym's the ungated projections.
- ``p_rope`` converts exactly: its kept planes are the fastest ones, dims 0..2·kept−1, at RoPE's
  own frequencies base^(−2k/rot_dim). TransformerLens rotates ``rotary_dim`` dims at
  base'^(−2k/rotary_dim), so ``rotary_dim = 2·kept`` and ``rotary_base = base^(2·kept/rot_dim)``
  give the same frequencies; the dims past them pass through unrotated, as NoPE planes do.
- ``nope_from_layer`` is refused: TransformerLens rotates every layer alike.

Rotary tables. TransformerLens builds its sin/cos tables in the model's dtype from float32 angles
(for a float32 model), whose error grows with the position (~1e-4 rad at position 5,000), and only
for the first 2,048 positions, rebuilding them the same way for a longer input. The conversion writes
possym's exact tables (float64 angles, cast at the end) for all ``n_ctx`` positions, so no input
shorter than ``n_ctx`` (default 8,192, past the paper's +5,000 length grid) ever sees TransformerLens's own.

Versions. TransformerLens 4.0 removed ``HookedTransformer`` (its successor, ``TransformerBridge``,
wraps a Hugging Face model, and its native models have neither a parallel block nor an unembedding
bias), so :func:`to_hooked_transformer` needs transformer-lens 3.x (``pip install "possym[tl3]"``).
:func:`to_transformer_bridge` runs on 3.9 and 4.x (``pip install "possym[tl]"`` installs 4.x): a
``TransformerBridge`` over the exact Hugging Face export (:func:`possym.model.hf.to_hf`), with that
export's limits (no p-RoPE, no NoPE layer, no attention-only model).

Example:
    >>> import torch
    >>> from possym.config import ModelConfig
    >>> model = GPTJ(ModelConfig(n_layers=2, d_model=16, d_mlp=32, d_vocab=10), torch.Generator().manual_seed(0))
    >>> ht = to_hooked_transformer(model.eval())                      # doctest: +SKIP
    >>> tokens = torch.tensor([[1, 2, 3]])
    >>> torch.allclose(ht(tokens), model(tokens), atol=1e-5)          # doctest: +SKIP
    True
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Any, cast

import torch
from torch import Tensor

from possym.config import ModelConfig
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
    return ht.eval()


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
    return build_bridge_from_module(hf, "GPTJForCausalLM", hf_config=hf.config, tokenizer=tokenizer).eval()
