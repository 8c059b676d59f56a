"""The tables of ``possym theory``: verification of Theorem 3.1, beta*(n0), Remark 3.1's witnesses, and
Theorem 3.2's counterexamples, each a list of plain records (the CLI writes them; see docs/theory.md).

Settings (all float64):

- ``index A=2 m=3``: T_Index over 2 letters and the integers 1..3, every valid input up to length 7.
- ``index paper``: 120 letters, integers 1..16 (the number task's vocabulary), number-task instances.
- ``index long``: 8 letters, integers 1..63, random valid inputs of length 64.
- ``retrieval A=3 m=1``: T_Retrieval over 3 letters and one integer, every proper input up to length 5.
- ``retrieval paper``: 8 letters, integers 1..8 (the letter task's vocabulary), letter-task instances,
  checked where Definition F.2 defines the output.
- ``retrieval long``: the same vocabulary, random proper inputs of length 145 (the longest the premise
  theta < omega / (2 n0) allows at theta = 0.0027).

T_Index uses theta = 0.8 and T_Retrieval theta = 0.0027 (Fig. 5A's angles) except in the small settings,
where T_Retrieval uses theta = 0.1 < omega / (2 * 5).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from possym.config import TaskConfig
from possym.tasks import generate, task_config, task_vocab
from possym.tasks.letter import LetterTaskConfig
from possym.tasks.number import NumberTaskConfig
from possym.theory.constructions import Construction, IndexConstruction, RetrievalConstruction, run_construction
from possym.theory.discrepancy import (
    bound_checks,
    index_discrepancy,
    index_witness,
    retrieval_discrepancy,
    retrieval_witness,
)
from possym.theory.functions import (
    IndexSymbols,
    RetrievalSymbols,
    all_index_inputs,
    all_proper_inputs,
    omega,
    retrieval,
    sample_index_inputs,
    sample_proper_inputs,
)
from possym.theory.verify import beta_threshold, check_construction, lemma_f1_beta, witness_fails
from possym.theory.witnesses import (
    index_swap_pair,
    positional_heads_on_swap,
    query_reading_positional_retrieval,
    retrieval_swap_pair,
    symbolic_heads_on_swap,
)

INDEX_THETA = 0.8
RETRIEVAL_THETA = 0.0027
SMALL_RETRIEVAL_THETA = 0.1
BETA_MARGIN = 1e-6


def _just_above(beta_star: float) -> float:
    """The beta at which "exact above beta*" is checked: beta* (1 + 1e-6), or 1 when beta* = 0 (then every
    beta > 0 is exact, but a vanishing beta leaves decoding gaps below the 1e-9 tolerance)."""
    return beta_star * (1 + BETA_MARGIN) if beta_star > 0 else 1.0


@dataclass(frozen=True)
class InputSet:
    label: str
    construction: Construction
    ids: np.ndarray
    kind: str  # "all" | "task" | "random"


def _task_ids(c: Construction, task: TaskConfig, n: int, rng: np.random.Generator) -> np.ndarray:
    """Task instances re-encoded in the construction's own symbol ids (the token names coincide)."""
    samples = generate(task, n, rng)
    vocab = task_vocab(task)
    return np.stack([c.symbols.encode(vocab.decode(row)) for row in samples.tokens])


