"""How each reading of the length protocol moves the paper's length claims (Sec. 3.6).

The paper says only that extra symbols go before the target window (docs/choices.md, "The length
protocol"). A *reading* fixes what it leaves open: what the extra tokens are (``extra_tokens``), how the
pooled accuracy weights the hop counts (``hop_mix``), which checkpoint is measured (``checkpoint``:
"best" or "final"), and what the paper's x-axis counts (``x_axis``: "extra", the K inserted tokens, or
"seq_len", the total input length K + 17). For each reading this module computes the values the length
claims of ``possym/data/claims.yaml`` grade:

- ``{task} task: accuracy at +{L} tokens`` for L = 100, 800, 5,000 and both tasks: the pooled accuracy at
  x = L (K = L, or K = L − 17 on the total-length axis), with its per-prefix 95% interval;
- ``the letter model extrapolates much further than the number model``: per seed, the share of the
  lengths x ≥ 50 measured for both tasks at which the letter accuracy ≥ the number accuracy (holds at 1).

:func:`length_claim_values` gives one row per (reading, claim, seed); :func:`length_claim_table` grades
each (reading, claim) over the seeds by the claims' own grading (:func:`possym.report.grading.grade_measured`)
and lays the readings side by side, so one table shows which reading moves which verdict.

The input is a frame of length-curve rows (``possym.records.LengthRecord`` fields) with columns ``task``,
``seed`` and the reading's columns, as :func:`possym.stages.length_protocol.read_protocol_curves` reads them.

Example:
    >>> import pandas as pd
    >>> rows = [dict(task=t, seed=0, extra_tokens="targets", hop_mix="uniform", checkpoint="best", extra=k,
    ...              seq_len=k + 17, n_hops=0, accuracy=a, cluster_low=a - 0.05, cluster_high=a + 0.05)
    ...         for t, acc in (("number", {83: 0.5, 100: 0.4}), ("letter", {83: 0.99, 100: 0.98}))
    ...         for k, a in acc.items()]
    >>> values = length_claim_values(pd.DataFrame(rows))
    >>> values[values.claim == "number task: accuracy at +100 tokens"][["x_axis", "value"]].values.tolist()
    [['extra', 0.4], ['seq_len', 0.5]]
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from possym.errors import PossymError
from possym.paper import paper_numbers
from possym.report.measures import Measured, Reading, SeedReading
from possym.report.rules import Estimate, SeedVerdict

READING = ("extra_tokens", "hop_mix", "checkpoint")
X_AXES = ("extra", "seq_len")
CLAIM_LENGTHS = (100, 800, 5000)
ORDER_CLAIM = "the letter model extrapolates much further than the number model"
ORDER_FROM = 50  # the ordering claim is checked at every length >= +50 (claims.yaml: letter-extrapolates)


def accuracy_claim(task: str, length: int) -> str:
    """The name of the claim about ``task``'s accuracy at +``length``, as the claims table spells it."""
    return f"{task} task: accuracy at +{length} tokens"


def _check(curves: pd.DataFrame) -> None:
    need = {"task", "seed", *READING, "extra", "seq_len", "n_hops", "accuracy", "cluster_low", "cluster_high"}
    missing = sorted(need - set(curves.columns))
    if missing:
        raise PossymError(f"length curves lack the columns {missing}; they need {sorted(need)}")


