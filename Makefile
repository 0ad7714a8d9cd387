# The two commands a newcomer needs: `make demo` and `make test`. Both set up everything.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
NODE_CLIENT := clients/node

.PHONY: demo test proto check-proto lint typecheck pytest bench clean

$(VENV)/.installed: pyproject.toml clients/python/pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e clients/python -e '.[dev]'
	touch $@

demo: $(VENV)/.installed
	$(PY) examples/demo.py

test: $(VENV)/.installed check-proto lint typecheck pytest

proto: $(VENV)/.installed
	$(PY) scripts/gen_proto.py

check-proto: $(VENV)/.installed
	$(PY) scripts/gen_proto.py --check

lint: $(VENV)/.installed
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

typecheck: $(VENV)/.installed
	$(VENV)/bin/mypy

pytest: $(VENV)/.installed
	$(PY) -m pytest

bench: $(VENV)/.installed
	$(PY) bench/call_latency.py
	$(PY) bench/durability.py

clean:
	rm -rf $(VENV) $(NODE_CLIENT)/node_modules