def input_sets(samples: int, rng: np.random.Generator, quick: bool = False) -> list[InputSet]:
    """The six settings of the module docstring (``quick``: shorter exhaustive and random inputs)."""
    idx_small = IndexConstruction(IndexSymbols(2, 3), INDEX_THETA)
    idx_paper = IndexConstruction(IndexSymbols(120, 16), INDEX_THETA)
    idx_long = IndexConstruction(IndexSymbols(8, 63), INDEX_THETA)
    ret_small = RetrievalConstruction(RetrievalSymbols(3, 1), SMALL_RETRIEVAL_THETA)
    ret_paper = RetrievalConstruction(RetrievalSymbols(8, 8), RETRIEVAL_THETA)
    n_idx, n_ret, n_long = (5, 4, 32) if quick else (7, 5, 145)
    return [
        InputSet("index A=2 m=3", idx_small, all_index_inputs(idx_small.symbols, n_idx), "all"),
        InputSet("index paper", idx_paper, _task_ids(idx_paper, task_config("number"), samples, rng), "task"),
        InputSet(
            "index long",
            idx_long,
            sample_index_inputs(idx_long.symbols, 64 if not quick else 32, samples, rng),
            "random",
        ),
        InputSet("retrieval A=3 m=1", ret_small, all_proper_inputs(ret_small.symbols, n_ret), "all"),
        InputSet("retrieval paper", ret_paper, _task_ids(ret_paper, task_config("letter"), samples, rng), "task"),
        InputSet("retrieval long", ret_paper, sample_proper_inputs(ret_paper.symbols, n_long, samples, rng), "random"),
    ]


def _row(
    label: str, c: Construction, ids: np.ndarray, kind: str, attention: str, beta: float | None, expect: str
) -> dict:
    chk = check_construction(c, ids, beta)
    return {
        "function": c.name,
        "setting": label,
        "theta": c.theta,
        "n_letters": c.symbols.n_letters,
        "n_ints": c.symbols.n_ints,
        "length": ids.shape[1],
        "inputs": kind,
        "attention": attention,
        "beta": beta,
        "expect": expect,
        "n_sequences": chk.n_sequences,
        "n_positions": chk.n_positions,
        "n_failed": chk.n_failed,
        "first_failing_length": chk.first_failing_length,
        "min_gap": chk.min_gap,
        "example_failure": " ".join(chk.failure) if chk.failure else "",
        "ok": (chk.n_failed == 0) == (expect == "exact"),
    }


def verification_records(sets: list[InputSet]) -> list[dict]:
    """Theorem 3.1 on every setting: average-hard attention, then softmax just above beta*(length)."""
    rows = []
    for s in sets:
        rows.append(_row(s.label, s.construction, s.ids, s.kind, "hard", None, "exact"))
        beta = beta_threshold(s.construction, s.ids.shape[1]).beta
        beta = _just_above(beta)
        rows.append(_row(s.label, s.construction, s.ids, s.kind, "softmax", beta, "exact"))
    return rows


def violation_records(quick: bool = False) -> list[dict]:
    """The theorem's conditions violated (average-hard attention, every input of the small settings).

    T_Index at theta = 2 pi / q ties positions q apart: first failure at length q + 1 when some integer
    reaches q, else q + 2. T_Retrieval: the exact condition is (2 n0 - 3) theta < omega (a match at distance
    n0 - 1 against a letter one step behind at distance n0 - 2); the paper's theta < omega / (2 n0) is
    sufficient, so at its boundary nothing fails up to n0 and the first failure is at n0 + 2.
    """
    rows = []
    n_idx, n0 = (5, 4) if quick else (7, 5)
    ids = all_index_inputs(IndexSymbols(2, 3), n_idx)
    c: Construction
    for q in (5, 3):
        first = q + 1 if q <= 3 else q + 2  # an integer query equal to q exists only if q <= m = 3
        c = IndexConstruction(IndexSymbols(2, 3), 2 * math.pi / q)
        rows.append(_row(f"index theta=2pi/{q}", c, ids, "all", "hard", None, f"fail at {first}"))
        want = first if first <= n_idx else None
        rows[-1]["ok"] = rows[-1]["first_failing_length"] == want
    sym = RetrievalSymbols(3, 1)
    w = omega(3)
    ids = all_proper_inputs(sym, n0)
    settings: list[tuple[str, float, str, int | None]] = [  # label, theta, expectation, first failing length
        (f"retrieval theta=omega/(2n0), n0={n0}", w / (2 * n0), "exact", None),
        (f"retrieval theta=omega/(2n0-3), n0={n0}", w / (2 * n0 - 3), f"fail at {n0}", n0),
        ("retrieval theta=0 (NoPE)", 0.0, "fail at 2", 2),
    ]
    for label, theta, expect, failing in settings:
        c = RetrievalConstruction(sym, theta)
        rows.append(_row(label, c, ids, "all", "hard", None, expect))
        rows[-1]["ok"] = rows[-1]["first_failing_length"] == failing
    # at the paper's boundary theta = omega / (2 n0) the first failure is at n0 + 2: the worst input
    c = RetrievalConstruction(sym, w / (2 * n0))
    worst = sym.encode(["a1"] + ["c1"] + ["b1"] * (n0 - 1) + ["ba"])[None]  # match "a1" at n0+1, "c" one behind
    rows.append(
        _row(
            f"retrieval theta=omega/(2n0), n0={n0}, worst input of length n0+2",
            c,
            worst,
            "witness",
            "hard",
            None,
            f"fail at {n0 + 2}",
        )
    )
    rows[-1]["ok"] = rows[-1]["first_failing_length"] == n0 + 2
    return rows


