"""Tiny models for the score tests: random ones, and one trained for a few Adam steps (imported by the tests)."""

from __future__ import annotations

import torch

from possym.config import ModelConfig
from possym.model.gptj import GPTJ

VOCAB = 12


def random_model(n_heads: int = 1, rotary_dim: int | None = None, n_layers: int = 2, seed: int = 0) -> GPTJ:
    """A float64 GPT-J whose large init (0.5) gives sharp, far-from-uniform attention."""
    cfg = ModelConfig(
        n_layers=n_layers, d_model=16, n_heads=n_heads, d_mlp=32, rotary_dim=rotary_dim, d_vocab=VOCAB, init_range=0.5
    )
    return GPTJ(cfg, torch.Generator().manual_seed(seed)).double().eval()


def random_tokens(batch: int = 6, pos: int = 10, seed: int = 1) -> torch.Tensor:
    return torch.randint(0, VOCAB, (batch, pos), generator=torch.Generator().manual_seed(seed))


def train_tiny_model() -> GPTJ:
    """A 2-layer, 2-head model after 40 Adam steps on a 1-hop 'count back' task (the last token is an offset)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a tiny model trains fastest on one thread, and the machine is shared
    cfg = ModelConfig(n_layers=2, d_model=32, n_heads=2, d_mlp=64, d_vocab=VOCAB, dropout=0.0)
    model = GPTJ(cfg, torch.Generator().manual_seed(0))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    gen = torch.Generator().manual_seed(2)
    for _ in range(40):
        tokens = torch.randint(4, VOCAB, (64, 10), generator=gen)
        tokens[:, -1] = torch.randint(1, 4, (64,), generator=gen)  # the offset 1..3
        target = tokens[torch.arange(64), 9 - tokens[:, -1]]
        loss = torch.nn.functional.cross_entropy(model(tokens)[:, -1], target)
        opt.zero_grad()
        loss.backward()
        opt.step()
    torch.set_num_threads(threads)
    return model.double().eval()
