"""`arcstudy query` and `Workspace(read_only=True).read` only read the database they were given.

Every escape below once went through with exit 0 (another database modified, files written, /etc files printed,
an extension download tried). Each must be refused (exit 2, one line saying what was refused), leave every
database file byte-identical, write no file and print no byte of a file outside the database.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest
from typer.testing import CliRunner

from pipeline.cli import app
from pipeline.core.workspace import QueryRefused, Workspace
from tests.unit.test_schemas import good_files_frame

SECRET = "h6-secret-3f9a1c"

# {other}: a second database; {link}: a hard link to the queried one; {secret}: a file outside the database;
# {out}: a path nothing may be written to.
ESCAPES = [
    "ATTACH '{other}' AS o (READ_WRITE)",
    "ATTACH '{other}' AS o (READ_WRITE); DROP TABLE o.runs",
    "ATTACH '{link}' AS l (READ_WRITE); DROP TABLE l.raw_ingest__files",
    "COPY raw_ingest__files TO '{out}'",
    "COPY (SELECT 1) TO '{out}' (FORMAT csv)",
    "EXPORT DATABASE '{out}'",
    "SELECT * FROM read_csv('{secret}')",
    "SELECT * FROM read_text('{secret}')",
    "SELECT * FROM read_blob('{secret}')",
    "SELECT * FROM '{secret}'",
    "SELECT * FROM glob('{secret_dir}/*')",
    "SELECT * FROM query('SELECT * FROM read_text(''{secret}'')')",
    "INSTALL httpfs",
    "LOAD httpfs",
    "SET threads = 1",
    "SET enable_external_access = true",
    "PRAGMA enable_profiling",
    "CHECKPOINT",
    "VACUUM",
    "CREATE TEMP TABLE t AS SELECT 1",
    "SELECT 1; SELECT 2",
    "SELECT 1; DROP TABLE raw_ingest__files",
    "DROP TABLE raw_ingest__files",
    "",
    # EXPLAIN ANALYZE runs what it explains: refused up front (exit 2) as the statement itself is (DuckDB's
    # read-only error, exit 1, was the only guard)
    "EXPLAIN ANALYZE CREATE TABLE t AS SELECT 1",
    "explain analyse DELETE FROM raw_ingest__files",
    "EXPLAIN ANALYZE COPY (SELECT 1) TO '{out}'",
]

READS = [
    "SELECT file_name FROM raw_ingest__files ORDER BY n_bytes",
    "WITH f AS (SELECT * FROM raw_ingest__files) SELECT count(*) AS n FROM f",
    "FROM raw_ingest__files",
    "DESCRIBE raw_ingest__files",
    "SHOW TABLES",
    "SUMMARIZE raw_ingest__files",
    "EXPLAIN SELECT * FROM raw_ingest__files",
    "EXPLAIN ANALYZE SELECT count(*) FROM raw_ingest__files",
    "SELECT 1;",
]


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


class Setup:
    def __init__(self, root: Path):
        self.db = root / "study.duckdb"
        with Workspace(self.db) as ws:
            ws.insert_frame("raw_ingest__files", good_files_frame())
        self.other = root / "other.duckdb"
        with Workspace(self.other):
            pass
        self.link = root / "link.duckdb"
        os.link(self.db, self.link)
        secret_dir = root / "private"
        secret_dir.mkdir()
        self.secret = secret_dir / "shadow.csv"
        self.secret.write_text(f"user,hash\nroot,{SECRET}\n")
        self.out = root / "written"
        self.files = [self.db, self.other, self.link]
        self.hashes = {p: sha256(p) for p in self.files}
        self.root = root

    def sql(self, template: str) -> str:
        return template.format(other=self.other, link=self.link, secret=self.secret, secret_dir=self.secret.parent,
                               out=self.out)

    def assert_untouched(self) -> None:
        assert {p: sha256(p) for p in self.files} == self.hashes
        assert not self.out.exists()
        assert sorted(p.name for p in self.root.iterdir()) == ["link.duckdb", "other.duckdb", "private", "study.duckdb"]


@pytest.fixture(scope="module")
def setup(tmp_path_factory) -> Setup:
    """One set of files for the module: every test checks they are still byte-identical."""
    return Setup(tmp_path_factory.mktemp("query_security"))


def query(*args: str):
    return CliRunner().invoke(app, ["--plain", "query", *args])


@pytest.mark.parametrize("template", ESCAPES)
def test_cli_refuses_every_escape(setup: Setup, template: str):
    res = query(setup.sql(template), "--db", str(setup.db))
    assert res.exit_code == 2, res.output
    assert "refused" in res.output and "Traceback" not in res.output
    assert SECRET not in res.output
    setup.assert_untouched()


@pytest.mark.parametrize("fmt", ["csv", "json", "table"])
def test_cli_refuses_reading_a_file_in_every_format(setup: Setup, fmt: str):
    res = query(setup.sql("SELECT * FROM read_blob('{secret}')"), "--db", str(setup.db), "--format", fmt)
    assert res.exit_code == 2 and SECRET not in res.output
    setup.assert_untouched()


def test_refusal_names_what_was_refused(setup: Setup):
    assert "ATTACH" in query(setup.sql(ESCAPES[0]), "--db", str(setup.db)).output
    assert "2 statements" in query("SELECT 1; SELECT 2", "--db", str(setup.db)).output
    assert "outside the database" in query(setup.sql(ESCAPES[6]), "--db", str(setup.db)).output
    # named by the word written, not only by DuckDB's kind of statement (it files INSTALL under LOAD)
    assert "refused: INSTALL (load statement)" in query("INSTALL httpfs", "--db", str(setup.db)).output
    assert "refused: CHECKPOINT (call statement)" in query("CHECKPOINT", "--db", str(setup.db)).output


@pytest.mark.parametrize("sql", READS)
def test_cli_still_runs_reads(setup: Setup, sql: str):
    res = query(sql, "--db", str(setup.db), "--format", "json")
    assert res.exit_code == 0, res.output
    setup.assert_untouched()


@pytest.mark.parametrize("fmt", ["csv", "json", "parquet", "table"])
@pytest.mark.parametrize("target", ["db", "link"])
def test_out_cannot_overwrite_the_database(setup: Setup, fmt: str, target: str):
    """`--out` naming the database being read (by any name) once replaced it with the query's rows."""
    res = query("SELECT 1 AS a", "--db", str(setup.db), "--format", fmt, "--out", str(getattr(setup, target)))
    assert res.exit_code == 2, res.output
    assert "is the database" in res.output and "Traceback" not in res.output
    setup.assert_untouched()


