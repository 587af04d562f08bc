# Two set-up commands for a fresh machine (see README.md): `make demo` and `make test`.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
EXTRAS := aer,test,examples

.PHONY: venv demo demo-quick test bench

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

bench: venv
	$(PY) -m benchmarks.run
