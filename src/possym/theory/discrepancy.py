"""Discrepancy (Definition 3.1) of T_Index and T_Retrieval, exactly, and Theorem 3.2's bounds checked.

For one input, the discrepancy of the query (the last position n) is ``top logit - second-largest logit``
over the keys j = 1..n (0 when the top is attained twice). Definition 3.1 takes its **maximum** over inputs
of length n; we also report the **minimum** (the worst case, which is what limits softmax, Lemma F.1), and
for T_Retrieval the **proof** quantity that Appendix F.2.2 actually bounds: the top logit minus the largest
logit that *any* non-matching letter could produce at *any* position, maximised over inputs.

Theorem 3.2's bounds:  Delta_Index(n) <= min{1 - cos theta, 2 pi^2 / n^2};
Delta_Retrieval(n) <= 1 - cos(omega - n theta) for omega = 2 pi / |ALPH| and theta < omega / (2 n0), n <= n0.

**Reductions** (each proved below and confirmed against every input of small alphabets in the tests).

*T_Index.* Keys are all v, so the logits depend only on the query: cos((t - sigma) theta) for t = n - j in
0..n-1 (sigma = 0 for a letter). The top is 1 at t = sigma; the other offsets s = t - sigma cover
{1..M} in absolute value, M = max(sigma, n-1-sigma) (M = n - 1 for a letter), so with
g(M) = 1 - max_{1 <= s <= M} cos(s theta), non-increasing in M:

    Delta_max(n) = g(min_sigma M) = g(max(ceil((n-1)/2), n-1-m)) over integers sigma <= min(m, n-1),
    Delta_min(n) = g(n - 1).

Dirichlet's theorem (some 1 <= s <= n-1 has ||s theta / 2 pi|| <= 1/n) gives Delta_min(n) <=
1 - cos(2 pi / n) <= 2 pi^2 / n^2, so the bound holds for the worst case; the paper's pigeonhole over
t = 0..n also needs s up to n, which an input of length n does not have, and an integer query in the middle
halves M -- so Delta_max can exceed 2 pi^2 / n^2 (our counterexamples).

*T_Retrieval.* The logit of key j is L(t, d) = cos(d omega + t theta), t = n - j, d = phi(sigma_j^L) -
phi(q) mod A. Every vector d in {0..A-1}^n with at least one zero is realised by a proper input (a
(letter, int) query has d = 0 at t = 0; a (letter, letter) query "xb" needs some earlier "b1"; every other
position can hold a (letter, int) token with any left letter), and no other is, so

    Delta_max(n) = max_{p, d_p} [ L(p, d_p) - max( max_{t != p} lo(t), [d_p != 0] min_{t != p} L(t, 0) ) ],
    lo(t) = min_d L(t, d)   (the others sit at their lowest logit; a zero must go somewhere),
    Delta_min(n) = min over two positions p != q holding the top two values a >= b, such that every other
               position can go below b (max lo <= b) and a zero fits (d_p = 0, d_q = 0, or L(r, 0) <= b for
               some other r)  of  a - b,
    Delta_proof(n) = 1 - max_{d = 1..A-1, t = 0..n-1} cos(d omega + t theta).

For Delta_proof the top logit is 1 when the query matches itself (a (letter, int) query), and in the regime
(n-1) theta < omega the largest non-matching logit is cos(omega - (n-1) theta) at t = n - 1: Delta_proof(n) =
1 - cos(omega - (n - 1) theta), which *exceeds* the stated bound 1 - cos(omega - n theta) at every n: the
proof's positions run over t = 0..n-1, not 0..n (an off-by-one; the bound holds with n replaced by n - 1).

Example:
    >>> d = index_discrepancy(0.8, n_ints=16, ns=np.array([9]))
    >>> round(float(d.maximum[0]), 4), round(float(index_bound(0.8, 9)), 4)   # sigma = 4: M = 4
    (0.3033, 0.2437)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from possym.theory.functions import RetrievalSymbols, omega

BOUND_TOL = 1e-12


def index_bound(theta: float, n: int | np.ndarray) -> np.ndarray:
    """Theorem 3.2 for T_Index: min{1 - cos theta, 2 pi^2 / n^2}."""
    n = np.asarray(n, dtype=np.float64)
    return np.minimum(1.0 - math.cos(theta), 2.0 * math.pi**2 / n**2)


def retrieval_bound(theta: float, n_letters: int, n: int | np.ndarray) -> np.ndarray:
    """Theorem 3.2 for T_Retrieval: 1 - cos(omega - n theta), omega = 2 pi / |ALPH|."""
    n = np.asarray(n, dtype=np.float64)
    return 1.0 - np.cos(omega(n_letters) - n * theta)


def retrieval_premise(theta: float, n_letters: int, n: int | np.ndarray) -> np.ndarray:
    """Whether n lies where Theorem 3.2 speaks for T_Retrieval: theta < omega / (2 n), i.e. n <= n0 allowed."""
    return theta < omega(n_letters) / (2.0 * np.asarray(n, dtype=np.float64))


# ---- T_Index -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class IndexDiscrepancy:
    """Per n: Delta_max, Delta_min, and the integer query that attains Delta_max (0 for a letter query)."""

    ns: np.ndarray
    maximum: np.ndarray
    minimum: np.ndarray
    argmax_query: np.ndarray


def index_discrepancy(theta: float, n_ints: int | None, ns: np.ndarray) -> IndexDiscrepancy:
    """Exact Delta_max(n), Delta_min(n) of T_Index (module docstring); ``n_ints=None``: every in-range offset."""
    ns = np.asarray(ns, dtype=np.int64)
    if (ns < 2).any():
        raise ValueError("the discrepancy needs a second key: n >= 2")
    s = np.arange(1, int(ns.max()))
    best = np.maximum.accumulate(np.cos(s * theta))  # best[M-1] = max_{1<=s<=M} cos(s theta)
    g = lambda m: 1.0 - best[m - 1]  # noqa: E731
    top = ns - 1 if n_ints is None else np.minimum(n_ints, ns - 1)
    # max(sigma, n-1-sigma) over 1 <= sigma <= top is smallest at sigma = clip((n-1)/2, 1, top)
    sig = np.clip((ns - 1) // 2, 1, top)
    sig2 = np.clip((ns - 1 + 1) // 2, 1, top)
    m1, m2 = np.maximum(sig, ns - 1 - sig), np.maximum(sig2, ns - 1 - sig2)
    best_sig = np.where(m1 <= m2, sig, sig2)
    m = np.minimum(m1, m2)
    return IndexDiscrepancy(ns, g(m), g(ns - 1), best_sig)


def index_witness(n: int, sigma: int, n_ints: int | None) -> list[str]:
    """An input of length n whose query is the integer ``sigma`` (letters elsewhere): Index symbols."""
    if not 1 <= sigma <= n - 1 or (n_ints is not None and sigma > n_ints):
        raise ValueError(f"sigma={sigma} must lie in 1..min(n_ints, n-1)")
    return ["a"] * (n - 1) + [str(sigma)]


# ---- T_Retrieval -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RetrievalDiscrepancy:
    """Per n: Delta_max, Delta_min (NaN when not computed) and Delta_proof; ``*_config`` holds, per n, the
    d-vector (indexed by t = n - j, length n) that attains the value."""

    ns: np.ndarray
    maximum: np.ndarray
    minimum: np.ndarray
    proof: np.ndarray
    max_config: list[np.ndarray]
    min_config: list[np.ndarray | None]
    proof_config: list[np.ndarray]


def _logits(theta: float, n_letters: int, n: int) -> np.ndarray:
    """L[t, d] = cos(d omega + t theta): [n, A]."""
    t = np.arange(n)[:, None]
    d = np.arange(n_letters)[None, :]
    return np.cos(d * omega(n_letters) + t * theta)


def _two_extremes(x: np.ndarray, largest: bool) -> tuple[int, int]:
    order = np.argsort(-x if largest else x, kind="stable")
    return int(order[0]), int(order[1])


def _retrieval_max(lv: np.ndarray) -> tuple[float, np.ndarray]:
    n, a = lv.shape
    lo, lo_arg, z = lv.min(axis=1), lv.argmin(axis=1), lv[:, 0]
    p1, p2 = _two_extremes(lo, largest=True)
    z1, z2 = _two_extremes(z, largest=False)
    pos = np.arange(n)
    lo_others = np.where(pos == p1, lo[p2], lo[p1])
    zero_at = np.where(pos == z1, z2, z1)
    second = np.maximum(lo_others[:, None], np.where(np.arange(a) != 0, z[zero_at][:, None], -np.inf))
    cand = lv - second
    p, dp = np.unravel_index(int(np.argmax(cand)), cand.shape)
    config = lo_arg.copy()
    if dp != 0:
        config[zero_at[p]] = 0
    config[p] = dp
    return float(cand[p, dp]), config


def _retrieval_min(lv: np.ndarray) -> tuple[float, np.ndarray | None]:
    """Smallest top-minus-second over d-vectors with a zero (module docstring); O(nA log nA)."""
    n, a = lv.shape
    lo, lo_arg, z = lv.min(axis=1), lv.argmin(axis=1), lv[:, 0]
    vals = lv.ravel()
    order = np.argsort(vals, kind="stable")
    vs, ts, ds = vals[order], order // a, order % a
    lo_sorted, z_sorted = np.sort(lo), np.sort(z)
    p1, p2 = _two_extremes(lo, largest=True)
    z1, z2 = _two_extremes(z, largest=False)
    big = len(vs)
    # per b-item (q = ts, b = vs): H = {t != q: lo(t) > b}, Z = {t != q: z(t) <= b}
    n_h = (len(lo) - np.searchsorted(lo_sorted, vs, side="right")) - (lo[ts] > vs)
    h = np.where(ts == p1, p2, p1)
    n_z = np.searchsorted(z_sorted, vs, side="right") - (z[ts] <= vs)
    r = np.where(ts == z1, z2, z1)
    zero_free = (ds == 0) | (n_z >= 2)

    def feasible(p: np.ndarray, dp: np.ndarray) -> np.ndarray:
        f1 = (n_h == 0) | ((n_h == 1) & (p == h))
        f2 = zero_free | (dp == 0) | ((n_z == 1) & (p != r))
        return (p != ts) & f1 & f2

    best = np.full(big, np.inf)
    best_p = np.full(big, -1)
    best_d = np.full(big, -1)

    def offer(gap: np.ndarray, ok: np.ndarray, p: np.ndarray, dp: np.ndarray) -> None:
        better = ok & (gap < best)
        best[better], best_p[better], best_d[better] = gap[better], p[better], dp[better]

    for o in range(1, 2 * a + 2):  # the first feasible item above lies within 2A - 1 (module docstring)
        j = np.minimum(np.arange(big) + o, big - 1)
        inside = np.arange(big) + o < big
        offer(vs[j] - vs, inside & feasible(ts[j], ds[j]), ts[j], ds[j])
    for d in range(a):  # p forced to h (n_h == 1): every value at h that is >= b
        val = lv[h, d]
        dd = np.full(big, d)
        offer(val - vs, (n_h == 1) & (val >= vs) & feasible(h, dd), h, dd)
    zp = np.where(ts == z1, z2, z1)  # a zero is needed at p: the smallest z among t != q
    zeros = np.zeros(big, dtype=np.int64)
    offer(z[zp] - vs, (z[zp] >= vs) & feasible(zp, zeros), zp, zeros)

    i = int(np.argmin(best))
    if not np.isfinite(best[i]):
        return math.nan, None
    config = lo_arg.copy()
    q, dq, p, dp = int(ts[i]), int(ds[i]), int(best_p[i]), int(best_d[i])
    config[q], config[p] = dq, dp
    if dq != 0 and dp != 0 and not (config == 0).any():
        others = np.where((np.arange(n) != p) & (np.arange(n) != q), z, np.inf)
        config[int(np.argmin(others))] = 0
    return float(best[i]), config


def _retrieval_proof(lv: np.ndarray) -> tuple[float, np.ndarray]:
    n, a = lv.shape
    other = lv[:, 1:]
    t, d = np.unravel_index(int(np.argmax(other)), other.shape)
    config = lv.argmin(axis=1)
    config[0] = 0  # a (letter, int) query matches itself: top logit 1 at t = 0
    if t > 0:  # (at t = 0 no single input shows both; the value is still the sup over inputs)
        config[t] = d + 1
    return 1.0 - float(other[t, d]), config


def retrieval_discrepancy(theta: float, n_letters: int, ns: np.ndarray, minimum: bool = True) -> RetrievalDiscrepancy:
    """Exact Delta_max, Delta_min and Delta_proof of T_Retrieval at each n in ``ns`` (module docstring).

    Delta_min is the costly reduction, O(n A log(n A)) per n; ``minimum=False`` skips it (NaN).
    """
    ns = np.asarray(ns, dtype=np.int64)
    if (ns < 2).any():
        raise ValueError("the discrepancy needs a second key: n >= 2")
    if n_letters < 2:
        raise ValueError("T_Retrieval's discrepancy needs at least two letters")
    out_max, out_min, out_proof = np.empty(len(ns)), np.full(len(ns), np.nan), np.empty(len(ns))
    cmax: list[np.ndarray] = []
    cmin: list[np.ndarray | None] = []
    cproof: list[np.ndarray] = []
    for i, n in enumerate(ns.tolist()):
        lv = _logits(theta, n_letters, n)
        out_max[i], c_max = _retrieval_max(lv)
        cmax.append(c_max)
        out_proof[i], c_proof = _retrieval_proof(lv)
        cproof.append(c_proof)
        if minimum:
            out_min[i], c_min = _retrieval_min(lv)
            cmin.append(c_min)
        else:
            cmin.append(None)
    return RetrievalDiscrepancy(ns, out_max, out_min, out_proof, cmax, cmin, cproof)


def retrieval_witness(sym: RetrievalSymbols, config: np.ndarray) -> list[str]:
    """A proper input realising the d-vector ``config`` (indexed by t = n - j): looked-up letter ``a``.

    d_t = 0 positions hold ``a1``; other positions ``x1`` with x = d letters after a; the query is ``a1``
    when d_0 = 0, else the pair ``xa`` (which needs the ``a1`` somewhere earlier).
    """
    config = np.asarray(config)
    if not (config == 0).any():
        raise ValueError("a proper input needs a key whose left letter is the looked-up one (a zero in config)")
    a = sym.n_letters
    ids = [sym.token(int(d), a) for d in config[::-1]]  # position j holds t = n - 1 - j
    if config[0] != 0:
        ids[-1] = sym.token(int(config[0]), 0)
    return sym.decode(np.array(ids))


# ---- records and checks ------------------------------------------------------------------------------


def discrepancy_records(
    index_theta: float = 0.8,
    index_ints: tuple[int | None, ...] = (16, None),
    retrieval_theta: float = 0.0027,
    n_letters: int = 8,
    n_max: int = 5000,
    index_ns: np.ndarray | None = None,
    retrieval_ns: np.ndarray | None = None,
) -> list[dict]:
    """One row per (function, definition, domain, n): discrepancy, the theorem's bound, holds, premise.

    ``domain`` names the inputs: ``ints<=16`` (T_Index over 16 integers; Definition F.1's n > m is the
    premise), ``ints<=n-1`` (every in-range offset), ``A=8`` (T_Retrieval; its Delta does not depend on m).
    ``index_ns`` / ``retrieval_ns`` default to every n in 2..n_max.
    """
    rows: list[dict] = []

    def add(function, definition, domain, theta, ns, values, bound, premise):
        for n, v, b, p in zip(ns.tolist(), values.tolist(), bound.tolist(), premise.tolist(), strict=True):
            rows.append(
                {
                    "function": function,
                    "definition": definition,
                    "domain": domain,
                    "theta": theta,
                    "n": n,
                    "discrepancy": v,
                    "bound": b,
                    "holds": bool(v <= b + BOUND_TOL),
                    "premise": bool(p),
                }
            )

    ns = np.arange(2, n_max + 1) if index_ns is None else np.asarray(index_ns)
    ib = index_bound(index_theta, ns)
    for m in index_ints:
        d = index_discrepancy(index_theta, m, ns)
        domain = "ints<=n-1" if m is None else f"ints<={m}"
        premise = np.ones(len(ns), dtype=bool) if m is None else ns > m
        add("index", "max", domain, index_theta, ns, d.maximum, ib, premise)
        add("index", "min", domain, index_theta, ns, d.minimum, ib, premise)
    ns = np.arange(2, n_max + 1) if retrieval_ns is None else np.asarray(retrieval_ns)
    r = retrieval_discrepancy(retrieval_theta, n_letters, ns, minimum=True)
    rb = retrieval_bound(retrieval_theta, n_letters, ns)
    rp = retrieval_premise(retrieval_theta, n_letters, ns)
    for definition, values in (("max", r.maximum), ("min", r.minimum), ("proof", r.proof)):
        add("retrieval", definition, f"A={n_letters}", retrieval_theta, ns, values, rb, rp)
    return rows


def fig5a_records(
    index_theta: float = 0.8, retrieval_theta: float = 0.0027, n_letters: int = 8, n_max: int = 100
) -> list[dict]:
    """The curves of the paper's Fig. 5A: Theorem 3.2's bounds at n = 1..n_max (the paper starts at n = 1)."""
    ns = np.arange(1, n_max + 1)
    rows = [
        {"function": "index", "theta": index_theta, "n": int(n), "bound": float(b)}
        for n, b in zip(ns, index_bound(index_theta, ns), strict=True)
    ]
    rows += [
        {"function": "retrieval", "theta": retrieval_theta, "n": int(n), "bound": float(b)}
        for n, b in zip(ns, retrieval_bound(retrieval_theta, n_letters, ns), strict=True)
    ]
    return rows


def _ranges(fails: list[int], grid: list[int], limit: int = 12) -> str:
    """Maximal runs of consecutive grid points in ``fails``, as "9-15, 54-71, ..." (at most ``limit``)."""
    bad, runs, start, prev = set(fails), [], None, None
    for n in grid:
        if n in bad:
            start = n if start is None else start
            prev = n
        elif start is not None:
            runs.append(f"{start}-{prev}" if prev != start else f"{start}")
            start = None
    if start is not None:
        runs.append(f"{start}-{prev}" if prev != start else f"{start}")
    more = f", ... ({len(runs)} runs)" if len(runs) > limit else ""
    return ", ".join(runs[:limit]) + more


def bound_checks(rows: list[dict]) -> list[dict]:
    """Where each bound holds: one summary per (function, definition, domain), inside the premise and out.

    Keys: n_checked, n_failed (inside the premise), first_fail, fail_ranges (runs of consecutive failing n on
    the checked grid), last_fail, max_ratio (discrepancy / bound inside the premise), n_failed_outside (where
    the theorem does not speak).
    """
    out = []
    keys = sorted({(r["function"], r["definition"], r["domain"], r["theta"]) for r in rows}, key=str)
    for function, definition, domain, theta in keys:
        sel = [
            r
            for r in rows
            if (r["function"], r["definition"], r["domain"], r["theta"]) == (function, definition, domain, theta)
        ]
        inside = [r for r in sel if r["premise"]]
        fails = [r["n"] for r in inside if not r["holds"]]
        ratios = [r["discrepancy"] / r["bound"] for r in inside if r["bound"] > 0]
        out.append(
            {
                "function": function,
                "definition": definition,
                "domain": domain,
                "theta": theta,
                "n_range": f"{min(r['n'] for r in sel)}..{max(r['n'] for r in sel)}",
                "premise_range": f"{min(r['n'] for r in inside)}..{max(r['n'] for r in inside)}" if inside else "",
                "n_checked": len(inside),
                "n_failed": len(fails),
                "first_fail": fails[0] if fails else None,
                "fail_ranges": _ranges(fails, [r["n"] for r in inside]),
                "last_fail": fails[-1] if fails else None,
                "max_ratio": max(ratios) if ratios else None,
                "n_failed_outside": sum(not r["holds"] for r in sel if not r["premise"]),
            }
        )
    return out
