"""The commit of one prepared file in its own transaction (`commit_file`): all the file produced, or nothing.

- older rows of the file (a `--force` re-read) or of its path (a changed file) go first; rows whose primary
  key another file already loaded are quarantined (`drop_cross_file_duplicates`);
- a large file of a streaming format is read inside the transaction, a chunk of rows at a time
  (`_read_streamed`); a big file read in pieces (H-ARC data.csv) has its pieces checked one at a time and
  their rows streamed into the database with bounded memory (`_stage_pieces`, `insert_arrow`,
  `_insert_spilled`);
- a refused file leaves only its quarantine rows (`_write_file_failure`).
"""

from __future__ import annotations

import itertools
import shutil
import tempfile
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, closing, nullcontext
from functools import partial
from pathlib import Path

import duckdb
import polars as pl

from pipeline.core.outputs import OutputError, as_output_error
from pipeline.core.prefetch import prefetched
from pipeline.core.spool import Spool
from pipeline.core.workspace import Workspace, WorkspaceError, duckdb_bounds, insert_arrow
from pipeline.ingest.background import BackgroundWriter
from pipeline.ingest.base import (
    MAX_RAW_TEXT,
    FileChangedError,
    FileContext,
    PiecesStartOver,
    ReaderOutput,
    Reject,
    clip,
)
from pipeline.ingest.formats import FORMATS
from pipeline.ingest.prepared import (
    FileReport,
    PreparedFile,
    _failed_piece,
    _failure_report,
    _file_record,
    _loaded_report,
    _location_column,
    _quarantine_frames,
    _read,
    _reader_error,
    _refuse_if_changed,
    _skipped_report,
    raise_if_output_error,
    skipped_message,
    validate_output,
)
from schemas import get_table, validate_frame
from schemas.validate import conform, empty_frame


def key_match(key: list[str], content: bool) -> str:
    """SQL condition matching a new row `n` to a stored row `t` on `key`; a content key (`Table.content_key`:
    a row's values, some of which may be empty) matches an empty value to an empty one."""
    eq = "IS NOT DISTINCT FROM" if content else "="
    return " AND ".join(f"t.{k} {eq} n.{k}" for k in key)


def drop_cross_file_duplicates(ws: Workspace, output: ReaderOutput, own_file_ids: list[str],
                               con: duckdb.DuckDBPyConnection | None = None,
                               clash_possible: Callable[[str], bool] | None = None) -> None:
    """Primary keys are checked on load across files too: a row whose key another file already loaded is
    quarantined (naming that file) instead of silently doubling a play, session or participant. A table whose
    primary key is the file's own (file_id, row) and that declares a `content_key` (an ARC-AGI-2 attempt row)
    is checked on that instead: a row equal in it to a row of another file is that row again, and the reason
    also names the other file's row.
    `con`: the connection the checks run on (default `ws.con`; `_stage_pieces` gives a cursor of its own,
    `ws.con` being busy with the file's streaming insert then). Rows of `own_file_ids` never clash, so a
    cursor outside the file's transaction, which still sees them, answers the same.
    `clash_possible(table)`: false when the table is known to hold no other file's rows (`_OtherFiles`)."""
    from schemas import TABLES

    con = con or ws.con
    for name, df in list(output.tables.items()):
        table = TABLES[name]
        key = list(table.across_files_key)
        if "file_id" in key or df.height == 0 or not ws.has_table(name, con):
            continue
        if clash_possible is not None and not clash_possible(name):
            continue
        content = bool(table.content_key)
        # the other file's first row holding it, for a content key (its own primary key names the file's row)
        first_row = (", min(t.row_number) AS other_row, arg_min(f.file_path, t.row_number) AS other_path"
                     if content and "row_number" in table.columns else ", any_value(f.file_path) AS other_path")
        con.register("_keys", df.select(key).to_arrow())
        try:
            placeholders = ", ".join("?" for _ in own_file_ids)
            clash = con.sql(
                f"SELECT {', '.join('n.' + k for k in key)}, any_value(t.file_id) AS other_file_id{first_row} "
                f"FROM _keys n JOIN {name} t ON {key_match(key, content)} "
                f"LEFT JOIN raw_ingest__files f ON f.file_id = t.file_id "
                f"WHERE t.file_id NOT IN ({placeholders}) GROUP BY {', '.join('n.' + k for k in key)}",
                params=own_file_ids,
            ).pl()
        finally:
            con.unregister("_keys")
        if clash.height == 0:
            continue
        # One join, not a filter per clashing key: a changed copy of a big file can clash on every row.
        hits = df.with_row_index("__i").join(clash, on=key, how="inner", nulls_equal=content)
        _reject_clashes(output, name, key, hits, _location_column(df))
        bad = clash.select(key)
        output.tables[name] = df.join(bad, on=key, how="anti", nulls_equal=content)
    if output.duplicate_plays:
        _drop_duplicate_plays_rows(output)


