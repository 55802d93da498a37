"""`arcstudy query` reads and writes its result a batch at a time (`Workspace.read_batches`): a result larger than
memory is written in the memory of a batch (30 million rows to CSV took 2.5 GB, to Parquet 1.3 GB, and shown as
a table of 5 rows 1.3 GB, each held whole). What it writes is what one read of the whole result gives."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

from pipeline.cli import app
from pipeline.core import workspace
from pipeline.core.outputs import csv_text
from pipeline.core.workspace import Workspace

ROOT = Path(__file__).resolve().parents[2]
QUERIES = [
    "SELECT range AS n, range::VARCHAR || '\",x' AS s, [range, 1] AS l, {'k': range} AS st, "
    "'=cmd' AS f, 'ab'::BLOB AS b, CASE WHEN range % 3 = 0 THEN NULL ELSE range / 7 END AS d FROM range(40)",
    "SELECT range AS n FROM range(0)",
    "SELECT 'nan'::DOUBLE AS g, 'é' AS u",
]


@pytest.fixture
def db(empty_db: Path) -> Path:
    return empty_db


def run(*args: str):
    return CliRunner().invoke(app, ["--plain", "query", *args])


@pytest.mark.parametrize("sql", QUERIES)
def test_every_format_written_in_batches_is_the_whole_results(db, tmp_path, monkeypatch, sql):
    with Workspace(db, read_only=True) as ws:
        whole = ws.read(sql)
    monkeypatch.setattr(workspace, "QUERY_BATCH_ROWS", 7)
    with Workspace(db, read_only=True) as ws:
        head, batches = ws.read_batches(sql)
        parts = list(batches)
    assert head.schema == whole.schema and head.height == 0
    assert all(p.height <= 7 for p in parts) and len(parts) >= whole.height // 7
    text = whole.with_columns(pl.col(pl.Binary).bin.encode("hex"))
    for fmt, expected in (("csv", csv_text(text)),
                          ("json", json.dumps([{k: (None if isinstance(v, float) and v != v else v)
                                                for k, v in row.items()} for row in text.to_dicts()],
                                              default=str, indent=1, allow_nan=False))):
        res = run(sql, "--db", str(db), "--format", fmt)
        assert res.exit_code == 0, res.output
        assert res.output == expected + ("" if expected.endswith("\n") else "\n")
        target = tmp_path / f"out.{fmt}"
        res = run(sql, "--db", str(db), "--out", str(target), "--format", fmt)
        assert res.exit_code == 0 and f"wrote {whole.height:,} rows" in res.output, res.output
        assert target.read_text() == expected
    res = run(sql, "--db", str(db), "--out", str(tmp_path / "out.parquet"))
    assert res.exit_code == 0, res.output
    assert pl.read_parquet(tmp_path / "out.parquet").equals(whole)
    res = run(sql, "--db", str(db), "--limit", "10")
    shown = " ".join(res.output.split())
    assert res.exit_code == 0 and f"{whole.height:,} rows" in shown
    assert ("(first 10 shown)" in shown) == (whole.height > 10)


def test_a_result_larger_than_a_batch_is_not_held(db, tmp_path):
    """20 million rows (about 0.9 GB as polars holds them) written as CSV, Parquet and a table: the command's peak
    stays far under what holding the result takes."""
    sql = "SELECT range AS x, range::VARCHAR || 'abc' AS s FROM range(20000000)"
    for args in (["--out", str(tmp_path / "big.csv")], ["--out", str(tmp_path / "big.parquet")], ["--limit", "3"]):
        wrapper = ("import resource, subprocess, sys; r = subprocess.run(sys.argv[1:], capture_output=True).returncode;"
                   " print(r, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")
        proc = subprocess.run([sys.executable, "-c", wrapper, sys.executable, "-m", "pipeline.cli", "--plain",
                               "query", sql, "--db", str(db), *args], cwd=ROOT, capture_output=True, text=True)
        code, peak_kb = map(int, proc.stdout.split())
        assert code == 0, (args, proc.stderr)
        assert peak_kb < 600_000, (args, peak_kb)
    assert pl.scan_parquet(tmp_path / "big.parquet").select(pl.len()).collect().item() == 20_000_000
    assert sum(1 for _ in open(tmp_path / "big.csv")) == 20_000_001


@pytest.mark.parametrize("fmt", ["table", "csv", "json", "parquet"])
def test_a_query_that_fails_after_its_first_batches_is_a_failed_query(db, tmp_path, monkeypatch, fmt):
    """DuckDB's error raised while the result streams (error(), a cast, out of memory) reaches the command through
    Arrow's reader as an OSError: it is the query's failure (exit 1, DuckDB's message), never a traceback nor a
    failed write of --out, and --out is not left behind."""
    monkeypatch.setattr(workspace, "QUERY_BATCH_ROWS", 7)
    sql = "SELECT CASE WHEN range > 9000 THEN error('stop at ' || range) END AS x FROM range(10000)"
    target = tmp_path / f"out.{fmt}"
    for args in (["--out", str(target)], [] if fmt == "parquet" else ["--format", fmt]):
        res = run(sql, "--db", str(db), *args)
        assert res.exit_code == 1, res.output
        assert "error: query failed: Invalid Input Error: stop at 9001" in res.output, res.output
        assert "cannot write" not in res.output and not isinstance(res.exception, OSError)
        assert not target.exists() and list(tmp_path.iterdir()) == []


def test_a_column_polars_cannot_hold_is_said_not_a_traceback(db):
    """A UNION column: pyarrow cannot make even a batch of no rows of it (it has no implementation of sparse
    unions); an INTERVAL polars cannot import. Each is said with what to do, exit 1."""
    for sql, reason in (("SELECT union_value(k := 1) AS u", "sparse_union"),
                        ("SELECT INTERVAL 3 DAY AS i", "month_day_nano_interval")):
        res = run(sql, "--db", str(db))
        assert res.exit_code == 1, res.output
        assert "the result cannot be read:" in res.output and reason in res.output, res.output
        assert "cast such columns to text in the query" in res.output and "POLARS_" not in res.output
        res = run(sql.replace(" AS", "::VARCHAR AS"), "--db", str(db), "--format", "csv")
        assert res.exit_code == 0 and res.output.splitlines()[1] in ("1", "3 days"), res.output
