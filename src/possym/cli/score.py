"""``possym score RUN``: positional/symbolic scores of every checkpoint, purity, frequency use and figures.

Writes into RUN:
  scores.csv          step, query, layer, head, s_pos, s_sym, entropy, entropy_norm, n_inputs
  scores.json         the settings scores.csv was made with (steps already scored with the same
                      settings are reused unless --force)
  purity.csv          per γ and head: the first pure step and kind, the kind at the last step, the
                      run's max-accuracy step
  purity_tally.csv    per γ and step: the cumulative count of pure heads per kind (Fig. 2C, 7)
  frequency_use.csv   final checkpoint: use per (layer, head, frequency ID)         (Fig. 8)
  table1.csv          final checkpoint: weighted mean ID, its frequency, dominant ID (Table 1)
  plane_scores.csv    final checkpoint: s_pos, s_sym of every plane's projection head
  figures/            fig2_dynamics, fig3_hop_attention, fig4b_geometry, fig6_scores, fig7_purity,
                      fig8_frequency_use (PNG and SVG)
"""

from __future__ import annotations

import argparse
import json
import time

import torch
from tqdm import tqdm

from possym.runs import RunDir, atomic_write_text, read_csv
from possym.scores.metric import TAU


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("score", help="positional/symbolic scores of a run's checkpoints, purity and frequency use")
    p.add_argument("run", help="a run directory made by `possym train`")
    p.add_argument("--steps", type=int, nargs="+", help="checkpoint steps to score (default: all)")
    p.add_argument("--n-inputs", type=int, default=100, help="test inputs per checkpoint (paper: 100)")
    p.add_argument("--seed", type=int, default=0, help="seed choosing the test inputs")
    p.add_argument("--tau", type=float, default=TAU, help="swap temperature (paper: 1e-4)")
    p.add_argument("--block-size", type=int, default=1, help="tokens per swapped block (paper A: 1)")
    p.add_argument("--hops", action="store_true", help="also score every hop position as a query")
    p.add_argument("--no-frequency", action="store_true", help="skip frequency use and per-plane scores")
    p.add_argument("--no-figures", action="store_true")
    p.add_argument("--threads", type=int, default=1,
                   help="torch threads (default 1: the engine works on small tensors, and an OpenMP team on a busy "
                   "machine can be 10x slower)")
    p.add_argument("--force", action="store_true", help="re-score steps already in RUN/scores.csv")
    p.set_defaults(func=run)


def _settings(args: argparse.Namespace) -> dict:
    return {"n_inputs": args.n_inputs, "seed": args.seed, "tau": args.tau, "block_size": args.block_size,
            "hops": args.hops}


def _previous(run: RunDir, settings: dict) -> list[dict]:
    """Rows of an earlier ``possym score`` made with the same settings (else none)."""
    csv_file, json_file = run.path / "scores.csv", run.path / "scores.json"
    if not csv_file.exists() or not json_file.exists():
        return []
    if json.loads(json_file.read_text()) != settings:
        return []
    return read_csv(csv_file)


