"""Theorem 3.1 checked: exact outputs of T_Index / T_Retrieval, and the smallest softmax beta for each n0.

**Exactness.** Where the oracle (:mod:`possym.theory.functions`) defines the output, the construction's logit of
the oracle's symbol must exceed every other by more than ``DECODE_TOL`` = 1e-9; the smallest excess is Lemma
F.1's decoding gap delta (>= 1 under average-hard attention).

**The smallest beta, exactly.** Under softmax only the weight per token, W(c) = sum_{j: sigma_j = c} w_j,
matters, so each construction's worst input is explicit (T_Index, integer query sigma: correct iff
``sum_{s in S_sigma} exp(beta (cos(s theta) - 1)) < 1``, S_sigma = {-sigma..n-1-sigma} minus {0}; a letter
query: the sum over s = 1..n-1 below 3; T_Retrieval: cases (A) and (B) over L_d(t) = cos(d omega + t theta)).
Every sum falls in beta and grows with n, so beta*(n0) is the root at n = n0 (bisection on log beta), returned
with its witness input; :func:`search_beta` bisects the construction itself instead (the tests' check). Lemma
F.1's sufficient choice: beta_F1(n0) = max_{n <= n0} ln(n - 1) / Delta_min(n). Cases and numbers:
docs/theory.md, section 2.

Example:
    >>> from possym.theory.functions import IndexSymbols
    >>> c = IndexConstruction(IndexSymbols(n_letters=2, n_ints=3), theta=0.8)
    >>> t = beta_threshold(c, n0=5)
    >>> round(t.beta, 3), t.case
    (2.715, 'int query 2')"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from scipy.special import logsumexp

from possym.theory.constructions import (
    Construction,
    IndexConstruction,
    RetrievalConstruction,
    construction_model,
    run_construction,
)
from possym.theory.functions import retrieval, retrieval_defined, selective_index

DECODE_TOL = 1e-9
HARD_TOL = 1e-12  # a competitor logit within this of the top is a tie: no beta can separate them
BETA_MAX = 1e15


@dataclass(frozen=True)
class Check:
    """Outcome of running a construction on a batch of inputs (see the module docstring)."""

    n_sequences: int
    n_positions: int
    n_failed: int
    n_failed_sequences: int
    min_gap: float
    failure: list[str] | None
    failure_position: int | None
    first_failing_length: int | None  # shortest prefix that fails (outputs are causal)


def expected_outputs(c: Construction, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The oracle's output [batch, pos] and where it is defined [batch, pos]."""
    if isinstance(c, IndexConstruction):
        return selective_index(ids, c.symbols), np.ones(ids.shape, dtype=bool)
    return retrieval(ids, c.symbols), retrieval_defined(ids, c.symbols)


def decoding_gaps(logits: np.ndarray, expected: np.ndarray) -> np.ndarray:
    """Output logit of the expected symbol minus the largest other: [batch, pos]."""
    right = np.take_along_axis(logits, expected[..., None], axis=-1)[..., 0]
    others = logits.copy()
    np.put_along_axis(others, expected[..., None], -np.inf, axis=-1)
    return right - others.max(axis=-1)


