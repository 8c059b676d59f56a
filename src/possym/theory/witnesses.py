"""Remark 3.1 witnessed (App. F.2.3): swap pairs that no purely symbolic / purely positional head can tell apart.

**Index is not computable by a purely symbolic head.** In a one-layer model whose head is symbolic (NoPE is the
canonical case: the logit of key j is a function of (x_n, x_j) alone), the last query's attention output is a
function of the *multiset* of keys, so the model's output there is invariant under permuting positions
1..n-1 (Paper B, Lemma 1) -- whatever the weights, the LayerNorm and the MLP, which act per position. Swap the
answer letter of a 1-hop number-task input with another target letter: Index's answer changes, the model's
output cannot. (With two or more layers the causal mask leaks position, so the argument is one-layer only.)

**Retrieval is not computable by a purely positional head** in the setting of Paper B's Theorem 4, which is
the one T_Retrieval itself uses: VAL = identity on one-hot embeddings, F(x, a) = a, a dot-product readout.
A positional head's weights w_j depend on the query and the positions only (here: every key equal), so the
output logit of token c is W(c) = sum_{j: sigma_j = c} w_j. Swap the matching target with another target:
Retrieval's answer stays, but W(match) and W(other) trade places, so the head is wrong on at least one of
the two inputs (on both when the two weights tie).

**Scope.** The Retrieval half needs Theorem 4's F. A positional head whose weights are all positive, followed
by an activation that reads the query, F(x, a)_c = a_c [left(c) = the looked-up letter of x] for a pair query
(and F(x, a) = onehot(x) for a (letter, int) query), computes Retrieval exactly on every proper input: the
attention output lists which tokens are present, and properness makes the present token with the looked-up
left letter unique. :func:`query_reading_positional_retrieval` is that head; the Index half has no such
escape, because a symbolic layer's output is permutation-invariant for every F.

Example:
    >>> import numpy as np
    >>> from possym.tasks import task_config
    >>> pair = index_swap_pair(task_config("number"), np.random.default_rng(0))
    >>> pair.expected_a != pair.expected_b
    True
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from possym.config import ModelConfig
from possym.model.gptj import GPTJ
from possym.model.rope import rope_cos_sin
from possym.tasks import generate, get_task
from possym.tasks.window import WindowTaskConfig
from possym.theory.functions import RetrievalSymbols


@dataclass(frozen=True)
class SwapPair:
    """Two inputs (token ids) that differ by swapping two positions, and the function's answer at the last
    position of each (token ids)."""

    function: str
    tokens_a: np.ndarray
    tokens_b: np.ndarray
    expected_a: int
    expected_b: int
    swapped: tuple[int, int]


def _one_hop(task: WindowTaskConfig, rng: np.random.Generator, tries: int = 64):
    one_hop = dataclasses.replace(task, min_hops=1, max_hops=1)
    samples = generate(one_hop, tries, rng)
    for i in range(tries):
        answer_pos = int(samples.path[i, 1])
        toks = samples.tokens[i]
        others = [p for p in range(task.n_target) if toks[p] != toks[answer_pos]]
        if others:
            return toks, answer_pos, others[0]
    raise ValueError("no 1-hop instance with two different targets; use a larger alphabet")


def index_swap_pair(task: WindowTaskConfig, rng: np.random.Generator) -> SwapPair:
    """A 1-hop number-task input and the same input with its answer letter swapped with another target letter.

    Index at the query (one hop) is the answer letter, so the two answers differ.
    """
    if get_task(task.name).mechanism != "positional":
        raise ValueError(f"the Index swap pair is built from a task whose hop reads by position (the number task), "
                         f"not {task.name!r}")
    toks, p, q = _one_hop(task, rng)
    swapped = toks.copy()
    swapped[[p, q]] = swapped[[q, p]]
    return SwapPair("index", toks.copy(), swapped, int(toks[p]), int(swapped[p]), (p, q))


def retrieval_swap_pair(task: WindowTaskConfig, rng: np.random.Generator) -> SwapPair:
    """A 1-hop letter-task input and the same input with its answer target swapped with another target.

    The query's right letter names the answer's left letter, wherever it sits: both answers are the same token.
    """
    if get_task(task.name).mechanism != "symbolic":
        raise ValueError(f"the Retrieval swap pair is built from a task whose hop reads by content (the letter "
                         f"task), not {task.name!r}")
    toks, p, q = _one_hop(task, rng)
    swapped = toks.copy()
    swapped[[p, q]] = swapped[[q, p]]
    return SwapPair("retrieval", toks.copy(), swapped, int(toks[p]), int(toks[p]), (p, q))


# ---- symbolic heads on the Index pair ---------------------------------------------------------------


def random_nope_model(d_vocab: int, generator: torch.Generator, d_model: int = 32) -> GPTJ:
    """A one-layer GPT-J with NoPE (``rotary_dim=0``) and random weights: a purely symbolic head, plus the
    block's LayerNorm and MLP. Weights are N(0, 1) (not the tiny init) so that attention is far from uniform."""
    cfg = ModelConfig(
        n_layers=1, d_model=d_model, n_heads=1, d_mlp=4 * d_model, rotary_dim=0, dropout=0.0, d_vocab=d_vocab
    )
    model = GPTJ(cfg, generator).double().eval()
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0.0, 1.0, generator=generator)
    return model


