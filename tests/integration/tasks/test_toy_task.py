"""A task is one module: a toy task declared in this file, registered, then trained, scored and
length-curved end to end through the public API, with nothing else in possym told about it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pytest

import possym
from possym.errors import require
from possym.tasks import (
    Solution,
    Task,
    TaskConfig,
    TaskSamples,
    Vocab,
    register_task,
    solve,
    task_vocab,
    unregister_task,
)
from possym.tasks.vocab import PAD


@dataclass(frozen=True)
class LastConfig(TaskConfig):
    """The toy task: ``length`` symbols then the query ``?``; the answer is the symbol just before it."""

    name: str = "last"
    length: int = 6
    n_symbols: int = 5

    def __post_init__(self) -> None:
        super().__post_init__()
        require(self.n_symbols >= 2, f"task.n_symbols={self.n_symbols} must be >= 2")

    @property
    def seq_len(self) -> int:
        return self.length + 1

    @property
    def hops(self) -> tuple[int, ...]:
        return (1,)


def vocab(cfg: LastConfig) -> Vocab:
    return Vocab((PAD, *(f"x{i}" for i in range(cfg.n_symbols)), "?"))


def combinations(cfg: LastConfig) -> np.ndarray:
    return np.stack([np.full(cfg.n_symbols, cfg.length - 1), np.arange(cfg.n_symbols), np.ones(cfg.n_symbols)],
                    axis=1).astype(np.int64)


def sample(cfg: LastConfig, combos: np.ndarray, rng: np.random.Generator, extra: int = 0) -> TaskSamples:
    n = len(combos)
    content = rng.integers(0, cfg.n_symbols, (n, extra + cfg.length))
    content[:, -1] = combos[:, 1]
    tokens = np.concatenate([content + 1, np.full((n, 1), cfg.n_symbols + 1)], axis=1)
    path = np.stack([np.full(n, extra + cfg.length), np.full(n, extra + cfg.length - 1)], axis=1)
    return TaskSamples(tokens, combos[:, 1] + 1, np.ones(n, dtype=np.int64), path, extra)


def draw_prefix(cfg: LastConfig, length: int, n_hops: int, rng: np.random.Generator) -> np.ndarray:
    return rng.integers(0, cfg.n_symbols, length) + 1


def sample_after(cfg: LastConfig, combos: np.ndarray, rng: np.random.Generator, prefix: np.ndarray,
                 length: int) -> TaskSamples:
    return sample(cfg, combos, rng).prepend(prefix[:length])


def solve_last(tokens: Sequence[str]) -> Solution:
    *content, query = tokens
    if query != "?" or not content:
        raise ValueError(f"the query {query!r} must be '?' after at least one symbol")
    return Solution(content[-1], 1, (len(content), len(content) - 1))


LAST = Task(name="last", config=LastConfig, vocab=vocab, combinations=combinations, sample=sample,
            solve=solve_last, chance=lambda cfg: 1 / cfg.n_symbols, draw_prefix=draw_prefix,
            sample_after=sample_after)


@pytest.fixture
def last_task():
    register_task(LAST)
    yield LAST
    unregister_task("last")


def test_a_toy_task_registered_in_one_file_trains_scores_and_length_curves(tmp_path, last_task):
    cfg = possym.load_config("last", None, ["task.n_train=2000", "task.n_val=100", "task.n_test=100",
                                            "model.n_layers=1", "model.d_model=16", "model.d_mlp=32",
                                            "train.steps=150", "train.eval_every=50", "train.checkpoint_every=50",
                                            "train.eval_size=100", "train.warmup_steps=5", "train.lr=1e-2",
                                            "train.threads=1"])
    assert cfg.task.length == 6 and len(task_vocab(cfg.task)) == 7
    run = possym.train_model(cfg, out=tmp_path / "run", progress=False)
    assert run.checkpoint_steps() == [0, 50, 100, 150]
    assert run.metrics().query("hop == 0")["accuracy"].iloc[-1] > 0.5  # the previous token: easily learnt
    scores = run.scores(n_inputs=4, figures=False, frequency=False)
    assert set(scores["step"]) == {0, 50, 100, 150} and scores["s_pos"].between(0, 1).all()
    curve = run.length_curve(grid=(0, 10), step="final", n=8, n_prefixes=2)
    assert set(curve["extra"]) == {0, 10} and (curve["n"] > 0).all()
    generated = possym.tasks.generate(cfg.task, 5, np.random.default_rng(0))
    for row, answer in zip(generated.tokens, generated.answer, strict=True):
        assert solve("last", task_vocab(cfg.task).decode(row)).answer == task_vocab(cfg.task).tokens[answer]


def test_a_toy_tasks_own_validation_names_its_field(last_task):
    with pytest.raises(possym.PossymError, match="n_symbols=1"):
        possym.load_config("last", None, ["task.n_symbols=1"])
    with pytest.raises(possym.PossymError, match="unknown key 'task.n_letters'"):
        possym.load_config("last", None, ["task.n_letters=3"])
