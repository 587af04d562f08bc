# Two set-up commands for a fresh machine (see README.md): `make demo` and `make test`.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
EXTRAS := aer,test,examples,paths

PEERS_VENV := .venv-peers
PEERS_PY := $(PEERS_VENV)/bin/python
PEERS_EXTRAS := bench,peers

.PHONY: venv demo demo-quick test docs bench bench-peers bench-peers-quick

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip

$(VENV)/.installed: $(PY) pyproject.toml constraints.txt
	$(PY) -m pip install -q -c constraints.txt -e ".[$(EXTRAS)]"
	touch $@

venv: $(VENV)/.installed

demo: venv
	$(PY) examples/train_digits10.py

demo-quick: venv
	$(PY) examples/train_digits.py

test: venv
	$(PY) -m pytest -q -n 2 --dist loadgroup

# The documentation site into site/ (ignored by git), any warning an error. It installs pyproject's `docs` extra
# into .venv by name (qhybrid itself is not reinstalled: the API page reads its source) and builds.
DOCS_EXTRA = $(PY) -c "import tomllib; print(' '.join(tomllib.load(open('pyproject.toml', 'rb'))['project']['optional-dependencies']['docs']))"

docs: $(PY)
	$(PY) -m pip install -q -c constraints.txt $$($(DOCS_EXTRA))
	$(PY) -m mkdocs build --strict

# Then the peers' table with whatever of them this venv has: it lists each missing peer as "not installed"
# with its ImportError (`make bench-peers` runs them all from their own venv).
bench: venv
	$(PY) -m benchmarks.run
	$(PY) -m benchmarks.peers_run --quick --workloads W1,G16

# The compiled peers (jax, TensorCircuit-NG, Catalyst, quimb) live in their own venv so the dev venv's
# packages never move. BENCH_ARGS passes options, e.g. BENCH_ARGS="--threads 1 --workloads W1".
$(PEERS_PY):
	$(PYTHON) -m venv $(PEERS_VENV)
	$(PEERS_PY) -m pip install -q --upgrade pip

$(PEERS_VENV)/.installed: $(PEERS_PY) pyproject.toml constraints.txt
	$(PEERS_PY) -m pip install -q -c constraints.txt -e ".[$(PEERS_EXTRAS)]"
	touch $@

bench-peers: $(PEERS_VENV)/.installed
	$(PEERS_PY) -m benchmarks.peers_run $(BENCH_ARGS)

bench-peers-quick: $(PEERS_VENV)/.installed
	$(PEERS_PY) -m benchmarks.peers_run --quick $(BENCH_ARGS)
