"""Measures of the theory (Thm. 3.1, 3.2, Remark 3.1, Fig. 5A): exact checks with no seeds. Each returns one
"seed" (label 0) whose verdict the rule kind ``check`` reads as ``verified`` where it holds, or, for a statement
graded as a finding (Theorem 3.2 as literally stated), the rule kind ``seeds``.

Example:
    >>> from possym.records import BoundCheckRecord
    >>> from possym.report.evidence import Evidence
    >>> from possym.report.claimspec import load_claims
    >>> spec = next(s for s in load_claims() if s.id == "thm32-index-bound")
    >>> rows = [BoundCheckRecord("index", d, "all", 0.8, "1-99", "1-99", 99, 0 if d == "min" else 3, None, "", None,
    ...                          None, 0) for d in ("max", "min")]
    >>> MEASURES["bound_holds"](Evidence(bounds=rows), spec).graded.seeds[0].verdict.label
    'differs'
"""

from __future__ import annotations

from possym.paper import paper_numbers
from possym.report.evidence import Evidence
from possym.report.measures.base import MEASURES, Measured, Reading, SeedReading, measure, not_measured
from possym.report.rules import DIFFERS, DIGITISATION, MATCH, PARTIAL, SeedVerdict

__all__ = ["MEASURES"]

# A head's outputs on the two inputs of a swap pair count as equal within float rounding of a softmax over a few
# hundred logits (the measured differences are 1e-14 and 1e-16).
EQUAL_OUTPUTS = 1e-6


def _one(name: str, verdict: SeedVerdict, text: str, *more: tuple[str, SeedVerdict]) -> Measured:
    readings = [Reading(name, (SeedReading(0, text, verdict=verdict),))]
    readings += [Reading(n, (SeedReading(0, text, verdict=v),)) for n, v in more]
    return Measured(tuple(readings))


@measure("constructions_exact")
def constructions_exact(ev: Evidence, spec) -> Measured:
    """Every verification setting of Theorem 3.1's constructions is exact."""
    if not ev.verification:
        return not_measured("no theory verification table")
    bad = [r for r in ev.verification if not r.ok]
    text = f"{len(ev.verification) - len(bad)} of {len(ev.verification)} settings exact"
    return _one("every setting", SeedVerdict.holds(not bad, text=text), text)


@measure("bound_holds")
def bound_holds(ev: Evidence, spec) -> Measured:
    """Theorem 3.2's bound for ``function`` holds on every n in its premise, for Definition 3.1 as stated (the max
    over inputs: the graded reading) and for the worst case (the min) beside."""
    rows = [r for r in ev.bounds if r.function == spec.arg("function")]
    if not rows:
        return not_measured("no bounds table")
    holds = {d: all(r.n_failed == 0 for r in rows if r.definition == d) for d in sorted({r.definition for r in rows})}
    text = "; ".join(f"{d}: {'holds' if ok else 'fails'}" for d, ok in holds.items())
    more = [(f"Definition 3.1 with the {d} over inputs", SeedVerdict.holds(ok, text=text))
            for d, ok in holds.items() if d != "max"]
    return _one("Definition 3.1 as stated (the max over inputs)", SeedVerdict.holds(holds.get("max", False), text=text),
                text, *more)


@measure("remark31_witness")
def remark31_witness(ev: Evidence, spec) -> Measured:
    """Remark 3.1 on its swap pairs (App. F.2.3): no purely ``kind`` head (random, or pointed at input a's answer)
    is right on both inputs of a pair whose answers the function tells apart (for Index, its outputs are equal too),
    while the ``construction`` is right on both."""
    function, construction = spec.arg("function"), spec.arg("construction")
    pair = [r for r in ev.witnesses if r.function == function]
    built = [r for r in pair if r.head.startswith(construction)]
    random_heads = [r for r in pair if r not in built]
    if not random_heads or not built:
        return not_measured("no witness table")
    blind = all(r.right_on_both == 0 for r in random_heads)
    if function == "index":  # a symbolic head cannot tell the inputs apart: equal outputs
        blind = blind and all((r.max_difference or 0.0) <= EQUAL_OUTPUTS for r in random_heads)
    exact = all(r.right_on_both == 1 for r in built)
    heads = " and ".join(r.head.split(" (")[0] for r in random_heads)
    text = (f"{heads}: right on both inputs of the swap pair {sum(r.right_on_both for r in random_heads)} times; "
            f"{construction} right on both: {'yes' if exact else 'no'}")
    return _one("as stated", SeedVerdict.holds(blind and exact, text=text), text)


@measure("remark31_scope")
def remark31_scope(ev: Evidence, spec) -> Measured:
    """Remark 3.1's scope: a positional head with a query-reading F is exact on every proper Retrieval input."""
    scope = [r for r in ev.witnesses if r.function == "retrieval (scope)"]
    if not scope:
        return not_measured("no witness table")
    r = scope[0]
    text = f"exact on {r.right_on_a} of {r.right_on_b} proper inputs"
    return _one("as stated", SeedVerdict.holds(r.right_on_both == 1 and r.right_on_a == r.right_on_b, text=text), text)


@measure("fig5a_curves")
def fig5a_curves(ev: Evidence, spec) -> Measured:
    """Fig. 5A's digitised points against the closed form our theory tables give: verified within the digitisation
    (0.01), partial within 0.05."""
    if not ev.fig5a:
        return not_measured("no Fig. 5A table")
    fig5a = paper_numbers()["fig5a_discrepancy_bounds"]
    bound = {(r.function, r.n): r.bound for r in ev.fig5a}
    pairs = [(want, bound[key, n]) for key in ("index", "retrieval")
             for n, want in zip(fig5a["n"], fig5a[key], strict=True) if want is not None and (key, n) in bound]
    worst = max(abs(a - b) for a, b in pairs)
    verdict = MATCH if worst <= DIGITISATION else PARTIAL if worst <= 0.05 else DIFFERS
    text = f"{len(pairs)} digitised points; largest gap {worst:.3f}"
    return _one("as digitised", SeedVerdict.of(verdict, text=text), text)