@dataclass(frozen=True)
class HeadTrial:
    """Outcome of one head on a swap pair: its answers (token ids), whether each is right, and the largest
    difference between its last-position logits on the two inputs (or attention weights, for positional)."""

    answer_a: int
    answer_b: int
    right_a: bool
    right_b: bool
    max_difference: float


def _readout_head(qkv: Tensor, rotary_dim: int) -> GPTJ:
    """A one-layer, one-head GPT-J over one-hot embeddings with the given [W_Q; W_K; W_V] rows,
    W_O = I and a dot-product unembedding: the head's own computation, nothing learned around it."""
    d = qkv.shape[1]
    cfg = ModelConfig(n_layers=1, d_model=d, n_heads=1, d_mlp=1, rotary_dim=rotary_dim, dropout=0.0, d_vocab=d)
    model = GPTJ(cfg, torch.Generator().manual_seed(0)).double().eval()
    attn = model.block(0).attn
    with torch.no_grad():
        model.embed.weight.copy_(torch.eye(d))
        attn.qkv.weight.copy_(qkv)
        attn.out.weight.copy_(torch.eye(d))
        model.unembed.weight.copy_(torch.eye(d))
        model.unembed.bias.zero_()
    return model


def pointed_symbolic_head(d_vocab: int, token: int, beta: float = 50.0) -> GPTJ:
    """A NoPE head that looks for one token, wherever it is: every query (1, 0, ..), key e_0 for ``token``
    and 0 otherwise, W_V = W_O = I, dot-product readout (run it with :func:`attention_output`)."""
    d = d_vocab
    qkv = torch.zeros(3 * d, d, dtype=torch.float64)
    qkv[0] = beta * d**0.5
    qkv[d, token] = 1.0
    qkv[2 * d :] = torch.eye(d, dtype=torch.float64)
    return _readout_head(qkv, rotary_dim=0)


def symbolic_heads_on_swap(
    pair: SwapPair, n_heads: int, generator: torch.Generator, pointed: bool = False
) -> list[HeadTrial]:
    """Run ``n_heads`` random one-layer NoPE models (full GPT-J block) on both inputs of ``pair``, or
    (``pointed``) one NoPE head looking for input a's answer token, attention only."""
    d_vocab = int(max(pair.tokens_a.max(), pair.tokens_b.max())) + 1
    both = torch.as_tensor(np.stack([pair.tokens_a, pair.tokens_b]))
    out = []
    for _ in range(1 if pointed else n_heads):
        if pointed:
            model = pointed_symbolic_head(d_vocab, pair.expected_a)
            a, _ = attention_output(model, both)
            with torch.no_grad():
                logits = model.unembed(a[:, -1])
        else:
            model = random_nope_model(d_vocab, generator)
            with torch.no_grad():
                logits = model(both)[:, -1]
        ans_a, ans_b = (int(x) for x in logits.argmax(-1))
        out.append(
            HeadTrial(
                ans_a,
                ans_b,
                ans_a == pair.expected_a,
                ans_b == pair.expected_b,
                float((logits[0] - logits[1]).abs().max()),
            )
        )
    return out


# ---- positional heads on the Retrieval pair ---------------------------------------------------------


def random_positional_head(d_vocab: int, generator: torch.Generator, beta: float = 4.0) -> GPTJ:
    """A one-layer, one-head RoPE model on one-hot embeddings whose keys are all equal (W_K E(sigma) = k0),
    hence purely positional; random W_Q and k0 over every RoPE plane, W_V = W_O = I, dot-product readout."""
    d = d_vocab
    w_q = torch.randn(d, d, generator=generator, dtype=torch.float64)
    k0 = torch.randn(d, 1, generator=generator, dtype=torch.float64)
    qkv = torch.cat([beta * w_q, k0.expand(d, d), torch.eye(d, dtype=torch.float64)])
    return _readout_head(qkv, rotary_dim=d - d % 2)