def _reject_clashes(output: ReaderOutput, name: str, key: list[str], hits: pl.DataFrame, loc_col: str | None,
                    *, note_plays: bool = True) -> None:
    """A reject for each row of `hits` (the table's rows whose key another file loaded, with `__i`, their
    position from 0, and the other file's `other_file_id`, `other_path`, maybe `other_row`); a play's id goes
    to `output.duplicate_plays`, for the rows it owns (unless ``note_plays`` is false: they are listed in the
    database)."""
    unit = "line" if loc_col == "line_number" else "row"
    for rec in hits.iter_rows(named=True):
        key_text = ", ".join(f"{k}={rec[k]!r}" for k in key)
        location = f"{unit} {rec[loc_col]}" if loc_col else f"record {rec['__i'] + 1}"
        raw = {k: v for k, v in rec.items() if k not in ("__i", "other_file_id", "other_path", "other_row")}
        where = rec["other_path"] if rec.get("other_row") is None else f"{rec['other_path']} row {rec['other_row']}"
        output.rejects.append(Reject(location, "duplicate_across_files",
                                     f"{name} already holds ({key_text}) from {where}",
                                     clip(str(raw)), name))
        if name == PLAYS and note_plays:
            output.duplicate_plays[rec["play_id"]] = rec["other_path"] or rec["other_file_id"]


CLASH_BATCH_ROWS = 50_000


def _drop_clashing_plays_written(con, prepared: PreparedFile, written: dict[str, int], own_file_ids: list[str]
                                 ) -> None:
    """`drop_cross_file_duplicates` for the plays a streamed file wrote in its transaction (they are written as
    read, not held: a file of a million one-step plays took 0.4 GB of them): those another file already loaded
    are found in the database and listed in a scratch Parquet file (play_id, the file that holds it, its place);
    read back a batch at a time, each is rejected as that function rejects a play row; the rows of the other
    tables that belong to them are moved to quarantine in the database, a line each, and the plays deleted. Only
    the in-memory tables' plays (a card's slots) go to `output.duplicate_plays`: every one, held, took 0.3 GB for
    a copy of a million plays. Under the bound of the spilled inserts (unbounded, the steps' quarantine took
    2.76 GB; and the clashes are listed narrow: a sort of every wide row of a million plays ran out of it)."""
    output, ctx = prepared.output, prepared.ctx
    assert output is not None
    if not written.get(PLAYS):
        return
    placeholders = ", ".join("?" for _ in own_file_ids)
    others = f"SELECT play_id FROM {PLAYS} WHERE file_id NOT IN ({placeholders})"  # (the other files' plays)
    with _bounded_insert(con, SPILL_INSERT_MEMORY, one_thread=False):
        clashing = con.execute(f"SELECT count(*) FROM {PLAYS} WHERE file_id = ? AND play_id IN ({others})",
                               [ctx.file_id, *own_file_ids]).fetchall()[0][0]
        if not clashing:
            return
        with _SpillFolder() as folder:
            listed = str(folder.path / "clashing_plays.parquet").replace("'", "''")
            # Each clashing play's place in the file's table (`__i`, from 0, as the rows held in memory are
            # numbered), the file that holds it (`other`: its path, else its id), and its rank (`k`).
            con.execute(
                f"COPY (WITH "
                f"mine AS (SELECT play_id, row_number() OVER (ORDER BY play_index) - 1 AS __i FROM {PLAYS} "
                f"WHERE file_id = ?), "
                f"clash AS (SELECT t.play_id, any_value(t.file_id) AS other_file_id, any_value(f.file_path) AS "
                f"other_path FROM {PLAYS} t LEFT JOIN raw_ingest__files f ON f.file_id = t.file_id WHERE t.file_id "
                f"NOT IN ({placeholders}) AND t.play_id IN (SELECT play_id FROM mine) GROUP BY t.play_id) "
                f"SELECT m.__i, row_number() OVER (ORDER BY m.__i) AS k, c.*, coalesce(c.other_path, "
                f"c.other_file_id) AS other FROM mine m JOIN clash c USING (play_id)) TO '{listed}' (FORMAT parquet)",
                [ctx.file_id, *own_file_ids])
            clashes = f"read_parquet('{listed}')"
            columns = ", ".join(f"m.{c}" for c in get_table(PLAYS).columns)
            schema = empty_frame(PLAYS).schema  # (DuckDB names its own time zone: the rows read back as written)
            for first in range(0, clashing, CLASH_BATCH_ROWS):
                hits = con.sql(
                    f"SELECT c.__i, {columns}, c.other_file_id, c.other_path FROM {clashes} c JOIN {PLAYS} m "
                    f"USING (play_id) WHERE m.file_id = ? AND c.k > ? AND c.k <= ? ORDER BY c.k",
                    params=[ctx.file_id, first, first + CLASH_BATCH_ROWS]).pl()
                hits = hits.with_columns(pl.col(name).cast(dtype) for name, dtype in schema.items())
                _reject_clashes(output, PLAYS, ["play_id"], hits, None, note_plays=False)
            held = sorted({play for df in output.tables.values() if "play_id" in df.columns
                           for play in df["play_id"].drop_nulls().unique().to_list()})
            if held:  # (a card's slots, from its one line)
                output.duplicate_plays.update(con.execute(
                    f"SELECT play_id, other FROM {clashes} WHERE play_id IN (SELECT unnest(?::VARCHAR[]))",
                    [held]).fetchall())
            _quarantine_rows_of_plays(con, prepared, written, clashes)
            con.execute(f"DELETE FROM {PLAYS} WHERE file_id = ? AND play_id IN (SELECT play_id FROM {clashes})",
                        [ctx.file_id])
    written[PLAYS] -= clashing


