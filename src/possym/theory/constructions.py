"""T_Index and T_Retrieval of Theorem 3.1 (App. F.2) as real weights, run through the project's attention code.

One layer, one head, one RoPE plane at angle theta, one-hot embeddings, a dot-product unembedding; v = (0, 1),
rho(a) the rotation ``apply_rope`` applies. **T_Index**, E(sigma) = (onehot(sigma), 1):
    W_Q E(sigma) = v for a letter, rho(theta)^{-sigma} v for the integer sigma;  W_K E(sigma) = v;
    L(n, j) = cos((n - j - sigma_n) theta);  W_V = diag(2 on letters, 0 elsewhere);  F(x, a) = x + a
    (the maximum, at j = n - sigma, is unique iff t theta is no multiple of 2 pi for t = 1..n-1: "theta not in Q").
**T_Retrieval**, Sigma = ALPH x (ALPH u INT), omega = 2 pi / |ALPH|:
    W_Q E(sigma) = rho(omega)^{-phi(sigma^R)} v for (letter, letter), rho(omega)^{-phi(sigma^L)} v else;
    W_K E(sigma) = rho(omega)^{-phi(sigma^L)} v;  L(n, j) = cos((phi(sigma_j^L) - phi(q_n)) omega + (n - j) theta);
    W_V = I;  F(x, a) = a  (a matching key wins while (n-1) theta < omega / 2).
:func:`run_construction` runs them through a one-layer :class:`~possym.model.gptj.GPTJ`'s own ``embed``,
:class:`~possym.model.gptj.Attention` and ``unembed`` (no LayerNorm, no MLP); average-hard attention (Lemma
F.1) is a hook on ``hook_pattern``, uniform on the maximisers within 1e-12. How, and the verification:
docs/theory.md, section 1.

Example:
    >>> from possym.theory.functions import IndexSymbols
    >>> c = IndexConstruction(IndexSymbols(n_letters=3, n_ints=3), theta=1.0)
    >>> ids = c.symbols.encode(["a", "b", "c", "2"])[None]
    >>> out = run_construction(c, ids, beta=None)
    >>> c.symbols.decode(out.logits.argmax(-1)[0].numpy())
    ['a', 'b', 'c', 'b']"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from possym.config import ModelConfig
from possym.model.gptj import GPTJ
from possym.model.rope import rope_cos_sin
from possym.theory.functions import IndexSymbols, RetrievalSymbols, omega

HARD_TIE_TOL = 1e-12
V = np.array([0.0, 1.0])


def rotation(angle: float | np.ndarray) -> np.ndarray:
    """rho(angle): [..., 2, 2], counter-clockwise, the rotation ``apply_rope`` applies to (x0, x1)."""
    c, s = np.cos(angle), np.sin(angle)
    return np.stack([np.stack([c, -s], -1), np.stack([s, c], -1)], -2)


@dataclass(frozen=True)
class IndexConstruction:
    """T_Index: query pre-rotated by -sigma, all keys equal to v, F(x, a) = x + a (App. F.2.1)."""

    symbols: IndexSymbols
    theta: float
    alpha: float = 2.0

    name = "index"

    @property
    def d_model(self) -> int:
        return self.symbols.size + 1

    def embedding(self) -> np.ndarray:
        """E(sigma) = (onehot(sigma), 1): [|Sigma|, d]."""
        return np.concatenate([np.eye(self.symbols.size), np.ones((self.symbols.size, 1))], axis=1)

    def W_Q(self) -> np.ndarray:
        """[2, d]: column sigma is v for a letter and rho(theta)^{-sigma} v for the integer sigma; bias column 0."""
        sigma = self.symbols.offset(np.arange(self.symbols.size))
        cols = rotation(-sigma * self.theta) @ V  # a letter has offset 0: rho(0) v = v
        return np.concatenate([cols.T, np.zeros((2, 1))], axis=1)

    def W_K(self) -> np.ndarray:
        """[2, d]: every key is v, carried by the bias coordinate."""
        w = np.zeros((2, self.d_model))
        w[:, -1] = V
        return w

    def W_V(self) -> np.ndarray:
        """[d, d]: alpha on the letter coordinates, 0 on the integers and the bias."""
        diag = np.zeros(self.d_model)
        diag[: self.symbols.n_letters] = self.alpha
        return np.diag(diag)

    def W_U(self) -> np.ndarray:
        """[d, |Sigma|]: the output logit of sigma is the residual's coordinate sigma, (onehot(sigma), 0)."""
        return np.eye(self.d_model, self.symbols.size)

    @property
    def keeps_residual(self) -> bool:
        return True

    def logit(self, ids: np.ndarray) -> np.ndarray:
        """Closed form of the attention logits of every query over every key: [batch, pos, pos] (paper F.2.1)."""
        ids = np.asarray(ids)
        n = ids.shape[-1]
        sigma = self.symbols.offset(ids)[..., :, None]
        diff = np.arange(n)[:, None] - np.arange(n)[None, :]
        out = np.cos((diff - sigma) * self.theta)
        return np.where(diff >= 0, out, -np.inf)


