"""Schema versions (issue 29, point 7; the item left open: "databases made before a schema change must be
re-ingested, and nothing says so").

A database records the schema that made it. One made by this code and then altered to look older (a table
and a nullable column missing, the version row gone) is upgraded in place by a writing command, or by
`arcstudy schema --upgrade`; read-only commands say so in one line. A change that cannot be made in place
(a column retyped) and a database from a newer arcstudy get one line saying what to do, never a traceback.
"""

from __future__ import annotations

import duckdb
import pytest
from typer.testing import CliRunner

from pipeline.cli import app
from pipeline.core.workspace import Workspace, WorkspaceError
from schemas import TABLES
from schemas.version import SCHEMA_VERSION, VERSION_TABLE, schema_changes, schema_sha256


def cli(*args):
    return CliRunner().invoke(app, ["--plain", *map(str, args)])


def _made_now(db_path):
    with Workspace(db_path) as ws:
        ws.con.execute("INSERT INTO quarantine (quarantine_id, run_id, file_path, source_location, check_name, reason, "
                       "raw_text, target_table) VALUES ('q1', 'r1', '/x', 'file', 'c', 'why', 'raw', 'core_arc3__steps')")
        return ws.read(f"SELECT schema_version, schema_sha256 FROM {VERSION_TABLE}").rows()


def _make_older(db_path, *sql):
    con = duckdb.connect(str(db_path))
    for stmt in sql:
        con.execute(stmt)
    con.close()


def test_a_new_database_records_its_schema(db_path):
    assert _made_now(db_path) == [(SCHEMA_VERSION, schema_sha256())]


def test_an_older_database_is_upgraded_in_place(db_path):
    _made_now(db_path)
    _make_older(db_path, f"DROP TABLE {VERSION_TABLE}", "DROP TABLE core_arctgi__tasks",
                "ALTER TABLE quarantine DROP COLUMN target_table")
    read = cli("query", "SELECT count(*) FROM quarantine", "--db", db_path)
    assert read.exit_code == 1 and "Traceback" not in read.output
    message = " ".join(read.output.split())
    assert "made by an older arcstudy" in message and "arcstudy schema --upgrade --db" in message
    up = cli("schema", "--upgrade", "--db", db_path)
    assert up.exit_code == 0, up.output
    out = " ".join(up.output.split())
    assert "core_arctgi__tasks" in out and "quarantine.target_table" in out
    with Workspace(db_path, read_only=True) as ws:
        assert ws.read("SELECT quarantine_id, reason, target_table FROM quarantine").rows() == [("q1", "why", None)]
        assert ws.has_table("core_arctgi__tasks")
        assert ws.schema_recorded() == (SCHEMA_VERSION, schema_sha256())
        assert not schema_changes(ws._db_columns(), ws._type_name).any


def test_a_writing_command_upgrades_in_place_too(db_path, tmp_path):
    _made_now(db_path)
    _make_older(db_path, f"DELETE FROM {VERSION_TABLE}", "ALTER TABLE quarantine DROP COLUMN column_name")
    with Workspace(db_path) as ws:  # what every writing command opens
        assert "column_name" in ws.read("SELECT * FROM quarantine").columns
        note = ws.read(f"SELECT migration_note FROM {VERSION_TABLE}").item()
    assert "quarantine.column_name" in note


def test_a_changed_derived_table_is_made_again(db_path):
    _made_now(db_path)
    _make_older(db_path, f"DELETE FROM {VERSION_TABLE}", "ALTER TABLE out_arc3__plays ALTER COLUMN n_actions TYPE VARCHAR")
    with Workspace(db_path) as ws:
        assert ws.read("SELECT data_type FROM information_schema.columns WHERE table_name = 'out_arc3__plays' "
                       "AND column_name = 'n_actions'").item() == "BIGINT"


def test_a_change_that_cannot_be_made_in_place_says_what_to_do(db_path):
    _made_now(db_path)
    _make_older(db_path, f"DELETE FROM {VERSION_TABLE}",
                "ALTER TABLE core_arc3__steps ALTER COLUMN n_frames TYPE VARCHAR")
    for args in (("query", "SELECT 1", "--db", db_path), ("forget", "x", "--db", db_path)):
        result = cli(*args)
        assert result.exit_code == 1 and "Traceback" not in result.output
        text = " ".join(result.output.split())
        assert "cannot be upgraded in place" in text and "core_arc3__steps.n_frames" in text
        assert "arcstudy ingest FILES --db NEW.duckdb" in text
    with pytest.raises(WorkspaceError):
        Workspace(db_path)
    con = duckdb.connect(str(db_path), read_only=True)  # nothing was changed
    assert con.execute("SELECT data_type FROM information_schema.columns WHERE table_name = 'core_arc3__steps' "
                       "AND column_name = 'n_frames'").fetchall() == [("VARCHAR",)]
    con.close()


def test_a_database_from_a_newer_arcstudy_is_refused(db_path):
    _made_now(db_path)
    _make_older(db_path, f"UPDATE {VERSION_TABLE} SET schema_version = {SCHEMA_VERSION + 1}, "
                         f"schema_sha256 = '{'0' * 64}'")
    result = cli("query", "SELECT 1", "--db", db_path)
    assert result.exit_code == 1 and "made by a newer arcstudy" in " ".join(result.output.split())


def test_the_version_follows_every_table_declaration(monkeypatch):
    """The hash is derived from the declarations: a new column changes it without anyone remembering to."""
    from dataclasses import replace

    before = schema_sha256()
    schema_sha256.cache_clear()
    table = TABLES["quarantine"]
    monkeypatch.setitem(TABLES, "quarantine", replace(table, columns=(*table.columns, "migration_note")))
    try:
        assert schema_sha256() != before
    finally:
        schema_sha256.cache_clear()