PLAYS = "core_arc3__plays"
CARDS = "core_arc3__card_plays"


def _duplicate_reason(play_id: str, other: str) -> str:
    return (f"belongs to play {play_id!r}, which duplicates the play already loaded from {other} (same play in "
            f"another file, encoding or folder): quarantined with its play, so the play counts once")


def _drop_duplicate_plays_rows(output: ReaderOutput) -> None:
    """A play quarantined as a duplicate takes every row it owns with it: its steps (any table with a `play_id`)
    and its card (every slot of a card line that holds one of its slots): a file lands whole or not at all."""
    dropped = output.duplicate_plays
    ids = list(dropped)
    for name, df in list(output.tables.items()):
        if name == PLAYS or "play_id" not in df.columns or df.height == 0:
            continue
        owned = pl.col("play_id").is_in(ids)
        if name == CARDS and "line_number" in df.columns:
            card_lines = df.filter(owned)["line_number"].drop_nulls().unique().to_list()
            owned = owned | pl.col("line_number").is_in(card_lines)
        hits = df.with_row_index("__i").filter(owned)
        if hits.height == 0:
            continue
        loc_col = _location_column(df)
        unit = "line" if loc_col == "line_number" else "row"
        card_play = next((p for p in hits["play_id"].drop_nulls() if p in dropped), None)
        for rec in hits.iter_rows(named=True):
            play_id = rec["play_id"] if rec["play_id"] in dropped else card_play
            location = f"{unit} {rec[loc_col]}" if loc_col and rec[loc_col] is not None else f"record {rec['__i'] + 1}"
            raw = {k: v for k, v in rec.items() if k != "__i"}
            what = f"{name} row" + (f" (card slot {rec['slot_index']})" if "slot_index" in rec else "")
            reason = f"{what} {_duplicate_reason(play_id, dropped[play_id])}"
            output.rejects.append(Reject(location, "duplicate_play", reason, clip(str(raw)), name))
        output.tables[name] = df.filter(~owned)


