# The two commands a newcomer needs: `make demo` and `make test`. Both set up everything.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
NODE_CLIENT := clients/node

NODE_DEPS := $(NODE_CLIENT)/node_modules/.package-lock.json

.PHONY: demo test proto check-proto lint typecheck pytest node-deps node-test bench clean

$(VENV)/.installed: pyproject.toml clients/python/pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e clients/python -e '.[dev]'
	touch $@

# The Node client's dependencies, exactly as locked, from the npm registry alone; no install
# scripts (every dependency is plain JavaScript).
$(NODE_DEPS): $(NODE_CLIENT)/package.json $(NODE_CLIENT)/package-lock.json
	cd $(NODE_CLIENT) && npm ci --ignore-scripts --no-audit --no-fund
	touch $@

node-deps: $(NODE_DEPS)

demo: $(VENV)/.installed $(NODE_DEPS)
	$(PY) examples/demo.py

test: $(VENV)/.installed check-proto lint typecheck node-test pytest

node-test: $(NODE_DEPS)
	cd $(NODE_CLIENT) && node --test test/

proto: $(VENV)/.installed
	$(PY) scripts/gen_proto.py

check-proto: $(VENV)/.installed
	$(PY) scripts/gen_proto.py --check

lint: $(VENV)/.installed
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

typecheck: $(VENV)/.installed
	$(VENV)/bin/mypy

pytest: $(VENV)/.installed $(NODE_DEPS)
	$(PY) -m pytest

bench: $(VENV)/.installed $(NODE_DEPS)
	$(PY) bench/call_latency.py
	$(PY) bench/durability.py

clean:
	rm -rf $(VENV) $(NODE_CLIENT)/node_modules