@dataclass(frozen=True)
class RetrievalConstruction:
    """T_Retrieval: queries and keys rotated by letter, RoPE angle theta, F(x, a) = a (App. F.2.2)."""

    symbols: RetrievalSymbols
    theta: float

    name = "retrieval"

    @property
    def omega(self) -> float:
        return omega(self.symbols.n_letters)

    @property
    def d_model(self) -> int:
        return self.symbols.size

    def embedding(self) -> np.ndarray:
        return np.eye(self.symbols.size)

    def query_letter(self, ids: np.ndarray) -> np.ndarray:
        """phi(q) - 1: the right letter of a (letter, letter) token, the left letter otherwise."""
        s = self.symbols
        return np.where(s.is_pair(ids), s.right(ids), s.left(ids))

    def W_Q(self) -> np.ndarray:
        ids = np.arange(self.symbols.size)
        return (rotation(-(self.query_letter(ids) + 1) * self.omega) @ V).T

    def W_K(self) -> np.ndarray:
        ids = np.arange(self.symbols.size)
        return (rotation(-(self.symbols.left(ids) + 1) * self.omega) @ V).T

    def W_V(self) -> np.ndarray:
        return np.eye(self.d_model)

    def W_U(self) -> np.ndarray:
        return np.eye(self.d_model)

    @property
    def keeps_residual(self) -> bool:
        return False

    def logit(self, ids: np.ndarray) -> np.ndarray:
        """Closed form of the attention logits: [batch, pos, pos] (paper F.2.2)."""
        ids = np.asarray(ids)
        n = ids.shape[-1]
        d = self.symbols.left(ids)[..., None, :] - self.query_letter(ids)[..., :, None]
        diff = np.arange(n)[:, None] - np.arange(n)[None, :]
        out = np.cos(d * self.omega + diff * self.theta)
        return np.where(diff >= 0, out, -np.inf)


Construction = IndexConstruction | RetrievalConstruction


def construction_model(c: Construction, beta: float = 1.0, dtype: torch.dtype = torch.float64) -> GPTJ:
    """A one-layer GPTJ whose embed / attention / unembed hold ``c``'s weights, scores = beta * L.

    The LayerNorms and the MLP exist (GPTJ always has them) but :func:`run_construction` does not call them.
    """
    d = c.d_model
    cfg = ModelConfig(n_layers=1, d_model=d, n_heads=1, d_mlp=1, rotary_dim=2, dropout=0.0, d_vocab=c.symbols.size)
    model = GPTJ(cfg, torch.Generator().manual_seed(0)).to(dtype).eval()
    qkv = np.zeros((3 * d, d))
    qkv[0:2] = beta * math.sqrt(d) * c.W_Q()  # the module divides the scores by sqrt(d_head)
    qkv[d : d + 2] = c.W_K()
    qkv[2 * d :] = c.W_V()
    attn = model.block(0).attn
    with torch.no_grad():
        model.embed.weight.copy_(torch.as_tensor(c.embedding()))
        attn.qkv.weight.copy_(torch.as_tensor(qkv))
        attn.out.weight.copy_(torch.eye(d, dtype=dtype))  # W_O = I
        model.unembed.weight.copy_(torch.as_tensor(c.W_U().T))
        model.unembed.bias.zero_()
    return model


@dataclass(frozen=True)
class ConstructionOutput:
    """logits: [batch, pos, |Sigma|] output logits; scores: [batch, pos, pos] attention logits L (beta divided
    out; -inf above the diagonal); pattern: [batch, pos, pos] the attention weights that were used."""

    logits: Tensor
    scores: Tensor
    pattern: Tensor


def average_hard_pattern(scores: Tensor, tol: float = HARD_TIE_TOL) -> Tensor:
    """Uniform weights on the maximisers of each query row (Lemma F.1's average-hard attention).

    scores: [..., query_pos, key_pos] with -inf on masked keys -> weights of the same shape.
    """
    top = scores.amax(dim=-1, keepdim=True)
    chosen = (scores >= top - tol * top.abs().clamp(min=1.0)).to(scores.dtype)
    return chosen / chosen.sum(dim=-1, keepdim=True)


def run_construction(
    c: Construction, ids: np.ndarray | Tensor, beta: float | None, model: GPTJ | None = None
) -> ConstructionOutput:
    """Run ``c`` on ``ids`` [batch, pos]: softmax attention at inverse temperature ``beta``, or average-hard
    attention when ``beta`` is None. Pass ``model`` (from :func:`construction_model` at the same beta) to reuse it.
    """
    scale = 1.0 if beta is None else float(beta)
    if model is None:
        model = construction_model(c, scale)
    dtype = model.embed.weight.dtype
    tokens = torch.as_tensor(np.asarray(ids), dtype=torch.long)
    n = tokens.shape[-1]
    angles = torch.arange(n, dtype=torch.float64) * c.theta  # RoPE angle theta as positions p * theta
    cos, sin = rope_cos_sin(angles, rot_dim=2, base=model.cfg.rope_base, dtype=dtype)
    kept: dict[str, Tensor] = {}

    def keep_scores(t: Tensor, hook: object) -> None:
        kept["scores"] = t.detach()

    def pattern(t: Tensor, hook: object) -> Tensor:
        p = average_hard_pattern(kept["scores"]) if beta is None else t
        kept["pattern"] = p.detach()
        return p

    hooks = {"blocks.0.attn.hook_attn_scores": keep_scores, "blocks.0.attn.hook_pattern": pattern}
    with torch.no_grad(), model.hooks(hooks):
        x = model.embed(tokens)
        a = model.block(0).attn(x, cos, sin)[0]
        logits = model.unembed(x + a if c.keeps_residual else a)
    return ConstructionOutput(logits=logits, scores=kept["scores"][:, 0] / scale, pattern=kept["pattern"][:, 0])
