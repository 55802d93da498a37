# arcstudy: every set-up step lives here, so a fresh clone needs only `make demo` or `make test`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.arcstudy-installed
PYTEST_WORKERS ?= 2

.PHONY: install test lint unit integration conformance clean help

help:
	@echo "make test    install into $(VENV) (if needed) and run ruff plus the whole test suite"
	@echo "make lint    ruff only"
	@echo "make clean   remove the virtual environment and caches"

# Re-install whenever pyproject.toml changes; the stamp makes repeated runs instant.
$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	@touch $(STAMP)

install: $(STAMP)

lint: install
	$(BIN)/ruff check .

test: install lint
	$(BIN)/python -m pytest -n $(PYTEST_WORKERS) --durations=15

unit: install
	$(BIN)/python -m pytest tests/unit -q

integration: install
	$(BIN)/python -m pytest tests/integration -q

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .hypothesis
