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

import itertools
import json
import os
import re
import time
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager, nullcontext
from pathlib import Path
from typing import Any, TypeVar

import duckdb
import polars as pl

import pipeline
from pipeline.core.db_template import copy_empty_database, forget_template
from pipeline.core.manifest import RunManifest
from pipeline.core.special_files import not_regular_file
from schemas import FIELDS, TABLES, create_table_sql, get_table, validate_frame
from schemas.generate import is_nullable
from schemas.model import duckdb_type
from schemas.validate import conform
from schemas.version import (
    SCHEMA_VERSION,
    VERSION_TABLE,
    SchemaChanges,
    schema_changes,
    schema_label,
    schema_sha256,
)

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

# DuckDB's memory limit while a transaction commits. At COMMIT DuckDB writes the rows it has not yet written to the
# file (a table's rows short of a whole row group wait in its buffer pool) into its write-ahead log, and under the
# database's own limit (80% of the RAM) it holds them all at once: committing a 400 MB ARC task collection took the
# process from 0.5 to 1.0 GB. Under a bound it streams them: that commit passed at 64 MB and H-ARC's 47-column raw
# layer at 32 MB, where 16 MB failed. A commit that fails is rolled back, hence the wide margin.
COMMIT_MEMORY = "256MB"
# A frame this long is inserted a slice at a time, under COMMIT_MEMORY: whole and unbounded, its Arrow copy (polars'
# strings become Arrow's, each value written out, a text repeated on every row too) and DuckDB's buffer pool held
# its rows at once (a 1,000,000-row core_arc3__plays frame: 0.38 GB more during its insert, 0.27 GB bounded in
# slices). Below it, the settings' statements would cost more than they save (small files insert a few rows each).
BOUNDED_INSERT_ROWS = 100_000
INSERT_SLICE_ROWS = 25_000


@contextmanager
def duckdb_bounds(con: duckdb.DuckDBPyConnection, *, memory: str, threads: int | None = None,
                  best_effort: bool = False) -> Iterator[None]:
    """DuckDB's memory limit (and number of threads) for the statements of a block, its defaults again after it.
    Set and reset on a cursor of their own: they are the database's settings, not the transaction's, and a
    statement that fails in a transaction leaves it refusing every other one until it is rolled back. Reset, not
    restored to the values found before: arcstudy leaves no other value in place, and two blocks overlapping on two
    threads would otherwise leave the first one's bound behind. ``best_effort``: a bound that DuckDB refuses (it
    cannot free enough memory at once) leaves the block unbounded rather than failing it."""
    wanted = {"memory_limit": f"'{memory}'"} | ({} if threads is None else {"threads": str(int(threads))})
    applied: list[str] = []  # reset only what was set (a read-only connection refuses both)
    with closing(con.cursor()) as settings:
        try:
            for name, value in wanted.items():
                settings.execute(f"SET {name} = {value}")
                applied.append(name)
        except duckdb.Error:
            if not best_effort:
                for name in applied:
                    settings.execute(f"RESET {name}")
                raise
        try:
            yield
        finally:
            for name in applied:
                settings.execute(f"RESET {name}")


def insert_arrow(con: duckdb.DuckDBPyConnection, table_name: str, rows: Any) -> None:
    """One INSERT ... SELECT into `table_name` (its columns, by name) from `rows`, a pyarrow Table or
    RecordBatchReader (a stream is read batch by batch). A failed insert leaves the registration in place: in a
    transaction DuckDB then refuses every statement, unregister too, and that refusal would hide the insert's
    own error; the caller rolls back, and the next registration under the name replaces it."""
    columns = ", ".join(get_table(table_name).columns)
    con.register("_incoming", rows)
    con.execute(f"INSERT INTO {table_name} ({columns}) SELECT {columns} FROM _incoming")
    con.unregister("_incoming")


class WorkspaceError(RuntimeError):
    """A problem opening or using the database, with a message meant for the user."""


class QueryRefused(WorkspaceError):
    """A query `read` will not run: not exactly one read statement, or it reaches outside the database."""


QUERY_BATCH_ROWS = 50_000  # `read_batches`: rows of a result held at a time


class CannotRead(Exception):
    """`Workspace.read_batches`: polars cannot hold a value of the result (its error is the cause)."""


def _refused_outside(err: duckdb.PermissionException) -> QueryRefused:
    return QueryRefused(f"refused: queries cannot use files, extensions or settings outside the database "
                        f"({str(err).splitlines()[0]})")


