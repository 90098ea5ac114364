# Every step a fresh clone needs lives here: `make test` and `make run` set up what they use.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: setup redis-server lint test run bench clean

$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $@

setup: $(BIN)/.installed

# The store tests start their own redis-server; install it when missing and we may.
redis-server:
	@command -v redis-server >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ]; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null; \
	  else echo "redis-server is missing: install it (apt-get install redis-server)" >&2; exit 1; fi; }

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

test: setup redis-server lint
	$(BIN)/pytest

# the API and a worker on ./tickwheel.db; private targets allowed for the README's local receiver
run: setup
	$(BIN)/tickwheel serve --allow-private-targets

bench: setup redis-server
	$(BIN)/python bench/inproc.py
	$(BIN)/python bench/stores.py
	$(BIN)/python bench/engine.py

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache .hypothesis
