"""The claims table seed by seed, in words: which of the paper's findings hold for every seed.

For each (variant, seed), the finished trials' run directories (number and letter side by side)
are read as one reproduction's evidence and checked by the claims table's own rules
(:func:`possym.report.grading.check_claims`: every claim about a trained run).
A claim's robustness across the seeds that could judge it (verdict other than ``n/a``):

- ``holds for every seed``: ``match`` on every seed;
- ``holds qualitatively for every seed``: ``match`` or ``partial`` on every seed, not all ``match``;
- ``fails for every seed``: ``differs`` on every seed;
- ``varies``: anything else; the tally says how.

A seed whose evidence cannot judge the claim (``n/a``, or no record: e.g. the frequency claim needs
pure positional layers) is left out, and the words say on how many seeds the claim was judged.

Example:
    >>> robustness(["match", "match", "match"])
    'holds for every seed'
    >>> robustness(["match", "differs", "n/a"])
    'varies (match ×1, differs ×1) (judged on 2 of 3 seeds)'
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from possym.report.rules import VERDICTS


def robustness(verdicts: list[str]) -> str:
    """One claim's verdicts across seeds, in words (module docstring)."""
    judged = [v for v in verdicts if v != "n/a"]
    if not judged:
        return "n/a"
    kinds, tally = set(judged), Counter(judged)
    if kinds == {"match"}:
        words = "holds for every seed"
    elif kinds <= {"match", "partial"}:
        words = "holds qualitatively for every seed"
    elif kinds == {"differs"}:
        words = "fails for every seed"
    else:
        order = {v: i for i, v in enumerate(VERDICTS)}
        words = "varies (" + ", ".join(f"{v} ×{tally[v]}" for v in sorted(tally, key=lambda v: (-tally[v],
                                                                                           order.get(v, 99)))) + ")"
    return words if len(judged) == len(verdicts) else f"{words} (judged on {len(judged)} of {len(verdicts)} seeds)"


def claims_wide(rows: list[dict[str, Any]]) -> list[dict[str, str]]:
    """One record per (variant, claim): the paper's value, ``seed N`` = "verdict: ours" per seed, and
    ``across seeds`` (:func:`robustness`); rows as :func:`claims_by_seed` gives them (seeds may be
    ints, or strings when read back from the CSV)."""
    out = []
    for variant in dict.fromkeys(r["variant"] for r in rows):
        mine = [r for r in rows if r["variant"] == variant]
        seeds = sorted({r["seed"] for r in mine}, key=int)
        for claim in dict.fromkeys(r["claim"] for r in mine):
            by_seed = {r["seed"]: r for r in mine if r["claim"] == claim}
            record = {"variant": variant, "claim": claim, "paper": next(iter(by_seed.values()))["paper"]}
            for seed in seeds:
                r = by_seed.get(seed)
                record[f"seed {seed}"] = f"{r['verdict']}: {r['ours']}" if r else "–"
            record["across seeds"] = robustness([by_seed[s]["verdict"] if s in by_seed else "n/a" for s in seeds])
            out.append(record)
    return out


def claims_markdown(rows: list[dict[str, Any]]) -> str:
    """Per variant, one line per claim: the paper's value, each seed's verdict (and value), the robustness."""
    out = []
    wide = claims_wide(rows)
    for variant in dict.fromkeys(r["variant"] for r in wide):
        mine = [{k: v for k, v in r.items() if k != "variant"} for r in wide if r["variant"] == variant]
        head = list(mine[0])
        out += [f"### {variant}", "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        out += ["| " + " | ".join(r[k] for k in head) + " |" for r in mine]
        out.append("")
    return "\n".join(out)
