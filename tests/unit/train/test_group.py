"""A group's members against their single runs: the batched step, its dropout bits, and the loop."""

from __future__ import annotations

import pytest
import torch

from possym.config import ModelConfig, load_config
from possym.model.gptj import GPTJ
from possym.runs import RunDir
from possym.tasks import make_splits, task_vocab
from possym.train.fused import (
    DropoutBits,
    GroupBits,
    ModelGroup,
    cxx_compiler,
    draw_bits,
    loss_and_grads,
    stacked_last_token_logits,
)
from possym.train.group import GroupError, group_key, why_single
from possym.train.loop import train, train_group
from possym.train.trainee import eval_metrics, evaluate_stacked

SMALL = [
    "model.n_layers=2",
    "model.d_model=16",
    "model.d_mlp=32",
    "model.n_heads=2",
    "task.n_train=600",
    "task.n_val=40",
    "task.n_test=40",
    "train.steps=6",
    "train.eval_every=1",
    "train.checkpoint_every=3",
    "train.state_every=3",
    "train.eval_size=40",
    "train.warmup_steps=2",
    "train.lr=1e-3",
    "train.threads=1",
]

# Members that differ in everything a group lets them differ in.
MEMBERS = [
    ["seeds.init=0", "seeds.data=0", "seeds.order=0", "seeds.dropout=0"],
    ["seeds.init=1", "seeds.data=1", "seeds.order=1", "seeds.dropout=1", "train.lr=3e-3", "train.weight_decay=0.1",
     "model.dropout=0.2", "model.embd_dropout=0.1"],
    ["seeds.init=2", "seeds.data=2", "seeds.order=2", "seeds.dropout=2", "model.dropout=0.0",
     "model.freq_gate=0@1-3;1@2", "train.grad_clip=0.05"],
    ["seeds.init=3", "seeds.data=3", "seeds.order=3", "seeds.dropout=3", "model.p_rope=0.5", "model.rope_base=500",
     "train.grad_clip=null", "train.warmup_steps=0"],
]


def _runs(tmp_path, name, members=MEMBERS, extra=()):
    return [RunDir.create(tmp_path / name / f"m{i}", load_config("number", None, [*SMALL, *m, *extra]), argv=["t"])
            for i, m in enumerate(members)]


class Recorder:
    """Each model's parameters after every step (the monitor sees the model at every evaluation), and losses."""

    def __init__(self) -> None:
        self.params: list[dict[str, torch.Tensor]] = []
        self.losses: list[float] = []

    def monitor(self, model, tokens):
        self.params.append({k: v.detach().clone() for k, v in model.state_dict().items()})
        return []

    def on_step(self, info):
        self.losses.append(info["loss"])


def test_float64_members_equal_their_runs_alone_bitwise_step_by_step_dropout_included(tmp_path):
    singles, members = _runs(tmp_path, "single"), _runs(tmp_path, "group")
    splits = [make_splits(r.config.task, r.config.seeds.data) for r in singles]
    alone = [Recorder() for _ in singles]
    for run, sp, rec in zip(singles, splits, alone, strict=True):
        train(run, sp, on_step=rec.on_step, monitor=rec.monitor, dtype=torch.float64)
    together = [Recorder() for _ in members]
    train_group(members, splits, on_step=lambda i, info: together[i].on_step(info),
                monitor=lambda m, t: together[_owner(members, m)].monitor(m, t),
                dtype=torch.float64)
    worst = 0.0
    for a, b in zip(alone, together, strict=True):
        assert len(a.params) == len(b.params) == 7  # step 0 and after each of the 6 steps
        for pa, pb in zip(a.params, b.params, strict=True):
            worst = max(worst, max(float((pa[k] - pb[k]).abs().max()) for k in pa))
        assert a.losses == b.losses
    assert worst == 0.0  # a single run is a group of one, and eager a member's numbers do not depend on S
    for s, g in zip(singles, members, strict=True):
        ea = [r for r in s.metrics() if r["event"] in ("eval", "final")]
        eb = [r for r in g.metrics() if r["event"] in ("eval", "final")]
        assert [r["accuracy"] for r in ea] == [r["accuracy"] for r in eb]
        assert [r["loss"] for r in ea] == [r["loss"] for r in eb]
        assert s.best() == g.best()


def _owner(runs: list[RunDir], model) -> int:
    """Which member a monitored model is (the members' model configs all differ)."""
    return next(i for i, r in enumerate(runs) if r.model_config == model.cfg)


def _cfgs():
    base = dict(n_layers=2, d_model=32, n_heads=2, d_mlp=64, d_vocab=40)
    return [ModelConfig(**base, dropout=0.1), ModelConfig(**base, dropout=0.0, embd_dropout=0.2),
            ModelConfig(**base, dropout=0.3, freq_gate="0@2-5;1@1", rotary_dim=12),
            ModelConfig(**base, dropout=0.1, nope_from_layer=1, rope_base=100.0)]


