"""The exact score engine against swap-and-rerun, on the same inputs, and the cost of scoring a whole run.

Part 1 (engine vs reference): the paper's model (12 layers, d_model 128, one head; a run's checkpoint
with --run, else random weights, which cost the same), 100 number-task test inputs, last-token
query. Both methods start from one clean forward pass that reads their hook points; we time

- the *scoring core*: everything after that pass (engine: tables, closed-form rows, metric;
  reference: re-running block ℓ's LayerNorm + attention on every swap variant, metric), and
- *end to end*: the core plus each method's own forward pass,

and print the ratios and the largest score difference. Medians over --repeats.

Part 2 (a paper run): score 135 checkpoints x 12 layers x 100 inputs as ``possym score`` does
(load weights, forward, engine). With --run, its first 135 checkpoints; otherwise one checkpoint's
bytes re-loaded 135 times (the same work).

    python benchmarks/bench_scores.py [--run runs/paper_number] [--threads 1] [--repeats 3] [--n-inputs 100]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import torch
from safetensors.torch import load as st_load
from safetensors.torch import save as st_save

from possym.config import ModelConfig
from possym.model.gptj import GPTJ
from possym.runs import RunDir
from possym.scores.metric import attention_entropy
from possym.scores.swap_and_rerun import rerun_swaps
from possym.scores.swaps import layer_tables, rotated_qk, swap_attention
from possym.tasks import generate, task_config, task_vocab


def engine_core(model, acts, query):
    out = []
    for q_rot, k_rot in acts.values():
        sw = swap_attention(layer_tables(model, q_rot, k_rot, query))
        out.append((*sw.scores(), attention_entropy(sw.row)))
    return out


def reference_core(model, cache, query):
    out = []
    for layer in range(model.cfg.n_layers):
        sw = rerun_swaps(model, cache[f"blocks.{layer}.hook_resid_pre"], layer=layer, query=query)
        out.append((*sw.scores(), attention_entropy(sw.row)))
    return out


def timed(fn, repeats):
    times, out = [], None
    for _ in range(repeats):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times), out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run", help="a paper-preset run directory (default: random weights)")
    ap.add_argument("--threads", type=int, default=1, help="1: the engine works on small tensors")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--n-inputs", type=int, default=100)
    ap.add_argument("--checkpoints", type=int, default=135)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)

    if args.run:
        run = RunDir.open(args.run)
        model = run.load_model(run.checkpoint_steps()[-1])
        task = run.config.task
    else:
        task = task_config("number")
        model = GPTJ(ModelConfig(d_vocab=len(task_vocab(task))), torch.Generator().manual_seed(0)).eval()
    tokens = torch.as_tensor(generate(task, args.n_inputs, np.random.default_rng(0)).tokens)
    n_layers, query = model.cfg.n_layers, tokens.shape[1] - 1
    print(f"threads={args.threads}  model: {n_layers} layers, d_model {model.cfg.d_model}, "
          f"{model.cfg.n_heads} head(s)  inputs: {tuple(tokens.shape)}  swaps per query: {query * (query - 1) // 2}")

    layers = list(range(n_layers))
    names = [f"blocks.{layer}.hook_resid_pre" for layer in layers]
    t_fwd_e, acts = timed(lambda: rotated_qk(model, tokens, layers), args.repeats)
    t_fwd_r, (_, cache) = timed(lambda: model.run_with_cache(tokens, names), args.repeats)
    with torch.no_grad():
        t_eng, fast = timed(lambda: engine_core(model, acts, query), args.repeats)
        t_ref, slow = timed(lambda: reference_core(model, cache, query), max(1, args.repeats // 2))
    diff = max(float((a - b).abs().max()) for f, s in zip(fast, slow, strict=True) for a, b in zip(f, s, strict=True))
    print("\nPart 1: engine vs swap-and-rerun (12 layers x inputs, last-token query)")
    e2e_e, e2e_r = t_fwd_e + t_eng, t_fwd_r + t_ref
    for what, e, r in (("scoring core", t_eng, t_ref), ("end to end", e2e_e, e2e_r)):
        print(f"  {what:<14} engine {e * 1e3:8.1f} ms   reference {r * 1e3:9.1f} ms   ratio {r / e:7.1f}x")
    # float32 rows differ by ~1e-7, which τ = 1e-4 can amplify in α; agreement is checked in float64.
    model64, few = model.double(), tokens[:10]
    acts64 = rotated_qk(model64, few, layers)
    _, cache64 = model64.run_with_cache(few, names)
    with torch.no_grad():
        pairs = zip(engine_core(model64, acts64, query), reference_core(model64, cache64, query), strict=True)
        diff64 = max(float((a - b).abs().max()) for f, s in pairs for a, b in zip(f, s, strict=True))
    model.float()
    print(f"  forward pass alone: {t_fwd_e * 1e3:.1f} ms.  max |score difference|: float32 {diff:.1e}, "
          f"float64 (10 inputs) {diff64:.1e}")

    print(f"\nPart 2: {args.checkpoints} checkpoints x {n_layers} layers x {len(tokens)} inputs, as `possym score`")
    if args.run and len(run.checkpoint_steps()) >= args.checkpoints:
        blobs = [run.checkpoint_path(s).read_bytes() for s in run.checkpoint_steps()[: args.checkpoints]]
        source = f"{args.run}, first {args.checkpoints} checkpoints"
    else:
        blobs = [st_save({k: v.contiguous() for k, v in model.state_dict().items()})] * args.checkpoints
        source = "one checkpoint's bytes re-loaded each time"
    from possym.scores.swaps import head_scores

    t = time.perf_counter()
    for blob in blobs:
        model.load_state_dict(st_load(blob))
        head_scores(model, tokens).records()
    total = time.perf_counter() - t
    print(f"  {total:6.1f} s  ({total / len(blobs) * 1e3:.0f} ms per checkpoint; {source}; files read beforehand)")


if __name__ == "__main__":
    main()
