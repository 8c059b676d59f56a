"""Check that the test tiers lose no test: `make test`'s tier (not long, not slow) and `make test-long`'s
(long, not slow) are disjoint and together are every test not marked slow, the set CI ran before the tiers
(and runs now, through .ci/run). With a file of node ids (one a line, e.g. `pytest --collect-only -q` of an
earlier commit), the union must equal it too. Run from the repository root with the environment's python:

    .venv/bin/python .ci/check_tiers.py [BASELINE]

It collects the tree four times (about 20 s each on 2 cores) and prints the counts; exit 1 on a mismatch."""

import subprocess
import sys

TIERS = {
    "every test": "",
    "not slow (what CI runs)": "not slow",
    "make test (fast tier)": "not slow and not long",
    "make test-long (second tier)": "long and not slow",
    "make test-slow (not in CI)": "slow",
}


def collect(expression: str) -> set[str]:
    done = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                           "-m", expression], capture_output=True, text=True)
    if done.returncode not in (0, 5):  # 5: nothing collected (no test is marked slow at present)
        sys.exit(f"collection with -m {expression!r} failed:\n{done.stdout}{done.stderr}")
    return {line for line in done.stdout.splitlines() if "::" in line}


sets = {name: collect(expression) for name, expression in TIERS.items()}
for name, tests in sets.items():
    sys.stdout.write(f"{len(tests):5d}  {name}  (-m {TIERS[name]!r})\n")
fast, long, ci, every = (sets["make test (fast tier)"], sets["make test-long (second tier)"],
                         sets["not slow (what CI runs)"], sets["every test"])
problems = []
if fast & long:
    problems.append(f"{len(fast & long)} tests in both tiers: {sorted(fast & long)[:5]}")
if fast | long != ci:
    problems.append(f"the tiers miss {sorted(ci - fast - long)[:5]} or add {sorted(fast | long - ci)[:5]}")
if ci | sets["make test-slow (not in CI)"] != every:
    problems.append(f"neither a tier nor slow: {sorted(every - ci - sets['make test-slow (not in CI)'])[:5]}")
if len(sys.argv) > 1:
    baseline = {line.strip() for line in open(sys.argv[1]) if "::" in line}
    if baseline != ci:
        problems.append(f"against {sys.argv[1]} ({len(baseline)}): missing {sorted(baseline - ci)[:5]}, "
                        f"new {sorted(ci - baseline)[:5]}")
    else:
        sys.stdout.write(f"equal to the {len(baseline)} tests of {sys.argv[1]}\n")
sys.stdout.write(("\n".join(problems) if problems else "the tiers are disjoint and lose no test") + "\n")
sys.exit(1 if problems else 0)
