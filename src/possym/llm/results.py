"""From answer records to the paper's numbers: per-cell accuracy, the Table 3 pivot, and the screening.

Accuracy of a cell (task, length, run) is ``n_correct / n`` over the prompts that got a reply; a
request that failed after all retries is counted in ``n_failed`` and left out of both numbers, so a
flaky API lowers ``n``, not the accuracy. ``n_invalid`` counts replies that are not one
whitespace-free token (an explanation, a chain of thought, an empty reply).

Table 3 reports, per task and length, the mean and the standard deviation of the run accuracies;
we take the sample standard deviation (ddof = 1), the paper does not say which.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from possym.llm.run import AnswerRecord
from possym.one_hop import PROMPT_TASKS

SCREEN_LENGTH = 16
SCREEN_TASK = "letter"  # App. H screens a model on its letter-task accuracy
SCREEN_MIN_LETTER_ACCURACY = 0.85
SCREEN_MAX_INVALID_RATE = 0.10


@dataclass(frozen=True)
class CellResult:
    """One row of results.csv: a (task, length, run) cell."""

    provider: str
    model: str
    task: str
    length: int
    run: int
    accuracy: float
    n: int
    n_correct: int
    n_invalid: int
    n_failed: int

    @property
    def invalid_rate(self) -> float:
        return self.n_invalid / self.n if self.n else math.nan


@dataclass(frozen=True)
class PivotCell:
    """Mean and sd over runs of one (task, length): one entry of Table 3."""

    task: str
    length: int
    mean: float
    sd: float
    runs: int
    n: int
    n_invalid: int
    n_failed: int


@dataclass(frozen=True)
class Screening:
    """The paper's two screens (App. H): letter accuracy at length 16, and one-token replies."""

    letter_accuracy_at_16: float | None
    passes_accuracy: bool | None
    invalid_rate: float
    max_invalid_rate: float
    flagged_reasoning: bool

    @property
    def passes(self) -> bool | None:
        if self.passes_accuracy is None:
            return None
        return self.passes_accuracy and not self.flagged_reasoning

    def verdict(self) -> str:
        parts = []
        if self.letter_accuracy_at_16 is None:
            parts.append(f"letter accuracy at length {SCREEN_LENGTH}: not measured (length not in the grid)")
        else:
            ok = "pass" if self.passes_accuracy else "FAIL"
            parts.append(
                f"letter accuracy at length {SCREEN_LENGTH}: {self.letter_accuracy_at_16:.3f} "
                f"(needs >= {SCREEN_MIN_LETTER_ACCURACY}): {ok}"
            )
        flag = "FLAGGED (replies with more than one token)" if self.flagged_reasoning else "pass"
        parts.append(
            f"single-token replies: {1 - self.invalid_rate:.3f} overall, worst cell invalid rate "
            f"{self.max_invalid_rate:.3f} (flag above {SCREEN_MAX_INVALID_RATE}): {flag}"
        )
        overall = {True: "PASSES", False: "FAILS", None: "NOT DECIDED"}[self.passes]
        return f"screening {overall}: " + "; ".join(parts)


def cell_results(records: Iterable[AnswerRecord], *, provider: str, model: str) -> list[CellResult]:
    """Per-cell counts and accuracy, sorted by task, length, run."""
    cells: dict[tuple[str, int, int], list[AnswerRecord]] = defaultdict(list)
    for rec in records:
        cells[(rec.task, rec.length, rec.run)].append(rec)
    out = []
    for (task, length, run), recs in cells.items():
        answered = [r for r in recs if r.ok]
        n_correct = sum(bool(r.correct) for r in answered)
        n_invalid = sum(not r.single_token for r in answered)
        accuracy = n_correct / len(answered) if answered else math.nan
        out.append(
            CellResult(provider, model, task, length, run, accuracy, len(answered), n_correct, n_invalid,
                       len(recs) - len(answered))
        )  # fmt: skip
    order = {t: i for i, t in enumerate(PROMPT_TASKS)}
    return sorted(out, key=lambda c: (order.get(c.task, 9), c.task, c.length, c.run))


def _mean_sd(values: Sequence[float]) -> tuple[float, float]:
    values = [v for v in values if not math.isnan(v)]
    if not values:
        return math.nan, math.nan
    mean = sum(values) / len(values)
    if len(values) < 2:
        return mean, math.nan
    var = sum((v - mean) ** 2 for v in values) / (len(values) - 1)
    return mean, math.sqrt(var)


def pivot(cells: Iterable[CellResult]) -> list[PivotCell]:
    """Table 3: for each task and length, the mean and sd of the accuracy over runs."""
    groups: dict[tuple[str, int], list[CellResult]] = defaultdict(list)
    for cell in cells:
        groups[(cell.task, cell.length)].append(cell)
    out = []
    for (task, length), group in groups.items():
        mean, sd = _mean_sd([c.accuracy for c in group])
        out.append(
            PivotCell(task, length, mean, sd, len(group), sum(c.n for c in group), sum(c.n_invalid for c in group),
                      sum(c.n_failed for c in group))
        )  # fmt: skip
    order = {t: i for i, t in enumerate(PROMPT_TASKS)}
    return sorted(out, key=lambda p: (order.get(p.task, 9), p.task, p.length))


def screen(cells: Sequence[CellResult]) -> Screening:
    """Letter accuracy at length 16 (mean over runs) >= 0.85, and no cell with > 10% multi-token replies."""
    at16 = [c.accuracy for c in cells if c.task == SCREEN_TASK and c.length == SCREEN_LENGTH and c.n]
    letter16 = sum(at16) / len(at16) if at16 else None
    n = sum(c.n for c in cells)
    invalid = sum(c.n_invalid for c in cells)
    rates = [c.invalid_rate for c in cells if c.n]
    max_rate = max(rates) if rates else 0.0
    return Screening(
        letter_accuracy_at_16=letter16,
        passes_accuracy=None if letter16 is None else letter16 >= SCREEN_MIN_LETTER_ACCURACY,
        invalid_rate=invalid / n if n else 0.0,
        max_invalid_rate=max_rate,
        flagged_reasoning=max_rate > SCREEN_MAX_INVALID_RATE,
    )


def format_mean_sd(mean: float, sd: float) -> str:
    """'0.98 (0.01)', as in Table 3; 'nan' parts print as '-'."""
    m = "-" if math.isnan(mean) else f"{mean:.2f}"
    s = "-" if math.isnan(sd) else f"{sd:.2f}"
    return f"{m} ({s})"


def table3_markdown(table: Sequence[PivotCell], *, title: str) -> str:
    """A Markdown table with one row per length and Number / Letter columns, as Table 3."""
    by = {(p.task, p.length): p for p in table}
    tasks = [t for t in PROMPT_TASKS if any(p.task == t for p in table)]
    lengths = sorted({p.length for p in table})
    head = "| length | " + " | ".join(t.capitalize() for t in tasks) + " |"
    rule = "|---:|" + "---:|" * len(tasks)
    rows = [
        f"| {length} | "
        + " | ".join(
            format_mean_sd(by[(t, length)].mean, by[(t, length)].sd) if (t, length) in by else "" for t in tasks
        )
        + " |"
        for length in lengths
    ]
    return "\n".join([f"**{title}** — mean (sd) accuracy over runs", "", head, rule, *rows]) + "\n"