def test_blob_columns_are_hex_in_text_formats(setup: Setup):
    sql = "SELECT '\\xAA\\x01'::BLOB AS b"
    csv = query(sql, "--db", str(setup.db), "--format", "csv")
    assert csv.exit_code == 0, csv.output
    assert csv.output.splitlines() == ["b", "aa01"]
    js = query(sql, "--db", str(setup.db), "--format", "json")
    assert js.exit_code == 0 and '"b": "aa01"' in js.output


@pytest.mark.parametrize("template", ESCAPES)
def test_notebook_api_refuses_every_escape(setup: Setup, template: str):
    with Workspace(setup.db, read_only=True) as ws:
        with pytest.raises(QueryRefused, match="refused"):
            ws.read(setup.sql(template))
        assert ws.read(READS[0]).height == 3  # the connection is still usable after a refusal
    setup.assert_untouched()


@pytest.mark.parametrize("template", ["ATTACH '{other}' AS o (READ_WRITE)", "COPY raw_ingest__files TO '{out}'",
                                      "SELECT * FROM read_text('{secret}')", "SET enable_external_access = true",
                                      "SET lock_configuration = false", "INSTALL httpfs"])
def test_the_raw_connection_is_guarded_too(setup: Setup, template: str):
    """A notebook may use `ws.con` directly: DuckDB's own guards still hold there."""
    with Workspace(setup.db, read_only=True) as ws, pytest.raises(duckdb.Error):
        ws.con.execute(setup.sql(template)).fetchall()
    setup.assert_untouched()


def test_query_waits_for_a_writer_then_says_so(tmp_path: Path):
    db = tmp_path / "busy.duckdb"
    duckdb.connect(str(db)).close()
    writer = subprocess.Popen([sys.executable, "-c", f"import duckdb, sys; c = duckdb.connect({str(db)!r}); "
                               "print('open', flush=True); sys.stdin.read()"],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert writer.stdout.readline().strip() == "open"
        res = query("SELECT 1", "--db", str(db), "--lock-timeout", "0.5")
        assert res.exit_code == 1
        assert "open for writing by another process" in res.output and f"PID {writer.pid}" in res.output
        assert "--lock-timeout" in res.output
    finally:
        writer.communicate("", timeout=30)
    assert query("SELECT 1", "--db", str(db), "--lock-timeout", "0.5").exit_code == 0


def test_json_output_is_valid_json_for_nan_and_infinities(setup: Setup):
    """`NaN` and `Infinity` were written as such: not JSON, so a strict reader refused the whole output."""
    res = query("SELECT 'nan'::DOUBLE AS a, '-inf'::DOUBLE AS b, [1.5, 'nan'::DOUBLE] AS l", "--db", str(setup.db),
                "--format", "json")
    assert res.exit_code == 0, res.output

    def refuse(name: str):
        raise ValueError(f"not JSON: {name}")

    assert json.loads(res.output, parse_constant=refuse) == [{"a": None, "b": None, "l": [1.5, None]}]
