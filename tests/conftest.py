"""Shared test fixtures: where ../shared is, a fresh database per test."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED = REPO_ROOT.parent / "shared"


@pytest.fixture
def shared_dir() -> Path:
    if not SHARED.is_dir():
        pytest.fail(f"../shared not found at {SHARED}: tests need it beside the checkout")
    return SHARED


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "test.duckdb"


@pytest.fixture
def empty_db(db_path: Path) -> Path:
    """A database with arcstudy's tables and no row (for the read-only commands)."""
    from pipeline.core.workspace import Workspace

    with Workspace(db_path):
        pass
    return db_path


@pytest.fixture
def fifo_unblocked():
    """Makes a FIFO at a path whose reader, if one blocks on it, is released within two seconds (for a minute) (a writer opens
    and closes it): code that wrongly reads it then fails its test instead of hanging the suite."""

    def make(path: Path) -> Path:
        os.mkfifo(path)

        def unblock() -> None:
            for _ in range(30):  # every reader that blocks on it in the next minute
                time.sleep(2)
                try:
                    fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
                except OSError:  # nobody is reading it now
                    continue
                os.close(fd)

        threading.Thread(target=unblock, daemon=True).start()
        return path

    return make