def _failed_midway(err: BaseException) -> Exception:
    """DuckDB's error raised while a result streams, which Arrow's reader hands on as an OSError (ArrowInvalid):
    the query's own failure again, as `read` raises it (a refusal as a refusal), not a failed write or read."""
    text = str(err).strip()
    if text.startswith("Permission Error"):
        return _refused_outside(duckdb.PermissionException(text))
    return duckdb.Error(text)


def default_db_path() -> Path:
    """`$ARCSTUDY_DB` if set and not empty (a leading `~` is the home folder, as a shell would read it unquoted),
    else `arcstudy.duckdb` in the current directory."""
    value = os.environ.get("ARCSTUDY_DB") or ""
    return Path(os.path.expanduser(value)) if value.strip() else Path(DEFAULT_DB)


def default_db_to_read() -> tuple[Path, bool]:
    """The database a read-only command opens without --db: `default_db_path()`, except that in a checkout
    where `make demo` ran and there is neither `$ARCSTUDY_DB` nor `./arcstudy.duckdb`, the demo database
    (`reports/demo/demo.duckdb`), so the README's tour works right after `make demo`. Returns (path, is_demo).
    Writers never fall back: new data must not land in the demo database unasked."""
    path = default_db_path()
    if not (os.environ.get("ARCSTUDY_DB") or "").strip() and not path.exists() and DEMO_DB.is_file():
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


_TYPE_NAMES: dict[str, str] = {}


def _all_ddl() -> list[str]:
    """Every table's DDL, in schemas/ order: what a new database runs (or the cached copy of it was made by)."""
    return [stmt for name in TABLES for stmt in create_table_sql(name)]


