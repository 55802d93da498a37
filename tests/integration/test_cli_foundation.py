"""The `arcstudy` CLI basics: version, tables, schema, read-only query, exit codes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

import pipeline
from pipeline.core.workspace import Workspace
from tests.unit.test_schemas import good_files_frame


def arcstudy(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pipeline.cli", "--plain", *args], capture_output=True,
                          text=True, cwd=cwd, timeout=120)


@pytest.fixture
def filled_db(db_path: Path) -> Path:
    with Workspace(db_path) as ws:
        ws.insert_frame("raw_ingest__files", good_files_frame())
    return db_path


def test_version():
    res = arcstudy("--version")
    assert res.returncode == 0
    assert res.stdout.strip() == f"arcstudy {pipeline.__version__}"


def test_tables_lists_counts_and_descriptions(filled_db: Path):
    res = arcstudy("tables", "--db", str(filled_db))
    assert res.returncode == 0, res.stderr
    line = next(ln for ln in res.stdout.splitlines() if "raw_ingest__files" in ln)
    assert " 3 " in line and "raw" in line


def test_schema_prints_dictionary_and_rejects_unknown_table():
    res = arcstudy("schema", "quarantine")
    assert res.returncode == 0
    assert "## `quarantine`" in res.stdout and "| `reason` |" in res.stdout
    bad = arcstudy("schema", "no_such_table")
    assert bad.returncode == 2
    assert "unknown table" in bad.stderr


@pytest.mark.parametrize("where", ["folder", "under_a_file", "missing_folder"])
def test_schema_out_that_cannot_be_written_is_an_error_not_a_traceback(tmp_path: Path, where: str):
    a_file = tmp_path / "a_file"
    a_file.write_text("kept\n")
    out_file = {"folder": tmp_path, "under_a_file": a_file / "x.md",
                "missing_folder": tmp_path / "no" / "x.md"}[where]
    res = arcstudy("schema", "quarantine", "--out", str(out_file))
    assert res.returncode == 1
    assert "Traceback" not in res.stderr and f"cannot write --out {out_file}" in res.stderr
    assert a_file.read_text() == "kept\n"


def test_query_formats(filled_db: Path, tmp_path: Path):
    sql = "SELECT file_name, n_bytes FROM raw_ingest__files ORDER BY n_bytes"
    res = arcstudy("query", sql, "--db", str(filled_db), "--format", "json")
    assert res.returncode == 0, res.stderr
    assert [r["n_bytes"] for r in json.loads(res.stdout)] == [100, 101, 102]
    csv_out = tmp_path / "q.csv"
    assert arcstudy("query", sql, "--db", str(filled_db), "--format", "csv", "--out", str(csv_out)).returncode == 0
    assert pl.read_csv(csv_out)["n_bytes"].to_list() == [100, 101, 102]
    pq = tmp_path / "q.parquet"
    assert arcstudy("query", sql, "--db", str(filled_db), "--format", "parquet", "--out", str(pq)).returncode == 0
    assert pl.read_parquet(pq).height == 3
    assert arcstudy("query", sql, "--db", str(filled_db), "--format", "parquet").returncode == 2


@pytest.mark.parametrize("statement", [
    "INSERT INTO raw_ingest__files (file_id) VALUES ('x')",
    "DROP TABLE raw_ingest__files",
    "DELETE FROM raw_ingest__files",
])
def test_query_cannot_modify_the_database(filled_db: Path, statement: str):
    res = arcstudy("query", statement, "--db", str(filled_db))
    assert res.returncode == 2  # refused before it runs: a query only reads (test_query_security.py has more)
    assert "refused" in res.stderr.lower()
    with Workspace(filled_db, read_only=True) as ws:
        assert ws.row_count("raw_ingest__files") == 3


def test_query_on_missing_database_is_a_clear_error(tmp_path: Path):
    res = arcstudy("query", "SELECT 1", "--db", str(tmp_path / "none.duckdb"))
    assert res.returncode == 1
    assert "does not exist" in res.stderr


def test_bad_sql_is_an_error_not_a_traceback(filled_db: Path):
    res = arcstudy("query", "SELEC nonsense", "--db", str(filled_db))
    assert res.returncode == 1
    assert "query failed" in res.stderr and "Traceback" not in res.stderr


def test_usage_error_exit_code():
    assert arcstudy("query").returncode == 2
    assert arcstudy("no-such-command").returncode == 2
