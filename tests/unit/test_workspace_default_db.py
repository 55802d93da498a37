"""Where commands find the database without --db: `$ARCSTUDY_DB`, else ./arcstudy.duckdb."""

from __future__ import annotations

from pathlib import Path

from pipeline.core.workspace import DEFAULT_DB, default_db_path


def test_an_empty_variable_is_no_database_path(monkeypatch):
    """ARCSTUDY_DB='' (an unset shell variable exported) once named the current folder: ". is not a DuckDB
    database"."""
    for value in ("", "  "):
        monkeypatch.setenv("ARCSTUDY_DB", value)
        assert default_db_path() == Path(DEFAULT_DB)


def test_a_leading_tilde_is_the_home_folder(monkeypatch, tmp_path):
    """ARCSTUDY_DB='~/x.duckdb' (quoted, so the shell left the ~) once made a folder named `~` here."""
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("ARCSTUDY_DB", "~/x.duckdb")
    assert default_db_path() == tmp_path / "x.duckdb"
    monkeypatch.setenv("ARCSTUDY_DB", str(tmp_path / "y.duckdb"))
    assert default_db_path() == tmp_path / "y.duckdb"