def length_claim_values(curves: pd.DataFrame, x_axes: Sequence[str] = X_AXES) -> pd.DataFrame:
    """One row per (reading, x_axis, claim, seed): ``value`` (an accuracy, or the ordering's share), ``low``
    and ``high`` (the per-prefix interval; the share's are the value), ``paper`` (the paper's value; blank
    for the ordering) and ``at_extra`` (the K the value was read at; blank for the ordering). A length
    the curve did not measure gives no row."""
    _check(curves)
    bad = [x for x in x_axes if x not in X_AXES]
    if bad:
        raise PossymError(f"x_axes {bad}; allowed: {X_AXES}")
    paper = paper_numbers()["fig5b_length_generalisation"]
    pooled = curves[curves.n_hops == 0]
    rows = []
    for reading, group in pooled.groupby(list(READING), sort=True):
        base = dict(zip(READING, reading, strict=True))
        for x_axis in x_axes:
            for task in ("number", "letter"):
                want = dict(zip(paper["extra"], paper[f"{task}_task"], strict=True))
                for (seed,), curve in group[group.task == task].groupby(["seed"]):
                    for length in CLAIM_LENGTHS:
                        at = curve[curve[x_axis] == length]
                        if at.empty:
                            continue
                        point = at.iloc[0]
                        rows.append({**base, "x_axis": x_axis, "claim": accuracy_claim(task, length), "seed": seed,
                                     "value": float(point.accuracy), "low": float(point.cluster_low),
                                     "high": float(point.cluster_high), "paper": want.get(length),
                                     "at_extra": int(point.extra)})
            for seed, share in _order_shares(group, x_axis).items():
                rows.append({**base, "x_axis": x_axis, "claim": ORDER_CLAIM, "seed": seed, "value": share,
                             "low": share, "high": share, "paper": None, "at_extra": None})
    return pd.DataFrame(rows, columns=[*READING, "x_axis", "claim", "seed", "value", "low", "high", "paper",
                                       "at_extra"])


def _order_shares(group: pd.DataFrame, x_axis: str) -> dict[int, float]:
    """Per seed with both tasks: the share of common x >= 50 at which letter >= number."""
    out = {}
    for seed in sorted(set(group.seed)):
        acc = {t: group[(group.task == t) & (group.seed == seed)].set_index(x_axis).accuracy
               for t in ("number", "letter")}
        common = sorted(set(acc["number"].index) & set(acc["letter"].index))
        beyond = [x for x in common if x >= ORDER_FROM]
        if beyond:
            out[int(seed)] = sum(acc["letter"][x] >= acc["number"][x] for x in beyond) / len(beyond)
    return out


def length_claim_table(curves: pd.DataFrame, chance: dict[str, float] | None = None,
                       x_axes: Sequence[str] = X_AXES) -> pd.DataFrame:
    """One row per (claim, reading): the seeds' mean, min and max, the verdict by the claim's rule, and a
    text ``cell`` ("0.43 (0.33–0.54) match"). ``chance``: a uniform guess's accuracy per task (1/120 and
    1/64 at the paper's), for the "uninformative" verdict at the floor. Pivot ``cell`` on the reading
    columns for the one-table view (:func:`claims_by_reading`)."""
    from possym.report.claimspec import load_claims
    from possym.report.grading import grade_measured

    values = length_claim_values(curves, x_axes)
    chance = chance or {}
    specs = {s.claim: s for s in load_claims()}
    rows = []
    for key, group in values.groupby(["claim", *READING, "x_axis"], sort=False):
        claim = key[0]
        spec = specs[claim]
        if claim == ORDER_CLAIM:
            seeds = tuple(SeedReading(int(s), f"{v:.2f}", verdict=SeedVerdict.holds(v == 1.0, weak=v >= 0.8))
                          for s, v in zip(group.seed, group.value, strict=True))
            paper = float("nan")
        else:
            paper = float(group.paper.iloc[0])
            seeds = tuple(SeedReading(int(s), f"{v:.2f}", Estimate.of(v, lo, hi))
                          for s, v, lo, hi in zip(group.seed, group.value, group.low, group.high, strict=True))
        # The claims' own grading, on this reading's seeds: one grading system, whatever the reading.
        verdict = grade_measured(spec, Measured((Reading("this reading", seeds),)), chance.get(spec.task),
                                 power=False).verdict
        mean, lo, hi = group.value.mean(), group.value.min(), group.value.max()
        rows.append({"claim": claim, **dict(zip([*READING, "x_axis"], key[1:], strict=True)), "paper": paper,
                     "seeds": len(group), "mean": mean, "min": lo, "max": hi, "verdict": verdict,
                     "cell": f"{mean:.2f} ({lo:.2f}–{hi:.2f}) {verdict}"})
    return pd.DataFrame(rows)


def claims_by_reading(table: pd.DataFrame) -> pd.DataFrame:
    """The one-table view: a row per claim (with the paper's value), a column per reading, each cell the
    seeds' mean (range) and verdict."""
    named = table.assign(paper=table.paper.map(lambda v: "" if pd.isna(v) else f"{v:g}"))
    return named.pivot_table(index=["claim", "paper"], columns=[*READING, "x_axis"], values="cell",
                             aggfunc="first", sort=False)
