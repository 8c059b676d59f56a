"""Whatever observes a hook point sees it: nnsight's envoys (which wrap a module's forward, not a hook) and
torch's hooks of every kind read and edit ``hook_pattern``, ``hook_attn_scores``, ``hook_q``, ``hook_k`` and the
residual stream of a possym GPT-J, while a model that nothing observes keeps the fused attention."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from possym.config import ModelConfig
from possym.model.gptj import GPTJ, hook_names

READ = ("blocks.0.attn.hook_pattern", "blocks.1.attn.hook_attn_scores", "blocks.0.attn.hook_q",
        "blocks.1.attn.hook_k", "blocks.1.attn.hook_rot_q", "blocks.0.hook_resid_post", "blocks.1.hook_resid_post")


def model() -> GPTJ:
    """float64, so that the fused attention of an unobserved layer equals the explicit one to rounding."""
    cfg = ModelConfig(n_layers=2, d_model=32, n_heads=4, d_mlp=64, d_vocab=40, dropout=0.0, init_range=0.3)
    return GPTJ(cfg, torch.Generator().manual_seed(0)).double().eval()


def tokens() -> torch.Tensor:
    return torch.randint(0, 40, (2, 9), generator=torch.Generator().manual_seed(1))


def envoy(net, name: str):
    """The nnsight envoy of hook point ``name`` (``blocks.0.attn.hook_q`` -> ``nn.blocks[0].attn.hook_q``)."""
    for part in name.split("."):
        net = net[int(part)] if part.isdigit() else getattr(net, part)
    return net


def count_sdpa(monkeypatch) -> list[int]:
    calls: list[int] = []
    fused = F.scaled_dot_product_attention

    def counted(*args, **kwargs):
        calls.append(1)
        return fused(*args, **kwargs)

    monkeypatch.setattr(F, "scaled_dot_product_attention", counted)
    return calls


def test_nnsight_reads_every_hook_point_as_run_with_cache_does():
    nnsight = pytest.importorskip("nnsight", reason='nnsight is not installed: pip install "possym[nnsight]"')
    gptj = model()
    logits, cache = gptj.run_with_cache(tokens())
    net = nnsight.NNsight(gptj)
    with torch.no_grad(), net.trace(tokens()):
        saved = nnsight.save({name: envoy(net, name).output for name in hook_names(gptj.cfg)})
        out = net.output.save()
    for name in hook_names(gptj.cfg):  # every one of them, in the order the forward pass fires them
        torch.testing.assert_close(saved[name], cache[name], rtol=0, atol=0, msg=name)
    torch.testing.assert_close(out, logits, rtol=0, atol=0)


def test_nnsight_edits_the_pattern_and_the_queries_as_a_hook_does():
    nnsight = pytest.importorskip("nnsight", reason='nnsight is not installed: pip install "possym[nnsight]"')
    gptj = model()

    def uniform(pattern, hook):  # every query attends evenly to the keys it may see
        return pattern.new_ones(pattern.shape).tril() / torch.arange(1, pattern.shape[-1] + 1)[:, None]

    def zero_head(q, hook):
        q = q.clone()
        q[:, :, 2] = 0
        return q

    hooks = [("blocks.1.attn.hook_pattern", uniform), ("blocks.0.attn.hook_q", zero_head)]
    want = gptj.run_with_hooks(tokens(), fwd_hooks=hooks)
    net = nnsight.NNsight(gptj)
    with torch.no_grad(), net.trace(tokens()):
        q = net.blocks[0].attn.hook_q
        q.output = zero_head(q.output, None)
        p = net.blocks[1].attn.hook_pattern
        p.output = uniform(p.output, None)
        got = net.output.save()
    assert (want - gptj(tokens())).abs().max() > 1e-3  # the edits change the logits
    torch.testing.assert_close(got, want, rtol=0, atol=1e-12)  # run_with_hooks fuses the unobserved layer 0


def test_every_kind_of_torch_hook_takes_the_explicit_path_and_nothing_else_does(monkeypatch):
    gptj = model()
    _, cache = gptj.run_with_cache(tokens())
    calls = count_sdpa(monkeypatch)
    gptj(tokens())
    assert len(calls) == 2  # nothing observes: both layers fused
    seen: dict[str, torch.Tensor] = {}
    pattern = gptj.block(0).attn.hook_pattern
    handles = [pattern.register_forward_pre_hook(lambda _m, args: seen.setdefault("pre", args[0])),
               torch.nn.modules.module.register_module_forward_hook(
                   lambda m, _i, out: seen.setdefault("global", out) if m is pattern else None)]
    try:
        gptj(tokens())
    finally:
        for handle in handles:
            handle.remove()
    for kind in ("pre", "global"):
        torch.testing.assert_close(seen[kind], cache["pattern", 0], rtol=0, atol=0, msg=kind)
    pattern.forward = lambda x: seen.setdefault("instance", x)  # a forward replaced on the instance
    gptj(tokens())
    torch.testing.assert_close(seen["instance"], cache["pattern", 0], rtol=0, atol=0)
    del pattern.forward
    calls.clear()
    gptj(tokens())
    assert len(calls) == 2  # all gone: fused again


def test_a_model_wrapped_by_nnsight_gives_the_same_logits_inside_and_outside_a_trace():
    nnsight = pytest.importorskip("nnsight", reason='nnsight is not installed: pip install "possym[nnsight]"')
    gptj = model()
    want = gptj(tokens())
    net = nnsight.NNsight(gptj)
    torch.testing.assert_close(gptj(tokens()), want, rtol=0, atol=1e-12)  # explicit attention, not fused
    torch.testing.assert_close(gptj(tokens(), last=True), want[:, -1:], rtol=0, atol=1e-12)
    with torch.no_grad(), net.trace(tokens()):
        resid = net.blocks[1].hook_resid_post.output.save()
    assert resid.shape == (2, 9, 32)
