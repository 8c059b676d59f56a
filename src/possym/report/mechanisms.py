"""The mechanism stages' tables over every run of an experiment, and one row per (task, seed, measure) that
says what each seed shows (docs/results.md, the mechanisms behind the length gaps).

Each run's stages write their own tables (RUN/cliff/, RUN/dilution/, RUN/l0/), each a run artifact with its record
type (:data:`possym.runs.ARTIFACTS`). :func:`collect_tables` reads them as their records and stacks their frames
with ``task`` and ``seed`` columns; :func:`mechanism_summary` reads from those stacks the
few numbers that decide each finding, per seed, so that a finding can be said to hold "at every seed"
only when it does:

- the cliff (number runs): accuracy by hop count at both ends of the K grid and the first K at which
  the 4-hop accuracy falls below 1/2; in each positional layer, the share of the failing inputs'
  attention maxima on the plane-1 alias (−44) and the commonest offset with its share (first hop
  query, inputs where the alias key exists); the accuracy past the cliff with plane p gated there;
- the dilution (letter runs): 3- and 4-hop accuracy at the largest K ≤ 800 as trained, with the extra
  window knocked out in every layer, and with every layer's logits × β;
- L0 (both): whether its last-token s_SYM is a mixture of inputs (Silverman, α = 0.05) at the best
  checkpoint, and how many heads are ever pure by the point estimate against the sustained count.

A measure a run lacks (the stage not run, or not its task) is absent, not NaN.

Example:
    >>> import pandas as pd
    >>> hops = pd.DataFrame({"task": "number", "seed": 0, "extra": [25, 25, 40, 40], "n_hops": [1, 4, 1, 4],
    ...                      "accuracy": [1.0, 0.9, 1.0, 0.3]})
    >>> s = mechanism_summary({"cliff_accuracy_hops": hops})
    >>> s.loc[s.measure == "cliff: first K with 4-hop accuracy < 0.5", "value"].item()
    40.0
"""

from __future__ import annotations

from collections.abc import Iterable

import pandas as pd

from possym.runs import RunDir

# The run artifacts stacked; each stacked table takes its artifact's name.
TABLES = ("cliff_accuracy_hops", "cliff_landing_summary", "cliff_gated", "cliff_evidence", "cliff_plane_margins",
          "dilution_knockout", "dilution_sharpen", "l0_modality", "l0_tally", "l0_split")
DILUTION_K = 800
BETAS = (1.3, 1.5, 2.0)
SUMMARY_COLUMNS = ["task", "seed", "measure", "value", "detail"]


def collect_tables(runs: Iterable[RunDir]) -> dict[str, pd.DataFrame]:
    """Every mechanism table the runs hold, stacked over runs with ``task`` and ``seed`` first; a table no
    run holds is left out."""
    stacks: dict[str, list[pd.DataFrame]] = {}
    for run in runs:
        task, seed = run.config.task.name, run.config.seeds.init
        for name in TABLES:
            frame = run.read_table(name)
            if not frame.empty:
                stacks.setdefault(name, []).append(frame.assign(task=task, seed=seed)[["task", "seed", *frame.columns]])
    return {name: pd.concat(frames, ignore_index=True) for name, frames in stacks.items()}


