"""What a sweep found: per-trial facts read back from the run directories, and mean ± sd across seeds.

Per trial (:func:`trial_facts`), from the files the stages wrote:

- ``metrics.jsonl``: final test accuracy (global and per hop) and the validation curve;
  ``steps_to_90`` = first evaluated step with validation accuracy ≥ 0.9; the **hop order** = hops
  sorted by the first step their validation accuracy reaches 0.9, ``=`` between hops that reach it
  at the same evaluation (the paper: ``1<2<3=4``-like progressive learning on the number task,
  all at once on the letter task);
- ``purity.csv`` (γ = 0.1, last-token query): which layers end pure positional / pure symbolic, and
  the step each first became pure;
- ``scores.csv``: the last checkpoint's s_POS, s_SYM per layer;
- ``table1.csv``: the weighted-average frequency ID per layer (paper Table 1);
- ``lengthgen.csv`` (``n_hops = 0``, all hops): accuracy per number of extra tokens, at the final
  checkpoint (``len_acc_K``) and at the best one (``len_best_K``: the earliest checkpoint at the
  maximum validation accuracy, ``best_step``, as the authors evaluated);
- ``scores.csv`` with intervals: the layers ever pure at γ = 0.1, surely and possibly
  (:func:`possym.scores.dynamics.layer_sets`), and L0's trajectory: its scores at the best step and
  the step at which it was most positional (the largest s_POS − s_SYM; at initialisation both are
  near 1, so the difference, not s_POS alone, finds a positional phase).

Across seeds (:func:`across_seeds`): for every numeric fact, per (variant, task), the mean, the sample
standard deviation (ddof = 1; 0 for one seed) and n. Facts that are not numbers (hop order, the
sets of pure layers) are tallied instead: ``"1<2<3<4" ×3``.

Example:
    >>> across_seeds([{"variant": "a", "task": "number", "seed": 0, "test_accuracy": 1.0},
    ...            {"variant": "a", "task": "number", "seed": 1, "test_accuracy": 0.8}])[0]["test_accuracy"]
    (0.9, 0.14142135623730948, 2)
"""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path
from typing import Any

from possym.experiment.spec import Experiment, RunSpec
from possym.records import GAMMA, SOLVED, LengthRecord, MetricsLog, PurityRecord, ScoreRecord, Table1Record
from possym.runs import CONFIG, RunDir, atomic_write_text, csv_text, save_figure
from possym.scores.dynamics import layer_sets
from possym.sweep.claims import claims_by_seed, claims_markdown


def hop_order(log: MetricsLog, threshold: float = SOLVED) -> tuple[str, dict[int, int | None]]:
    """("1<2<3=4", {hop: first step with acc ≥ threshold}) from a run's evaluations; unreached hops are left
    out of the order string and map to None.

    >>> hop_order(MetricsLog.from_json([{"event": "eval", "step": 1, "accuracy": 0.5, "acc_hop1": 0.95,
    ...                                  "acc_hop2": 0.1}, {"event": "eval", "step": 2, "accuracy": 0.9,
    ...                                  "acc_hop1": 1, "acc_hop2": 0.92}]))
    ('1<2', {1: 1, 2: 2})
    """
    hops = sorted(log.evals[0].hops) if log.evals else []
    first = {h: log.first_step(f"acc_hop{h}", threshold) for h in hops}
    reached = sorted((s, h) for h, s in first.items() if s is not None)
    text = ""
    for i, (step, h) in enumerate(reached):
        text += ("" if i == 0 else "=" if step == reached[i - 1][0] else "<") + str(h)
    return text, first


