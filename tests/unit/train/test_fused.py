"""The hand-written training step against the module's own autograd (the reference), in float64."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from possym.config import ModelConfig
from possym.model.gptj import GPTJ
from possym.tasks import generate, task_config
from possym.train.fused import (
    DropoutMasks,
    cxx_compiler,
    draw_bits,
    draw_masks,
    last_token_logits,
    loss_and_grads,
)
from possym.train.loop import evaluate

VARIANTS = {
    "paper-like": {},
    "two heads": {"n_heads": 2},
    "partial rotary": {"rotary_dim": 4},
    "p-RoPE": {"p_rope": 0.5},
    "NoPE from layer 1": {"nope_from_layer": 1},
    "gated planes, two heads": {"n_heads": 2, "freq_gate": "0@2-3;1@1"},
    "exact GELU": {"activation": "gelu"},
    "attention-only": {"mlp": False},
}


def _model(dropout: float, **kw) -> GPTJ:
    cfg = ModelConfig(n_layers=2, d_model=16, d_mlp=32, d_vocab=11, dropout=dropout, **kw)
    return GPTJ(cfg, torch.Generator().manual_seed(0)).double()


def _batch(seed: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, 11, (5, 7), generator=g), torch.randint(0, 11, (5,), generator=g)


def _reference(model: GPTJ, tokens, answers, masks: DropoutMasks | None = None):
    """Loss and grads by autograd through the module; ``masks`` replace its dropout calls, in order."""
    model.zero_grad(set_to_none=True)
    model.train(masks is not None)
    # The module calls dropout at every site, even at rate 0 (a None mask) and never at an absent MLP's.
    mlp = model.cfg.mlp
    queue = [] if masks is None else [masks.embed] + [m for lay in masks.layers for m in (lay if mlp else lay[:2])]
    real = F.dropout

    def fake(x, p=0.5, training=True, inplace=False):
        if not training:
            return real(x, p, training, inplace)
        mask = queue.pop(0)
        return x if mask is None else x * mask

    # A pattern hook sends attention through the explicit softmax path, whose dropout is F.dropout.
    read = {f"blocks.{i}.attn.hook_pattern": lambda t, hook: None for i in range(model.cfg.n_layers)}
    with pytest.MonkeyPatch.context() as mp, model.hooks(read):
        mp.setattr(torch.nn.functional, "dropout", fake)
        loss = F.cross_entropy(model(tokens)[:, -1], answers)
    loss.backward()
    assert not queue, "every mask must be used exactly once"
    return loss.detach(), {n: p.grad.clone() for n, p in model.named_parameters()}


def _fused(model: GPTJ, tokens, answers, masks, precision="fp32", compiled=False):
    model.zero_grad(set_to_none=True)
    loss = loss_and_grads(model, tokens, answers, masks, precision, compiled)
    return loss, {n: p.grad.clone() for n, p in model.named_parameters()}


@pytest.mark.parametrize("variant", VARIANTS)
def test_equals_autograd_without_dropout(variant):
    model = _model(0.0, **VARIANTS[variant])
    tokens, answers = _batch()
    want_loss, want = _reference(model, tokens, answers)
    got_loss, got = _fused(model, tokens, answers, draw_masks(model.cfg, 5, 7, torch.Generator()))
    torch.testing.assert_close(got_loss, want_loss, rtol=0, atol=1e-12)
    for name in want:
        torch.testing.assert_close(got[name], want[name], rtol=0, atol=1e-10, msg=name)


WITH_DROPOUT = {
    **{v: VARIANTS[v] for v in ("paper-like", "two heads", "p-RoPE", "exact GELU", "attention-only")},
    # the authors' effective recipe: no embedding dropout, exact GELU (attention and residual 0.3 here)
    "authors' recipe": {"embd_dropout": 0.0, "activation": "gelu"},
    "embedding dropout of its own": {"embd_dropout": 0.5},
}


@pytest.mark.parametrize("variant", WITH_DROPOUT)
def test_equals_autograd_with_the_same_dropout_masks(variant):
    model = _model(0.3, **WITH_DROPOUT[variant])
    tokens, answers = _batch()
    bits = draw_bits(model.cfg, 5, 7, torch.Generator().manual_seed(4))
    masks = bits.masks(torch.float64)  # like the model, so the reference multiplies the very same numbers
    want_loss, want = _reference(model, tokens, answers, masks)
    got_loss, got = _fused(model, tokens, answers, masks)
    torch.testing.assert_close(got_loss, want_loss, rtol=0, atol=1e-12)
    for name in want:
        torch.testing.assert_close(got[name], want[name], rtol=0, atol=1e-10, msg=name)
    # the raw bits (the training loop's form, thresholded inside the step) give the same bits out
    from_bits = _fused(model, tokens, answers, bits)
    assert torch.equal(from_bits[0], got_loss) and all(torch.equal(from_bits[1][n], got[n]) for n in got)
    # and the masks matter: without them the gradients differ
    _, plain = _reference(model, tokens, answers)
    assert not torch.allclose(plain["unembed.weight"], want["unembed.weight"])


@pytest.mark.skipif(cxx_compiler() is None, reason="torch.compile (Inductor) needs a C++ compiler")
@pytest.mark.parametrize(
    "variant",
    [VARIANTS["gated planes, two heads"], {"embd_dropout": 0.0, "activation": "gelu"}],
    ids=["gated planes, two heads", "authors' recipe"],
)
def test_compiled_step_equals_autograd(variant):
    """Inductor's fused kernels, with the real-valued rotation, against the module's autograd in
    float64, dropout (thresholded inside the graph) and gated planes included; and the authors'
    recipe (exact GELU, no embedding dropout)."""
    model = _model(0.3, **variant)
    tokens, answers = _batch()
    bits = draw_bits(model.cfg, 5, 7, torch.Generator().manual_seed(4))
    want_loss, want = _reference(model, tokens, answers, bits.masks(torch.float64))
    for _ in range(2):  # the second call reuses the compiled kernels
        got_loss, got = _fused(model, tokens, answers, bits, compiled=True)
        torch.testing.assert_close(got_loss, want_loss, rtol=0, atol=1e-12)
        for name in want:
            torch.testing.assert_close(got[name], want[name], rtol=0, atol=1e-10, msg=name)


@pytest.mark.skipif(cxx_compiler() is None, reason="torch.compile (Inductor) needs a C++ compiler")
@pytest.mark.long
def test_compiled_step_is_bitwise_repeatable_on_two_threads():
    """Same inputs, same bits, with Inductor's kernels split over 2 threads: no atomic adds (the
    embedding gradient once was a scatter-add, whose float sum changed from call to call)."""
    cfg = ModelConfig(n_layers=2, d_model=128, d_mlp=512, d_vocab=137, dropout=0.1)
    model = GPTJ(cfg, torch.Generator().manual_seed(0))
    tokens = torch.randint(0, 137, (64, 17), generator=torch.Generator().manual_seed(1))
    answers = torch.randint(0, 137, (64,), generator=torch.Generator().manual_seed(2))
    masks = draw_bits(cfg, 64, 17, torch.Generator().manual_seed(3))
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        runs = [_fused(model, tokens, answers, masks, "bf16", compiled=True)[1] for _ in range(6)]
    finally:
        torch.set_num_threads(threads)
    for other in runs[1:]:
        for name, grad in runs[0].items():
            assert torch.equal(other[name], grad), name


def test_masks_rate_scale_shapes_and_determinism():
    cfg = ModelConfig(n_layers=3, d_model=32, n_heads=2, d_mlp=64, d_vocab=11, dropout=0.1, embd_dropout=None)
    masks = draw_masks(cfg, 64, 17, torch.Generator().manual_seed(0))
    again = draw_masks(cfg, 64, 17, torch.Generator().manual_seed(0))
    other = draw_masks(cfg, 64, 17, torch.Generator().manual_seed(1))
    assert masks.embed.shape == (64, 17, 32) and len(masks.layers) == 3
    assert [m.shape for m in masks.layers[0]] == [(64, 2, 17, 17), (64, 17, 32), (64, 17, 32)]
    every = torch.cat([masks.embed.flatten()] + [m.flatten() for layer in masks.layers for m in layer])
    assert every.unique().tolist() == pytest.approx([0.0, 1 / 0.9])
    n, dropped = every.numel(), float((every == 0).float().mean())
    assert abs(dropped - 0.1) < 4 * (0.1 * 0.9 / n) ** 0.5  # 4 sd of a binomial rate
    assert torch.equal(masks.embed, again.embed) and not torch.equal(masks.embed, other.embed)
    # independent sites: the attention and MLP masks of a layer are not the same draw
    assert not torch.equal(masks.layers[0][1], masks.layers[0][2])
    none = draw_masks(ModelConfig(n_layers=2, d_model=8, d_vocab=5, dropout=0.0), 4, 3, torch.Generator())
    assert none.embed is None and none.layers == ((None, None, None), (None, None, None))


def test_embedding_dropout_has_a_rate_of_its_own():
    """embd_dropout=None (as dropout) is the stream of one rate everywhere, bit for bit; 0 draws no
    embedding mask and leaves the other masks at their rate; an attention-only block has no MLP mask."""
    base = dict(n_layers=2, d_model=32, d_mlp=64, d_vocab=11, dropout=0.1)
    same = draw_masks(ModelConfig(**base, embd_dropout=None), 64, 17, torch.Generator().manual_seed(0))
    spelt = draw_masks(ModelConfig(**base, embd_dropout=0.1), 64, 17, torch.Generator().manual_seed(0))
    assert torch.equal(same.embed, spelt.embed) and all(
        torch.equal(a, b) for la, lb in zip(same.layers, spelt.layers, strict=True) for a, b in zip(la, lb, strict=True)
    )
    zero = draw_masks(ModelConfig(**base, embd_dropout=0.0), 64, 17, torch.Generator().manual_seed(0))
    assert zero.embed is None
    rest = torch.cat([m.flatten() for layer in zero.layers for m in layer])
    assert abs(float((rest == 0).float().mean()) - 0.1) < 4 * (0.09 / rest.numel()) ** 0.5
    high = draw_masks(ModelConfig(**base, embd_dropout=0.5), 64, 17, torch.Generator().manual_seed(0))
    assert abs(float((high.embed == 0).float().mean()) - 0.5) < 4 * (0.25 / high.embed.numel()) ** 0.5
    assert high.embed.unique().tolist() == pytest.approx([0.0, 2.0])
    bare = draw_masks(ModelConfig(**base, mlp=False), 64, 17, torch.Generator().manual_seed(0))
    assert all(layer[2] is None and layer[1] is not None for layer in bare.layers)


def test_bf16_matmuls_stay_close_to_fp32():
    cfg = ModelConfig(n_layers=4, d_model=64, d_mlp=256, d_vocab=40, dropout=0.1)
    model = GPTJ(cfg, torch.Generator().manual_seed(0))
    tokens = torch.randint(0, 40, (32, 17), generator=torch.Generator().manual_seed(1))
    answers = torch.randint(0, 40, (32,), generator=torch.Generator().manual_seed(2))
    masks = draw_masks(cfg, 32, 17, torch.Generator().manual_seed(3))
    loss32, g32 = _fused(model, tokens, answers, masks, "fp32")
    loss16, g16 = _fused(model, tokens, answers, masks, "bf16")
    assert abs(float(loss16) - float(loss32)) < 1e-2 * float(loss32)
    for name, want in g32.items():
        rel = float((g16[name] - want).norm() / want.norm().clamp_min(1e-12))
        assert rel < 3e-2, f"{name}: relative gradient error {rel:.3g}"
    assert any(not torch.equal(g16[n], g32[n]) for n in g32), "bf16 must actually change the arithmetic"


@pytest.mark.parametrize("variant", VARIANTS)
def test_eval_logits_equal_the_module(variant):
    model = _model(0.1, **VARIANTS[variant]).eval()
    tokens, _ = _batch()
    torch.testing.assert_close(last_token_logits(model, tokens), model(tokens)[:, -1], rtol=0, atol=1e-12)


@pytest.mark.skipif(cxx_compiler() is None, reason="torch.compile (Inductor) needs a C++ compiler")
@pytest.mark.long
def test_compiled_eval_logits_equal_the_module():
    """Each block through one compiled graph (the last block, one query row, through a second),
    against the module in float64, gated planes included; the second call reuses the kernels."""
    model = _model(0.1, **VARIANTS["gated planes, two heads"]).eval()
    tokens, _ = _batch()
    for _ in range(2):
        got = last_token_logits(model, tokens, compiled=True)
        torch.testing.assert_close(got, model(tokens)[:, -1], rtol=0, atol=1e-10)


@pytest.mark.skipif(cxx_compiler() is None, reason="torch.compile (Inductor) needs a C++ compiler")
@pytest.mark.long
def test_compiled_evaluate_pads_the_last_batch_and_agrees():
    """11 samples in batches of 4: the compiled evaluation pads the last batch to 4 rows (one shape
    for every batch) and gives the eager evaluation's accuracies and loss."""
    task = task_config("letter", n_train=0, n_val=11, n_test=0)
    samples = generate(task, 11, np.random.default_rng(0))
    cfg = ModelConfig(n_layers=2, d_model=16, d_mlp=32, d_vocab=int(samples.tokens.max()) + 1)
    model = GPTJ(cfg, torch.Generator().manual_seed(0)).double().eval()
    want = evaluate(model, samples, batch_size=4)
    graphs = torch._dynamo.utils.counters["stats"]["unique_graphs"]
    got = evaluate(model, samples, batch_size=4, compiled=True)
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] - graphs == 2  # inner and last block, one shape
    assert got.keys() == want.keys() and got.pop("loss") == pytest.approx(want.pop("loss"), abs=1e-10)
    assert got == want


def test_bf16_eval_logits_stay_close_and_differ():
    cfg = ModelConfig(n_layers=4, d_model=64, d_mlp=256, d_vocab=40)
    model = GPTJ(cfg, torch.Generator().manual_seed(0)).eval()
    tokens = torch.randint(0, 40, (32, 17), generator=torch.Generator().manual_seed(1))
    want, got = last_token_logits(model, tokens), last_token_logits(model, tokens, "bf16")
    assert not torch.equal(got, want) and float((got - want).norm() / want.norm()) < 2e-2
