"""fp16 training (the paper's mixed precision): the scaled step, and the scale that follows overflows."""

import functools

import torch

from possym.config import ModelConfig, load_config
from possym.model.gptj import GPTJ
from possym.runs import RunDir
from possym.tasks import make_splits
from possym.train import loop, trainee
from possym.train.fused import DropoutMasks, loss_and_grads


def _step(precision: str, loss_scale: float, seed: int = 0) -> dict[str, torch.Tensor]:
    cfg = ModelConfig(n_layers=2, d_model=32, n_heads=2, d_mlp=64, d_vocab=40)
    model = GPTJ(cfg, torch.Generator().manual_seed(seed))
    tokens = torch.randint(0, 40, (8, 12), generator=torch.Generator().manual_seed(1))
    answers = torch.randint(0, 40, (8,), generator=torch.Generator().manual_seed(2))
    loss_and_grads(model, tokens, answers, DropoutMasks.none(2), precision, loss_scale=loss_scale)  # type: ignore[arg-type]  # a str, not the Literal
    return {name: p.grad for name, p in model.named_parameters()}


def test_scaling_by_a_power_of_two_and_back_is_exact():
    plain, scaled = _step("fp32", 1.0), _step("fp32", 2.0**20)
    assert all(torch.equal(plain[k], scaled[k]) for k in plain)


def test_the_fp16_step_matches_fp32_to_half_precision():
    exact, half = _step("fp32", 1.0), _step("fp16", 2.0**16)
    for name, g in exact.items():
        assert torch.isfinite(half[name]).all(), name
        assert (half[name] - g).norm() <= 1e-2 * g.norm() + 1e-6, name


def test_an_overflowing_scale_leaves_gradients_that_are_not_finite():
    grads = _step("fp16", 2.0**40)  # 2^40 x a gradient is beyond float16's 65504
    assert not all(torch.isfinite(g).all() for g in grads.values())


def test_an_fp16_run_skips_overflowing_steps_lowers_the_scale_and_still_trains(tmp_path, monkeypatch, tiny_overrides):
    monkeypatch.setattr(trainee, "LossScaler", functools.partial(trainee.LossScaler, scale=2.0**40))
    cfg = load_config("number", None, [*tiny_overrides, "train.precision=fp16"])
    run = RunDir.create(tmp_path / "run", cfg, argv=["t"])
    final = loop.train(run, make_splits(cfg.task, 0))
    scaler = run.load_state()["loss_scaler"]
    assert scaler["scale"] < 2.0**40  # overflowing steps halved it (each one skipped)
    assert final["precision"] == "fp16" and 0 < final["loss"] < 10
    first, last = (r for r in (run.metrics()[0], run.metrics()[-2]))
    assert last["loss"] < first["loss"]  # the skipped steps did not stop it from learning
