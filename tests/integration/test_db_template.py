"""A new database is a copy of a cached empty one (pipeline/core/db_template.py): the same tables, columns and
comments as the DDL makes, recorded as created, and every way the cache can be unusable falls back to the DDL."""

from __future__ import annotations

import os
import stat

import duckdb
import pytest

from pipeline.core.db_template import CACHE_ENV, copy_empty_database, template_key
from pipeline.core.workspace import Workspace, _all_ddl

CATALOG = ("SELECT table_name, column_name, data_type, is_nullable, comment FROM duckdb_columns() "
           "WHERE NOT internal ORDER BY ALL")
TABLE_COMMENTS = "SELECT table_name, comment FROM duckdb_tables() WHERE NOT internal ORDER BY ALL"


def _catalog(path) -> tuple[list, list, list]:
    con = duckdb.connect(str(path), read_only=True)
    try:
        return (con.execute(CATALOG).fetchall(), con.execute(TABLE_COMMENTS).fetchall(),
                con.execute("SELECT schema_version, schema_sha256, migration_note FROM schema_version").fetchall())
    finally:
        con.close()


def _template(cache):
    return cache / f"empty-{template_key(_all_ddl())}.duckdb"


def test_a_copied_database_is_the_one_the_ddl_makes(tmp_path, monkeypatch):
    monkeypatch.setenv(CACHE_ENV, "")  # off: the DDL itself
    Workspace(tmp_path / "by_ddl.duckdb").close()
    cache = tmp_path / "cache"
    monkeypatch.setenv(CACHE_ENV, str(cache))
    Workspace(tmp_path / "first.duckdb").close()  # makes the cached file, then copies it
    assert _template(cache).is_file()
    made = _template(cache).stat()
    Workspace(tmp_path / "second.duckdb").close()  # a copy of the cached file, which is left as it was
    assert (_template(cache).stat().st_ino, _template(cache).stat().st_mtime_ns) == (made.st_ino, made.st_mtime_ns)
    expected = _catalog(tmp_path / "by_ddl.duckdb")
    assert expected[0] and any(row[4] for row in expected[0])  # columns with their comments
    assert expected[2][0][2] == "created"
    for name in ("first.duckdb", "second.duckdb"):
        assert _catalog(tmp_path / name) == expected
    assert not list(tmp_path.glob("*.new")) and not list(tmp_path.glob("*.wal"))
    with Workspace(tmp_path / "second.duckdb") as ws:  # and it takes rows like any other
        ws.con.execute("INSERT INTO schema_version VALUES (99, 'x', 'y', now(), 'z')")


def test_an_altered_cached_file_is_thrown_away_and_the_ddl_used(tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    monkeypatch.setenv(CACHE_ENV, str(cache))
    Workspace(tmp_path / "first.duckdb").close()
    con = duckdb.connect(str(_template(cache)))
    con.execute("ALTER TABLE schema_version DROP COLUMN migration_note")
    con.close()
    Workspace(tmp_path / "second.duckdb").close()
    assert _catalog(tmp_path / "second.duckdb") == _catalog(tmp_path / "first.duckdb")
    assert not _template(cache).exists()  # made again by the next new database
    Workspace(tmp_path / "third.duckdb").close()
    assert _template(cache).is_file()
    assert _catalog(tmp_path / "third.duckdb") == _catalog(tmp_path / "first.duckdb")


def test_a_damaged_cached_file_falls_back_to_the_ddl(tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    monkeypatch.setenv(CACHE_ENV, str(cache))
    Workspace(tmp_path / "first.duckdb").close()
    _template(cache).write_bytes(b"\0" * 8 + b"DUCK" + b"not a database at all" * 100)
    Workspace(tmp_path / "second.duckdb").close()
    assert _catalog(tmp_path / "second.duckdb") == _catalog(tmp_path / "first.duckdb")


@pytest.mark.skipif(not hasattr(os, "getuid"), reason="folder permissions are POSIX")
def test_a_cache_folder_others_may_write_to_is_not_used(tmp_path, monkeypatch):
    cache = tmp_path / "shared-cache"
    cache.mkdir()
    cache.chmod(0o777)
    monkeypatch.setenv(CACHE_ENV, str(cache))
    Workspace(tmp_path / "db.duckdb").close()
    assert list(cache.iterdir()) == []
    assert _catalog(tmp_path / "db.duckdb")[2][0][2] == "created"
    cache.chmod(stat.S_IRWXU)


def test_a_database_made_meanwhile_is_never_overwritten(tmp_path, monkeypatch):
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    target = tmp_path / "db.duckdb"
    target.write_bytes(b"someone else's")
    assert copy_empty_database(target, _all_ddl()) is False
    assert target.read_bytes() == b"someone else's"
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".new")] == []
