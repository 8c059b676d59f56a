"""The paper's headline claims, each checked against our measurements by an explicit tolerance rule.

Every claim is a record: ``claim``, ``section`` (where the paper makes it), ``paper`` (its value, from
:func:`possym.paper.paper_numbers` or its text), ``ours``, ``verdict`` and ``rule`` (the rule
that turned the two into the verdict, in words). Verdicts:

- ``match``: within the rule's tolerance;
- ``partial``: the qualitative finding holds but the numbers are outside the tolerance;
- ``differs``: it does not hold for us;
- ``n/a``: not comparable (e.g. layer claims on a model that does not have the paper's 12 layers),
  or the evidence is missing; ``ours`` says which.

The rules, once for all:

- **Accuracy at a length** (Fig. 5B): with h the half-width of our per-prefix 95% interval,
  match if |ours - paper| <= 0.05 + h, partial if <= 0.15 + h, else differs. The paper's points are
  digitised to about +-0.01, well inside 0.05.
- **Sets of layers** (Figs. 2C, 6, 7): with J the Jaccard index of our set and the paper's, match if
  J = 1, partial if J >= 0.5, else differs.
- **Counts of pure heads**: match if within 1 of the paper's, partial if within 3.
- **Sampling noise** (scores carry bootstrap 95% intervals; :func:`possym.scores.dynamics.layer_sets`):
  a layer is *surely* pure when its whole interval box is, *possibly* pure when the box meets the
  pure region. Every set between the sure and the possible one is consistent with our data; the
  rules above are applied to the one closest to the paper's (the sure layers plus the possible ones
  the paper lists), and ``ours`` names the layers that straddle γ. So a claim never flips on sampling
  noise alone. Scores without intervals count by their point estimates.
- **Table 1 frequency IDs**: a layer agrees if |our weighted ID - paper's| <= 3; match if >= 10 of 12
  layers agree, partial if >= 6.
- **Orders and inequalities** (hop order, which task learns first, letter above number): exact, as
  each rule states; ties count as holding where the paper's own figure has a tie.
- **Theorem 3.2's bounds**: match if the bound holds, on every n the theorem speaks of, for the
  paper's Definition 3.1 (the maximum over inputs); partial if it holds only for the worst case
  (the minimum); differs if it fails for both.

Pure means γ = 0.1 (the paper's Fig. 2C threshold), at the last-token query.

Example:
    >>> verdict_for_value(0.70, 0.74, 0.03)
    'match'
    >>> verdict_for_set({1, 2, 3, 4}, {0, 1, 2, 3})
    'partial'
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from possym.paper import paper_numbers
from possym.records import (
    GAMMA,
    BoundCheckRecord,
    Fig5aRecord,
    LengthPoint,
    PurityRecord,
    ScoreRecord,
    Table1Record,
    VerificationRecord,
)
from possym.scores.dynamics import layer_sets, purity

VERDICTS = ("match", "partial", "differs", "n/a")
PAPER_LAYERS = 12


@dataclass(frozen=True)
class TaskEvidence:
    """What one trained run produced, as typed records (any missing table is an empty list)."""

    n_layers: int
    metrics: Sequence[Mapping[str, Any]] = ()  # the run's log (JSON records, already typed)
    purity: Sequence[PurityRecord] = ()
    scores: Sequence[ScoreRecord] = ()
    table1: Sequence[Table1Record] = ()
    lengthgen: Sequence[LengthPoint] = ()  # the curve at ``lengthgen_step``
    lengthgen_final: Sequence[LengthPoint] = ()  # the curve at the final checkpoint, shown beside it
    # The checkpoint each kind of number comes from, as a claim names it ("best 4800", "final 6750").
    lengthgen_step: str = ""
    scores_step: str = ""
    table1_step: str = ""


@dataclass(frozen=True)
class Evidence:
    tasks: Mapping[str, TaskEvidence]
    bounds: Sequence[BoundCheckRecord] = ()
    verification: Sequence[VerificationRecord] = ()
    fig5a: Sequence[Fig5aRecord] = ()


def verdict_for_value(ours: float, paper: float, half_width: float = 0.0) -> str:
    """The accuracy-at-a-length rule (module docstring)."""
    gap = abs(ours - paper)
    return "match" if gap <= 0.05 + half_width else "partial" if gap <= 0.15 + half_width else "differs"


def verdict_for_set(ours: set[int], paper: set[int]) -> str:
    """The sets-of-layers rule (module docstring)."""
    union = ours | paper
    jaccard = len(ours & paper) / len(union) if union else 1.0
    return "match" if jaccard == 1.0 else "partial" if jaccard >= 0.5 else "differs"


def _layers(layers: set[int]) -> str:
    return "{" + ", ".join(f"L{x}" for x in sorted(layers)) + "}" if layers else "none"


def _claim(claim: str, section: str, paper: str, ours: str, verdict: str, rule: str, step: str = "") -> dict[str, str]:
    assert verdict in VERDICTS, verdict
    return {"claim": claim, "section": section, "paper": paper, "ours": ours, "verdict": verdict, "rule": rule,
            "step": step}


def first_steps(metrics: Sequence[Mapping[str, Any]], threshold: float = 0.9) -> dict[str, int | None]:
    """First evaluated step at which each accuracy key (``acc_hop1``.., ``accuracy``) reaches ``threshold``."""
    from possym.evaluate.curves import learning_summary

    return learning_summary([dict(m) for m in metrics], threshold)["first_step"]


def ever_pure(purity_rows: Sequence[PurityRecord], kind: str) -> set[int]:
    """Layers (head 0, last-token query, γ = 0.1) that are pure ``kind`` at some checkpoint."""
    return {r.layer for r in purity_rows if r.gamma == GAMMA and r.query == "last" and kind in (r.kind, r.final_kind)}


def closest_layers(sure: set[int], possible: set[int], paper: set[int]) -> set[int]:
    """Of the sets between ``sure`` and ``possible`` (all consistent with the intervals), the one closest to
    ``paper``: the sure layers plus the possible ones the paper lists.

    >>> sorted(closest_layers({1, 2}, {0, 1, 2, 4}, {0, 1, 2, 3}))
    [0, 1, 2]
    """
    return sure | (possible & paper)


def _straddling(sure: set[int], possible: set[int]) -> str:
    uncertain = possible - sure
    return f" ({', '.join(f'L{x}' for x in sorted(uncertain))} straddle γ)" if uncertain else ""


def layer_claim_sets(te: TaskEvidence, kind: str, paper: set[int], *, ever: bool) -> tuple[set[int], str]:
    """(our set for the rule, its text): from the scores' intervals when the run has scores, else from
    the purity table (``ever``) or the point estimates."""
    if te.scores:
        sure, possible = layer_sets([r.to_dict() for r in te.scores], kind, GAMMA, ever=ever)
        chosen = closest_layers(sure, possible, paper)
        return chosen, _layers(chosen) + _straddling(sure, possible)
    ours = ever_pure(te.purity, kind) if ever else set()
    return ours, _layers(ours)


def final_kinds(scores: Sequence[ScoreRecord]) -> dict[int, str]:
    """Per layer (head 0), the purity kind at the last scored step ("" if mixed)."""
    last = max((r.step for r in scores), default=None)
    return {r.layer: purity(r.s_pos, r.s_sym, GAMMA)
            for r in scores if r.step == last and r.query == "last" and r.head == 0}


def _at(lengthgen: Sequence[LengthPoint], extra: int) -> LengthPoint | None:
    return next((p for p in lengthgen if p.extra == extra and p.n_hops == 0), None)


def learning_claims(ev: Evidence) -> list[dict[str, str]]:
    out = []
    paper = paper_numbers()["fig2a_number_task_test_accuracy_by_hop"]
    number = ev.tasks.get("number")
    rule = "match if our first steps reaching 0.9 never decrease with the hop count and 1 hop comes before the most"
    paper_text = "hops learned in order: 1 -> 2 -> 3 ~ 4 (Fig. 2A, 0.9 reached at about 2000/3000/3500/3500)"
    if number and number.metrics:
        steps = first_steps(number.metrics)
        hops = [steps.get(f"acc_hop{h}") for h in range(1, 5) if f"acc_hop{h}" in steps]
        reached = [s for s in hops if s is not None]
        ordered = (len(reached) == len(hops) > 0 and all(a <= b for a, b in zip(reached, reached[1:], strict=False))
                   and reached[0] < reached[-1])
        out.append(
            _claim(
                "number-task hops are learned in order",
                "Sec. 3.2, Fig. 2A",
                paper_text,
                " / ".join(str(s) for s in hops),
                "match" if ordered else "differs",
                rule,
            )
        )
    else:
        out.append(
            _claim("number-task hops are learned in order", "Sec. 3.2, Fig. 2A", paper_text, "no run", "n/a", rule)
        )
    letter = ev.tasks.get("letter")
    rule = "match if the spread of our per-hop first steps reaching 0.9 is <= 10% of training, partial if <= 20%"
    if letter and letter.metrics:
        steps = first_steps(letter.metrics)
        hops = [s for k, s in steps.items() if k.startswith("acc_hop")]
        reached = [s for s in hops if s is not None]
        total = max(r["step"] for r in letter.metrics if "step" in r)
        if len(reached) < len(hops) or not reached:
            verdict, ours = "differs", "some hop count never reaches 0.9"
        else:
            spread = (max(reached) - min(reached)) / max(total, 1)
            verdict = "match" if spread <= 0.1 else "partial" if spread <= 0.2 else "differs"
            ours = f"{min(reached)}-{max(reached)} (spread {spread:.0%} of {total} steps)"
        out.append(
            _claim(
                "letter-task hops are learned together",
                "Sec. 3.2, Fig. 2A",
                "per-hop curves within a few points of each other",
                ours,
                verdict,
                rule,
            )
        )
    if number and letter and number.metrics and letter.metrics:
        n_step, l_step = first_steps(number.metrics)["accuracy"], first_steps(letter.metrics)["accuracy"]
        faster = n_step is not None and l_step is not None and l_step < n_step
        out.append(
            _claim(
                "the letter task is learned before the number task",
                "Sec. 3.2, Fig. 2A",
                f"max accuracy at step {paper_numbers()['fig2a_letter_task_test_accuracy_global']['max_accuracy_step']}"
                f" (letter) vs {paper['max_accuracy_step']} (number)",
                f"global accuracy >= 0.9 at step {l_step} (letter) vs {n_step} (number)",
                "match" if faster else "differs",
                "match if our letter model reaches 0.9 global accuracy at an earlier step than the number model",
            )
        )
    return out


def head_claims(ev: Evidence) -> list[dict[str, str]]:
    fig2c = paper_numbers()["fig2c_purity_gamma_0.1"]
    out = []
    layer_rule = "Jaccard index J of the layer sets: match if J = 1, partial if J >= 0.5"
    settings = [
        ("number", "positional", set(fig2c["number_task"]["pure_positional_layers"]), "Sec. 3.3, Fig. 2C"),
        ("number", "symbolic", set(fig2c["number_task"]["pure_symbolic_layers"]), "Sec. 3.3, Fig. 2C"),
        ("letter", "symbolic", set(fig2c["letter_task"]["pure_symbolic_layers"]), "Sec. 3.3, Fig. 7"),
    ]
    for task, kind, paper_set, section in settings:
        name = f"{task} task: layers that become pure {kind} (γ = 0.1)"
        te = ev.tasks.get(task)
        if te is None or not te.purity:
            out.append(_claim(name, section, _layers(paper_set), "no scores", "n/a", layer_rule))
        elif te.n_layers != PAPER_LAYERS:
            _, text = layer_claim_sets(te, kind, paper_set, ever=True)
            out.append(
                _claim(
                    name,
                    section,
                    _layers(paper_set),
                    f"{text} of {te.n_layers} layers",
                    "n/a",
                    layer_rule + "; needs the paper's 12 layers",
                )
            )
        else:
            ours, text = layer_claim_sets(te, kind, paper_set, ever=True)
            rule = layer_rule + "; on the set closest to the paper's within our intervals"
            out.append(_claim(name, section, _layers(paper_set), text, verdict_for_set(ours, paper_set), rule))
    number, letter = ev.tasks.get("number"), ev.tasks.get("letter")
    rule = ("match if the number model has a pure positional layer at its last checkpoint and the letter model "
            "none (within our intervals: possibly one, surely none)")
    if number and letter and number.scores and letter.scores:
        n_sure, n_possible = layer_sets([r.to_dict() for r in number.scores], "positional", GAMMA, ever=False)
        l_sure, l_possible = layer_sets([r.to_dict() for r in letter.scores], "positional", GAMMA, ever=False)
        out.append(
            _claim(
                "positional layers appear in the number task only",
                "Sec. 3.3, Fig. 6",
                "number L1-L3 positional; letter none",
                f"number {_layers(n_possible)}{_straddling(n_sure, n_possible)}; "
                f"letter {_layers(l_sure)}{_straddling(l_sure, l_possible)}",
                "match" if n_possible and not l_sure else "differs",
                rule,
            )
        )
    fig6 = paper_numbers()["fig6_final_scores_last_token_step_6000"]
    for task in ("number", "letter"):
        te = ev.tasks.get(task)
        if te is None or not te.scores:
            continue
        rows = [r.to_dict() for r in te.scores]
        sure = set().union(*(layer_sets(rows, k, GAMMA, ever=False)[0] for k in ("positional", "symbolic")))
        possible = set().union(*(layer_sets(rows, k, GAMMA, ever=False)[1] for k in ("positional", "symbolic")))
        mixed_l0 = fig6[f"{task}_task"]["L0"]
        paper_pure = PAPER_LAYERS - 1  # every layer but L0 (Fig. 6: L0 at (s_pos, s_sym) = mixed)
        # The count within our intervals that is closest to the paper's (module docstring).
        pure = min(max(paper_pure, len(sure)), len(possible))
        rule = "match if within 1 of the paper's count, partial if within 3"
        if te.n_layers != PAPER_LAYERS:
            verdict, rule = ("match" if pure >= 1 else "differs"), "pure heads emerge: match if at least one"
        else:
            gap = abs(pure - paper_pure)
            verdict = "match" if gap <= 1 else "partial" if gap <= 3 else "differs"
        out.append(
            _claim(
                f"{task} task: pure heads at the end of training",
                "Sec. 3.3, Fig. 6",
                f"{paper_pure} of 12 (L0 mixed at {tuple(mixed_l0)})",
                f"{pure} of {te.n_layers}{_straddling(sure, possible)}",
                verdict,
                rule,
            )
        )
    return out


def frequency_claims(ev: Evidence) -> list[dict[str, str]]:
    paper = paper_numbers()["table1_weighted_frequency_id"]
    out = []
    rule = "a layer agrees if |our weighted ID - paper's| <= 3; match if >= 10 of 12 agree, partial if >= 6"
    for task in ("number", "letter"):
        te = ev.tasks.get(task)
        name = f"{task} task: Table 1 weighted frequency IDs"
        ids = {r.layer: r.weighted_id for r in (te.table1 if te else ()) if r.head == 0}
        if not ids:
            continue
        ours = ", ".join(f"{ids[layer]:.0f}" for layer in sorted(ids))
        if len(ids) != PAPER_LAYERS:
            out.append(
                _claim(
                    name,
                    "Sec. 3.5, Table 1",
                    str(paper[f"{task}_task"]),
                    ours,
                    "n/a",
                    rule + "; needs the paper's 12 layers",
                )
            )
            continue
        agree = sum(abs(ids[layer] - want) <= 3 for layer, want in enumerate(paper[f"{task}_task"]))
        verdict = "match" if agree >= 10 else "partial" if agree >= 6 else "differs"
        out.append(
            _claim(
                name,
                "Sec. 3.5, Table 1",
                ", ".join(str(x) for x in paper[f"{task}_task"]),
                f"{ours} ({agree} of 12 within 3)",
                verdict,
                rule,
            )
        )
    number = ev.tasks.get("number")
    if number and number.table1 and number.scores:
        kinds = final_kinds(number.scores)
        ids = {r.layer: r.weighted_id for r in number.table1 if r.head == 0}
        pos = [ids[layer] for layer, k in kinds.items() if k == "positional" and layer in ids]
        sym = [ids[layer] for layer, k in kinds.items() if k == "symbolic" and layer in ids]
        if pos and sym:
            strict = max(pos) <= 12 and min(sym) >= 25
            ordered = sum(pos) / len(pos) < sum(sym) / len(sym)
            out.append(
                _claim(
                    "positional heads use the fastest rotations, symbolic heads slow ones",
                    "Sec. 3.5, Table 1",
                    "positional L0-L3: IDs 1-10; symbolic L4-L11: IDs 37-39",
                    f"positional: {', '.join(f'{x:.0f}' for x in pos)}; symbolic: {', '.join(f'{x:.0f}' for x in sym)}",
                    "match" if strict else "partial" if ordered else "differs",
                    "match if every pure positional layer's ID <= 12 and every pure symbolic one's >= 25; partial if "
                    "only their means are so ordered",
                )
            )
    return out


def length_claims(ev: Evidence) -> list[dict[str, str]]:
    paper = paper_numbers()["fig5b_length_generalisation"]
    rule = "h = half-width of our per-prefix 95% interval: match if |ours - paper| <= 0.05 + h, partial if <= 0.15 + h"
    out = []
    for task in ("number", "letter"):
        te = ev.tasks.get(task)
        values = dict(zip(paper["extra"], paper[f"{task}_task"], strict=True))
        for extra in (100, 800, 5000):
            name = f"{task} task: accuracy at +{extra} tokens"
            row = _at(te.lengthgen, extra) if te else None
            if te is None or row is None or values.get(extra) is None:
                out.append(_claim(name, "Sec. 3.6, Fig. 5B", str(values.get(extra)), "not measured", "n/a", rule))
                continue
            acc, low, high = row.accuracy, row.cluster_low, row.cluster_high
            half = (high - low) / 2 if high == high and low == low else 0.0  # NaN for one prefix
            final = _at(te.lengthgen_final, extra)
            beside = f"; final checkpoint {final.accuracy:.2f}" if final is not None else ""
            out.append(
                _claim(
                    name,
                    "Sec. 3.6, Fig. 5B",
                    f"{values[extra]:.2f}",
                    f"{acc:.2f} [{low:.2f}, {high:.2f}]{beside}",
                    verdict_for_value(acc, values[extra], half),
                    rule,
                    te.lengthgen_step,
                )
            )
    number, letter = ev.tasks.get("number"), ev.tasks.get("letter")
    if number and letter and number.lengthgen and letter.lengthgen:
        grid = sorted({p.extra for p in number.lengthgen} & {p.extra for p in letter.lengthgen})
        beyond = [k for k in grid if k >= 50]
        pooled = {task: {p.extra: p.accuracy for p in te.lengthgen if p.n_hops == 0}
                  for task, te in (("letter", letter), ("number", number))}
        above = [k for k in beyond if pooled["letter"][k] >= pooled["number"][k]]
        share = len(above) / len(beyond) if beyond else 0.0
        out.append(
            _claim(
                "the letter model extrapolates much further than the number model",
                "Sec. 3.6, Fig. 5B",
                "letter above number at every length beyond +40",
                f"letter >= number at {len(above)} of {len(beyond)} lengths >= +50",
                "match" if share == 1.0 else "partial" if share >= 0.8 else "differs",
                "match if our letter accuracy >= number accuracy at every K >= 50, partial at >= 80% of them",
            )
        )
    return out


def theory_claims(ev: Evidence) -> list[dict[str, str]]:
    out = []
    if ev.verification:
        bad = [r for r in ev.verification if not r.ok]
        out.append(
            _claim(
                "T_Index and T_Retrieval implement their functions exactly",
                "Thm. 3.1",
                "exact (proof)",
                f"{len(ev.verification) - len(bad)} of {len(ev.verification)} settings exact",
                "match" if not bad else "differs",
                "match if every verification setting is exact",
            )
        )
    statements = {"index": "Δ_Index ≤ min(1 − cos θ, 2π²/n²)", "retrieval": "Δ_Retrieval ≤ 1 − cos(ω − nθ)"}
    rule = (
        "match if the bound holds on every n in the premise for Definition 3.1 (max over inputs); partial if "
        "only for the worst case (min); differs if for neither"
    )
    for function, statement in statements.items():
        rows = [r for r in ev.bounds if r.function == function]
        if not rows:
            continue
        definitions = {r.definition for r in rows}
        holds = {d: all(r.n_failed == 0 for r in rows if r.definition == d) for d in definitions}
        verdict = "match" if holds.get("max") else "partial" if holds.get("min") else "differs"
        ours = "; ".join(f"{d}: {'holds' if ok else 'fails'}" for d, ok in sorted(holds.items()))
        out.append(_claim(statement, "Thm. 3.2, Fig. 5A", "holds", ours, verdict, rule))
    fig5a = paper_numbers()["fig5a_discrepancy_bounds"]
    if ev.fig5a:
        bound = {(r.function, r.n): r.bound for r in ev.fig5a}
        pairs = [
            (n, want, bound[key, n])
            for key in ("index", "retrieval")
            for n, want in zip(fig5a["n"], fig5a[key], strict=True)
            if want is not None and (key, n) in bound
        ]
        worst = max(abs(a - b) for _, a, b in pairs)
        out.append(
            _claim(
                "Fig. 5A: the bounds' curves (index falls to 0, retrieval stays near 0.13 at n = 99)",
                "Fig. 5A",
                f"{len(pairs)} digitised points",
                f"largest gap {worst:.3f}",
                "match" if worst <= 0.02 else "partial" if worst <= 0.05 else "differs",
                "match if every digitised point is within 0.02 of our curve, partial if within 0.05",
            )
        )
    return out


def check_claims(ev: Evidence) -> list[dict[str, str]]:
    """Every claim's record, in the paper's order."""
    def at(claims: list[dict[str, str]], kind: str) -> list[dict[str, str]]:
        """Name the checkpoint of each claim about one task's ``kind`` numbers (the task opens the claim)."""
        for c in claims:
            task = next((t for t in ev.tasks if c["claim"].startswith(t)), None)
            if task is not None and not c["step"]:
                c["step"] = getattr(ev.tasks[task], kind)
        return claims

    return (learning_claims(ev) + at(head_claims(ev), "scores_step") + at(frequency_claims(ev), "table1_step")
            + length_claims(ev) + theory_claims(ev))
