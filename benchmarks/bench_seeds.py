"""Many seeds at once: S members as one batched training step against S single runs one after another.

On the ``paper`` preset's model (12 layers, d_model 128, one head, MLP 512; batch 64 x 17 tokens of
the number task, vocabulary 137), at the precision and compile setting the paper preset trains with
here (bf16, ``train.compile=true``, one thread). A step is what the training loop does per member:
draw the dropout bits from the member's own generator, forward and backward
(:func:`possym.train.fused.loss_and_grads` alone, a group of one, :class:`possym.train.fused.ModelGroup`
for the group), clip, AdamW. Evaluation is left out (it is the same forward for both).

For S = 1, 2, 4, 8 it prints each contender's member-steps per second (steps of all members per
second; per member, divide by S) and the ratio single / group, as medians over interleaved timing
windows (each repeat times S single runs one after another, then the group of S). Compiling is timed
apart and left out of the windows.

    python benchmarks/bench_seeds.py [--sizes 1,2,4,8] [--steps 10] [--repeats 5] [--eager] [--profile]
    python benchmarks/bench_seeds.py --eager --precision fp32 --sizes 4 --vmap   # the batched step against vmap
    python benchmarks/bench_seeds.py --tiny        # a tiny model, eager, seconds: checks that it runs
    python benchmarks/bench_seeds.py --device cuda --sizes 1,8,32
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import torch

from possym.config import ModelConfig
from possym.devices import resolve_device, torch_threads
from possym.model.gptj import GPTJ
from possym.train.fused import GroupBits, ModelGroup, draw_bits, loss_and_grads

PAPER = {"n_layers": 12, "d_model": 128, "n_heads": 1, "d_mlp": 512, "d_vocab": 137, "dropout": 0.1,
         "embd_dropout": 0.0, "activation": "gelu"}
TINY = {"n_layers": 2, "d_model": 16, "n_heads": 1, "d_mlp": 32, "d_vocab": 137, "dropout": 0.1}


class Member:
    """One run's model, optimiser and dropout stream, as the training loop holds them."""

    def __init__(self, cfg: ModelConfig, seed: int, device: torch.device) -> None:
        self.model = GPTJ(cfg, torch.Generator().manual_seed(seed)).to(device).eval()
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=1e-4, betas=(0.95, 0.999), weight_decay=1e-4,
                                     fused=True)
        self.dropout = torch.Generator().manual_seed(seed)

    def bits(self, batch: int, pos: int, device: torch.device):
        bits = draw_bits(self.model.cfg, batch, pos, self.dropout)
        return bits if bits.uniforms is None or device.type == "cpu" else \
            type(bits)(bits.uniforms.to(device), bits.rates, bits.shapes)

    def apply(self) -> None:
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
        self.opt.step()


def vmap_contender(cfg: ModelConfig, S: int, tokens: torch.Tensor, answers: torch.Tensor,
                   precision: str) -> Callable[[], None]:
    """``torch.func.stack_module_state`` + ``vmap`` over the module's autograd, the other way to batch S
    models: without dropout (vmap's randomness cannot draw each member's own masks), and without the
    optimiser step (its gradients are not in ``.grad``), so it is timed at an advantage."""
    import copy

    import torch.nn.functional as F
    from torch.func import functional_call, grad, stack_module_state, vmap

    models = [GPTJ(cfg, torch.Generator().manual_seed(s)).to(tokens.device).eval() for s in range(S)]
    params, buffers = stack_module_state(models)  # type: ignore[arg-type]
    base = copy.deepcopy(models[0]).to("meta")

    def loss(p, b, t, a):
        return F.cross_entropy(functional_call(base, (p, b), (t,))[:, -1], a)

    grads = vmap(grad(loss))
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision)

    def step() -> None:
        with torch.autocast(tokens.device.type, dtype=dtype, enabled=dtype is not None):
            grads(params, buffers, tokens, answers)

    return step


