"""Training throughput of possym's GPT-J against HF ``GPTJForCausalLM``, same config, same run.

Both models get identical weights, batch 64 x 17 tokens, fp32, AdamW, last-token loss, dropout on.
Prints tokens/s for each, and their ratio, as medians over repeated timing windows.

    python benchmarks/bench_train.py [--steps 30] [--repeats 5] [--batch 64] [--bf16]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
import torch.nn.functional as F

from possym.config import ModelConfig
from possym.model.gptj import GPTJ
from possym.model.hf import to_hf


def time_steps(step_fn, steps: int, repeats: int) -> list[float]:
    for _ in range(3):  # warm-up: allocator, oneDNN kernels
        step_fn()
    out = []
    for _ in range(repeats):
        t = time.perf_counter()
        for _ in range(steps):
            step_fn()
        out.append(time.perf_counter() - t)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--seq", type=int, default=17)
    ap.add_argument("--bf16", action="store_true", help="also time possym under CPU bf16 autocast")
    ap.add_argument("--compile", action="store_true", help="also time possym under torch.compile")
    args = ap.parse_args()

    cfg = ModelConfig(d_vocab=137)  # the paper model: 12 layers, 1 head, d_model 128, MLP 512
    ours = GPTJ(cfg, torch.Generator().manual_seed(0))
    theirs = to_hf(ours).train()
    tokens = torch.randint(1, cfg.d_vocab, (args.batch, args.seq), generator=torch.Generator().manual_seed(1))
    answers = torch.randint(1, cfg.d_vocab, (args.batch,), generator=torch.Generator().manual_seed(2))

    def stepper(model, forward, autocast=False):
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4, betas=(0.95, 0.999), weight_decay=1e-4)
        model.train()

        def step():
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
                loss = F.cross_entropy(forward(tokens)[:, -1].float(), answers)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()

        return step

    tok = args.batch * args.seq * args.steps
    runs = {
        "possym": stepper(ours, ours),
        "hf": stepper(theirs, lambda t: theirs(t).logits),
    }
    if args.bf16:
        runs["possym_bf16"] = stepper(ours, ours, autocast=True)
    if args.compile:
        compiled = torch.compile(ours)
        runs["possym_compiled"] = stepper(ours, compiled)
    # Interleave the contenders so that machine noise hits all of them alike.
    times: dict[str, list[float]] = {k: [] for k in runs}
    for _ in range(args.repeats):
        for name, fn in runs.items():
            times[name] += time_steps(fn, args.steps, 1)
    print(f"threads={torch.get_num_threads()} batch={args.batch} seq={args.seq} steps/window={args.steps}")
    med = {k: statistics.median(v) for k, v in times.items()}
    for name, t in med.items():
        print(f"{name:12s} {tok / t:10.0f} tokens/s   {args.steps / t:6.2f} steps/s")
    print(f"ratio possym/hf = {med['hf'] / med['possym']:.2f}x")
    for name in ("possym_bf16", "possym_compiled"):
        if name in med:
            print(f"ratio {name}/hf = {med['hf'] / med[name]:.2f}x")
    paper_steps = 6750
    minutes = paper_steps * med["possym"] / args.steps / 60
    print(f"projected paper-preset training ({paper_steps} steps): {minutes:.1f} min")


if __name__ == "__main__":
    main()