class Workspace:
    def __init__(self, path: Path | str | None = None, *, read_only: bool = False, lock_timeout_s: float = 30.0,
                 memory: str | None = None):
        """``memory``: DuckDB's memory limit for a read-only open (whose settings are locked: `duckdb_bounds`
        cannot set it), e.g. COMMIT_MEMORY for a process that reads a whole recording's steps."""
        self.path = Path(path) if path is not None else default_db_path()
        self.read_only = read_only
        self.memory = memory
        if read_only and not self.path.exists():
            raise WorkspaceError(f"database {self.path} does not exist (run `arcstudy ingest` first, or pass --db)")
        _refuse_other_files(self.path)
        if not read_only:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        self._known_tables: set[str] | None = None
        copied = (not read_only and not self.path.exists() and copy_empty_database(self.path, _all_ddl())
                  and self._adopt_copy())
        if not copied:
            self.con = self._connect(lock_timeout_s)
        try:
            if not read_only and not copied:
                self._refuse_foreign_database()
                self.ensure_schema()
            elif read_only:
                self.check_schema()
        except BaseException:
            self.con.close()
            raise

    def _adopt_copy(self) -> bool:
        """Open a new database copied from the cached empty one (`pipeline.core.db_template`), check it against
        schemas/ like any database, and record it as created. A copy that cannot be opened or differs in any
        way is thrown away, the cached file with it: False, and the caller makes the database by the DDL."""
        try:
            self.con = duckdb.connect(str(self.path))
        except duckdb.Error as err:
            if _is_lock_error(err):  # another process opened the new file first: it is theirs now, not damaged
                return False
            good = False
        else:
            try:
                good = not schema_changes(self._db_columns(), self._type_name).any
                if good:
                    self._record_schema("created")
            except duckdb.Error:
                good = False
            if not good:
                self.con.close()
        if not good:
            forget_template(_all_ddl())
            for leftover in (self.path, Path(f"{self.path}.wal")):
                leftover.unlink(missing_ok=True)
        return good

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
                    config = dict(READ_ONLY_GUARDS) | ({"memory_limit": self.memory} if self.memory else {})
                    return duckdb.connect(str(self.path), read_only=True, config=config)
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
                    pid = re.search(r"PID (\d+)", str(err))  # any DuckDB client: arcstudy, a notebook, the CLI
                    raise WorkspaceError(
                        f"database {self.path} is open in another process{f' (PID {pid.group(1)})' if pid else ''}"
                        f", e.g. another arcstudy command or a notebook (waited {lock_timeout_s:.0f} s). Wait for "
                        "it to finish or close it, or raise --lock-timeout."
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
    def schema_recorded(self) -> tuple[int, str] | None:
        """(declared version, layout hash) this database last recorded, or None (made before it recorded one)."""
        if VERSION_TABLE not in self.table_names():
            return None
        row = self.con.execute(f"SELECT schema_version, schema_sha256 FROM {VERSION_TABLE} "
                               "ORDER BY migrated_at DESC LIMIT 1").fetchall()
        return (int(row[0][0]), str(row[0][1])) if row else None

    def _type_name(self, ddl_type: str) -> str:
        """A DDL type as information_schema names it (asked of DuckDB once per type)."""
        if ddl_type not in _TYPE_NAMES:
            _TYPE_NAMES[ddl_type] = self.con.execute(f"SELECT typeof(CAST(NULL AS {ddl_type}))").fetchall()[0][0]
        return _TYPE_NAMES[ddl_type]

    def _db_columns(self) -> dict[str, dict[str, tuple[str, bool]]]:
        rows = self.con.execute("SELECT table_name, column_name, data_type, is_nullable = 'YES' FROM "
                                "information_schema.columns WHERE table_schema = 'main'").fetchall()
        out: dict[str, dict[str, tuple[str, bool]]] = {}
        for table, column, typ, nullable in rows:
            out.setdefault(table, {})[column] = (typ, nullable)
        return out

    def _schema_problem(self, recorded: tuple[int, str] | None) -> tuple[SchemaChanges | None, str | None]:
        """(what separates this database from the schema, or None when nothing does; the one-line message
        when it cannot be used as it is)."""
        # The tables are compared with the schema on every open (one information_schema query), whatever the
        # recorded hash says: a database altered by hand is judged by what it holds.
        if recorded is not None and recorded[0] > SCHEMA_VERSION and recorded[1] != schema_sha256():
            return None, (f"{self.path} was made by a newer arcstudy (schema {schema_label(*recorded)}); this "
                          f"arcstudy ({pipeline.__version__}) knows schema {schema_label()}: upgrade arcstudy to "
                          "use this database")
        changes = schema_changes(self._db_columns(), self._type_name)
        if not changes.any:
            return None, None
        if changes.foreign_tables:  # never altered: they may hold another program's data
            shown = ", ".join(changes.foreign_tables[:3]) + (" ..." if len(changes.foreign_tables) > 3 else "")
            return changes, (f"cannot use {self.path}: its tables {shown} do not have the columns arcstudy expects "
                             "(a database of another program or version?): give --db the database `arcstudy "
                             "ingest` wrote")
        was = schema_label(*recorded) if recorded else "v1, before schema versions were recorded"
        if changes.breaking:
            more = f" and {len(changes.breaking) - 1} more change(s)" if len(changes.breaking) > 1 else ""
            return changes, (f"{self.path} was made by an older arcstudy (schema {was}) and cannot be upgraded in "
                             f"place to schema {schema_label()} ({changes.breaking[0]}{more}): ingest your input "
                             "files again into a new database (`arcstudy ingest FILES --db NEW.duckdb`)")
        return changes, None

    def ensure_schema(self) -> None:
        """Create the tables of a new database, or bring an older one to the schema in place (additive changes
        only, in one transaction), recording the schema version; refuse one that cannot be brought."""
        names = set(self.table_names())
        recorded = self.schema_recorded() if VERSION_TABLE in names else None
        fresh = not any(n in TABLES for n in names)
        if fresh:
            self.ensure_tables()
            self._record_schema("created")
            return
        changes, problem = self._schema_problem(recorded)
        if problem is not None:
            raise WorkspaceError(problem)
        if changes is None:
            if recorded is None or recorded[1] != schema_sha256():
                self._record_schema("recorded the schema of a database that already matched it")
            return
        self._migrate(changes, recorded)

    def check_schema(self) -> None:
        """A read-only open: refuse a database that differs from the schema, with what to do (a writing
        command upgrades an older one in place when the changes are additive)."""
        names = set(self.table_names())
        if not any(n in TABLES for n in names):
            return  # nothing of arcstudy's yet: the command says what it lacks
        recorded = self.schema_recorded() if VERSION_TABLE in names else None
        changes, problem = self._schema_problem(recorded)
        if problem is not None:
            raise WorkspaceError(problem)
        # Tables it lacks are said by the commands that need them ("does not exist"); a table whose columns
        # differ would fail in ways that name no cause.
        if changes is not None and (changes.new_columns or changes.derived_tables):
            was = schema_label(*recorded) if recorded else "v1, before schema versions were recorded"
            raise WorkspaceError(f"{self.path} was made by an older arcstudy (schema {was}); upgrade it in place "
                                 f"to schema {schema_label()} with `arcstudy schema --upgrade --db {self.path}` "
                                 "(additive: new tables and columns; nothing is lost)")

    def _migrate(self, changes: SchemaChanges, recorded: tuple[int, str] | None) -> None:
        from schemas import FIELDS
        from schemas.generate import is_nullable
        from schemas.model import duckdb_type

        with self.transaction() as con:
            for name in changes.new_tables:
                for stmt in create_table_sql(name):
                    con.execute(stmt)
            for name, column in changes.new_columns:
                assert is_nullable(TABLES[name], column)
                con.execute(f"ALTER TABLE {name} ADD COLUMN {column} {duckdb_type(FIELDS[column].dtype)}")
            for name in changes.derived_tables:
                self.recreate_table(name, con=con)
            note = "; ".join(part for part in (
                f"from {schema_label(*recorded) if recorded else 'v1 (unrecorded)'}",
                f"new tables: {', '.join(t for t in changes.new_tables if t != VERSION_TABLE)}"
                if set(changes.new_tables) - {VERSION_TABLE} else "",
                f"new columns: {', '.join(f'{t}.{c}' for t, c in changes.new_columns)}" if changes.new_columns else "",
                f"derived tables made again: {', '.join(changes.derived_tables)}" if changes.derived_tables else "",
            ) if part)
            self._record_schema(note, con)
        self._known_tables = None

    def _record_schema(self, note: str, con: duckdb.DuckDBPyConnection | None = None) -> None:
        from datetime import UTC, datetime

        con = con or self.con
        digest = schema_sha256()
        con.execute(f"DELETE FROM {VERSION_TABLE} WHERE schema_sha256 = ?", [digest])
        con.execute(f"INSERT INTO {VERSION_TABLE} (schema_version, schema_sha256, arcstudy_version, migrated_at, "
                    "migration_note) VALUES (?, ?, ?, ?, ?)",
                    [SCHEMA_VERSION, digest, pipeline.__version__, datetime.now(UTC), note])

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
        rows = self.con.execute("SELECT table_name, column_name FROM information_schema.columns "
                                "WHERE table_schema = 'main'").fetchall()
        have: dict[str, set[str]] = {}
        for table_name, column in rows:
            have.setdefault(table_name, set()).add(column)
        stmts = [f"ALTER TABLE {n} ADD COLUMN {c} {duckdb_type(FIELDS[c].dtype)}" for n in tables
                 for c in TABLES[n].columns if c not in have.get(n, set()) and is_nullable(TABLES[n], c)]
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
        with duckdb_bounds(self.con, memory=COMMIT_MEMORY, best_effort=True):
            self.con.execute("COMMIT")

    def run_in_transaction(self, fn: Callable[[duckdb.DuckDBPyConnection], T]) -> T:
        with self.transaction() as con:
            return fn(con)

    def insert_frame(self, table_name: str, df: pl.DataFrame, *, con: duckdb.DuckDBPyConnection | None = None,
                     validate: bool = True, memory: str | None = None) -> None:
        """Append a frame to a table after validating it against the table's schema.

        Callers quarantine bad rows before this point; a failure here is a programming error, so it
        raises with every failure listed rather than dropping rows. ``memory``: DuckDB's limit for the insert,
        whatever the frame's length (by default COMMIT_MEMORY, from BOUNDED_INSERT_ROWS rows on).
        """
        con = con or self.con
        df = conform(table_name, df)
        if validate:
            result = validate_frame(table_name, df)
            if result.failures:
                lines = "\n".join(f"  row {f.row}: {f.reason}" for f in result.failures[:20])
                raise WorkspaceError(f"refusing to write invalid rows to {table_name}:\n{lines}")
        if df.height == 0:
            return
        if df.height < BOUNDED_INSERT_ROWS and memory is None:
            incoming, bounds = df.to_arrow(), nullcontext()
        else:
            import pyarrow as pa

            slices = (part.to_arrow() for part in df.iter_slices(INSERT_SLICE_ROWS))
            first = next(slices)
            incoming = pa.RecordBatchReader.from_batches(
                first.schema, (batch for part in itertools.chain([first], slices) for batch in part.to_batches()))
            bounds = duckdb_bounds(con, memory=memory or COMMIT_MEMORY, best_effort=True)
        with bounds:
            insert_arrow(con, table_name, incoming)

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
            raise _refused_outside(err) from err

    def read_batches(self, sql: str, rows: int | None = None) -> tuple[pl.DataFrame, Iterator[pl.DataFrame]]:
        """`read`, a batch of at most ``rows`` (QUERY_BATCH_ROWS) rows at a time: (the result's columns, empty;
        its batches, each made as it is asked for). A result far larger than memory is read in the memory of a
        batch. Raises QueryRefused as `read` does, when the statement is refused or as a batch is read;
        `CannotRead` when polars cannot hold a batch (the error as its cause)."""
        import pyarrow as pa

        check_read_statement(self.con, sql)
        try:
            rel = self.con.sql(sql)
            if rel is None:  # a statement without a result
                return pl.DataFrame(), iter(())
            reader = rel.to_arrow_reader(rows or QUERY_BATCH_ROWS)
        except duckdb.PermissionException as err:
            raise _refused_outside(err) from err
        # what polars (or pyarrow, building the empty batch: a UNION column) cannot hold
        unreadable = (pl.exceptions.PolarsError, pl.exceptions.PanicException, pa.ArrowException)
        try:  # (from an empty batch: polars converts a batch, where an empty table of some types made it panic)
            head = pl.from_arrow(pa.RecordBatch.from_pylist([], schema=reader.schema))
        except unreadable as err:
            reader.close()
            raise CannotRead(err) from err

        def batches() -> Iterator[pl.DataFrame]:
            try:
                while True:
                    try:
                        batch = reader.read_next_batch()
                    except StopIteration:
                        return
                    except duckdb.PermissionException as err:
                        raise _refused_outside(err) from err
                    except (OSError, pa.ArrowException) as err:  # DuckDB's error as it made this batch (error(),
                        raise _failed_midway(err) from err  # a cast, out of memory), through Arrow's stream
                    try:
                        yield pl.from_arrow(batch)
                    except unreadable as err:
                        raise CannotRead(err) from err
            finally:
                reader.close()  # (the connection takes no other query while its result is open)

        return head, batches()

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


_EXPLAINED = re.compile(r"^\s*EXPLAIN\s+(ANALY[SZ]E\s+)?(\([^)]*\)\s*)?", re.IGNORECASE)  # EXPLAIN's own words


def check_read_statement(con: duckdb.DuckDBPyConnection, sql: str) -> None:
    """Raise QueryRefused unless `sql` is exactly one read statement. DuckDB's own parser splits and classifies
    it (a syntax error raises duckdb.ParserException as running it would)."""
    statements = con.extract_statements(sql)
    if len(statements) != 1:
        raise QueryRefused(f"refused: {len(statements)} statements; a query runs exactly one" if statements
                           else "refused: the query is empty")
    kind = statements[0].type
    if kind == duckdb.StatementType.EXPLAIN:  # what it explains (EXPLAIN ANALYZE runs it) must be a read too
        explained = _EXPLAINED.sub("", statements[0].query or sql, count=1)
        try:
            check_read_statement(con, explained)
        except (QueryRefused, duckdb.Error) as err:
            first = re.match(r"\s*([A-Za-z]+)", explained)
            word = first.group(1).upper() if first else "a statement"
            raise QueryRefused(f"refused: EXPLAIN of {word}; a query only reads (SELECT, WITH, FROM, DESCRIBE, "
                               "SHOW, SUMMARIZE, EXPLAIN of one of them)") from err
        return
    if kind not in READ_STATEMENTS:
        # named by the word the user wrote (DuckDB files INSTALL under LOAD, CHECKPOINT under CALL)
        first = re.match(r"\s*([A-Za-z]+)", statements[0].query or sql)
        word = first.group(1).upper() if first else ""
        what = f"{word} ({kind.name.lower()} statement)" if word and word != kind.name else f"{kind.name} statement"
        raise QueryRefused(f"refused: {what}; a query only reads (SELECT, WITH, FROM, DESCRIBE, SHOW, SUMMARIZE, "
                           "EXPLAIN)")


def describe_tables(ws: Workspace) -> list[tuple[str, str, int, str]]:
    """(name, layer, rows, description) for every table present in the database."""
    out = []
    for name in ws.table_names():
        table = TABLES.get(name)
        layer = table.layer if table else "?"
        desc = table.description if table else "(not defined in schemas/)"
        out.append((name, layer, ws.row_count(name), desc))
    return out
