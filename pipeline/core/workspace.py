"""The DuckDB workspace: one database file holding every layer, opened safely.

- Tables are created from schemas/ (never hand-written DDL).
- Writes happen inside one transaction (`Workspace.transaction`), so a failure leaves nothing half-written.
- DuckDB allows one writing process per file. A second writer waits up to `lock_timeout_s` for the lock
  and then fails with a clear message instead of corrupting anything.
- Read-only opens (`arcstudy query`, reports, the viewer, notebooks) are fenced in by DuckDB's own guards
  (`READ_ONLY_GUARDS`): no file or network access beyond the database itself (so no ATTACH, COPY TO, EXPORT,
  read_csv('/etc/...'), INSTALL), no extension loading, and settings locked. `Workspace.read` further runs
  exactly one read statement (`READ_STATEMENTS`, classified by DuckDB's parser) and refuses the rest.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import duckdb
import polars as pl

from pipeline.core.manifest import RunManifest
from pipeline.core.special_files import not_regular_file
from schemas import FIELDS, TABLES, create_table_sql, get_table, validate_frame
from schemas.generate import is_nullable
from schemas.model import duckdb_type
from schemas.validate import conform

DEFAULT_DB = Path("arcstudy.duckdb")
DEMO_DB = Path("reports/demo/demo.duckdb")  # what `make demo` / `arcstudy demo` build in a checkout
T = TypeVar("T")


# Passed to duckdb.connect for read-only opens. `lock_configuration` stops a query from SETting any of them back.
READ_ONLY_GUARDS: dict[str, Any] = {
    "enable_external_access": False,  # only the database file itself: no ATTACH, COPY, read_*, glob, httpfs
    "autoinstall_known_extensions": False,
    "autoload_known_extensions": False,
    "lock_configuration": True,
}
# What `read` runs. DESCRIBE, SHOW, SUMMARIZE, FROM-first and PIVOT-in-a-subquery parse as SELECT. EXPLAIN
# ANALYZE executes the statement it explains, under the guards above (read-only file, no files, locked settings).
READ_STATEMENTS = frozenset({duckdb.StatementType.SELECT, duckdb.StatementType.EXPLAIN})


class WorkspaceError(RuntimeError):
    """A problem opening or using the database, with a message meant for the user."""


class QueryRefused(WorkspaceError):
    """A query `read` will not run: not exactly one read statement, or it reaches outside the database."""


def default_db_path() -> Path:
    """`$ARCSTUDY_DB` if set, else `arcstudy.duckdb` in the current directory."""
    return Path(os.environ.get("ARCSTUDY_DB", DEFAULT_DB))


def default_db_to_read() -> tuple[Path, bool]:
    """The database a read-only command opens without --db: `default_db_path()`, except that in a checkout
    where `make demo` ran and there is neither `$ARCSTUDY_DB` nor `./arcstudy.duckdb`, the demo database
    (`reports/demo/demo.duckdb`), so the README's tour works right after `make demo`. Returns (path, is_demo).
    Writers never fall back: new data must not land in the demo database unasked."""
    path = default_db_path()
    if "ARCSTUDY_DB" not in os.environ and not path.exists() and DEMO_DB.is_file():
        return DEMO_DB, True
    return path, False


def _is_lock_error(err: Exception) -> bool:
    text = str(err).lower()
    return "lock" in text and ("conflicting" in text or "could not set lock" in text)


DUCKDB_MAGIC = (8, b"DUCK")  # offset and bytes of the DuckDB file format's magic number


def _refuse_other_files(path: Path) -> None:
    """DuckDB opens a CSV, JSON or Parquet file given as the database as an in-memory database with a view over
    the file: whatever is written then vanishes at exit. Only an empty file or a DuckDB file is a database."""
    offset, magic = DUCKDB_MAGIC
    if not_regular_file(path) is not None:  # (a missing file passes: DuckDB creates it, or says why it cannot)
        raise WorkspaceError(f"{path} is not a DuckDB database (not a regular file); --db names the study's "
                             "database file")
    try:
        with open(path, "rb") as fh:
            head = fh.read(offset + len(magic))
    except (FileNotFoundError, IsADirectoryError):
        return
    except OSError as err:
        raise WorkspaceError(f"cannot open database {path}: {err.strerror}") from err
    if head and head[offset:] != magic:
        raise WorkspaceError(f"{path} is not a DuckDB database (it starts with {head[:offset]!r}); --db names the "
                             "study's database file, a new one is created when it does not exist")


class Workspace:
    def __init__(self, path: Path | str | None = None, *, read_only: bool = False, lock_timeout_s: float = 30.0):
        self.path = Path(path) if path is not None else default_db_path()
        self.read_only = read_only
        if read_only and not self.path.exists():
            raise WorkspaceError(f"database {self.path} does not exist (run `arcstudy ingest` first, or pass --db)")
        _refuse_other_files(self.path)
        if not read_only:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        self._known_tables: set[str] | None = None
        self.con = self._connect(lock_timeout_s)
        if not read_only:
            self._refuse_foreign_database()
            self.ensure_tables()

    def _refuse_foreign_database(self) -> None:
        """A writer does not add arcstudy's 60-odd tables to another program's database: one that has tables but
        none of arcstudy's. (A study database with a few tables of the user's own beside arcstudy's is fine.)"""
        names = self.table_names()
        if names and not any(name in TABLES for name in names):
            self.con.close()
            shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
            raise WorkspaceError(f"{self.path} is a DuckDB database of another program (tables {shown}; none of "
                                 "arcstudy's), so arcstudy does not add its tables to it: give --db a new file or a "
                                 "database arcstudy wrote")

    def _connect(self, lock_timeout_s: float) -> duckdb.DuckDBPyConnection:
        deadline = time.monotonic() + lock_timeout_s
        delay = 0.05
        while True:
            try:
                if self.read_only:
                    return duckdb.connect(str(self.path), read_only=True, config=dict(READ_ONLY_GUARDS))
                return duckdb.connect(str(self.path))
            except duckdb.Error as err:
                if not _is_lock_error(err):
                    raise WorkspaceError(f"cannot open database {self.path}: {err}") from err
                if time.monotonic() >= deadline and self.read_only:
                    # DuckDB lets readers in only when no process has the file open for writing.
                    pid = re.search(r"PID (\d+)", str(err))
                    raise WorkspaceError(
                        f"database {self.path} is open for writing by another process"
                        f"{f' (PID {pid.group(1)})' if pid else ''}, e.g. an ingest or build; waited "
                        f"{lock_timeout_s:.0f} s. Wait for it to finish or raise --lock-timeout."
                    ) from err
                if time.monotonic() >= deadline:
                    raise WorkspaceError(
                        f"database {self.path} is locked by another arcstudy process (waited "
                        f"{lock_timeout_s:.0f} s). Wait for it to finish or raise --lock-timeout."
                    ) from err
                time.sleep(delay)
                delay = min(delay * 2, 1.0)

    # -- lifecycle -----------------------------------------------------------------------------------
    def close(self) -> None:
        self.con.close()

    def __enter__(self) -> Workspace:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- schema --------------------------------------------------------------------------------------
    def ensure_tables(self, names: list[str] | None = None) -> None:
        """Create missing tables, all in one transaction (DDL one statement at a time is ~10x slower)."""
        known = set(self.table_names())  # once: has_table re-queries on every miss (60+ on a fresh database)
        self._known_tables = known
        missing = [n for n in names or list(TABLES) if n not in known]
        self._add_new_nullable_columns(known & set(names or TABLES))
        if not missing:
            return
        with self.transaction() as con:
            for name in missing:
                for stmt in create_table_sql(name):
                    con.execute(stmt)
        self._known_tables = None

    def _add_new_nullable_columns(self, existing: set[str]) -> None:
        """A raw or core table written by an older arcstudy lacks a column schemas/ has added since: a nullable
        one is added in place (earlier rows hold null there), so the database keeps ingesting. Writes name their
        columns, so the order does not matter; out tables are re-created by `build` when their layout changes."""
        tables = [n for n in sorted(existing) if TABLES[n].layer in ("raw", "core")]
        if not tables:
            return
        rows = self.con.execute("SELECT table_name, column_name, is_nullable FROM information_schema.columns "
                                "WHERE table_schema = 'main'").fetchall()
        have: dict[str, set[str]] = {}
        for table_name, column, _ in rows:
            have.setdefault(table_name, set()).add(column)
        stmts = [f"ALTER TABLE {n} ADD COLUMN {c} {duckdb_type(FIELDS[c].dtype)}" for n in tables
                 for c in TABLES[n].columns if c not in have.get(n, set()) and is_nullable(TABLES[n], c)]
        # a column schemas/ has dropped since (the H-ARC raw layer's row_json): kept with the older rows' values,
        # but no longer required, so that the new rows (which leave it out) can be written
        wanted = set(tables)
        stmts += [f"ALTER TABLE {n} ALTER COLUMN {c} DROP NOT NULL" for n, c, nullable in rows
                  if n in wanted and c not in TABLES[n].columns and nullable == "NO" and c not in TABLES[n].primary_key]
        if stmts:
            with self.transaction() as con:
                for stmt in stmts:
                    con.execute(stmt)

    def recreate_table(self, name: str, *, con: duckdb.DuckDBPyConnection | None = None) -> None:
        """Drop a derived table and create it again from schemas/ (its columns changed between versions).
        Runs inside the caller's transaction when `con` is given."""
        con = con or self.con
        con.execute(f"DROP TABLE IF EXISTS {name}")
        for stmt in create_table_sql(name):
            con.execute(stmt)
        self._known_tables = None

    def has_table(self, name: str, con: duckdb.DuckDBPyConnection | None = None) -> bool:
        """Whether table `name` exists; `con`: where to ask on a miss (a cursor, while `self.con` is busy)."""
        # Cached: ingest asks for every table of every file. Tables are only ever added (never dropped) by
        # this class; other writers that drop or create tables invalidate via `forget_tables`.
        if self._known_tables is None:
            self._known_tables = set(self.table_names(con))
        if name in self._known_tables:
            return True
        self._known_tables = set(self.table_names(con))
        return name in self._known_tables

    def forget_tables(self) -> None:
        """Invalidate the table cache after creating or dropping tables by hand."""
        self._known_tables = None

    def table_names(self, con: duckdb.DuckDBPyConnection | None = None) -> list[str]:
        rows = (con or self.con).execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'main' ORDER BY table_name"
        ).fetchall()
        return [r[0] for r in rows]

    def row_count(self, name: str) -> int:
        return int(self.con.execute(f'SELECT count(*) FROM "{name}"').fetchall()[0][0])

    # -- transactions and writes ---------------------------------------------------------------------
    @contextmanager
    def transaction(self) -> Iterator[duckdb.DuckDBPyConnection]:
        self.con.execute("BEGIN TRANSACTION")
        try:
            yield self.con
        except BaseException:
            self.con.execute("ROLLBACK")
            raise
        self.con.execute("COMMIT")

    def run_in_transaction(self, fn: Callable[[duckdb.DuckDBPyConnection], T]) -> T:
        with self.transaction() as con:
            return fn(con)

    def insert_frame(self, table_name: str, df: pl.DataFrame, *, con: duckdb.DuckDBPyConnection | None = None,
                     validate: bool = True) -> None:
        """Append a frame to a table after validating it against the table's schema.

        Callers quarantine bad rows before this point; a failure here is a programming error, so it
        raises with every failure listed rather than dropping rows.
        """
        con = con or self.con
        table = get_table(table_name)
        df = conform(table_name, df)
        if validate:
            result = validate_frame(table_name, df)
            if result.failures:
                lines = "\n".join(f"  row {f.row}: {f.reason}" for f in result.failures[:20])
                raise WorkspaceError(f"refusing to write invalid rows to {table_name}:\n{lines}")
        if df.height == 0:
            return
        con.register("_incoming", df.to_arrow())
        try:
            cols = ", ".join(table.columns)
            con.execute(f"INSERT INTO {table_name} ({cols}) SELECT {cols} FROM _incoming")
        finally:
            con.unregister("_incoming")

    def replace_table(self, table_name: str, df: pl.DataFrame, *, con: duckdb.DuckDBPyConnection | None = None) -> None:
        con = con or self.con
        con.execute(f"DELETE FROM {table_name}")
        self.insert_frame(table_name, df, con=con)

    def read(self, sql: str, params: list[Any] | None = None) -> pl.DataFrame:
        """The result of one read statement (see READ_STATEMENTS); raises QueryRefused for anything else, and
        (read-only opens) for a query that reaches outside the database."""
        check_read_statement(self.con, sql)
        try:
            # duckdb 2.x: relations (`sql`) convert to polars; `execute` results must be fully fetched.
            rel = self.con.sql(sql, params=params) if params else self.con.sql(sql)
            return rel.pl() if rel is not None else pl.DataFrame()
        except duckdb.PermissionException as err:
            raise QueryRefused(f"refused: queries cannot use files, extensions or settings outside the database "
                               f"({str(err).splitlines()[0]})") from err

    # -- runs ----------------------------------------------------------------------------------------
    def finish_run(self, manifest: RunManifest, out_dir: Path | None = None, exit_code: int = 0) -> Path | None:
        """Close `manifest` with `exit_code`, record it in `runs` and, when the run wrote a folder of outputs,
        write its manifest.json there (returned)."""
        manifest.finish(exit_code)
        self.record_run(manifest)
        return manifest.write_json(out_dir) if out_dir is not None else None

    def record_run(self, manifest: RunManifest) -> None:
        data = manifest.to_dict()
        row = {
            "run_id": manifest.run_id,
            "command": manifest.command,
            "started_at": manifest.started_at,
            "finished_at": manifest.finished_at,
            "arcstudy_version": data["arcstudy_version"],
            "git_commit": data["git_commit"],
            "is_git_dirty": data["is_git_dirty"],
            "exit_code": manifest.exit_code,
            "manifest_json": json.dumps(data, default=str, sort_keys=True),
        }
        with self.transaction() as con:
            con.execute("DELETE FROM runs WHERE run_id = ?", [manifest.run_id])
            self.insert_frame("runs", pl.DataFrame([row]), con=con)


def check_read_statement(con: duckdb.DuckDBPyConnection, sql: str) -> None:
    """Raise QueryRefused unless `sql` is exactly one read statement. DuckDB's own parser splits and classifies
    it (a syntax error raises duckdb.ParserException as running it would)."""
    statements = con.extract_statements(sql)
    if len(statements) != 1:
        raise QueryRefused(f"refused: {len(statements)} statements; a query runs exactly one" if statements
                           else "refused: the query is empty")
    kind = statements[0].type
    if kind not in READ_STATEMENTS:
        raise QueryRefused(f"refused: {kind.name} statement; a query only reads (SELECT, WITH, FROM, DESCRIBE, "
                           f"SHOW, SUMMARIZE, EXPLAIN)")


def describe_tables(ws: Workspace) -> list[tuple[str, str, int, str]]:
    """(name, layer, rows, description) for every table present in the database."""
    out = []
    for name in ws.table_names():
        table = TABLES.get(name)
        layer = table.layer if table else "?"
        desc = table.description if table else "(not defined in schemas/)"
        out.append((name, layer, ws.row_count(name), desc))
    return out