def _quarantine_rows_of_plays(con, prepared: PreparedFile, written: dict[str, int], plays: str) -> None:
    """The rows of duplicate plays that a streamed file already wrote in its transaction (its steps): moved to
    `quarantine` in the database, a line each, without passing through memory. ``plays``: the relation that
    lists them (play_id, other: the file that holds it)."""
    from schemas import TABLES

    output, ctx = prepared.output, prepared.ctx
    assert output is not None
    for name in written:
        if name == PLAYS or "play_id" not in TABLES[name].columns or "line_number" not in TABLES[name].columns:
            continue
        n = con.execute(f"SELECT count(*) FROM {name} t JOIN {plays} d USING (play_id) WHERE t.file_id = ?",
                        [ctx.file_id]).fetchall()[0][0]
        if not n:
            continue
        reason = (f"'{name} row belongs to play ''' || d.play_id || ''', which duplicates the play already "
                  f"loaded from ' || d.other || ' (same play in another file, encoding or folder): quarantined "
                  f"with its play, so the play counts once'")
        con.execute(
            f"INSERT INTO quarantine (quarantine_id, run_id, file_id, file_path, source_format, source_location, "
            f"target_table, check_name, reason, raw_text, n_raw_bytes, raw_sha256) "
            f"SELECT sha256(? || '|line ' || t.line_number || '|duplicate_play|' || ?), ?, t.file_id, ?, ?, "
            f"'line ' || t.line_number, ?, 'duplicate_play', {reason}, left(CAST(t AS VARCHAR), {MAX_RAW_TEXT}), "
            f"octet_length(encode(CAST(t AS VARCHAR))), sha256(CAST(t AS VARCHAR)) "
            f"FROM {name} t JOIN {plays} d USING (play_id) WHERE t.file_id = ?",
            [ctx.file_id, name, ctx.run_id, str(ctx.path), prepared.fmt_name, name, ctx.file_id])
        con.execute(f"DELETE FROM {name} WHERE file_id = ? AND play_id IN (SELECT play_id FROM {plays})",
                    [ctx.file_id])
        written[name] -= n
        output.n_quarantined_in_db += n


class _Refused(Exception):
    """A streamed file was refused while its transaction was open: roll back what it wrote."""


def _spill_chunk(name: str, rows: pl.DataFrame, path: Path) -> None:
    """Write one chunk of a streamed file's rows for table `name` to `path` (Arrow IPC), for `_insert_spilled`."""
    rows.write_ipc(path, compression="uncompressed")


def _read_streamed(ws: Workspace, con, prepared: PreparedFile) -> dict[str, int]:
    """Read a streamed file inside its transaction: every chunk of rows the reader hands over is validated (rows
    that fail become rejects, as in `validate_output`) and spilled to an Arrow file in a scratch folder; once the
    reading is done, each table's chunks are inserted by ONE INSERT ... SELECT over its files. DuckDB holds the
    rows a transaction appends in many statements in memory until it commits (2,000,000 frameless steps: over
    1 GB for the raw lines and the steps), where one INSERT streams them with bounded memory
    (`_insert_spilled`). Rows written per table."""
    written: dict[str, int] = {}
    chunk_rejects: list[Reject] = Spool()
    write_errors: list[BaseException] = []
    spills: dict[str, list[str]] = {}

    with _SpillFolder() as folder:
        def write_chunk(name: str, df: pl.DataFrame) -> None:  # on the writer thread, chunks in reading order
            piece = ReaderOutput(tables={name: df})
            validate_output(piece)
            chunk_rejects.extend_mapped(piece.rejects)
            rows = conform(name, piece.tables[name])
            spill = folder.path / f"{name}-{len(spills.get(name, ())):06d}.arrow"
            try:
                _spill_chunk(name, rows, spill)
            except OSError as err:  # a full scratch disk is not the file's fault: the run stops (exit 1)
                write_errors.append(as_output_error(err, folder.path))
                raise write_errors[-1] from err
            except BaseException as err:
                write_errors.append(err)
                raise
            spills.setdefault(name, []).append(str(spill))
            written[name] = written.get(name, 0) + rows.height

        try:
            # This thread parses chunk N+1 while the writer spills chunk N; leaving the block waits for the
            # writer (and raises its error), so nothing writes once the transaction ends or rolls back.
            with BackgroundWriter(name="arcstudy-chunk-writer") as writer:
                prepared.ctx.write_chunk = partial(writer.submit, write_chunk)
                _read(prepared, FORMATS[prepared.fmt_name or ""])
            _refuse_if_changed(prepared)
        except Exception as err:
            if isinstance(err, OutputError) or (isinstance(err, duckdb.Error) and not write_errors):
                raise  # an output (frames folder, scratch space) or the database failed, not the file
            if not write_errors:  # a reader bug: this file is refused and the run goes on, as for a worker's file
                prepared.failure = ("rejected", "reader_error", _reader_error(err), "file", None)
        finally:
            prepared.ctx.write_chunk = None
        if write_errors:  # writing failed, not the file (the reader may have taken it for its own): the run stops
            raise write_errors[0]
        if prepared.failure is not None:
            raise _Refused
        for name, files in spills.items():  # the reader's memory is let go by now: one INSERT per table
            _insert_spilled(con, name, files)
    assert prepared.output is not None
    chunk_rejects.extend_mapped(prepared.output.rejects)  # the chunks' rejects, then the reader's: neither copied
    prepared.output.rejects = chunk_rejects
    return written