def check_construction(c: Construction, ids: np.ndarray, beta: float | None, chunk_elements: int = 20_000_000) -> Check:
    """Run ``c`` on every row of ``ids`` [batch, pos] (in chunks) and compare with the oracle everywhere."""
    ids = np.asarray(ids)
    batch, n = ids.shape
    model = construction_model(c, 1.0 if beta is None else beta)
    chunk = max(1, chunk_elements // (n * (n + c.d_model)))
    n_failed = n_failed_seq = n_positions = 0
    min_gap, failure, failure_pos, shortest = math.inf, None, None, None
    for start in range(0, batch, chunk):
        part = ids[start : start + chunk]
        expected, defined = expected_outputs(c, part)
        logits = run_construction(c, part, beta, model).logits.numpy()
        gaps = np.where(defined, decoding_gaps(logits, expected), np.inf)
        bad = gaps <= DECODE_TOL
        n_positions += int(defined.sum())
        n_failed += int(bad.sum())
        n_failed_seq += int(bad.any(axis=1).sum())
        min_gap = min(min_gap, float(gaps.min()))
        if bad.any():
            first = int(np.argwhere(bad)[:, 1].min()) + 1
            shortest = first if shortest is None else min(shortest, first)
        if failure is None and bad.any():
            row, pos = np.argwhere(bad)[0]
            failure, failure_pos = c.symbols.decode(part[row]), int(pos)
    return Check(batch, n_positions, n_failed, n_failed_seq, min_gap, failure, failure_pos, shortest)


# ---- the exact smallest beta -----------------------------------------------------------------------


@dataclass(frozen=True)
class _Cases:
    """Worst-case conditions at one length: fail iff logsumexp(beta * exponents[i]) >= log_target[i]."""

    exponents: np.ndarray  # [cases, terms], -inf pads
    log_target: np.ndarray  # [cases]
    labels: list[str]
    witnesses: list[np.ndarray]  # the input realising each case, [n]


def _index_cases(c: IndexConstruction, n: int) -> _Cases:
    if c.symbols.n_letters < 2:
        raise ValueError("the worst-case analysis of T_Index needs at least two letters")
    s_all = np.arange(-(n - 1), n)
    exps, targets, labels, witnesses = [], [], [], []
    letter_a, letter_b = 0, 1
    for sigma in range(1, min(c.symbols.n_ints, n - 1) + 1):
        s = np.arange(-sigma, n - sigma)
        s = s[s != 0]
        exps.append(np.where(np.isin(s_all, s), np.cos(s_all * c.theta) - 1.0, -np.inf))
        targets.append(0.0)
        labels.append(f"int query {sigma}")
        w = np.full(n, letter_b)
        w[n - 1 - sigma], w[n - 1] = letter_a, c.symbols.n_letters + sigma - 1
        witnesses.append(w)
    s = np.arange(1, n)
    exps.append(np.where(np.isin(s_all, s), np.cos(s_all * c.theta) - 1.0, -np.inf))
    targets.append(math.log(3.0))
    labels.append("letter query")
    w = np.full(n, letter_b)
    w[n - 1] = letter_a
    witnesses.append(w)
    return _Cases(np.array(exps), np.array(targets), labels, witnesses)


def _retrieval_cases(c: RetrievalConstruction, n: int) -> _Cases:
    sym, a = c.symbols, c.symbols.n_letters
    t = np.arange(n)
    exps, labels, witnesses = [], [], []
    for d in range(a):
        logit = np.cos(d * c.omega + t * c.theta)
        # (A) a (letter, int) query "a1" at t = 0; the competitor everywhere else
        exps.append(np.where(t >= 1, logit - 1.0, -np.inf))
        labels.append(f"(letter,int) query vs {d} letters on, everywhere")
        comp = sym.token(0, 0) if d == 0 else sym.token(d, a)  # "aa" self-matches; else "x1"
        w = np.full(n, comp)
        w[n - 1] = sym.token(0, a)
        witnesses.append(w)
        if d == 0:
            continue
        for tk in range(1, n):
            k = n - 1 - tk
            top = math.cos(tk * c.theta)
            # (B i) the match "a1" only at distance tk; the query's own pair "xa" at every later position
            exps.append(np.where(t < tk, logit - top, -np.inf))
            labels.append(f"(letter,letter) query, match at distance {tk}, query token repeated after it")
            w = np.full(n, sym.token(d, a))
            w[k + 1 :] = sym.token(d, 0)
            w[k] = sym.token(0, a)
            witnesses.append(w)
            # (B ii) the match only at distance tk; a (letter, int) competitor everywhere else
            exps.append(np.where((t >= 1) & (t != tk), logit - top, -np.inf))
            labels.append(f"(letter,letter) query, match at distance {tk}, (letter,int) competitor elsewhere")
            w = np.full(n, sym.token(d, a))
            w[k] = sym.token(0, a)
            w[n - 1] = sym.token(d, 0)
            witnesses.append(w)
    return _Cases(np.array(exps), np.zeros(len(exps)), labels, witnesses)


def _cases(c: Construction, n: int) -> _Cases:
    return _index_cases(c, n) if isinstance(c, IndexConstruction) else _retrieval_cases(c, n)


def _margins(cases: _Cases, beta: float) -> np.ndarray:
    """logsumexp(beta * exponents) - log_target per case; >= 0 means the case fails at beta."""
    with np.errstate(invalid="ignore"):
        z = np.where(np.isfinite(cases.exponents), beta * cases.exponents, -np.inf)
    return logsumexp(z, axis=1) - cases.log_target


@dataclass(frozen=True)
class BetaThreshold:
    """beta*(n0): softmax at any beta > beta* is exact on every input of length <= n0; ``witness`` (tokens)
    is an input that fails at every beta < beta* (``case`` says which worst case it realises)."""

    n0: int
    beta: float
    case: str
    witness: list[str]


def beta_threshold(c: Construction, n0: int, rel_tol: float = 1e-12) -> BetaThreshold:
    """The exact smallest inverse temperature for inputs of length <= n0 (module docstring)."""
    if n0 < 2:
        raise ValueError(f"n0={n0} must be >= 2")
    cases = _cases(c, n0)
    # competitors that reach the top logit keep their weight at every beta: as many as the target allows
    # (one for most cases, below 3 for an Index letter query) and no beta separates them
    ties = (np.nan_to_num(cases.exponents, neginf=-np.inf) >= -HARD_TOL).sum(axis=1)
    tie = ties >= np.exp(cases.log_target) - 1e-9
    if tie.any():  # average-hard attention fails too
        i = int(np.argmax(tie))
        return BetaThreshold(n0, math.inf, cases.labels[i], c.symbols.decode(cases.witnesses[i]))
    if (_margins(cases, 0.0) <= 1e-15).all():  # a tie at beta = 0 at worst: every beta > 0 separates
        return BetaThreshold(n0, 0.0, "none: exact at every beta > 0", [])
    lo, hi = 0.0, 1.0
    while (_margins(cases, hi) >= 0).any():
        lo, hi = hi, hi * 2.0
        if hi > BETA_MAX:
            raise ValueError(f"beta* exceeds {BETA_MAX:g}: the logit gaps are below float64 resolution")
    while hi - lo > rel_tol * hi and hi > 1e-300:
        mid = 0.5 * (lo + hi)
        if (_margins(cases, mid) >= 0).any():
            lo = mid
        else:
            hi = mid
    i = int(np.argmax(_margins(cases, lo)))
    return BetaThreshold(n0, hi, cases.labels[i], c.symbols.decode(cases.witnesses[i]))


def search_beta(c: Construction, ids: np.ndarray, lo: float, hi: float, iters: int = 40) -> float:
    """Bisect (on log beta) the smallest beta at which the construction is exact on all of ``ids``.

    Needs the construction to fail at ``lo`` and to be exact at ``hi``; exactness is monotone in beta for
    both constructions (module docstring), which the caller's bracket also checks.
    """

    def exact(beta: float) -> bool:
        return check_construction(c, ids, beta).n_failed == 0

    if exact(lo) or not exact(hi):
        raise ValueError(f"[{lo:g}, {hi:g}] does not bracket the threshold: need a failure at lo and none at hi")
    for _ in range(iters):
        mid = math.sqrt(lo * hi)
        lo, hi = (lo, mid) if exact(mid) else (mid, hi)
    return hi


def lemma_f1_beta(c: Construction, n0: int) -> float:
    """beta_F1 = max_{2 < n <= n0} ln(n - 1) / Delta_min(n), Lemma F.1's sufficient inverse temperature."""
    from possym.theory.discrepancy import index_discrepancy, retrieval_discrepancy

    ns = np.arange(3, n0 + 1)
    if len(ns) == 0:
        return 0.0
    if isinstance(c, IndexConstruction):
        dmin = index_discrepancy(c.theta, c.symbols.n_ints, ns).minimum
    else:
        dmin = retrieval_discrepancy(c.theta, c.symbols.n_letters, ns, minimum=True).minimum
    with np.errstate(divide="ignore"):
        return float(np.max(np.log(ns - 1) / dmin))


def witness_fails(c: Construction, witness: list[str], beta: float) -> bool:
    """True when the construction gets the witness input wrong at its last position at ``beta``."""
    ids = c.symbols.encode(witness)[None]
    expected, _ = expected_outputs(c, ids)
    with torch.no_grad():
        logits = run_construction(c, ids, beta).logits.numpy()
    return bool(decoding_gaps(logits, expected)[0, -1] <= DECODE_TOL)
