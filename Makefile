# arcstudy: every set-up step lives here, so a fresh clone needs only `make demo` or `make test`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.arcstudy-installed
PYTEST_WORKERS ?= 2

.PHONY: install test lint unit integration conformance clean help demo browser screenshots baselines

help:
	@echo "make demo    install into $(VENV) (if needed) and run the whole pipeline on the demo study"
	@echo "make test    install into $(VENV) (if needed) and run make lint plus the whole test suite"
	@echo "make lint    ruff and the import-layer contract (lint-imports, docs/architecture.md)"
	@echo "make baselines  regenerate games/*/metadata.json baseline_actions from a fresh demo study"
	@echo "make screenshots  the README's pictures (docs/img/*.png) from reports/demo (after make demo)"
	@echo "make clean   remove the virtual environment and caches"
	@echo "make bench   the benchmarks at a small size: headline ratios beside their goals (benchmarks/README.md)"

# Re-install whenever pyproject.toml changes; the stamp makes repeated runs instant.
$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[dev]" --config-settings editable_mode=compat
	@touch $(STAMP)

# Compiled once here, so that every command starts from bytecode even where PYTHONDONTWRITEBYTECODE is set
# (CI and container images often set it; an editable install would then compile arcstudy on every run).
install: $(STAMP)
	@$(BIN)/python -m compileall -q pipeline engine schemas

demo: install
	$(BIN)/arcstudy demo

# The shipped games' baseline_actions are the demo study's recomputed baselines (games/README.md): regenerate
# them after any change to the simulator, the games or the baseline rule (tests/integration/test_demo.py fails
# while they drift). --fresh: the demo's agents are budgeted by the old baselines, humans never read them.
baselines: install
	$(BIN)/arcstudy demo --fresh
	$(BIN)/arcstudy baselines --db reports/demo/demo.duckdb --write-metadata games
	$(BIN)/arcstudy demo --fresh

# The README's pictures, taken from the demo's reports with headless Chromium (docs/screenshots.py).
screenshots: install browser
	$(BIN)/python docs/screenshots.py

lint: install
	$(BIN)/ruff check .
	$(BIN)/lint-imports

test: install lint browser
	$(BIN)/python -m pytest -n $(PYTEST_WORKERS) --durations=15

unit: install
	$(BIN)/python -m pytest tests/unit -q

integration: install browser
	$(BIN)/python -m pytest tests/integration -q

# Benchmarks at a small size: prints each headline ratio with its goal, asserts nothing about time, appends each
# result to benchmarks/results/results.csv (benchmarks/README.md).
.PHONY: bench
bench: install
	$(BIN)/python benchmarks/bench.py

# Headless Chromium for the HTML report and replay-viewer tests (Debian's package). Installed only as root with
# apt-get, without recommends and with no upgrade or dist-upgrade; otherwise the browser tests are reported
# as not run (skipped with the reason), except in CI (CI set), where they fail: CI must run them.
CHROMIUM ?= /usr/bin/chromium
browser:
	@if [ -x "$(CHROMIUM)" ]; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  echo "$(CHROMIUM) missing: installing Debian's chromium (apt-get, no recommends, no upgrades)"; \
	  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
	      --no-upgrade chromium; } || echo "make browser: installing chromium failed: the browser tests will be" \
	      "reported as not run (CI fails them)"; \
	else \
	  echo "make browser: $(CHROMIUM) not found and not installable here (needs root and apt-get): the browser" \
	       "tests will be reported as not run (CI fails them)"; \
	fi

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .hypothesis .import_linter_cache