def commit_file(ws: Workspace, prepared: PreparedFile) -> FileReport:
    """Write a prepared file in one transaction (or record why it was refused)."""
    path, ctx = prepared.path, prepared.ctx
    if prepared.skipped:
        return _skipped_report(prepared, ws)
    if prepared.failure is not None:
        status, check, reason, location, raw = prepared.failure
        _write_file_failure(ws, ctx, prepared.fmt_name, check, reason, location, raw, prepared.failure_rejects)
        return _failure_report(prepared)
    assert (prepared.output is not None or prepared.streamed) and ctx.file_id is not None
    if prepared.output is not None and not prepared.validated:
        try:
            validate_output(prepared.output)
        except Exception as err:  # as when validating it in `prepare_file` raised: refused, the run goes on
            return commit_file(ws, _failed_piece(path, ctx.run_id, err))
        prepared.validated = True
    # Workers judged "seen before" against the database as it was when the run started; an identical file
    # committed earlier in this same run is only visible here.
    found = ws.read("SELECT file_id, file_path FROM raw_ingest__files WHERE file_id = ? OR file_path = ?",
                    [ctx.file_id, str(path)])  # one query for both questions
    earlier = found["file_id"].to_list()
    if ctx.file_id in earlier:
        if not prepared.force:
            matched = found.filter(pl.col("file_id") == ctx.file_id)["file_path"][0]
            return FileReport(path, "skipped", message=skipped_message(path, matched, this_run=True),
                              file_id=ctx.file_id)
        prepared.seen_before = True
    replaced = [f for f in dict.fromkeys(earlier) if f != ctx.file_id]
    own_ids = [ctx.file_id, *replaced]
    counts: dict[str, int] = {}  # rows written, per table
    piece_rejects: list[Reject] = Spool()
    piece_flags: list[str] = []
    pieces = prepared.output.pieces if prepared.output is not None else None
    spill = _SpillFolder() if pieces is not None else None
    try:
        with spill or nullcontext(), ws.transaction() as con:
            # Deleting from every table costs ~40 statements: only when something of this file or path is there.
            for old_id in ([ctx.file_id] if prepared.seen_before else []) + replaced:
                _delete_file_rows(ws, con, old_id)
            con.execute("DELETE FROM quarantine WHERE file_id = ?", [ctx.file_id])  # earlier refusals of it
            if prepared.streamed:
                for name, n in _read_streamed(ws, con, prepared).items():
                    counts[name] = counts.get(name, 0) + n
            output = prepared.output
            assert output is not None
            if prepared.streamed:  # (its plays are in the database: they are checked there)
                _drop_clashing_plays_written(con, prepared, counts, own_ids)
            drop_cross_file_duplicates(ws, output, own_ids)
            for name, df in output.tables.items():
                ws.insert_frame(name, df, con=con, validate=False)  # validated above (validate_output)
            staged: dict[str, list[str]] = {}
            if spill is not None:  # the pieces: read again now, their rows written as they come
                try:
                    staged = _stage_pieces(ws, con, pieces, own_ids, counts, piece_rejects, piece_flags,
                                           spill.path)
                except _WriteFailed as err:  # the database's error, not the file's: the run stops
                    raise err.error from None
                except PiecesStartOver:  # rolled back, then written again from the first piece (below)
                    raise
                except (OSError, UnicodeDecodeError, FileChangedError) as err:  # read again, after prepare_file
                    raise_if_output_error(err, ctx, spill.path)  # a full scratch disk is not the file's fault
                    prepared.failure = ("unreadable", "unreadable",
                                        f"cannot read the file as {prepared.fmt_name}: {err}", "file", None)
                    raise _Refused from err
                except OutputError:
                    raise
                except Exception as err:  # a reader bug: this file is refused and the run goes on (`_failed_piece`)
                    prepared.failure = ("rejected", "reader_error", _reader_error(err), "file", None)
                    raise _Refused from err
                _refuse_if_changed(prepared)
                if prepared.failure is not None:
                    raise _Refused
            for name, df in output.tables.items():
                counts[name] = counts.get(name, 0) + df.height
            # A file can have millions of rejects: made and written a bounded batch at a time.
            n_quarantined = _insert_quarantine(ws, con, ctx, prepared.fmt_name,
                                               itertools.chain(output.rejects, piece_rejects))
            n_quarantined += output.n_quarantined_in_db
            flags = [*output.flags, *piece_flags]
            file_row = conform("raw_ingest__files", [_file_record(prepared, n_quarantined, counts, flags)])
            ws.insert_frame("raw_ingest__files", file_row, con=con)
            for name, spills in staged.items():
                _insert_spilled(con, name, spills)
            if spill is not None:
                spill.release()  # removed while the transaction commits
    except _Refused:  # nothing of the file stays; its refusal is recorded like any other
        prepared.streamed = False
        return commit_file(ws, prepared)
    except PiecesStartOver:  # the reader settled on another parser after some pieces: nothing of them stays
        return commit_file(ws, prepared)
    return _loaded_report(prepared, n_quarantined, len(replaced), counts)