def contenders(cfg: ModelConfig, S: int, batch: int, pos: int, precision: str, compiled: bool,
               device: torch.device, with_vmap: bool = False) -> dict[str, Callable[[], None]]:
    g = torch.Generator().manual_seed(S)
    tokens = torch.randint(1, cfg.d_vocab, (S, batch, pos), generator=g).to(device)
    answers = torch.randint(1, cfg.d_vocab, (S, batch), generator=g).to(device)
    singles = [Member(cfg, s, device) for s in range(S)]
    members = [Member(cfg, s, device) for s in range(S)]
    group = ModelGroup([m.model for m in members])

    def one_by_one() -> None:
        for s, m in enumerate(singles):
            loss_and_grads(m.model, tokens[s], answers[s], m.bits(batch, pos, device), precision, compiled)  # type: ignore[arg-type]
            m.apply()

    def together() -> None:
        bits = GroupBits.stack([m.bits(batch, pos, device) for m in members])
        group.loss_and_grads(tokens, answers, bits, precision, compiled)  # type: ignore[arg-type]
        for m in members:
            m.apply()

    fns = {"singles": one_by_one, "group": together}
    if with_vmap:
        fns["vmap"] = vmap_contender(cfg, S, tokens, answers, precision)
    return fns


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def window(fn: Callable[[], None], steps: int, device: torch.device) -> float:
    sync(device)
    t = time.perf_counter()
    for _ in range(steps):
        fn()
    sync(device)
    return time.perf_counter() - t


def profile(fns: dict[str, Callable[[], None]], steps: int) -> None:
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    for name, fn in fns.items():
        with torch_profile(activities=[ProfilerActivity.CPU]) as prof:
            for _ in range(steps):
                fn()
        print(f"--- profile: {name} ---")
        print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=12))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1,2,4,8", help="group sizes S, comma-separated")
    ap.add_argument("--steps", type=int, default=10, help="steps per timing window")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--seq", type=int, default=17)
    ap.add_argument("--precision", default="bf16", choices=("fp32", "bf16", "fp16"))
    ap.add_argument("--eager", action="store_true", help="the eager step instead of the compiled one")
    ap.add_argument("--threads", type=int, default=1, help="torch threads (the paper preset trains with 1 here)")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--vmap", action="store_true", help="also time vmap over the module's autograd (no dropout)")
    ap.add_argument("--profile", action="store_true", help="also print a short profile at the largest S")
    ap.add_argument("--tiny", action="store_true", help="a tiny model, eager, S=1,2, one short window: a smoke run")
    args = ap.parse_args()
    if args.tiny:
        args.sizes, args.steps, args.repeats, args.eager = "1,2", 2, 1, True
    sizes = [int(s) for s in args.sizes.split(",")]
    device = resolve_device(args.device)
    cfg = ModelConfig(**(TINY if args.tiny else PAPER))
    compiled = not args.eager

    with torch_threads(args.threads if device.type == "cpu" else None):
        runs = {S: contenders(cfg, S, args.batch, args.seq, args.precision, compiled, device, args.vmap)
                for S in sizes}
        for S, fns in runs.items():  # warm-up: compiling, the allocator, oneDNN's kernels
            for name, fn in fns.items():
                t = time.perf_counter()
                fn()
                sync(device)
                first = time.perf_counter() - t
                fn()
                if compiled:
                    print(f"S={S} {name}: first step (compiling) {first:.1f} s")
        times: dict[tuple[int, str], list[float]] = {(S, n): [] for S in sizes for n in runs[S]}
        for _ in range(args.repeats):  # interleaved, so that the machine's noise hits every contender alike
            for S, fns in runs.items():
                for name, fn in fns.items():
                    times[(S, name)].append(window(fn, args.steps, device))
        print(f"device={device} threads={torch.get_num_threads()} precision={args.precision} "
              f"compiled={compiled} model={'tiny' if args.tiny else 'paper'} batch={args.batch} seq={args.seq} "
              f"steps/window={args.steps} repeats={args.repeats}")
        print(f"{'S':>3} {'singles member-steps/s':>23} {'group member-steps/s':>21} {'ratio':>7}")
        for S in sizes:
            ratios = [a / b for a, b in zip(times[(S, "singles")], times[(S, "group")], strict=True)]
            single = S * args.steps / statistics.median(times[(S, "singles")])
            grouped = S * args.steps / statistics.median(times[(S, "group")])
            print(f"{S:>3} {single:>23.2f} {grouped:>21.2f} {statistics.median(ratios):>6.2f}x")
        if args.vmap:
            for S in sizes:
                ratios = [a / b for a, b in zip(times[(S, "vmap")], times[(S, "group")], strict=True)]
                print(f"S={S}: vmap over autograd {S * args.steps / statistics.median(times[(S, 'vmap')]):.2f} "
                      f"member-steps/s; group / vmap = {statistics.median(ratios):.2f}x")
        if args.profile:
            profile(runs[max(sizes)], args.steps)


if __name__ == "__main__":
    main()