def run(args: argparse.Namespace) -> int:
    from possym.scores.checkpoints import purity_tables, score_checkpoints, score_inputs
    from possym.scores.dynamics import GAMMAS, normalise_entropy

    if args.threads:
        torch.set_num_threads(args.threads)
    run_dir = RunDir.open(args.run)
    available = run_dir.checkpoint_steps()
    if not available:
        raise ValueError(f"{run_dir.path} has no checkpoints yet")
    steps = sorted(args.steps) if args.steps else available
    missing = sorted(set(steps) - set(available))
    if missing:
        raise ValueError(f"no checkpoints for steps {missing}; available: {available}")
    settings = _settings(args)
    cfg = run_dir.config
    samples = score_inputs(cfg.task, cfg.seeds.data, args.n_inputs, args.seed)

    previous = _previous(run_dir, settings)
    if args.force:  # re-score the asked steps, keep the others
        kept = [r for r in previous if int(r["step"]) not in set(steps)]
    else:
        kept = previous
    done = {int(r["step"]) for r in kept}
    todo = [s for s in steps if s not in done]
    print(f"{run_dir.path}: {len(samples)} inputs, {len(steps)} checkpoints, {len(steps) - len(todo)} already scored")
    t0 = time.perf_counter()
    with tqdm(total=len(todo), desc="score", unit="ckpt", dynamic_ncols=True) as bar:
        fresh = score_checkpoints(
            run_dir, todo, samples, tau=args.tau, block_size=args.block_size, hops=args.hops,
            progress=lambda _s: bar.update(1),
        )
    elapsed = time.perf_counter() - t0
    rows = [{k: r[k] for k in ("step", "query", "layer", "head", "s_pos", "s_sym", "entropy", "n_inputs")}
            for r in kept + fresh]
    rows.sort(key=lambda r: (int(r["step"]), str(r["query"]), int(r["layer"]), int(r["head"])))
    rows = normalise_entropy(rows)
    run_dir.write_csv("scores.csv", rows)
    atomic_write_text(run_dir.path / "scores.json", json.dumps(settings, indent=2) + "\n")
    print(f"scored {len(todo)} checkpoints in {elapsed:.1f}s -> {run_dir.path / 'scores.csv'}")

    metrics = run_dir.metrics()
    first, tally = purity_tables(rows, metrics, GAMMAS)
    run_dir.write_csv("purity.csv", first)
    run_dir.write_csv("purity_tally.csv", tally)

    final_step = max(int(r["step"]) for r in rows)
    table = []
    if not args.no_frequency and cfg.model.rot_dim > 0:
        table = _frequency(run_dir, final_step, samples, args)
    _print_summary(rows, first, table, final_step)
    if not args.no_figures:
        _figures(run_dir, rows, metrics, first, tally, samples, final_step, args)
    return 0


def _frequency(run_dir: RunDir, step: int, samples, args: argparse.Namespace) -> list[dict]:
    from possym.model.rope import layer_frequencies
    from possym.scores.frequency import dominant_frequency_id, frequency_use, plane_scores, weighted_frequency_id

    model = run_dir.load_model(step)
    tokens = torch.as_tensor(samples.tokens)
    use = frequency_use(model, tokens)  # [layer, head, plane]
    per_plane = plane_scores(model, tokens, tau=args.tau, block_size=args.block_size)
    use_rows, table, plane_rows = [], [], []
    for layer in range(use.shape[0]):
        thetas = layer_frequencies(model.cfg, layer)  # 0 where p-RoPE or a NoPE layer stops a plane turning
        for head in range(use.shape[1]):
            for k in range(use.shape[2]):
                use_rows.append({"step": step, "layer": layer, "head": head, "frequency_id": k + 1,
                                 "theta": float(thetas[k]), "use": float(use[layer, head, k])})
                plane_rows.append({"step": step, "layer": layer, "head": head, "frequency_id": k + 1,
                                   "s_pos": float(per_plane.s_pos[:, layer, head, k].nanmean()),
                                   "s_sym": float(per_plane.s_sym[:, layer, head, k].nanmean())})
            weighted = float(weighted_frequency_id(use[layer, head]))
            rounded = min(max(round(weighted), 1), len(thetas))
            table.append({"step": step, "layer": layer, "head": head, "weighted_id": weighted,
                          "frequency_id": rounded, "frequency": float(thetas[rounded - 1]),
                          "dominant_id": int(dominant_frequency_id(use[layer, head]))})
    run_dir.write_csv("frequency_use.csv", use_rows)
    run_dir.write_csv("table1.csv", table)
    run_dir.write_csv("plane_scores.csv", plane_rows)
    return table