class _OtherFiles:
    """Whether a table holds rows of files other than `own_ids` (asked once per table on `con`): a big file's
    pieces need no cross-file duplicate check against a table that holds none, such as every table of a
    first ingest. Holds for the whole file: only this process writes, and only this file meanwhile."""

    def __init__(self, con: duckdb.DuckDBPyConnection, own_ids: list[str]):
        self._con, self._own_ids = con, own_ids
        self._known: dict[str, bool] = {}

    def __call__(self, table: str) -> bool:
        if table not in self._known:
            found = self._con.execute(f"SELECT EXISTS (SELECT 1 FROM {table} WHERE file_id NOT IN "
                                      f"(SELECT unnest(?)))", [self._own_ids]).fetchall()  # all: duckdb 2.x
            self._known[table] = bool(found[0][0])
        return self._known[table]


class _SpillFolder:
    """A temporary folder for a big file's spilled pieces. `release()`, once they are inserted, removes it on a
    thread (unlinking a few hundred MB of cached pages takes tenths of a second) while the file's transaction
    commits; leaving the `with` block waits for that thread (and raises its error), or removes the folder
    itself on every other way out."""

    def __enter__(self) -> _SpillFolder:
        try:
            self.path = Path(tempfile.mkdtemp(prefix="arcstudy-ingest-"))
        except OSError as err:  # $TMPDIR full or unwritable: the environment's fault, not the file's
            raise as_output_error(err, tempfile.gettempdir()) from err
        self._remover: threading.Thread | None = None
        self._error: list[BaseException] = []
        return self

    def release(self) -> None:
        def remove() -> None:
            try:
                shutil.rmtree(self.path)
            except BaseException as err:  # raised by __exit__, in the caller's thread
                self._error.append(err)

        self._remover = threading.Thread(target=remove, name="arcstudy-spill-remover")
        self._remover.start()

    def __exit__(self, exc_type, exc, tb) -> None:
        if self._remover is None:
            shutil.rmtree(self.path, ignore_errors=exc_type is not None)
            return
        self._remover.join()
        if self._error and exc_type is None:
            raise self._error[0]


class _WriteFailed(Exception):
    """Inserting a big file's rows failed (the database, not the file): `error` stops the run."""

    def __init__(self, error: BaseException):
        super().__init__(str(error))
        self.error = error


