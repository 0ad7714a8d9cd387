# The two commands a newcomer needs: `make demo` and `make test`. Both set up everything.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
NODE_CLIENT := clients/node

NODE_DEPS := $(NODE_CLIENT)/node_modules/.package-lock.json
BUF := tools/proto-lint/node_modules/.bin/buf

# The security suite must run where bubblewrap can (CI, the development machine); on a machine
# that cannot run it (user namespaces disabled), `make test TOOLBRIDGE_REQUIRE_BWRAP=0` skips it
# with the reason instead of failing.
TOOLBRIDGE_REQUIRE_BWRAP ?= 1
export TOOLBRIDGE_REQUIRE_BWRAP
# Likewise the PostgreSQL journal's tests, on a throwaway cluster: `TOOLBRIDGE_REQUIRE_POSTGRES=0`
# skips them with the reason where PostgreSQL cannot be installed (not root).
TOOLBRIDGE_REQUIRE_POSTGRES ?= 1
export TOOLBRIDGE_REQUIRE_POSTGRES
# And the hosts tests (tests/hosts), which build network namespaces: root and iproute2 (CI runs
# as root); `TOOLBRIDGE_REQUIRE_NETNS=0` skips them with the reason elsewhere.
TOOLBRIDGE_REQUIRE_NETNS ?= 1
export TOOLBRIDGE_REQUIRE_NETNS
# make bench BENCH_ARGS=--quick: fewer rounds of each benchmark (bench/run_all.py --help)
BENCH_ARGS ?=

# `make test` runs the web view's browser tests too: system-deps installs Debian's chromium for
# them, and they fail (rather than skip) when it is missing.
test pytest: export TOOLBRIDGE_BROWSER_TESTS := 1

.PHONY: demo test proto check-proto lint typecheck pytest node-deps node-test bench clean system-deps dist docs docs-serve

$(VENV)/.installed: pyproject.toml clients/python/pyproject.toml
	@echo "toolbridge: installing the Python environment in $(VENV) (first time only)" >&2
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e clients/python -e '.[dev]'
	touch $@
	@echo "toolbridge: the Python environment is ready" >&2

# The Node client's dependencies, exactly as locked, from the npm registry alone; no install
# scripts (every dependency is plain JavaScript).
$(NODE_DEPS): $(NODE_CLIENT)/package.json $(NODE_CLIENT)/package-lock.json
	cd $(NODE_CLIENT) && npm ci --ignore-scripts --no-audit --no-fund
	touch $@

node-deps: $(NODE_DEPS)

# bubblewrap for the sandbox and PostgreSQL's binaries for the journal's tests: installed here
# when run as root (apt-get install -y bubblewrap postgresql).
system-deps:
	sh scripts/setup_system.sh

demo: $(VENV)/.installed $(NODE_DEPS) system-deps
	$(PY) examples/demo.py

test: $(VENV)/.installed check-proto lint typecheck docs node-test pytest

# The documentation site (mkdocs.yml, docs/), built strictly: a broken link or anchor, a page
# missing from the nav, a sample file that is not there or a reference entry that names nothing
# fails it. Offline and a few seconds; part of `make test`. Its samples (examples/docs/) are run
# by tests/docs/.
docs: $(VENV)/.installed
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --quiet

# The site at http://127.0.0.1:8000/, rebuilt as the pages change.
docs-serve: $(VENV)/.installed
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs serve --strict

node-test: $(NODE_DEPS)
	cd $(NODE_CLIENT) && node --test test/

# The Node messages come from protobuf-es (protoc-gen-es in clients/node, buf in tools/proto-lint).
proto: $(VENV)/.installed $(BUF) $(NODE_DEPS)
	$(PY) scripts/gen_proto.py

check-proto: $(VENV)/.installed $(BUF) $(NODE_DEPS)
	$(PY) scripts/gen_proto.py --check

lint: $(VENV)/.installed $(BUF)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(BUF) lint proto

# buf, only to lint the contract (buf STANDARD and COMMENTS rules), from the npm registry.
$(BUF): tools/proto-lint/package.json tools/proto-lint/package-lock.json
	cd tools/proto-lint && npm ci --ignore-scripts --no-audit --no-fund
	touch $@

typecheck: $(VENV)/.installed
	$(VENV)/bin/mypy

pytest: $(VENV)/.installed $(NODE_DEPS) system-deps
	$(PY) -m pytest

# Every benchmark, one after another; their tables go to bench/results.md (shown in the README).
bench: $(VENV)/.installed $(NODE_DEPS) system-deps
	$(PY) bench/run_all.py $(BENCH_ARGS)

# What a release publishes, in dist/: the toolbridge and inngest-tools wheels and sdists (the
# toolbridge wheel carries the Node client, its dependencies resolved) and the npm tarball.
dist: $(VENV)/.installed $(NODE_DEPS)
	rm -rf dist && mkdir dist
	$(PY) -m build --no-isolation --outdir dist .
	$(PY) -m build --no-isolation --outdir dist clients/python
	cd $(NODE_CLIENT) && npm pack --silent --pack-destination ../../dist

clean:
	rm -rf $(VENV) $(NODE_CLIENT)/node_modules tools/proto-lint/node_modules dist site
