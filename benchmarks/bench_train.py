"""Training throughput of possym's GPT-J against HF ``GPTJForCausalLM``, same config, same run.

Every contender gets identical weights, batch 64 x 17 tokens, last-token loss, dropout on, gradient
clipping at 1.0 and AdamW; a step is forward, backward, clip and optimiser step.

- ``possym``: the training loop's step (:func:`possym.train.fused.loss_and_grads`, fp32, fused AdamW);
- ``possym_bf16``: the same with ``train.precision=bf16``;
- ``possym_compiled`` / ``possym_bf16_compiled``: those steps through ``torch.compile``
  (``train.compile=true``); their compile times are printed apart and left out of the timing windows;
- ``module``: possym's ``nn.Module`` through autograd (the reference the fused step is tested against);
- ``hf`` / ``hf_fused_adamw``: HF's model with AdamW's default (foreach) and fused implementations.

Prints tokens/s for each, as medians over interleaved timing windows, and possym's ratio to the
faster HF contender.

    python benchmarks/bench_train.py [--steps 20] [--repeats 5] [--batch 64] [--compile]
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
from possym.train.fused import draw_bits, loss_and_grads


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
    ap.add_argument("--compile", action="store_true", help="also time the module under torch.compile")
    args = ap.parse_args()

    cfg = ModelConfig(d_vocab=137)  # the paper model: 12 layers, 1 head, d_model 128, MLP 512
    ours = GPTJ(cfg, torch.Generator().manual_seed(0))
    theirs, theirs2 = to_hf(ours).train(), to_hf(ours).train()
    tokens = torch.randint(1, cfg.d_vocab, (args.batch, args.seq), generator=torch.Generator().manual_seed(1))
    answers = torch.randint(1, cfg.d_vocab, (args.batch,), generator=torch.Generator().manual_seed(2))

    def stepper(model, forward, fused_adamw=False):
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4, betas=(0.95, 0.999), weight_decay=1e-4, fused=fused_adamw)
        model.train()

        def step():
            loss = F.cross_entropy(forward(tokens)[:, -1], answers)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()

        return step

    def fused_stepper(model, precision, compiled=False):
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4, betas=(0.95, 0.999), weight_decay=1e-4, fused=True)
        gen = torch.Generator().manual_seed(3)

        def step():
            loss_and_grads(model, tokens, answers, draw_bits(model.cfg, *tokens.shape, gen), precision, compiled)
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()

        return step

    tok = args.batch * args.seq * args.steps
    module = GPTJ(cfg, torch.Generator().manual_seed(0))
    runs = {
        "possym": fused_stepper(GPTJ(cfg, torch.Generator().manual_seed(0)), "fp32"),
        "possym_bf16": fused_stepper(GPTJ(cfg, torch.Generator().manual_seed(0)), "bf16"),
        "possym_compiled": fused_stepper(GPTJ(cfg, torch.Generator().manual_seed(0)), "fp32", compiled=True),
        "possym_bf16_compiled": fused_stepper(GPTJ(cfg, torch.Generator().manual_seed(0)), "bf16", compiled=True),
        "module": stepper(module, module),
        "hf": stepper(theirs, lambda t: theirs(t).logits),
        "hf_fused_adamw": stepper(theirs2, lambda t: theirs2(t).logits, fused_adamw=True),
    }
    if args.compile:
        compiled = torch.compile(ours)
        runs["module_compiled"] = stepper(ours, compiled)
    compile_s = {}
    for name in ("possym_compiled", "possym_bf16_compiled"):
        t = time.perf_counter()
        runs[name]()  # compiles
        compile_s[name] = time.perf_counter() - t
    # Interleave the contenders so that machine noise hits all of them alike.
    times: dict[str, list[float]] = {k: [] for k in runs}
    for _ in range(args.repeats):
        for name, fn in runs.items():
            times[name] += time_steps(fn, args.steps, 1)
    print(f"threads={torch.get_num_threads()} batch={args.batch} seq={args.seq} steps/window={args.steps}")
    for name, s in compile_s.items():
        print(f"{name}: first step (compiling) {s:.1f} s")
    med = {k: statistics.median(v) for k, v in times.items()}
    for name, t in med.items():
        print(f"{name:20s} {tok / t:10.0f} tokens/s   {args.steps / t:6.2f} steps/s")
    hf = min(med["hf"], med["hf_fused_adamw"])
    for name in ("possym", "possym_bf16", "possym_compiled", "possym_bf16_compiled", "module"):
        print(f"ratio {name}/hf = {hf / med[name]:.2f}x   (against the faster HF contender)")
    for eager, compiled in (("possym", "possym_compiled"), ("possym_bf16", "possym_bf16_compiled")):
        print(f"ratio {compiled}/{eager} = {med[eager] / med[compiled]:.2f}x   (same precision, same run)")
    paper_steps = 6750
    for name in ("possym", "possym_bf16", "possym_compiled", "possym_bf16_compiled"):
        minutes = paper_steps * med[name] / args.steps / 60
        print(f"projected paper-preset training steps ({paper_steps}) with {name}: {minutes:.1f} min")


if __name__ == "__main__":
    main()