def _inputs(cfgs, seed=0):
    g = torch.Generator().manual_seed(seed)
    tokens = torch.randint(0, 40, (len(cfgs), 8, 12), generator=g)
    answers = torch.randint(0, 40, (len(cfgs), 8), generator=g)
    bits = [draw_bits(c, 8, 12, torch.Generator().manual_seed(10 + i)) for i, c in enumerate(cfgs)]
    return tokens, answers, bits


def test_group_bits_make_each_members_own_masks_even_where_a_rate_is_zero():
    cfgs = _cfgs()
    bits = _inputs(cfgs)[2]
    stacked = GroupBits.stack(bits).masks(torch.float64)
    for s, b in enumerate(bits):
        own = b.masks(torch.float64)
        pairs = [(own.embed, stacked.embed)] + [(a, g) for la, lg in zip(own.layers, stacked.layers, strict=True)
                                                for a, g in zip(la, lg, strict=True)]
        for a, g in pairs:
            assert g is not None
            assert torch.equal(g[s], torch.ones_like(g[s]) if a is None else a)  # rate 0: a mask of ones


@pytest.mark.parametrize("precision", ["fp32", "bf16", "fp16"])
def test_a_group_step_gives_each_member_its_single_step_to_rounding(precision):
    cfgs = _cfgs()
    tokens, answers, bits = _inputs(cfgs)
    members = [GPTJ(c, torch.Generator().manual_seed(i)) for i, c in enumerate(cfgs)]
    singles = [GPTJ(c, torch.Generator().manual_seed(i)) for i, c in enumerate(cfgs)]
    scales = [1.0, 2.0**10, 1.0, 2.0**4] if precision == "fp16" else None
    losses = ModelGroup(members).loss_and_grads(tokens, answers, GroupBits.stack(bits), precision, loss_scales=scales)
    tol = {"fp32": 1e-5, "bf16": 2e-2, "fp16": 2e-2}[precision]
    for s, model in enumerate(singles):
        loss = loss_and_grads(model, tokens[s], answers[s], bits[s], precision, loss_scale=(scales or [1.0] * 4)[s])
        assert float(loss) == pytest.approx(float(losses[s]), rel=1e-5 if precision == "fp32" else 1e-2)
        for (name, p), q in zip(model.named_parameters(), members[s].parameters(), strict=True):
            assert (p.grad - q.grad).norm() <= tol * p.grad.norm() + 1e-7, (s, name)


def _member_grads(cfgs, order, precision, compiled, companions_seed=0):
    """Member 0's gradients and logits in a group laid out as ``order`` (indices into ``cfgs``), its
    companions' weights and data drawn from ``companions_seed``."""
    tokens, answers, bits = _inputs(cfgs)
    other_tokens, other_answers, _ = _inputs(cfgs, seed=100 + companions_seed)
    at = order.index(0)
    models = [GPTJ(cfgs[i], torch.Generator().manual_seed(0 if j == at else 50 + companions_seed + j))
              for j, i in enumerate(order)]
    tk = torch.stack([tokens[0] if j == at else other_tokens[i] for j, i in enumerate(order)])
    an = torch.stack([answers[0] if j == at else other_answers[i] for j, i in enumerate(order)])
    group = ModelGroup(models)
    group.loss_and_grads(tk, an, GroupBits.stack([bits[i] for i in order]), precision, compiled)
    logits = group.last_token_logits(tk, precision, compiled)[at]
    return [p.grad for p in group.members[at].parameters()], logits


def test_a_members_numbers_do_not_depend_on_its_companions_eager_nor_on_the_group_size():
    """Bitwise, in bf16: member 0 first of four, last of four, beside copies of itself, alone, or beside
    one other: its step is its own arithmetic, and batching by S changes none of it."""
    cfgs = _cfgs()
    grads, logits = _member_grads(cfgs, [0, 1, 2, 3], "bf16", False)
    for order in ([3, 2, 1, 0], [0, 0, 2, 0], [0], [1, 0]):
        g, lg = _member_grads(cfgs, order, "bf16", False, companions_seed=len(order))
        assert all(torch.equal(a, b) for a, b in zip(grads, g, strict=True)), order
        assert torch.equal(logits, lg), order


@pytest.mark.skipif(cxx_compiler() is None, reason="Inductor needs a C++ compiler")
@pytest.mark.long
def test_a_compiled_members_numbers_depend_on_its_groups_layout_only():
    """Compiled, in bf16: the same layout (slot configs) with other companions' weights and data gives
    member 0 bitwise the same step, in another slot too; its evaluation logits match even alone. (A
    layout of another size does not give the same gradients, which is why members record theirs.)"""
    cfgs = _cfgs()
    grads, logits = _member_grads(cfgs, [0, 1, 2, 3], "bf16", True)
    g, lg = _member_grads(cfgs, [0, 1, 2, 3], "bf16", True, companions_seed=7)
    assert all(torch.equal(a, b) for a, b in zip(grads, g, strict=True))
    assert torch.equal(logits, lg)
    assert torch.equal(logits, _member_grads(cfgs, [0], "bf16", True)[1])


