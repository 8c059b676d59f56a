"""What the live score monitor costs during training: its share of the time between two evaluations.

The paper's set-up: the 12-layer model, AdamW, batch 64, an evaluation every 50 steps; at each, the
training loop calls ``monitor_scores`` on the first ``--monitor-size`` evaluation inputs. Training
steps and monitor calls are timed in alternation (so a busy machine slows both alike), and the
overhead printed is  monitor time / (eval_every x step time).

    python benchmarks/bench_monitor.py [--threads 2] [--rounds 5] [--steps-per-round 10] [--monitor-size 32 100]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import torch
import torch.nn.functional as F

from possym.config import ModelConfig
from possym.model.gptj import GPTJ
from possym.scores.monitor import monitor_scores
from possym.tasks import generate, task_config, task_vocab


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=torch.get_num_threads())
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps-per-round", type=int, default=10)
    ap.add_argument("--eval-every", type=int, default=50)
    ap.add_argument("--monitor-size", type=int, nargs="+", default=[32, 100])
    args = ap.parse_args()
    torch.set_num_threads(args.threads)

    task = task_config("number")
    model = GPTJ(ModelConfig(d_vocab=len(task_vocab(task))), torch.Generator().manual_seed(0))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, betas=(0.95, 0.999), weight_decay=1e-4)
    data = generate(task, 64 * args.steps_per_round + max(args.monitor_size), np.random.default_rng(0))
    tokens, answers = torch.as_tensor(data.tokens), torch.as_tensor(data.answer)

    def train_steps() -> None:
        model.train()
        for i in range(args.steps_per_round):
            batch = slice(64 * i, 64 * (i + 1))
            loss = F.cross_entropy(model(tokens[batch])[:, -1], answers[batch])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()

    def monitor(n: int) -> None:
        model.eval()
        with torch.no_grad():
            monitor_scores(model, tokens[-n:])

    train_steps()
    for n in args.monitor_size:
        monitor(n)  # warm-up
    step_s: list[float] = []
    mon_s: dict[int, list[float]] = {n: [] for n in args.monitor_size}
    for _ in range(args.rounds):
        t = time.perf_counter()
        train_steps()
        step_s.append((time.perf_counter() - t) / args.steps_per_round)
        for n in args.monitor_size:
            t = time.perf_counter()
            monitor(n)
            mon_s[n].append(time.perf_counter() - t)
    step = statistics.median(step_s)
    print(f"threads={args.threads}  training step (batch 64): {step * 1e3:.0f} ms   eval every {args.eval_every} steps "
          f"= {args.eval_every * step:.1f} s of training")
    for n, times in mon_s.items():
        m = statistics.median(times)
        print(f"  monitor on {n:>3} inputs: {m * 1e3:6.0f} ms  ->  overhead {100 * m / (args.eval_every * step):.2f}% "
              "of training time")


if __name__ == "__main__":
    main()