def _stage_pieces(ws: Workspace, con: duckdb.DuckDBPyConnection, pieces, own_ids: list[str],
                  counts: dict[str, int], rejects: list[Reject], flags: list[str],
                  folder: Path) -> dict[str, list[str]]:
    """Validate a big file's pieces one at a time, inside the file's transaction (`con`), and write their rows.
    DuckDB holds a transaction's appended rows in memory until it commits when they come in many statements;
    one INSERT ... SELECT streams them with bounded memory. So each run of pieces that hold the same table
    (`_streamed_table` of the run's first piece: an H-ARC data.csv hands out its raw rows in its first pass,
    its events in the second) has that table inserted by one INSERT whose source is the pieces themselves,
    pulled as DuckDB asks for rows; the run ends at the first piece without that table, which starts the next
    run. The pieces' other tables are spilled to Arrow IPC files in `folder` (returned per table, in order),
    each inserted afterwards by one INSERT over its files (`_insert_spilled`). The reader works on the next
    piece meanwhile (`prefetched`); the file still lands whole or not at all.

    Raises what the reading or checking of a piece raised, as it was raised (not DuckDB's wrapper of it);
    a failure of the insert itself comes out as `_WriteFailed`."""
    import pyarrow as pa

    staged: dict[str, list[str]] = {}
    with closing(prefetched(pieces())) as ahead, closing(con.cursor()) as reads:
        others = _OtherFiles(reads, own_ids)
        index = itertools.count()  # each piece's number, for the names of its spilled files

        def stage(piece: ReaderOutput, streamed: str | None) -> pl.DataFrame | None:
            """Check the piece, spill its tables but `streamed`, and return that one's rows."""
            i = next(index)
            validate_output(piece)
            drop_cross_file_duplicates(ws, piece, own_ids, reads, others)  # `con` is busy with the insert
            rows = None
            for name, df in piece.tables.items():
                counts[name] = counts.get(name, 0) + df.height
                if name == streamed:
                    rows = conform(name, df)
                    continue
                spill = folder / f"{name}-{i:06d}.arrow"
                conform(name, df).write_ipc(spill, compression="uncompressed")
                staged.setdefault(name, []).append(str(spill))
            rejects.extend_mapped(piece.rejects)  # a flood of them is not copied
            flags.extend(piece.flags)
            return rows

        pending = next(ahead, None)  # the first piece of the next run
        while pending is not None:
            streamed = _streamed_table(pending.tables)
            rows = stage(pending, streamed)
            pending = None
            if rows is None:  # a piece without tables (its rejects and flags only)
                pending = next(ahead, None)
                continue
            schema = _to_arrow(rows).schema
            failure: list[BaseException] = []  # what the reading or checking raised, inside DuckDB's pull

            def batches(streamed: str, schema: pa.Schema, failure: list[BaseException]) -> Iterator[pa.RecordBatch]:
                nonlocal rows, pending
                while True:
                    if rows is not None and rows.height:
                        table = _to_arrow(rows)
                        yield from (table if table.schema == schema else table.cast(schema)).to_batches()
                    rows = table = None  # not held while the next piece is checked
                    try:
                        piece = next(ahead, None)
                        if piece is None:
                            return
                        if streamed not in piece.tables:  # the end of the run: the piece starts the next one
                            pending = piece
                            return
                        rows = stage(piece, streamed)
                    except BaseException as err:
                        failure.append(err)
                        raise

            source = batches(streamed, schema, failure)
            try:
                with _bounded_insert(con, PIECES_INSERT_MEMORY):
                    insert_arrow(con, streamed, pa.RecordBatchReader.from_batches(schema, source))
            except BaseException as err:
                if failure:
                    raise failure[0] from None
                raise _WriteFailed(err) from err
            finally:
                source.close()
    return staged


def _to_arrow(df: pl.DataFrame):
    """The frame as Arrow with polars' own string layout (string views): no copy of its texts, and DuckDB appends
    them with less CPU than the large strings of the default conversion (573k H-ARC raw rows: 4.3 -> 3.6 s of
    CPU for the whole streamed insert)."""
    return df.to_arrow(compat_level=pl.CompatLevel.newest())


def _streamed_table(tables: dict[str, pl.DataFrame]) -> str | None:
    """Which table of a piece starts a run of streamed pieces (the piece's other tables wait for the end of the
    file): the one DuckDB takes longest to write. That is the raw layer's where the piece has one (every field
    of every row as text, many columns to compress: on a 573k-row H-ARC data.csv 2.7 s of CPU against 1.5 s
    for core_harc__actions, though the latter is bigger in memory), else the biggest."""
    raw = [n for n in tables if n.startswith("raw_")]
    return max(raw or tables, key=lambda n: tables[n].estimated_size(), default=None)


# DuckDB's memory limit during one INSERT ... SELECT from a stream of Arrow batches: from the spilled files,
# once the reader is done; and from the pieces themselves, while the reader holds its own memory beside it
# (the rows DuckDB cannot hold then go to its temporary files, and the process stays well under 1 GB).
SPILL_INSERT_MEMORY = "256MB"
STREAM_INSERT_MEMORY = "64MB"
# a big file's pieces (H-ARC data.csv): below about 256 MB DuckDB spends much of its time evicting and reading
# back the blocks it is compressing (573k rows: 12.6-13.2 s of CPU for the whole ingest at 64 MB, 10.9-11.6 s
# at 256 MB, for 30 MB more peak RSS)
PIECES_INSERT_MEMORY = "256MB"
QUARANTINE_SLICE_ROWS = 8192