def test_runs_that_cannot_share_a_step_are_refused_naming_what_differs(tmp_path):
    a, b = _runs(tmp_path, "g", [[], ["model.d_mlp=48", "train.batch_size=32"]])
    splits = [make_splits(r.config.task, 0) for r in (a, b)]
    with pytest.raises(GroupError, match="model.d_mlp, train.batch_size differ"):
        train_group([a, b], splits)
    assert group_key(a.config) != group_key(b.config)
    extra = _runs(tmp_path, "extra", [["train.random_extra=3"]])[0]
    assert why_single(extra.config) is not None
    with pytest.raises(GroupError, match="random_extra gives its batches a new length"):
        train_group([a, extra], splits)


META = torch.device("meta")
needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU; this torch sees none")


@pytest.mark.parametrize("precision", ["fp32", "bf16", "fp16"])
def test_the_group_step_keeps_every_tensor_on_the_device_of_its_members(precision):
    """On the meta device (module docstring of tests/unit/test_devices.py): a stray CPU tensor raises."""
    cfgs = _cfgs()
    group = ModelGroup([GPTJ(c, torch.Generator().manual_seed(i)).to(META) for i, c in enumerate(cfgs)])
    _, _, bits = _inputs(cfgs)
    tokens = torch.zeros(len(cfgs), 8, 12, dtype=torch.long, device=META)
    answers = torch.zeros(len(cfgs), 8, dtype=torch.long, device=META)
    losses = group.loss_and_grads(tokens, answers, GroupBits.stack(bits).to(META), precision,
                                  loss_scales=[2.0**16] * len(cfgs))
    assert losses.device == META and losses.shape == (len(cfgs),)
    for member in group.members:
        assert all(p.grad is not None and p.grad.device == META for p in member.parameters())
    assert group.last_token_logits(tokens[:2], precision, members=[1, 3]).device == META



def test_group_bits_stay_on_their_device_when_the_first_member_pads_its_layout():
    """The loop moves each member's bits to the device before stacking. A first member without the group's
    layout (here: no attention/MLP dropout, the others have some) is padded with zeros, which must be made
    there too; on an H200 they were made on the CPU and torch.cat refused (2026-12-04)."""
    cfgs = _cfgs()
    bits = _inputs(cfgs)[2]
    on_meta = [DropoutBits(b.uniforms.to(META), b.rates, b.shapes) for b in (bits[1], bits[0], bits[2])]
    stacked = GroupBits.stack(on_meta)
    assert stacked.uniforms is not None and stacked.uniforms.device == META
    assert stacked.uniforms.shape[0] == 3

@needs_cuda
def test_a_short_group_on_cuda_matches_the_group_on_the_cpu(tmp_path):
    finals = {}
    for device in ("cpu", "cuda"):
        runs = _runs(tmp_path, device, MEMBERS[:2], extra=[f"train.device={device}"])
        finals[device] = train_group(runs, [make_splits(r.config.task, r.config.seeds.data) for r in runs])
    for a, b in zip(finals["cpu"], finals["cuda"], strict=True):
        assert b["loss"] == pytest.approx(a["loss"], rel=1e-3) and b["device"].startswith("cuda")


def test_each_member_draws_its_epoch_order_once_an_epoch(tmp_path, monkeypatch):
    """Not once a step: a cache shared by the members thrashed once a group held more orders than it
    kept (a fifth of a group of 8's time on an H200). 6 steps of batch 64 over 600 rows stay in epoch 0."""
    from possym.train import trainee

    calls: list[tuple[int, int, int]] = []
    real = trainee.epoch_order

    def counted(n_train: int, order_seed: int, epoch: int):
        calls.append((n_train, order_seed, epoch))
        return real(n_train, order_seed, epoch)

    monkeypatch.setattr(trainee, "epoch_order", counted)
    runs = _runs(tmp_path, "orders")
    train_group(runs, [make_splits(r.config.task, r.config.seeds.data) for r in runs])
    assert sorted(calls) == [(600, s, 0) for s in range(4)]


@pytest.mark.parametrize("precision", ["bf16", "fp32"])
def test_evaluation_on_the_cpu_member_by_member_equals_one_stacked_pass(precision):
    """evaluate_stacked runs a CPU group's members one by one (a stacked pass leaves the cache); the
    metrics must be those of the stacked pass, bitwise, as the accelerators still compute them."""
    task = load_config("number", None, SMALL).task
    samples = [make_splits(task, s)["val"] for s in (0, 1)]  # 40 rows each
    cfgs = [ModelConfig(n_layers=2, d_model=32, n_heads=2, d_mlp=64, d_vocab=len(task_vocab(task)), rope_base=b)
            for b in (1e4, 100.0)]
    group = ModelGroup([GPTJ(c, torch.Generator().manual_seed(i)) for i, c in enumerate(cfgs)])
    got = evaluate_stacked(group.params, cfgs, samples, batch_size=16, precision=precision)
    tokens = torch.stack([torch.as_tensor(s.tokens) for s in samples])
    stacked = [stacked_last_token_logits(group.params, cfgs, t, precision) for t in tokens.split(16, dim=1)]
    want = [eval_metrics(s, [lg[i] for lg in stacked]) for i, s in enumerate(samples)]
    assert got == want
