"""`arcstudy ingest` without --workers: below the automatic threshold everything is read in one process, and
the command says so (the user sees why the other cores stay idle); with --workers it says nothing."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

import pipeline.core.executor as executor
from pipeline.cli import app

FIXTURES = Path(__file__).resolve().parents[2].parent / "shared" / "samples" / "arc-agi-3" / "fixtures"


@pytest.mark.parametrize("workers", [None, "1"])
def test_ingest_says_when_it_reads_in_one_process(monkeypatch, tmp_path, workers):
    monkeypatch.setattr(executor, "default_workers", lambda: 2)  # as on a two-core machine
    files = sorted(FIXTURES.glob("*.jsonl"))[:3]
    assert len(files) == 3
    args = ["--plain", "ingest", *map(str, files), "--db", str(tmp_path / "w.duckdb")]
    result = CliRunner().invoke(app, args + (["--workers", workers] if workers else []))
    assert result.exit_code in (0, 3), result.output
    said = "reading in this one process" in result.output
    assert said == (workers is None)
    if said:
        assert "on 2 cores" in result.output and "--workers N" in result.output
