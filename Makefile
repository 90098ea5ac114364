# Every step a fresh clone needs lives here: `make test` and `make run` set up what they use.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: setup tools lint test run bench clean

# --no-compile: pip would compile every installed module (16 s of a 46 s install); a module
# is compiled when first imported instead, most of them by `make test`'s collection beside lint
$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet --no-compile -e '.[dev]'
	touch $@

setup: $(BIN)/.installed

# The store tests start their own redis-server, the README session test runs curl, the TLS
# callback test makes its certificate with openssl, the clock-skew test runs a worker under
# faketime and the dashboard's browser tests drive a headless chromium (/usr/bin/chromium);
# install them when missing and we may (each tool's Debian package has its name). The
# PostgreSQL store's tests run their own server with initdb, which Debian's postgresql package
# puts in /usr/lib/postgresql/<version>/bin, off PATH.
tools:
	@for tool in redis-server curl openssl faketime chromium; do \
	  command -v $$tool >/dev/null 2>&1 && continue; \
	  if [ "$$(id -u)" = 0 ]; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$tool >/dev/null || exit 1; \
	  else echo "$$tool is missing: install it (apt-get install $$tool)" >&2; exit 1; fi; \
	done
	@command -v initdb >/dev/null 2>&1 || ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || \
	  if [ "$$(id -u)" = 0 ]; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null || exit 1; \
	  else echo "initdb is missing: install PostgreSQL (apt-get install postgresql)" >&2; exit 1; fi

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

# In parallel: two workers per core (tests/conftest.py says why); idle workers steal queued
# tests, so a long fault test does not hold up short ones. Then the tests marked `latency`,
# whose bounds on real time the first part's load would break, two at a time: each mostly
# waits on real time, and two of them leave a core each on a 2-core machine. That part imports
# only the test modules that name the mark (tests/conftest.py).
# `--hypothesis-profile=ci` runs each property test's CI example count (tests/budget.py); a
# plain `pytest` runs the full counts. Bytecode is compiled once and kept, even where the
# environment sets PYTHONDONTWRITEBYTECODE: without it every `tickwheel` process a test starts
# compiles the package again (0.15 s of CPU each), and the `latency` part's workers rewrite and
# compile every test module again (half of a worker's 23 s collection). pytest keeps the test
# modules' assertion-rewritten bytecode apart: one collection writes it while lint runs on the
# other core, or each of the parallel part's four workers would rewrite every module (8 s of CPU).
test: export PYTHONDONTWRITEBYTECODE :=
test: setup tools
	$(BIN)/python -m compileall -q src tests
	$(BIN)/pytest --collect-only -q -p no:cacheprovider >/dev/null 2>&1 & collecting=$$!; \
	  $(MAKE) --no-print-directory lint; linted=$$?; wait $$collecting; exit $$linted
	$(BIN)/pytest -n auto --dist worksteal -m "not latency" --durations=10 --hypothesis-profile=ci
	$(BIN)/pytest -n 2 --dist worksteal -m latency --hypothesis-profile=ci

# the API and a worker, on ./tickwheel.db at port 8080 unless told otherwise (make run PORT=9090
# STORE=redis://127.0.0.1:6379/0); private targets allowed for the README's local receiver
run: setup
	$(BIN)/tickwheel serve --allow-private-targets $(if $(PORT),--port '$(PORT)') $(if $(STORE),--store '$(STORE)')

bench: setup tools
	$(BIN)/python bench/inproc.py
	$(BIN)/python bench/stores.py
	$(BIN)/python bench/engine.py

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache .hypothesis