def trial_facts(trial: RunSpec, run: Path) -> dict[str, Any] | None:
    """The facts of one run of the sweep (see the module docstring), in its directory ``run``, or None if it
    never finished training."""
    if not (run / CONFIG).is_file():
        return None
    run_dir = RunDir.open(run)
    log = run_dir.metrics_log()
    if log.final is None:
        return None
    order, first = hop_order(log)
    facts: dict[str, Any] = {
        "variant": trial.variant,
        "task": trial.task,
        "seed": trial.seed,
        "test_accuracy": log.final.accuracy,
    }
    facts |= {f"test_acc_hop{h}": a for h, a in log.final.hops.items()}
    solved = log.first_step()
    facts["steps_to_90"] = math.nan if solved is None else solved
    facts["hop_order"] = order or "none"  # no hop reached the threshold
    facts |= {f"steps_to_90_hop{h}": math.nan if s is None else s for h, s in first.items()}
    facts["curve"] = log.curve()
    purity = [r for r in run_dir.read("purity", PurityRecord) if r.gamma == GAMMA and r.query == "last"]
    if purity:
        for kind in ("positional", "symbolic"):
            layers = [r.layer for r in purity if r.final_kind == kind]
            facts[f"pure_{kind}"] = ",".join(map(str, layers)) or "-"
            facts[f"n_pure_{kind}"] = len(layers)
            facts[f"last_pure_{kind}_step"] = max(
                (r.final_kind_step for r in purity if r.final_kind == kind and r.final_kind_step is not None),
                default=math.nan,
            )
    scores = run_dir.read("scores", ScoreRecord)
    last_token = [r for r in scores if r.query == "last"]
    if last_token:
        last = max(r.step for r in last_token)
        for r in last_token:
            if r.step == last:
                facts[f"s_pos_L{r.layer}"] = r.s_pos
                facts[f"s_sym_L{r.layer}"] = r.s_sym
    table1 = run_dir.read("table1", Table1Record)
    if table1:
        facts["table1_ids"] = " ".join("nan" if math.isnan(r.weighted_id) else str(round(r.weighted_id))
                                       for r in table1)
        facts |= {f"weighted_id_L{r.layer}": r.weighted_id for r in table1}
    facts |= plane_mix(run_dir, [r.layer for r in purity if r.final_kind == "positional"] if purity else [])
    steps = run_dir.checkpoint_steps()
    best = run_dir.best() if steps else None
    facts["best_step"] = math.nan if best is None else best
    for point in run_dir.read("lengthgen", LengthRecord):
        if point.n_hops != 0:
            continue
        step = steps[-1] if point.step is None else point.step  # older files: the final checkpoint
        if step == steps[-1]:
            facts[f"len_acc_{point.extra}"] = point.accuracy
        if step == best:
            facts[f"len_best_{point.extra}"] = point.accuracy
    if scores:
        for kind in ("positional", "symbolic"):
            sure, possible = layer_sets(scores, kind, GAMMA, ever=True)
            facts[f"ever_{kind}"] = _layer_text(sure, possible)
        l0 = sorted((r for r in last_token if r.layer == 0 and r.head == 0), key=lambda r: r.step)
        if l0:
            peak = max(l0, key=lambda r: r.s_pos - r.s_sym)
            facts["L0_peak_s_pos"], facts["L0_peak_s_sym"], facts["L0_peak_step"] = peak.s_pos, peak.s_sym, peak.step
            at_best = next((r for r in l0 if r.step == best), None)
            if at_best is not None:
                facts["L0_s_pos_best"], facts["L0_s_sym_best"] = at_best.s_pos, at_best.s_sym
    return facts


def plane_mix(run: RunDir, layers: list[int], planes: tuple[int, ...] = (1, 2)) -> dict[str, float]:
    """How the ``layers`` (the pure positional ones) share their frequency use among ``planes``, at the
    table step: per plane k, the positive part of its use over the positive use of every plane, pooled
    over the layers (``plane{k}_share``); NaN when there is no such layer or no frequency table.

    Plane 1 turns by θ = 1 rad a position and plane 2 by about 0.87, so a head on plane 1 sees a key
    44 positions away (7 turns, 0.018 rad off) almost as it sees the right one; the share says how much
    a run's positional heads lean on it.
    """
    from possym.records import FrequencyUseRecord

    use = [r for r in run.read("frequency_use", FrequencyUseRecord) if r.layer in layers]
    total = sum(max(r.use, 0.0) for r in use)
    return {f"plane{k}_share": (sum(max(r.use, 0.0) for r in use if r.frequency_id == k) / total
                                if total > 0 else math.nan) for k in planes}


