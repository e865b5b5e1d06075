# One command to run the demo, one to run every test. Everything is installed from
# this repository's own files: pyproject extras into .venv, npm peers into tests/peers.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
PEERS  := tests/peers

.PHONY: setup demo test lint bench peers clean

setup: $(VENV)/.installed

# mcpd and its three runtime dependencies: all the demo needs.
$(VENV)/.runtime: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e .
	touch $@

# The test and lint tools on top.
$(VENV)/.installed: $(VENV)/.runtime pyproject.toml
	$(BIN)/pip install -q -e '.[test]'
	touch $@

# Real third-party MCP servers and the official conformance suite for interop tests,
# a venv with the v1 Python SDK line (mcp-proxy pins it) kept apart from .venv, and
# real hosts whose config files `mcpd connect` writes (tests/host_programs).
HOST_PROGRAMS  := tests/host_programs
peers: $(PEERS)/node_modules/.installed .venv-peers-v1/.installed $(HOST_PROGRAMS)/node_modules/.installed

$(HOST_PROGRAMS)/node_modules/.installed: $(HOST_PROGRAMS)/package.json $(HOST_PROGRAMS)/package-lock.json
	cd $(HOST_PROGRAMS) && npm ci --no-audit --no-fund --loglevel=error
	touch $@

$(PEERS)/node_modules/.installed: $(PEERS)/package.json $(PEERS)/package-lock.json
	cd $(PEERS) && npm ci --no-audit --no-fund --loglevel=error
	touch $@

.venv-peers-v1/.installed: $(PEERS)/requirements-v1.txt
	$(PYTHON) -m venv .venv-peers-v1
	.venv-peers-v1/bin/pip install -q -r $(PEERS)/requirements-v1.txt
	touch $@

demo: $(VENV)/.runtime
	$(BIN)/mcpd serve --demo

# pytest exits 5 when it collects nothing; that is not a failure of the code.
# As root, the tests that boot a real systemd (tests/systemd/) must run, not skip; their
# first run builds a Debian rootfs into ~/.cache/mcpd-tests (about a minute and a half).
# As root they also install bubblewrap (apt) when it is missing: servers run sandboxed.
test: export MCPD_REQUIRE_SYSTEMD_TESTS ?= $(if $(filter 0,$(shell id -u)),1)
# Likewise the status page's browser tests: as root they install Debian's chromium and
# chromium-driver with apt on first use (tests/support/page/browser.py), and must run.
test: export MCPD_REQUIRE_BROWSER_TESTS ?= $(if $(filter 0,$(shell id -u)),1)
# Likewise the servers' sandbox: as root the tests install bubblewrap with apt and the
# sandbox tests must run.
test: export MCPD_REQUIRE_SANDBOX_TESTS ?= $(if $(filter 0,$(shell id -u)),1)
test: setup peers
	$(BIN)/pytest; rc=$$?; if [ $$rc -eq 5 ]; then exit 0; else exit $$rc; fi

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy --strict protocol transports mcpd bench

# Bytecode first: an installed mcpd has it, and a start-up that compiles its own
# modules (PYTHONDONTWRITEBYTECODE=1 keeps them uncached) costs up to twice the CPU.
bench: $(VENV)/.bench-installed
	$(BIN)/python -m compileall -q mcpd protocol transports
	$(BIN)/python -m bench.run

$(VENV)/.bench-installed: $(VENV)/.installed pyproject.toml
	$(BIN)/pip install -q -e '.[test,bench]'
	touch $@

clean:
	rm -rf $(VENV) .venv-peers-v1 $(PEERS)/node_modules $(HOST_PROGRAMS)/node_modules