@dataclass(frozen=True)
class BetaSetting:
    label: str
    construction: Construction
    n0s: tuple[int, ...]
    check: str  # "all": every input; "random": sampled inputs; "witness": only the witness


def beta_settings(quick: bool = False) -> list[BetaSetting]:
    idx_small = IndexConstruction(IndexSymbols(2, 3), INDEX_THETA)
    idx_paper = IndexConstruction(IndexSymbols(120, 16), INDEX_THETA)
    ret_small = RetrievalConstruction(RetrievalSymbols(3, 1), SMALL_RETRIEVAL_THETA)
    ret_paper = RetrievalConstruction(RetrievalSymbols(8, 8), RETRIEVAL_THETA)
    if quick:
        return [
            BetaSetting("index A=2 m=3 θ=0.8", idx_small, (3, 4, 5), "all"),
            BetaSetting("index A=120 m=16 θ=0.8", idx_paper, (5, 17, 65), "random"),
            BetaSetting("retrieval A=3 m=1 θ=0.1", ret_small, (3, 4), "all"),
            BetaSetting("retrieval A=8 m=8 θ=0.0027", ret_paper, (5, 17, 65), "random"),
        ]
    return [
        BetaSetting("index A=2 m=3 θ=0.8", idx_small, (2, 3, 4, 5, 6, 7), "all"),
        BetaSetting("index A=120 m=16 θ=0.8", idx_paper, (3, 5, 9, 17, 33, 65, 129, 257, 513, 1025), "random"),
        BetaSetting("retrieval A=3 m=1 θ=0.1", ret_small, (2, 3, 4, 5), "all"),
        BetaSetting("retrieval A=8 m=8 θ=0.0027", ret_paper, (3, 5, 9, 17, 33, 65, 129, 145), "random"),
    ]


def beta_records(
    settings: list[BetaSetting], samples: int, rng: np.random.Generator, max_checked_n0: int = 65
) -> list[dict]:
    """beta*(n0) per setting, with the construction run just above (every / sampled inputs of length n0) and
    its witness run just below; and Lemma F.1's sufficient beta for comparison."""
    rows = []
    for s in settings:
        c = s.construction
        for n0 in s.n0s:
            t = beta_threshold(c, n0)
            above = _just_above(t.beta)
            ids, checked = None, "witness only"
            if s.check == "all":
                if isinstance(c, IndexConstruction):
                    ids = all_index_inputs(c.symbols, n0)
                else:
                    ids = all_proper_inputs(c.symbols, n0)
                checked = f"all {len(ids)}"
            elif n0 <= max_checked_n0:
                if isinstance(c, IndexConstruction):
                    ids = sample_index_inputs(c.symbols, n0, samples, rng)
                else:
                    ids = sample_proper_inputs(c.symbols, n0, samples, rng)
                checked = f"random {len(ids)}"
            if ids is not None:
                ids = np.concatenate([ids, c.symbols.encode(t.witness)[None]]) if t.witness else ids
            below = t.beta * (1 - BETA_MARGIN)
            rows.append(
                {
                    "function": c.name,
                    "setting": s.label,
                    "theta": c.theta,
                    "n0": n0,
                    "beta_star": t.beta,
                    "binding_case": t.case,
                    "beta_lemma_f1": lemma_f1_beta(c, n0),
                    "checked": checked,
                    "failures_above": None if ids is None else check_construction(c, ids, above).n_failed,
                    "witness_fails_above": witness_fails(c, t.witness, above) if t.witness else None,
                    "witness_fails_below": witness_fails(c, t.witness, below) if t.witness and t.beta > 0 else None,
                    "witness": " ".join(t.witness) if n0 <= 20 else f"{' '.join(t.witness[:6])} … (length {n0})",
                }
            )
    return rows


