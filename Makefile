# Two commands on a fresh machine: `make run` (set up + demo server) and `make test`.
SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
PORT ?= 8080
DATA ?= ./scdb-data
TEST_WORKERS ?= 2
STACK_DATA ?= ./scdb-stack
STACK_WORKERS ?= 2
# STANDBY=1: `make stack` adds a synchronous hot standby (read replica, `stack failover`).
# CLUSTERS=1: tenants over two PostgreSQL clusters and a directory database (D-277).
STANDBY ?=

.PHONY: setup run stack stack-down test test-fast test-postgres lint bench clean

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml scripts/setup.sh
	PYTHON=$(PYTHON) bash scripts/setup.sh
	@touch $@

run: setup
	$(VENV)/bin/superchargedb serve --data $(DATA) --port $(PORT) --demo

# The server stack from wheels (PostgreSQL + pgvector, SeaweedFS, Valkey), serve --workers and a
# media worker, detached, with the demo data (docs/deploy.md); stack-down stops all of it.
stack: setup
	bash scripts/install_stack.sh
	$(VENV)/bin/superchargedb stack up --data $(STACK_DATA) --port $(PORT) --workers $(STACK_WORKERS) $(if $(STANDBY),--standby) $(if $(CLUSTERS),--clusters)

stack-down: setup
	$(VENV)/bin/superchargedb stack down --data $(STACK_DATA)

# The whole suite on the embedded default, then every test that builds a service again on the
# server stack's PostgreSQL (tests/backend_suite.py; it skips, saying why, without the stack).
# Both passes run TEST_WORKERS pytest-xdist workers, a test file per worker at a time: no test
# asserts a speed (benchmarks report it), and serial the embedded pass took 38 minutes, not 20.
test: setup
	$(PY) -m pytest -q -p xdist -n $(TEST_WORKERS) --dist loadfile
	SCDB_TEST_BACKEND=postgres $(PY) -m pytest -q -p xdist -n $(TEST_WORKERS) --dist loadfile

test-postgres: setup
	SCDB_TEST_BACKEND=postgres $(PY) -m pytest -q -p xdist -n $(TEST_WORKERS) --dist loadfile

# The fast tier runs TEST_WORKERS pytest-xdist workers (one per core of the 2-core target), a
# test file per worker at a time so a module's fixtures are built once. TEST_WORKERS=0 runs a
# target serially.
test-fast: setup
	$(PY) -m pytest -q -m "not slow" -p xdist -n $(TEST_WORKERS) --dist loadfile

lint: setup
	$(VENV)/bin/ruff check src tests bench
	$(VENV)/bin/ruff format --check src tests bench
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports

bench: setup
	$(PY) -m bench.scifact   # needs SCDB_EVAL_DIR (the evaluation data's folder)

clean:
	rm -rf $(VENV) $(DATA)