def _bounded_insert(con: duckdb.DuckDBPyConnection, memory: str, *, one_thread: bool = True
                    ) -> AbstractContextManager[None]:
    """Settings for one INSERT ... SELECT from a stream of Arrow batches: DuckDB would otherwise keep the
    blocks it writes cached up to its memory limit (most of the RAM); and one thread appends a stream of
    Arrow batches with about a third less CPU than several (`one_thread`: while the reader works beside it;
    once it is done, every thread shortens the wait: 1.9 -> 1.2 s for a 573k-row core_harc__actions)."""
    return duckdb_bounds(con, memory=memory, threads=1 if one_thread else None)


def _insert_spilled(con, name: str, spills: list[str]) -> None:
    """One INSERT ... SELECT over the spilled Arrow files of a table, read batch by batch (memory-mapped)."""
    import pyarrow as pa

    def batches():
        for spill in spills:
            with pa.memory_map(spill) as source:
                reader = pa.ipc.open_file(source)
                for i in range(reader.num_record_batches):
                    yield reader.get_batch(i)

    with pa.memory_map(spills[0]) as source:
        schema = pa.ipc.open_file(source).schema
    with _bounded_insert(con, SPILL_INSERT_MEMORY, one_thread=False):  # the reader is done: nothing runs beside it
        insert_arrow(con, name, pa.RecordBatchReader.from_batches(schema, batches()))


def _insert_quarantine(ws: Workspace, con, ctx: FileContext, fmt_name: str | None, rejects) -> int:
    """Write a file's quarantine rows a batch at a time (`_quarantine_frames`); a reject repeated word for word
    in two batches is kept once, as within one. Rows written."""
    import pyarrow as pa

    n, batches = 0, 0
    frames = _quarantine_frames(ctx, fmt_name, rejects)
    first = next(frames, None)
    if first is None:
        return 0
    schema = first.to_arrow().schema

    def stream() -> Iterator[pa.RecordBatch]:
        # One INSERT ... SELECT over the batches: DuckDB streams it with bounded memory, where an INSERT per
        # batch would hold every row of the transaction until it commits.
        nonlocal n, batches
        for frame in itertools.chain([first], frames):
            validated = validate_frame("quarantine", frame)
            if validated.failures:
                raise WorkspaceError(f"refusing to write invalid rows to quarantine: {validated.failures[0].reason}")
            n += frame.height
            batches += 1
            table = frame.to_arrow()
            yield from (table if table.schema == schema else table.cast(schema)).to_batches(QUARANTINE_SLICE_ROWS)

    with _bounded_insert(con, STREAM_INSERT_MEMORY):
        insert_arrow(con, "quarantine", pa.RecordBatchReader.from_batches(schema, stream()))
    # A GROUP BY under a memory limit: DuckDB spills it to disk for millions of rows. Not under the insert's
    # 64 MB: 12,000,000 rejects of one file ran out of memory there (an 8 MiB allocation at 61 MB).
    with _bounded_insert(con, SPILL_INSERT_MEMORY):
        if batches > 1:
            where = "file_id = ?" if ctx.file_id else "file_id IS NULL AND file_path = ? AND run_id = ?"
            params = [ctx.file_id] if ctx.file_id else [str(ctx.path), ctx.run_id]
            repeated = con.execute(f"SELECT coalesce(sum(n - 1), 0) FROM (SELECT count(*) AS n FROM quarantine "
                                   f"WHERE {where} GROUP BY quarantine_id HAVING count(*) > 1)", params).fetchall()[0][0]
            if repeated:
                con.execute(f"DELETE FROM quarantine WHERE {where} AND rowid NOT IN (SELECT min(rowid) FROM "
                            f"quarantine WHERE {where} GROUP BY quarantine_id)", params + params)
                n -= int(repeated)
    return n


def _delete_file_rows(ws: Workspace, con, file_id: str) -> None:
    """Remove everything an earlier ingest of `file_id` wrote (tables of every format carry file_id)."""
    from schemas import TABLES

    for name, table in TABLES.items():
        if "file_id" in table.columns and ws.has_table(name):
            con.execute(f"DELETE FROM {name} WHERE file_id = ?", [file_id])


def _write_file_failure(ws: Workspace, ctx: FileContext, fmt_name: str | None, check: str, reason: str,
                        location: str = "file", raw_text: str | None = None,
                        line_rejects: list[Reject] | None = None) -> None:
    with ws.transaction() as con:
        if ctx.file_id:
            con.execute("DELETE FROM quarantine WHERE file_id = ?", [ctx.file_id])
        _insert_quarantine(ws, con, ctx, fmt_name,
                           itertools.chain([Reject(location, check, reason, raw_text)], line_rejects or []))
