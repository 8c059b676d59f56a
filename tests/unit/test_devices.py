"""Device plumbing, tested without a GPU: every path that runs a model, on the ``meta`` device.

On ``meta`` a tensor has a shape, a dtype and a device but no data. A CPU tensor made by mistake and
mixed into an elementwise op with a meta one raises ("Tensor on device cpu is not on the expected
device meta"); a matmul does not, so every output's device is asserted as well. A path that keeps
all its tensors on the meta device here keeps them on a GPU. The tests marked ``gpu`` run the same
paths for real and skip, saying why, where torch sees no CUDA device.
"""

import dataclasses

import numpy as np
import pytest
import torch

from possym.config import ConfigError, ModelConfig, TrainConfig, load_config
from possym.devices import batch_size_on, resolve_device
from possym.evaluate import lengthgen
from possym.evaluate.lengthgen import LengthGenConfig, measure_length_curve
from possym.model.gptj import GPTJ
from possym.scores.swaps import head_scores
from possym.tasks import task_config
from possym.train.fused import draw_bits, last_token_logits, loss_and_grads

META = torch.device("meta")
needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU; this torch sees none")


def _meta_model(**options) -> GPTJ:
    cfg = ModelConfig(n_layers=2, d_model=16, n_heads=2, d_mlp=32, d_vocab=40, **options)
    return GPTJ(cfg, torch.Generator().manual_seed(0)).to(META).eval()


def _tokens(batch: int, pos: int, device=META) -> torch.Tensor:
    return torch.zeros(batch, pos, dtype=torch.long, device=device)


def test_device_names_resolve_and_a_missing_device_is_a_clear_error():
    assert resolve_device("auto").type in ("cuda", "mps", "cpu")
    assert resolve_device("cpu") == torch.device("cpu")
    with pytest.raises(ConfigError, match="allowed"):
        resolve_device("tpu")
    if not torch.cuda.is_available():
        with pytest.raises(ConfigError, match="no CUDA device"):
            resolve_device("cuda")
    with pytest.raises(ConfigError, match="train.device"):
        TrainConfig(device="gpu")
    assert load_config("number", None, ["train.device=cpu"]).train.device == "cpu"
    assert batch_size_on(torch.device("cpu"), 256) == 256 < batch_size_on(META, 256)


@pytest.mark.parametrize("options", [{}, {"p_rope": 0.5}, {"nope_from_layer": 1}, {"mlp": False}])
def test_the_forward_pass_stays_on_the_device_of_its_inputs(options):
    model = _meta_model(**options)
    logits, cache = model.run_with_cache(_tokens(3, 7), ["blocks.1.attn.hook_pattern", "blocks.0.attn.hook_rot_q"])
    assert logits.device == META and logits.shape == (3, 7, 40)
    assert all(t.device == META for t in cache.values())


def test_the_kv_cached_forward_stays_on_the_device():
    model = _meta_model()
    _, past = model.forward_kv(_tokens(1, 5))
    assert all(k.device == META and v.device == META for k, v in past)
    logits = model(_tokens(4, 3), past=[(k.expand(4, -1, -1, -1), v.expand(4, -1, -1, -1)) for k, v in past])
    assert logits.device == META and logits.shape == (4, 3, 40)


@pytest.mark.parametrize("precision", ["fp32", "bf16", "fp16"])
def test_the_eager_training_step_puts_loss_and_every_gradient_on_the_device(precision):
    model = _meta_model(dropout=0.1)
    bits = draw_bits(model.cfg, 4, 6, torch.Generator().manual_seed(1))  # the loop draws on the CPU
    bits = dataclasses.replace(bits, uniforms=bits.uniforms.to(META))  # ... and moves them, as here
    answers = torch.zeros(4, dtype=torch.long, device=META)
    loss = loss_and_grads(model, _tokens(4, 6), answers, bits, precision, loss_scale=2.0**16)
    assert loss.device == META
    for name, p in model.named_parameters():
        assert p.grad is not None and p.grad.device == META and p.grad.shape == p.shape, name
    assert last_token_logits(model, _tokens(4, 6), precision).device == META


def test_the_score_engine_keeps_its_scores_on_the_model_device():
    model = _meta_model()
    scores = head_scores(model, _tokens(3, 9), query=torch.tensor([8, 5, -1]))
    for t in (scores.s_pos, scores.s_sym, scores.entropy):
        assert t.device == META and t.shape == (3, 2, 2)


@pytest.mark.parametrize("mode", ["cached", "plain"])
def test_the_length_curve_loop_runs_the_model_on_its_device(mode, monkeypatch):
    model = _meta_model()
    seen = []

    def to_host(predictions: torch.Tensor) -> np.ndarray:  # meta tensors hold no numbers to copy
        seen.append(predictions.device)
        return np.zeros(len(predictions), dtype=np.int64)

    monkeypatch.setattr(lengthgen, "_to_host", to_host)
    task = task_config("letter", n_target=4, n_pretarget=4, max_hops=2, n_letters=40 // 2 - 9, n_ints=4)
    cfg = LengthGenConfig(grid=(0, 3, 10), n=4, n_prefixes=2, mode=mode)
    records = measure_length_curve(model, task, cfg)
    assert seen and set(seen) == {META}
    assert len(records) == len(cfg.grid) * (1 + len(task.hops))


@needs_cuda
def test_a_short_run_on_cuda_matches_the_cpu_run(tiny_overrides, tmp_path):
    from possym.runs import RunDir
    from possym.tasks import make_splits
    from possym.train.loop import train

    finals = {}
    for device in ("cpu", "cuda"):
        cfg = load_config("number", None, [*tiny_overrides, f"train.device={device}"])
        run = RunDir.create(tmp_path / device, cfg, argv=["t"])
        finals[device] = train(run, make_splits(cfg.task, 0))
    assert finals["cuda"]["loss"] == pytest.approx(finals["cpu"]["loss"], rel=1e-3)


def test_the_trained_discrepancy_reads_its_scores_on_the_device():
    from possym.theory.trained import last_query_scores, top_gap

    model = _meta_model()
    scores, logits = last_query_scores(model, _tokens(3, 8))
    assert scores.device == logits.device == top_gap(scores).device == META
    assert scores.shape == (3, 2, 2, 8)
