# arcstudy: every set-up step lives here, so a fresh clone needs only `make demo` or `make test`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.arcstudy-installed
PYTEST_WORKERS ?= 2

.PHONY: install test lint unit integration conformance clean help demo browser

help:
	@echo "make demo    install into $(VENV) (if needed) and run the whole pipeline on the demo study"
	@echo "make test    install into $(VENV) (if needed) and run make lint plus the whole test suite"
	@echo "make lint    ruff and the import-layer contract (lint-imports, docs/architecture.md)"
	@echo "make clean   remove the virtual environment and caches"

# Re-install whenever pyproject.toml changes; the stamp makes repeated runs instant.
$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[dev]" --config-settings editable_mode=compat
	@touch $(STAMP)

install: $(STAMP)

demo: install
	$(BIN)/arcstudy demo

lint: install
	$(BIN)/ruff check .
	$(BIN)/lint-imports

test: install lint browser
	$(BIN)/python -m pytest -n $(PYTEST_WORKERS) --durations=15

unit: install
	$(BIN)/python -m pytest tests/unit -q

integration: install browser
	$(BIN)/python -m pytest tests/integration -q

# Headless Chromium for the HTML report and replay-viewer tests (Debian's package; CI runs as root).
CHROMIUM ?= /usr/bin/chromium
browser:
	@if [ -x "$(CHROMIUM)" ]; then :; \
	elif command -v apt-get >/dev/null 2>&1; then \
	  echo "$(CHROMIUM) missing: installing Debian's chromium"; \
	  apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y chromium; \
	else \
	  echo "make browser: $(CHROMIUM) is missing and apt-get is unavailable: install Chromium by hand," \
	       "or the browser tests (tests/integration/test_viewer.py, test_report_framework.py) will fail." >&2; \
	fi

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .hypothesis .import_linter_cache