def _print_summary(rows: list[dict], first: list[dict], table: list[dict], final_step: int) -> None:
    from possym.scores.dynamics import purity

    last = [r for r in rows if int(r["step"]) == final_step and r["query"] == "last"]
    by = {(f["layer"], f["head"], f["gamma"]): f for f in first}
    ids = {(t["layer"], t["head"]): t for t in table}
    best = first[0]["max_accuracy_step"] if first else None
    print(f"\nfinal step {final_step}; max-accuracy step {best}")
    print(f"{'layer':>5} {'head':>4} {'s_pos':>6} {'s_sym':>6} {'pure@0.1':>10} {'first@0.1':>18} "
          f"{'first@0.05':>18} {'mean ID':>7} {'dom ID':>6}")
    for r in last:
        key = (int(r["layer"]), int(r["head"]))
        f1, f2 = by.get((*key, 0.1), {}), by.get((*key, 0.05), {})
        kind = purity(float(r["s_pos"]), float(r["s_sym"]), 0.1) or "-"

        def fmt(f: dict) -> str:  # first passage, and the first step pure as the final kind if that differs
            if f.get("step") is None:
                return "never"
            text = f"{f['kind'][:3]} {f['step']}"
            if f["final_kind"] and f["final_kind"] != f["kind"]:
                text += f"/{f['final_kind'][:3]} {f['final_kind_step']}"
            return text

        t = ids.get(key, {})
        mean_id = f"{t['weighted_id']:.1f}" if t else ""
        print(f"{key[0]:>5} {key[1]:>4} {float(r['s_pos']):6.3f} {float(r['s_sym']):6.3f} {kind:>10} "
              f"{fmt(f1):>18} {fmt(f2):>18} {mean_id:>7} {t.get('dominant_id', ''):>6}")


def _figures(run_dir, rows, metrics, first, tally, samples, final_step, args) -> None:
    from possym.report.score_plots import (
        fig2_dynamics,
        fig3_hop_attention,
        fig4b_geometry,
        fig6_layer_scores,
        fig7_purity,
        fig8_frequency_use,
    )
    from possym.runs import save_figure
    from possym.scores.dynamics import GAMMAS
    from possym.scores.frequency import plane_geometry
    from possym.scores.patterns import hop_attention
    from possym.tasks import task_vocab

    out = run_dir.path / "figures"
    out.mkdir(exist_ok=True)
    name = run_dir.config.task.name
    best = first[0]["max_accuracy_step"] if first else None
    first_01 = [f for f in first if f["gamma"] == 0.1]
    tally_01 = [t for t in tally if t["gamma"] == 0.1]
    n_layers = run_dir.config.model.n_layers
    shown = [layer for layer in (1, 5, 11) if layer < n_layers] or list(range(min(3, n_layers)))
    figs = {
        "fig2_dynamics": fig2_dynamics(rows, metrics, tally_01, first_01, layers=shown, max_acc_step=best,
                                       title=f"{name} task"),
        "fig6_scores": fig6_layer_scores(rows, max_acc_step=best, title=f"{name} task: scores per layer"),
        "fig7_purity": fig7_purity({g: [t for t in tally if t["gamma"] == g] for g in GAMMAS},
                                   {g: [f for f in first if f["gamma"] == g] for g in GAMMAS}, title=name),
    }
    if args.hops:
        for q in sorted({r["query"] for r in rows} - {"last"}):
            figs[f"fig6_scores_{q}"] = fig6_layer_scores(rows, max_acc_step=best, query=q,
                                                         title=f"{name} task: scores per layer, query {q}")
    # Fig. 3 and 4B: one input with the most hops, at the final checkpoint.
    model = run_dir.load_model(final_step)
    i = int(samples.n_hops.argmax())
    tokens = torch.as_tensor(samples.tokens[i])
    path = [int(p) for p in samples.path[i] if p >= 0]
    words = task_vocab(run_dir.config.task).decode(samples.tokens[i])
    figs["fig3_hop_attention"] = fig3_hop_attention(hop_attention(model, tokens, path), words, path)
    if model.cfg.rot_dim > 0:
        layer = 1 if n_layers > 1 else 0
        geo = plane_geometry(model, tokens, layer=layer)
        figs["fig4b_geometry"] = fig4b_geometry(geo, title=f"{name} task, L{layer}, frequency ID {geo.frequency_id}")
    freq_file = run_dir.path / "frequency_use.csv"
    if freq_file.exists() and not args.no_frequency:
        figs["fig8_frequency_use"] = fig8_frequency_use(read_csv(freq_file), read_csv(run_dir.path / "table1.csv"),
                                                        title=f"{name} task: frequency use")
    import matplotlib.pyplot as plt

    for stem, fig in figs.items():
        save_figure(fig, out / stem)
        plt.close(fig)
    print(f"figures -> {out}/ ({', '.join(figs)})")
