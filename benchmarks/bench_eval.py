"""Evaluation throughput: the training loop's evaluation, eager against ``train.compile=true``.

The paper model (12 layers, d_model 128, the number task's vocabulary), the loop's evaluation set
size (1,200 samples, 17 tokens) and its batch of 256, in fp32 and bf16. The compiled contenders run
each block through one compiled graph (:func:`possym.train.fused.last_token_logits`); their
compile times (a cold or warm Inductor cache, as the machine has it) are printed apart and left
out of the timing windows.

Prints seconds per evaluation as medians over interleaved windows, the compiled/eager ratio at each
precision, and what 137 evaluations and the 45,600-sample test (a paper run's) come to.

    python benchmarks/bench_eval.py [--repeats 7] [--n 1200]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import torch

from possym.config import ModelConfig
from possym.model.gptj import GPTJ
from possym.tasks import generate, task_config, task_vocab
from possym.train.loop import evaluate


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--n", type=int, default=1200, help="evaluation samples (the loop's train.eval_size)")
    args = ap.parse_args()

    task = task_config("number", n_train=0, n_val=args.n, n_test=0)
    samples = generate(task, args.n, np.random.default_rng(0))
    model = GPTJ(ModelConfig(d_vocab=len(task_vocab(task))), torch.Generator().manual_seed(0)).eval()
    runs = {
        f"{precision}_{mode}": (lambda p=precision, c=(mode == "compiled"): evaluate(model, samples, 256, p, c))
        for precision in ("fp32", "bf16")
        for mode in ("eager", "compiled")
    }
    compile_s = {}
    for name, fn in runs.items():
        t = time.perf_counter()
        fn()  # compiles the compiled ones; warms the others
        compile_s[name] = time.perf_counter() - t
    times: dict[str, list[float]] = {k: [] for k in runs}
    for _ in range(args.repeats):  # interleaved, so machine noise hits every contender alike
        for name, fn in runs.items():
            t = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t)

    print(f"threads={torch.get_num_threads()} samples={args.n} batch=256 repeats={args.repeats}")
    med = {k: statistics.median(v) for k, v in times.items()}
    for name, t in med.items():
        first = f"   first call (compiling) {compile_s[name]:.1f} s" if name.endswith("compiled") else ""
        print(f"{name:14s} {t:6.3f} s per evaluation{first}")
    for precision in ("fp32", "bf16"):
        eager, compiled = med[f"{precision}_eager"], med[f"{precision}_compiled"]
        per_run = (137 + 45_600 / args.n) * (eager - compiled)
        print(
            f"ratio {precision} compiled/eager = {eager / compiled:.2f}x   (same run); a paper run's 137 "
            f"evaluations and test: {per_run:.0f} s saved, against {compile_s[f'{precision}_compiled']:.0f} s compiling"
        )


if __name__ == "__main__":
    main()
