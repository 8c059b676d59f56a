"""Training throughput of possym's GPT-J against HF ``GPTJForCausalLM``, same config, same run.

Every contender gets identical weights, batch 64 x 17 tokens, last-token loss, dropout on, gradient
clipping at 1.0 and AdamW; a step is forward, backward, clip and optimiser step.

- ``possym``: the training loop's step (:meth:`possym.train.fused.ModelGroup.loss_and_grads` on a group
  of one, as :func:`possym.train.loop.train` runs it; fp32, fused AdamW);
- ``against`` (with ``--against REV``): the same with REV's step, loaded from REV's
  ``src/possym/train/fused.py`` (its ``loss_and_grads``; the rest of possym is HEAD's), so a change to
  the step is measured against its baseline in one process, interleaved;
- ``possym_bf16``: the same with ``train.precision=bf16``;
- ``possym_compiled`` / ``possym_bf16_compiled``: those steps through ``torch.compile``
  (``train.compile=true``); their compile times are printed apart and left out of the timing windows;
- ``module``: possym's ``nn.Module`` through autograd (the reference the fused step is tested against);
- ``hf`` / ``hf_fused_adamw``: HF's model with AdamW's default (foreach) and fused implementations.

Prints tokens/s for each, as medians over interleaved timing windows, and possym's ratio to the
faster HF contender; with ``--against``, possym's speed over REV's per window pair (median, quartiles
and range over the windows), by wall-clock and by the process's CPU time (the steadier of the two on a
shared machine: it leaves out the time other processes held the core).

    python benchmarks/bench_train.py [--steps 20] [--repeats 5] [--batch 64] [--compile] [--threads N]
                                     [--against REV] [--only possym,against]
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType

import torch
import torch.nn.functional as F

from possym.config import ModelConfig
from possym.model.gptj import GPTJ
from possym.model.hf import to_hf
from possym.train.fused import GroupBits, ModelGroup, draw_bits

ROOT = Path(__file__).resolve().parents[1]


def step_module_at(rev: str) -> ModuleType:
    """``src/possym/train/fused.py`` as it stood at git revision ``rev``, imported under a name of its own."""
    source = subprocess.run(["git", "show", f"{rev}:src/possym/train/fused.py"], cwd=ROOT, check=True,
                            capture_output=True, text=True).stdout
    path = Path(tempfile.mkdtemp()) / f"fused_{rev}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(f"possym_fused_{rev}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


def time_steps(step_fn, steps: int, repeats: int) -> list[tuple[float, float]]:
    """(wall-clock, CPU) seconds of each of ``repeats`` windows of ``steps`` steps. The process's CPU time
    leaves out the time other processes held the core, so on a shared machine it is the steadier of the two."""
    for _ in range(3):  # warm-up: allocator, oneDNN kernels
        step_fn()
    out = []
    for _ in range(repeats):
        t, c = time.perf_counter(), time.process_time()
        for _ in range(steps):
            step_fn()
        out.append((time.perf_counter() - t, time.process_time() - c))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--seq", type=int, default=17)
    ap.add_argument("--compile", action="store_true", help="also time the module under torch.compile")
    ap.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's own)")
    ap.add_argument("--against", default=None, help="a git revision whose training step to time beside HEAD's")
    ap.add_argument("--only", default=None, help="comma-separated contenders to time (default: all)")
    args = ap.parse_args()
    if args.threads is not None:
        torch.set_num_threads(args.threads)

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

    def fused_stepper(model, precision, compiled=False, step_module=None):
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4, betas=(0.95, 0.999), weight_decay=1e-4, fused=True)
        gen = torch.Generator().manual_seed(3)
        group = ModelGroup([model]) if step_module is None else None
        draw = draw_bits if step_module is None else step_module.draw_bits  # REV's step knows REV's bits

        def step():
            bits = draw(model.cfg, *tokens.shape, gen)
            if group is None:  # REV's step, called as REV's loop called it
                step_module.loss_and_grads(model, tokens, answers, bits, precision, compiled)
            else:  # the loop's step: a group of one
                group.loss_and_grads(tokens[None], answers[None], GroupBits.stack([bits]), precision, compiled)
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
    if args.against:
        runs["against"] = fused_stepper(GPTJ(cfg, torch.Generator().manual_seed(0)), "fp32",
                                        step_module=step_module_at(args.against))
    if args.only:
        runs = {k: v for k, v in runs.items() if k in args.only.split(",")}
    compile_s = {}
    for name in [n for n in ("possym_compiled", "possym_bf16_compiled") if n in runs]:
        t = time.perf_counter()
        runs[name]()  # compiles
        compile_s[name] = time.perf_counter() - t
    # Interleave the contenders so that machine noise hits all of them alike.
    times: dict[str, list[float]] = {k: [] for k in runs}
    cpu: dict[str, list[float]] = {k: [] for k in runs}
    for _ in range(args.repeats):
        for name, fn in runs.items():
            (wall, used), = time_steps(fn, args.steps, 1)
            times[name].append(wall)
            cpu[name].append(used)
    print(f"threads={torch.get_num_threads()} batch={args.batch} seq={args.seq} steps/window={args.steps}")
    for name, s in compile_s.items():
        print(f"{name}: first step (compiling) {s:.1f} s")
    med = {k: statistics.median(v) for k, v in times.items()}
    for name, t in med.items():
        print(f"{name:20s} {tok / t:10.0f} tokens/s   {args.steps / t:6.2f} steps/s")
    if "hf" in med and "hf_fused_adamw" in med:
        hf = min(med["hf"], med["hf_fused_adamw"])
        for name in [n for n in ("possym", "possym_bf16", "possym_compiled", "possym_bf16_compiled", "module")
                     if n in med]:
            print(f"ratio {name}/hf = {hf / med[name]:.2f}x   (against the faster HF contender)")
    for eager, compiled in (("possym", "possym_compiled"), ("possym_bf16", "possym_bf16_compiled")):
        if eager in med and compiled in med:
            print(f"ratio {compiled}/{eager} = {med[eager] / med[compiled]:.2f}x   (same precision, same run)")
    if "possym" in med and "against" in med:
        # Each window of HEAD's step against the REV window timed right after it: the machine's drift
        # hits a pair alike, so the spread of the pairs' ratios is the noise of the comparison.
        for clock, seconds in (("wall-clock", times), ("CPU time", cpu)):
            pairs = sorted(a / p for p, a in zip(seconds["possym"], seconds["against"], strict=True))
            q1, q2, q3 = statistics.quantiles(pairs, n=4) if len(pairs) > 1 else pairs * 3
            print(f"speed possym/{args.against} by {clock}: per window pair median {q2:.3f}x, quartiles "
                  f"{q1:.3f}-{q3:.3f}x, range {pairs[0]:.3f}-{pairs[-1]:.3f}x over {len(pairs)} pairs of "
                  f"{args.steps} steps; ratio of medians "
                  f"{statistics.median(seconds['against']) / statistics.median(seconds['possym']):.3f}x")
    paper_steps = 6750
    for name in [n for n in ("possym", "possym_bf16", "possym_compiled", "possym_bf16_compiled") if n in med]:
        minutes = paper_steps * med[name] / args.steps / 60
        print(f"projected paper-preset training steps ({paper_steps}) with {name}: {minutes:.1f} min")


if __name__ == "__main__":
    main()