def pointed_positional_head(d_vocab: int, distance: int, beta: float = 50.0) -> GPTJ:
    """A positional head that looks ``distance`` tokens back, whatever the tokens (T_Index's mechanism with
    one fixed offset): one RoPE plane at 1 rad per position, every key v, every query rho(-distance) v,
    W_V = W_O = I, dot-product readout."""
    d = d_vocab
    qkv = torch.zeros(3 * d, d, dtype=torch.float64)
    qkv[0] = -np.sin(-distance) * beta * d**0.5  # rho(-distance) (0, 1) = (-sin(-distance), cos(-distance))
    qkv[1] = np.cos(-distance) * beta * d**0.5
    qkv[d + 1] = 1.0  # every key is v = (0, 1)
    qkv[2 * d :] = torch.eye(d, dtype=torch.float64)
    return _readout_head(qkv, rotary_dim=2)


def attention_output(model: GPTJ, tokens: Tensor) -> tuple[Tensor, Tensor]:
    """One block's attention only (F(x, a) = a): the attention output [batch, pos, d] and the last query's
    weights [batch, key_pos], through the model's own embed and Attention module."""
    kept: dict[str, Tensor] = {}
    n = tokens.shape[-1]
    cos, sin = rope_cos_sin(torch.arange(n), model.cfg.rot_dim, model.cfg.rope_base, torch.float64)
    with torch.no_grad(), model.hooks({"blocks.0.attn.hook_pattern": lambda p, hook: kept.__setitem__("w", p)}):
        a = model.block(0).attn(model.embed(tokens), cos, sin)[0]
    return a, kept["w"][:, 0, -1, :]


def positional_heads_on_swap(
    pair: SwapPair, d_vocab: int, n_heads: int, generator: torch.Generator, pointed: bool = False
) -> list[HeadTrial]:
    """Run ``n_heads`` random positional heads (F(x, a) = a, one-hot readout) on both inputs of ``pair``, or
    (``pointed``) one head looking exactly at input a's answer; ``max_difference`` is the largest difference
    between the last query's attention weights on the two inputs."""
    both = torch.as_tensor(np.stack([pair.tokens_a, pair.tokens_b]))
    out = []
    for _ in range(1 if pointed else n_heads):
        distance = len(pair.tokens_a) - 1 - pair.swapped[0]
        model = pointed_positional_head(d_vocab, distance) if pointed else random_positional_head(d_vocab, generator)
        a, w = attention_output(model, both)
        logits = model.unembed(a[:, -1])
        ans_a, ans_b = (int(x) for x in logits.argmax(-1))
        # a tie between the two swapped tokens counts as wrong on both
        tie = [bool((row == row.max()).sum() > 1) for row in logits]
        out.append(
            HeadTrial(
                ans_a,
                ans_b,
                ans_a == pair.expected_a and not tie[0],
                ans_b == pair.expected_b and not tie[1],
                float((w[0] - w[1]).abs().max()),
            )
        )
    return out


# ---- scope: a positional head with a query-reading activation computes Retrieval ---------------------


def query_reading_positional_retrieval(
    sym: RetrievalSymbols, ids: np.ndarray, generator: torch.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """A random positional head (all keys equal, W_V = I) followed by the query-reading activation of the
    module docstring, at every position: returns (outputs [batch, pos], decoding gaps [batch, pos])."""
    model = random_positional_head(sym.size, generator, beta=1.0)
    tokens = torch.as_tensor(np.asarray(ids))
    a = attention_output(model, tokens)[0].numpy()  # [batch, pos, |Sigma|]: the weight each token receives
    ids = np.asarray(ids)
    looked_up = sym.right(ids)  # a pair's right letter
    reads = sym.left(np.arange(sym.size))[None, None, :] == looked_up[..., None]
    logits = np.where(sym.is_pair(ids)[..., None], np.where(reads, a, 0.0), 0.0)
    own = np.eye(sym.size)[ids]
    logits = np.where(sym.is_pair(ids)[..., None], logits, own)  # a (letter, int) query outputs itself
    outputs = logits.argmax(-1)
    top2 = np.sort(logits, axis=-1)[..., -2:]
    return outputs, top2[..., 1] - top2[..., 0]