def mechanism_summary(tables: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """One row per (task, seed, measure): ``value`` a number, ``detail`` what it counts (module docstring)."""
    rows: list[dict[str, object]] = []
    rows += _cliff_rows(tables)
    rows += _dilution_rows(tables)
    rows += _l0_rows(tables)
    return pd.DataFrame(rows, columns=SUMMARY_COLUMNS).sort_values(["task", "measure", "seed"], kind="stable",
                                                                     ignore_index=True)


def _row(task: str, seed: int, measure: str, value: float, detail: str = "") -> dict[str, object]:
    return {"task": task, "seed": int(seed), "measure": measure, "value": float(value), "detail": detail}


def _cliff_rows(tables: dict[str, pd.DataFrame]) -> list[dict[str, object]]:
    rows = []
    hops = tables.get("cliff_accuracy_hops")
    if hops is not None:
        for (task, seed), g in hops.groupby(["task", "seed"], sort=True):
            lo, hi = g["extra"].min(), g["extra"].max()
            for k in (lo, hi):
                for h, acc in g[g["extra"] == k].set_index("n_hops")["accuracy"].items():
                    rows.append(_row(task, seed, f"cliff: {h}-hop accuracy at K = {k}", acc))
            most = g["n_hops"].max()
            below = g[(g["n_hops"] == most) & (g["accuracy"] < 0.5)].sort_values("extra")
            if not below.empty:
                rows.append(_row(task, seed, f"cliff: first K with {most}-hop accuracy < 0.5", below["extra"].iloc[0]))
    landing = tables.get("cliff_landing_summary")
    if landing is not None:
        first = landing[(~landing["correct"].astype(bool)) & landing["alias_exists"].astype(bool)
                        & (landing["query"] == landing["query"].min())]
        for (task, seed, layer, plane), g in first.groupby(["task", "seed", "layer", "plane"], sort=True):
            r = next(g.itertuples())
            rows.append(_row(task, seed, f"cliff: L{layer} failing maxima on the plane-{plane} alias (-{r.alias})",
                             r.share_alias, f"n = {r.n}"))
            if plane == landing["plane"].min():
                rows.append(_row(task, seed, f"cliff: L{layer} failing maxima at the commonest offset",
                                 r.mode_share, f"offset {r.mode_offset}; top {r.top_offsets}"))
    evidence = tables.get("cliff_evidence")
    if evidence is not None:
        for r in evidence.itertuples():
            rows.append(_row(r.task, r.seed, f"cliff: accuracy past the cliff, plane {r.plane} gated in L{r.layer}",
                             r.acc_above_gated, f"as trained {r.acc_above:.2f}; alias rule supported: {r.supported}"))
    return rows


def _dilution_rows(tables: dict[str, pd.DataFrame]) -> list[dict[str, object]]:
    rows = []
    knockout, sharpen = tables.get("dilution_knockout"), tables.get("dilution_sharpen")
    if knockout is not None:
        for (task, seed), g in knockout.groupby(["task", "seed"], sort=True):
            k = g.loc[g["extra"] <= DILUTION_K, "extra"].max()
            for arm, label in (("none", "as trained"), ("all", "extra window knocked out in every layer")):
                for r in g[(g["extra"] == k) & (g["knocked_out"] == arm)].itertuples():
                    rows.append(_row(task, seed, f"dilution: {r.n_hops}-hop accuracy at K = {k}, {label}", r.accuracy,
                                     f"n = {r.n}"))
    if sharpen is not None:
        every = sharpen[sharpen["set"] == "all"]
        for (task, seed), g in every.groupby(["task", "seed"], sort=True):
            k = g.loc[g["extra"] <= DILUTION_K, "extra"].max()
            for r in g[(g["extra"] == k) & g["beta"].isin(BETAS)].itertuples():
                rows.append(_row(task, seed, f"dilution: {r.n_hops}-hop accuracy at K = {k}, every layer's "
                                             f"logits x {r.beta:g}", r.accuracy))
    return rows


def _l0_rows(tables: dict[str, pd.DataFrame]) -> list[dict[str, object]]:
    rows = []
    modality, tally = tables.get("l0_modality"), tables.get("l0_tally")
    if modality is not None:
        last = modality[(modality["query"] == "last") & (modality["score"] == "s_sym") & (modality["layer"] == 0)]
        for (task, seed), g in last.groupby(["task", "seed"], sort=True):
            r = next(g.sort_values("step").itertuples())  # the best checkpoint: best <= final
            rows.append(_row(task, seed, "l0: last-token s_SYM unimodality p-value (best checkpoint)", r.p_value,
                             f"step {r.step}; share above the antimode {r.share_above:.2f}; "
                             f"mixture at 0.05: {r.mixture}"))
    if tally is not None:
        for r in tally.itertuples():
            rows.append(_row(r.task, r.seed, f"l0: {r.kind} heads ever pure, sustained count", r.counted,
                             f"by the point estimate {r.ever_point}; counted layers {r.layers_counted}"))
    return rows


__all__ = ["TABLES", "collect_tables", "mechanism_summary"]
