"""Random extra tokens during training (a data-side scheme): answers kept, counts varied, resume exact."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from possym.config import ConfigError, load_config
from possym.runs import RunDir
from possym.tasks import generate, make_splits, solve, task_vocab
from possym.train.augment import with_random_extra
from possym.train.loop import train


def test_extra_letters_keep_every_answer_by_the_oracle():
    cfg = load_config("number").task
    samples = generate(cfg, 64, np.random.default_rng(0))
    vocab = task_vocab(cfg)
    rng = np.random.default_rng(1)
    lengths = set()
    for _ in range(20):
        out = with_random_extra(samples.tokens, cfg, 6, rng)
        lengths.add(out.shape[1] - samples.tokens.shape[1])
        assert np.array_equal(out[:, -samples.tokens.shape[1] :], samples.tokens)
        for row, answer in zip(out[:8], samples.answer[:8], strict=True):
            assert solve("number", vocab.decode(row)).answer == vocab.tokens[answer]
    assert lengths == set(range(7))  # every count 0..K occurs


def test_letter_task_refuses_random_extra_with_a_reason():
    with pytest.raises(ConfigError, match="windows may follow any prefix"):
        load_config("letter", None, ["train.random_extra=5"])
    with pytest.raises(ConfigError, match="must be >= 0"):
        load_config("number", None, ["train.random_extra=-1"])


def test_training_with_random_extra_resumes_bitwise(tmp_path, tiny_overrides, cut_and_resume):
    cfg = load_config("number", None, [*tiny_overrides, "train.random_extra=8", "train.steps=20"])
    splits = make_splits(cfg.task, 0)
    ref = RunDir.create(tmp_path / "ref", cfg, argv=["test"])
    train(ref, splits)
    cut = RunDir.create(tmp_path / "cut", cfg, argv=["test"])
    cut_and_resume(cut, splits, at_step=15)
    a, b = (load_file(r.checkpoint_path(20)) for r in (ref, cut))
    assert all(torch.equal(a[k], b[k]) for k in a)
    plain = RunDir.create(tmp_path / "plain", load_config("number", None, [*tiny_overrides, "train.steps=20"]))
    train(plain, splits)
    c = load_file(plain.checkpoint_path(20))
    assert any(not torch.equal(a[k], c[k]) for k in a)  # the extra tokens did change training