def _trial_summary(trials: list, difference_of: str) -> dict:
    """How heads fared on a swap pair: the largest output difference between its two inputs, and how
    many heads were right on a, on b, and on both."""
    return {
        "max_difference": max(t.max_difference for t in trials),
        "difference_of": difference_of,
        "right_on_a": sum(int(t.right_a) for t in trials),
        "right_on_b": sum(int(t.right_b) for t in trials),
        "right_on_both": sum(int(t.right_a and t.right_b) for t in trials),
    }


def witness_records(rng: np.random.Generator, n_heads: int = 20) -> list[dict]:
    """Remark 3.1: the swap pairs, random symbolic / positional heads on them, the constructions on them, and
    the scope witness (a positional head with a query-reading activation computing Retrieval)."""
    gen = torch.Generator().manual_seed(int(rng.integers(2**31)))
    rows = []
    c: Construction
    number, letter = NumberTaskConfig(), LetterTaskConfig()
    nv, lv = task_vocab(number), task_vocab(letter)

    pair = index_swap_pair(number, rng)
    base = {
        "function": "index",
        "input_a": " ".join(nv.decode(pair.tokens_a)),
        "input_b": " ".join(nv.decode(pair.tokens_b)),
        "expected_a": nv.tokens[pair.expected_a],
        "expected_b": nv.tokens[pair.expected_b],
    }
    trials = symbolic_heads_on_swap(pair, n_heads, gen)
    head = f"{n_heads} random one-layer NoPE GPT-J blocks (symbolic)"
    rows.append({**base, "head": head, **_trial_summary(trials, "last-position logits")})
    (t,) = symbolic_heads_on_swap(pair, 1, gen, pointed=True)
    head = "NoPE head pointed at input a's answer letter (T_Retrieval's mechanism)"
    rows.append({**base, "head": head, **_trial_summary([t], "last-position logits")})
    c = IndexConstruction(IndexSymbols(120, 16), INDEX_THETA)
    rows.append({**base, **_construction_on_pair(c, pair, nv), "head": "T_Index (positional)"})

    pair = retrieval_swap_pair(letter, rng)
    base = {
        "function": "retrieval",
        "input_a": " ".join(lv.decode(pair.tokens_a)),
        "input_b": " ".join(lv.decode(pair.tokens_b)),
        "expected_a": lv.tokens[pair.expected_a],
        "expected_b": lv.tokens[pair.expected_b],
    }
    trials = positional_heads_on_swap(pair, len(lv), n_heads, gen)
    head = f"{n_heads} random positional heads (keys equal; F(x,a)=a, W_V=I)"
    rows.append({**base, "head": head, **_trial_summary(trials, "last-query weights")})
    (t,) = positional_heads_on_swap(pair, len(lv), 1, gen, pointed=True)
    head = "positional head pointed at input a's answer position (T_Index's mechanism)"
    rows.append({**base, "head": head, **_trial_summary([t], "last-query weights")})
    c = RetrievalConstruction(RetrievalSymbols(8, 8), RETRIEVAL_THETA)
    rows.append({**base, **_construction_on_pair(c, pair, lv), "head": "T_Retrieval (symbolic)"})

    sym = RetrievalSymbols(3, 2)
    ids = all_proper_inputs(sym, 4)
    outputs, gaps = query_reading_positional_retrieval(sym, ids, gen)
    exact = (outputs == retrieval(ids, sym)) & (gaps > 0)
    rows.append(
        {
            "function": "retrieval (scope)",
            "input_a": f"every proper input, A=3 m=2 length 4 ({len(ids)})",
            "input_b": "",
            "expected_a": "Retrieval at every position",
            "expected_b": "",
            "head": "random positional head + query-reading F(x,a)_c = a_c [left(c) = looked-up letter]",
            "max_difference": float(gaps.min()),
            "difference_of": "smallest decoding gap",
            "right_on_a": int(exact.sum()),
            "right_on_b": int(exact.size),
            "right_on_both": int(exact.all()),  # one head: 1 if it is exact on every input
        }
    )
    return rows