def _layer_text(sure: set[int], possible: set[int]) -> str:
    """``L1-L3`` style text of a layer set, with the layers only possibly in it in brackets: ``L1-L3 (+L0)``."""
    def span(layers: set[int]) -> str:
        out: list[list[int]] = []
        run: list[int] = []
        for x in sorted(layers):
            if run and x != run[-1] + 1:
                out.append(run)
                run = []
            run.append(x)
        out += [run] if run else []
        return ", ".join(f"L{r[0]}" if len(r) == 1 else f"L{r[0]}-L{r[-1]}" for r in out)

    text = span(sure) or "none"
    return text + (f" (+{span(possible - sure)})" if possible - sure else "")


def _mean_sd(values: list[float]) -> tuple[float, float, int]:
    values = [v for v in values if not math.isnan(v)]
    n = len(values)
    if n == 0:
        return math.nan, math.nan, 0
    mean = sum(values) / n
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1)) if n > 1 else 0.0
    return mean, sd, n


def across_seeds(facts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One record per (variant, task): numeric facts as (mean, sd, n), other facts as a tally string."""
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for f in facts:
        groups.setdefault((f["variant"], f["task"]), []).append(f)
    out = []
    for (variant, task), rows in groups.items():
        record: dict[str, Any] = {"variant": variant, "task": task, "seeds": sorted(r["seed"] for r in rows)}
        keys = list(dict.fromkeys(k for r in rows for k in r if k not in ("variant", "task", "seed", "curve")))
        for key in keys:
            values = [r.get(key) for r in rows]
            numbers = [float(v) for v in values if isinstance(v, int | float) and not isinstance(v, bool)]
            if len(numbers) == len(values):
                record[key] = _mean_sd(numbers)
            else:
                record[key] = ", ".join(f"{v} ×{c}" for v, c in Counter(str(v) for v in values).most_common())
        out.append(record)
    return out


def summary_rows(summary: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The long table: variant, task, metric, mean, sd, n (or the tally in ``value``)."""
    rows = []
    for rec in summary:
        for key, value in rec.items():
            if key in ("variant", "task", "seeds"):
                continue
            base = {"variant": rec["variant"], "task": rec["task"], "metric": key}
            if isinstance(value, tuple):
                rows.append(base | {"mean": value[0], "sd": value[1], "n": value[2], "value": ""})
            else:
                rows.append(base | {"mean": "", "sd": "", "n": len(rec["seeds"]), "value": value})
    return rows


def _pm(value: Any, digits: int = 3) -> str:
    if not isinstance(value, tuple):
        return str(value) if value is not None else ""
    mean, sd, n = value
    if n == 0:
        return "–"
    return f"{mean:.{digits}f} ± {sd:.{digits}f}" if digits else f"{mean:.0f} ± {sd:.0f}"


def summary_markdown(summary: list[dict[str, Any]]) -> str:
    """The main table in Markdown: accuracy, speed, pure heads and the length curve, mean ± sd."""
    extras = sorted({int(k[8:]) for rec in summary for k in rec if k.startswith("len_acc_")})
    head = [
        "variant",
        "task",
        "seeds",
        "test acc",
        "steps to 90 %",
        "hop order",
        "pure pos. layers",
        "pure sym. layers",
        *[f"K={k}" for k in extras],
    ]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for rec in summary:
        cells = [
            rec["variant"],
            rec["task"],
            str(len(rec["seeds"])),
            _pm(rec.get("test_accuracy")),
            _pm(rec.get("steps_to_90"), 0),
            rec.get("hop_order", ""),
            rec.get("pure_positional", ""),
            rec.get("pure_symbolic", ""),
            *[_pm(rec.get(f"len_acc_{k}"), 2) for k in extras],
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


ARM_LENGTHS = (40, 100, 800, 5000)  # the paper's quoted points of Fig. 5B


def arms_markdown(summary: list[dict[str, Any]], lengths: tuple[int, ...] = ARM_LENGTHS) -> str:
    """Arm by claim, mean ± sd over seeds (the recipe ablation's table): the step each hop first reaches 0.9,
    the best step, the layers ever pure (sure, then + the possible ones), L0 at the best step and at its
    most positional step, and the length accuracies at the best and the final checkpoint."""
    hops = sorted({int(k[15:]) for rec in summary for k in rec if k.startswith("steps_to_90_hop")})
    head = ["arm", "task", "seeds", "0.9 reached (hop " + "/".join(map(str, hops)) + ")", "best step",
            "ever pure pos.", "ever pure sym.", "L0 at best (s_pos, s_sym)", "L0 most positional @ step",
            *[f"K={k} best / final" for k in lengths]]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for rec in summary:
        firsts = " / ".join(_pm(rec.get(f"steps_to_90_hop{h}"), 0) for h in hops)
        l0 = f"({_pm(rec.get('L0_s_pos_best'), 2)}, {_pm(rec.get('L0_s_sym_best'), 2)})"
        cells = [rec["variant"], rec["task"], str(len(rec["seeds"])), firsts, _pm(rec.get("best_step"), 0),
                 str(rec.get("ever_positional", "")), str(rec.get("ever_symbolic", "")), l0,
                 f"({_pm(rec.get('L0_peak_s_pos'), 2)}, {_pm(rec.get('L0_peak_s_sym'), 2)}) @ "
                 f"{_pm(rec.get('L0_peak_step'), 0)}",
                 *[f"{_pm(rec.get(f'len_best_{k}'), 2)} / {_pm(rec.get(f'len_acc_{k}'), 2)}" for k in lengths]]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def seeds_markdown(facts: list[dict[str, Any]]) -> str:
    """One row per trial: what varies from seed to seed (hop order, pure layers and when, Table 1 IDs, length)."""
    extras = sorted({int(k[8:]) for f in facts for k in f if k.startswith("len_acc_")})
    head = [
        "variant",
        "task",
        "seed",
        "test acc",
        "steps to 90 %",
        "hop order",
        "pure pos. (settled by step)",
        "pure sym. (settled by step)",
        "Table 1 IDs",
        *[f"K={k}" for k in extras],
    ]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for f in facts:
        when = {k: f.get(f"last_pure_{k}_step", math.nan) for k in ("positional", "symbolic")}
        cells = [
            f["variant"],
            f["task"],
            str(f["seed"]),
            f"{f['test_accuracy']:.3f}",
            f"{f['steps_to_90']:.0f}",
            f["hop_order"],
            *[f"{f.get('pure_' + k, '')} ({'–' if math.isnan(w) else f'{w:.0f}'})" for k, w in when.items()],
            f.get("table1_ids", ""),
            *[f"{f.get(f'len_acc_{k}', math.nan):.2f}" for k in extras],
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def write_summary(exp: Experiment, out: str | Path) -> list[Path]:
    """Read every finished run of the sweep ``exp`` under ``out``; write summary.csv/.md, seeds.csv/.md,
    claims_by_seed.csv/.md (:mod:`possym.sweep.claims`) and figures/; return the paths. It holds the sweep
    directory's writer lock (:mod:`possym.locks`), as the executor does, so that a summary is never written
    while another process runs or summarises the same sweep."""
    from possym.locks import writer_lock

    with writer_lock(out, "experiment"):
        return _write_summary(exp, Path(out))


def _write_summary(exp: Experiment, out: Path) -> list[Path]:
    from possym.sweep.plots import accuracy_curves, layer_scores, length_curves

    read = [(t, out / "runs" / t.id, trial_facts(t, out / "runs" / t.id)) for t in exp.runs()]
    facts = [f for _, _, f in read if f is not None]
    summary = across_seeds(facts)
    claims = claims_by_seed([(t, path) for t, path, f in read if f is not None])
    paths = [out / "summary.csv", out / "summary.md", out / "seeds.csv", out / "seeds.md"]
    paths += [out / "claims_by_seed.csv", out / "claims_by_seed.md", out / "arms.md"]
    atomic_write_text(paths[0], csv_text(summary_rows(summary)))
    atomic_write_text(paths[1], summary_markdown(summary))
    atomic_write_text(paths[2], csv_text([{k: v for k, v in f.items() if k != "curve"} for f in facts]))
    atomic_write_text(paths[3], seeds_markdown(facts))
    atomic_write_text(paths[4], csv_text(claims))
    atomic_write_text(paths[5], claims_markdown(claims))
    atomic_write_text(paths[6], arms_markdown(summary))
    for stem, fig in (  # Figures made without pyplot: nothing to close
        ("sweep_accuracy", accuracy_curves(facts)),
        ("sweep_length", length_curves(facts)),
        ("sweep_layer_scores", layer_scores(facts)),
    ):
        paths += save_figure(fig, out / "figures" / stem)
    return paths
