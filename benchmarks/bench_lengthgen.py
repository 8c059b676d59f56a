"""Length generalisation (Fig. 5B) with shared-prefix KV caches, against the plain forward pass.

Part 1: the whole curve for one model with the defaults of ``possym lengthgen`` (the paper's 28-point
grid, K up to 5,000; 500 inputs per (K, hop count); 8 prefixes): wall-clock and peak memory (the
process's maximum resident set). Goals: <= 3 minutes and <= 4 GB on 2 cores.

Part 2: both modes on the same inputs (K in --compare-grid, --compare-n inputs per K), in the same
process: time per mode, the ratio, the largest logit difference, and the plain mode's time on the
whole curve, extrapolated from its per-input times (a quadratic in K + 17 through the measured
points), against part 1's measured time. The plain mode on the full curve would take most of an
hour, hence the extrapolation; per input, the plain pass costs (K + 17)^2 attention work against
the cached mode's 17 (K + 17).

Part 3: the cached windows' forward pass as it is and as it was, on the same inputs, in the same
process: ``past`` attention split into two blocks with a shared row maximum, and only the last
query row in the last block (``last=True``), against the concatenated softmax over every row (what a
no-op hook on every ``hook_pattern`` still forces). Medians of ``--repeats`` and their ratio per K.

    python benchmarks/bench_lengthgen.py [--run runs/paper_letter] [--threads 2] [--skip-curve]
"""

from __future__ import annotations

import argparse
import resource
import time

import numpy as np
import torch

from possym.config import ModelConfig
from possym.evaluate.lengthgen import (
    PAPER_GRID,
    LengthGenConfig,
    last_logits_after,
    last_logits_plain,
    measure_length_curve,
    point_samples,
    prefix_cache,
    slice_cache,
)
from possym.model.gptj import GPTJ
from possym.runs import RunDir
from possym.tasks import draw_prefix, task_config, task_vocab


def peak_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # ru_maxrss is in KiB on Linux


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--run", help="a trained run (default: the paper's model with random weights, same cost)")
    p.add_argument("--task", default="letter", choices=("number", "letter"), help="without --run")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--compare-grid", default="0,1000,5000", help="K values of part 2")
    p.add_argument("--compare-n", type=int, default=32, help="inputs per K in part 2")
    p.add_argument("--skip-curve", action="store_true", help="only parts 2 and 3")
    p.add_argument("--repeats", type=int, default=5, help="timings per K in part 3 (>= 1)")
    args = p.parse_args()
    if args.repeats < 1:
        p.error(f"--repeats {args.repeats}: must be >= 1")
    torch.set_num_threads(args.threads)
    if args.run:
        run = RunDir.open(args.run)
        model, task = run.load_model(), run.config.task
    else:
        task = task_config(args.task)
        model = GPTJ(ModelConfig(d_vocab=len(task_vocab(task)), dropout=0.0), torch.Generator().manual_seed(0)).eval()
    print(f"model: {args.run or 'random paper-size GPT-J'} ({task.name} task), {args.threads} threads")

    if not args.skip_curve:
        cfg = LengthGenConfig()
        t0 = time.perf_counter()
        rows = measure_length_curve(model, task, cfg)
        seconds = time.perf_counter() - t0
        n = sum(r["n"] for r in rows if r["n_hops"] == 0)
        print(f"part 1: whole curve, {len(cfg.grid)} K values up to {cfg.grid[-1]}, {n} inputs: "
              f"{seconds:.1f} s ({seconds / 60:.2f} min; goal <= 3), peak memory {peak_gb():.2f} GB (goal <= 4)")
        for r in rows:
            if r["n_hops"] == 0 and r["extra"] in (0, 100, 800, 5000):
                print(f"    K={r['extra']:>5}  accuracy {r['accuracy']:.3f}")

    # Part 2: both modes on the same inputs, K by K. The cached time includes the prefix pass, so with few
    # windows per prefix it understates the saving; the full-curve ratio is extrapolated from per-input times.
    grid = tuple(int(k) for k in args.compare_grid.split(","))
    per_input = {}
    for k in grid:
        long = draw_prefix(task, k, task.max_hops, np.random.default_rng(k))
        cfg = LengthGenConfig(grid=(k,), n=args.compare_n, n_prefixes=1)
        tokens = torch.as_tensor(point_samples(task, cfg, task.max_hops, 0, k, long).tokens)
        t0 = time.perf_counter()
        cached = last_logits_after(model, tokens[:, k:], slice_cache(prefix_cache(model, long), k), cfg.token_budget)
        t_cached = time.perf_counter() - t0
        t0 = time.perf_counter()
        plain = last_logits_plain(model, tokens, cfg.token_budget)
        t_plain = time.perf_counter() - t0
        assert (cached.argmax(-1) == plain.argmax(-1)).all(), "the two modes must make the same predictions"
        per_input[k] = t_plain / len(tokens)
        print(f"part 2: K={k:>5}, {len(tokens)} inputs: plain {t_plain:6.2f} s, cached (with its prefix pass) "
              f"{t_cached:6.2f} s, ratio {t_plain / t_cached:5.1f}x; max |logit difference| "
              f"{(cached - plain).abs().max().item():.1e}")
    if len(grid) >= 3 and not args.skip_curve:
        # Plain cost per input is quadratic in the length: fit a + b L + c L^2 through the measured points.
        lengths = np.array([k + task.seq_len for k in grid], dtype=float)
        coef = np.polyfit(lengths, np.array([per_input[k] for k in grid]), 2)
        full = sum(np.polyval(coef, k + task.seq_len) * LengthGenConfig().n * len(task.hops) for k in PAPER_GRID)
        print(f"        plain mode on the whole curve, extrapolated from these per-input times: {full / 60:.0f} min; "
              f"speed-up of the cached curve {full / seconds:.0f}x")

    # Part 3: a no-op hook on every pattern sends the model down the concatenated-softmax path and, being a
    # hook, makes it compute every row: the computation as it was before the split softmax and last=True.
    noop = [(f"blocks.{layer}.attn.hook_pattern", lambda t, hook: None) for layer in range(model.cfg.n_layers)]
    for k in grid:
        if k == 0:
            continue
        long = draw_prefix(task, k, task.max_hops, np.random.default_rng(k))
        cfg = LengthGenConfig(grid=(k,), n=args.compare_n * 4, n_prefixes=1)
        windows = torch.as_tensor(point_samples(task, cfg, task.max_hops, 0, k, long).tokens)[:, k:]
        past = slice_cache(prefix_cache(model, long), k)
        times: dict[str, list[float]] = {"now": [], "before": []}
        logits: dict[str, torch.Tensor] = {}
        for _ in range(args.repeats):
            for name in times:
                with model.hooks(noop if name == "before" else []):
                    t0 = time.perf_counter()
                    logits[name] = last_logits_after(model, windows, past, cfg.token_budget)
                    times[name].append(time.perf_counter() - t0)
        difference = (logits["now"] - logits["before"]).abs().max().item()
        before, now = (float(np.median(times[n])) for n in ("before", "now"))
        print(f"part 3: K={k:>5}, {len(windows)} windows: before {before * 1e3:7.1f} ms, now {now * 1e3:7.1f} ms, "
              f"before / now {before / now:4.2f}x (medians of {args.repeats}); max |logit difference| {difference:.1e}")


if __name__ == "__main__":
    main()