def _construction_on_pair(c: Construction, pair, vocab) -> dict:
    ids = np.stack([c.symbols.encode(vocab.decode(pair.tokens_a)), c.symbols.encode(vocab.decode(pair.tokens_b))])
    out = run_construction(c, ids, beta=None).logits[:, -1].argmax(-1).numpy()
    names = c.symbols.decode(out)
    right_a = names[0] == vocab.tokens[pair.expected_a]
    right_b = names[1] == vocab.tokens[pair.expected_b]
    return {
        "max_difference": None,
        "difference_of": f"outputs {names[0]} / {names[1]}",
        "right_on_a": int(right_a),
        "right_on_b": int(right_b),
        "right_on_both": int(right_a and right_b),
    }


def counterexample_records(
    rows: list[dict], index_theta: float = INDEX_THETA, retrieval_theta: float = RETRIEVAL_THETA, n_letters: int = 8
) -> list[dict]:
    """For each (function, definition, domain) whose bound fails inside the premise: the first failing n, a
    concrete input, the discrepancy claimed by the reduction and the one measured by running the construction
    on that input (top minus second of its last query's logits), and the bound."""
    out = []
    c: Construction
    for check in bound_checks(rows):
        n = check["first_fail"]
        if n is None:
            continue
        function, definition, domain = check["function"], check["definition"], check["domain"]
        row = next(
            r
            for r in rows
            if (r["function"], r["definition"], r["domain"], r["n"]) == (function, definition, domain, n)
        )
        if function == "index":
            m = None if domain == "ints<=n-1" else int(domain.split("<=")[1])
            d = index_discrepancy(index_theta, m, np.array([n]))
            if definition != "max":
                continue  # Delta_min never fails (Dirichlet); nothing to exhibit
            index_symbols = IndexSymbols(1, n - 1 if m is None else m)
            tokens = index_witness(n, int(d.argmax_query[0]), m)
            c, encoded = IndexConstruction(index_symbols, index_theta), index_symbols.encode(tokens)
        else:
            letters = RetrievalSymbols(n_letters, 1)
            r = retrieval_discrepancy(retrieval_theta, n_letters, np.array([n]), minimum=definition == "min")
            configs = r.max_config if definition == "max" else r.min_config if definition == "min" else r.proof_config
            if configs[0] is None:
                continue  # no input attains this definition's extreme at n: nothing to exhibit
            tokens = retrieval_witness(letters, configs[0])
            c, encoded = RetrievalConstruction(letters, retrieval_theta), letters.encode(tokens)
        scores = run_construction(c, encoded[None], beta=1.0).scores[0, -1].numpy()
        top2 = np.sort(scores)[-2:]
        out.append(
            {
                "function": function,
                "definition": definition,
                "domain": domain,
                "n": n,
                "discrepancy": row["discrepancy"],
                "measured_on_input": float(top2[1] - top2[0]),
                "bound": row["bound"],
                "input": " ".join(tokens),
            }
        )
    return out
