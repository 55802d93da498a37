"""Ingest orchestration: hash, skip or replace, detect, read, validate, quarantine, write atomically.

Guarantees (CONVENTIONS.md, issue "Ingest"):
- idempotent: a file whose content hash is already in `raw_ingest__files` is skipped (`force` re-reads it);
  a changed file at a path ingested before replaces the older version, so plays are never counted twice;
- atomic per file: everything a file produces is written in one transaction, or nothing is (small files
  are committed a batch per transaction, `commit_batch`: whole files, with the result of one by one);
- lossless and loud: every rejected line, row, play or file lands in `quarantine` with its location, the raw
  text and a reason, and the caller's exit code says so.
"""

from __future__ import annotations

import itertools
import shutil
import tempfile
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import closing, contextmanager, nullcontext
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from pathlib import Path

import duckdb
import polars as pl

from pipeline.core.executor import SerialExecutor, default_workers, open_executor
from pipeline.core.manifest import FileVersion, file_version, sha256_file
from pipeline.core.prefetch import prefetched
from pipeline.core.special_files import not_regular_file
from pipeline.core.workspace import Workspace
from pipeline.ingest.background import BackgroundWriter
from pipeline.ingest.base import FileChangedError, FileContext, ReaderOutput, Reject, clip
from pipeline.ingest.formats import FORMATS, InputFormat, detect
from pipeline.ingest.prepared import (
    FileReport,
    PreparedFile,
    _failed_piece,
    _failure_report,
    _file_record,
    _loaded_report,
    _location_column,
    _quarantine_records,
    _quarantine_rows,
    _read,
    _reader_error,
    _refuse_if_changed,
    _skipped_report,
    validate_output,
)
from schemas import get_table, validate_frame
from schemas.validate import conform

SKIP_DIR_NAMES = {".git", "__pycache__", ".venv"}
# Not inputs: test sidecars beside sample recordings, and game source code in environment folders
# (game code is only ever executed by the engine, from folders the user names).
SKIPPED_SUFFIXES = (".expected.json", ".py", ".pyc")


@dataclass
class IngestReport:
    files: list[FileReport] = field(default_factory=list)

    @property
    def n_quarantined(self) -> int:
        return sum(f.n_quarantined for f in self.files)

    @property
    def has_rejections(self) -> bool:
        return any(f.n_quarantined or f.status in ("rejected", "unreadable") for f in self.files)


def expand_paths(paths: list[Path]) -> list[Path]:
    """Files as given, and every file below the directories given (sorted, hidden and sidecars skipped).
    Entries that are not regular files (FIFOs, devices, sockets) are kept, so that `prepare_file` refuses
    them by name instead of their vanishing silently."""
    out: list[Path] = []
    for p in paths:
        if p.is_dir():
            for f in sorted(p.rglob("*")):
                if f.is_dir() or any(part in SKIP_DIR_NAMES or part.startswith(".") for part in f.relative_to(p).parts):
                    continue
                if f.name.endswith(SKIPPED_SUFFIXES):
                    continue
                out.append(f)
        else:
            out.append(p)
    return out


def drop_cross_file_duplicates(ws: Workspace, output: ReaderOutput, own_file_ids: list[str],
                               con: duckdb.DuckDBPyConnection | None = None,
                               clash_possible: Callable[[str], bool] | None = None) -> None:
    """Primary keys are checked on load across files too: a row whose key another file already loaded is
    quarantined (naming that file) instead of silently doubling a play, session or participant.
    `con`: the connection the checks run on (default `ws.con`; `_stage_pieces` gives a cursor of its own,
    `ws.con` being busy with the file's streaming insert then). Rows of `own_file_ids` never clash, so a
    cursor outside the file's transaction, which still sees them, answers the same.
    `clash_possible(table)`: false when the table is known to hold no other file's rows (`_OtherFiles`)."""
    from schemas import TABLES

    con = con or ws.con
    for name, df in list(output.tables.items()):
        key = list(TABLES[name].primary_key)
        if "file_id" in key or df.height == 0 or not ws.has_table(name, con):
            continue
        if clash_possible is not None and not clash_possible(name):
            continue
        con.register("_keys", df.select(key).to_arrow())
        try:
            cond = " AND ".join(f"t.{k} = n.{k}" for k in key)
            placeholders = ", ".join("?" for _ in own_file_ids)
            clash = con.sql(
                f"SELECT {', '.join('n.' + k for k in key)}, any_value(t.file_id) AS other_file_id, "
                f"any_value(f.file_path) AS other_path FROM _keys n JOIN {name} t ON {cond} "
                f"LEFT JOIN raw_ingest__files f ON f.file_id = t.file_id "
                f"WHERE t.file_id NOT IN ({placeholders}) GROUP BY {', '.join('n.' + k for k in key)}",
                params=own_file_ids,
            ).pl()
        finally:
            con.unregister("_keys")
        if clash.height == 0:
            continue
        loc_col = _location_column(df)
        # One join, not a filter per clashing key: a changed copy of a big file can clash on every row.
        hits = df.with_row_index("__i").join(clash, on=key, how="inner")
        unit = "line" if loc_col == "line_number" else "row"
        for rec in hits.iter_rows(named=True):
            key_text = ", ".join(f"{k}={rec[k]!r}" for k in key)
            location = f"{unit} {rec[loc_col]}" if loc_col else f"record {rec['__i'] + 1}"
            raw = {k: v for k, v in rec.items() if k not in ("__i", "other_file_id", "other_path")}
            output.rejects.append(Reject(location, "duplicate_across_files",
                                         f"{name} already holds ({key_text}) from {rec['other_path']}",
                                         clip(str(raw)), name))
        bad = clash.select(key)
        output.tables[name] = df.join(bad, on=key, how="anti")


# A file of a streaming format (InputFormat.streams) at least this big is read inside its transaction, its rows
# written a chunk at a time: memory stays flat whatever the file's size.
STREAM_MIN_BYTES = 32 * 1024 * 1024


class HashAhead:
    """The content hash (`sha256_file`) of the next input file, computed on a thread while this one reads the
    current file: hashlib and file reads release the GIL, the parse of a recording does not. For a serial
    ingest: `wrap(prepare)` is `prepare` for files given in input order, each once (SerialExecutor)."""

    BLOCK = 8 << 20  # bytes read and hashed per GIL release

    def __init__(self, files: list[Path]):
        self._files = files
        self._next = 0  # index of the next file to be prepared
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="arcstudy-hash-ahead")
        self._ahead: tuple[int, Future] | None = None  # index of the file being hashed, and (version, hash)

    def __enter__(self) -> HashAhead:
        return self

    def __exit__(self, *exc) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)

    def wrap(self, prepare: Callable[..., PreparedFile]) -> Callable[[Path], PreparedFile]:
        def prepare_ahead(path: Path) -> PreparedFile:
            index, self._next = self._next, self._next + 1
            return prepare(path, hash_file=partial(self._hash, index))
        return prepare_ahead

    def _hash(self, index: int, path: Path) -> str:
        """File `index`'s hash (taken from the thread when it was hashed ahead); the next file's is started."""
        ahead, self._ahead = self._ahead, None
        following = index + 1
        if following < len(self._files) and self._worth_it(self._files[following]):
            self._ahead = (following, self._pool.submit(self._hash_regular, self._files[following]))
        if ahead is not None and ahead[0] == index:
            hashed = ahead[1].result()  # the OSError of a file that cannot be read, as sha256_file raises it
            # A hash taken ahead holds only for the file as it was then (the caller takes its version first).
            if hashed is not None and hashed[0] == file_version(path):
                return hashed[1]
        return sha256_file(path)

    @staticmethod
    def _worth_it(path: Path) -> bool:
        """A small file is hashed in a blink: handing it to the thread would cost more than it saves."""
        try:
            return path.stat().st_size > SMALL_FILE_BYTES
        except OSError:
            return False

    @classmethod
    def _hash_regular(cls, path: Path) -> tuple[FileVersion, str] | None:
        # Only regular files are opened (a FIFO would block the thread); `prepare_file` judges the others.
        if not_regular_file(path) is not None:
            return None
        try:
            version = file_version(path)
        except OSError:
            return None
        return version, sha256_file(path, cls.BLOCK)


def prepare_file(path: Path, *, run_id: str, fmt_name: str = "auto", force: bool = False,
                 keep_frames: bool = False, frames_dir: Path | None = None,
                 known_file_ids: frozenset[str] = frozenset(), batch_small: bool = False,
                 chunk_bytes: int | None = None, hash_file: Callable[[Path], str] = sha256_file,
                 validate: bool = True) -> PreparedFile:
    """Hash, detect, read and validate one file. Pure with respect to the database. A large file of a streaming
    format (or any, when `chunk_bytes` is given) is only detected here: `commit_file` reads it.

    `batch_small`: a small file (`is_small`) is left unvalidated, for `commit_batch` to validate it together
    with the other files of its batch (a schema check per table and file is most of a small file's cost).
    `hash_file`: how the content hash is had (`HashAhead` gives it in a serial ingest).
    `validate`: false leaves every file unvalidated, for `commit_file` to validate it (on the writer thread)."""
    path = path.resolve()
    now = datetime.now(UTC)
    kind = not_regular_file(path)
    if kind is not None:
        ctx = FileContext(path, None, run_id, now)  # type: ignore[arg-type]
        return PreparedFile(path, ctx, failure=("rejected", "not_a_regular_file",
                                                f"{kind}, not a regular file: only regular files are read", "file",
                                                None))
    try:
        version = file_version(path)  # before the hash: a change from here on is caught by `_refuse_if_changed`
        file_id = hash_file(path)
        n_bytes = version[2]
    except OSError as err:
        ctx = FileContext(path, None, run_id, now)  # type: ignore[arg-type]
        return PreparedFile(path, ctx, failure=("unreadable", "unreadable",
                                                f"cannot read the file: {err.strerror or err}", "file", None))
    ctx = FileContext(path, file_id, run_id, now, keep_frames=keep_frames, frames_dir=frames_dir)
    prepared = PreparedFile(path, ctx, n_bytes, force=force, version=version)
    if file_id in known_file_ids:
        prepared.seen_before = True
        if not force:
            prepared.skipped = True
            return prepared

    fmt: InputFormat | None
    if fmt_name == "auto":
        try:
            fmt, evidence = detect(path)
        except OSError as err:
            prepared.failure = ("unreadable", "unreadable", f"cannot read the file: {err}", "file", None)
            return prepared
        if fmt is None:
            prepared.failure = ("rejected", "unknown_format",
                                f"format not recognised: {evidence}; pass --format to force one", "file", None)
            return prepared
    else:
        fmt, evidence = FORMATS[fmt_name], "forced with --format"
    prepared.fmt_name, prepared.evidence = fmt.name, evidence
    if fmt.streams and (chunk_bytes is not None or n_bytes >= STREAM_MIN_BYTES):
        prepared.streamed, ctx.chunk_bytes = True, chunk_bytes
        return prepared
    _read(prepared, fmt, validate=validate and not (batch_small and is_small(prepared)))
    _refuse_if_changed(prepared)
    return prepared


class _Refused(Exception):
    """A streamed file was refused while its transaction was open: roll back what it wrote."""


def _read_streamed(ws: Workspace, con, prepared: PreparedFile) -> dict[str, int]:
    """Read a streamed file inside its transaction: every chunk of rows the reader hands over is validated (rows
    that fail become rejects, as in `validate_output`) and inserted at once. Rows written per table."""
    written: dict[str, int] = {}
    chunk_rejects: list[Reject] = []
    write_errors: list[BaseException] = []

    def write_chunk(name: str, df: pl.DataFrame) -> None:  # on the writer thread, chunks in reading order
        piece = ReaderOutput(tables={name: df})
        validate_output(piece)
        chunk_rejects.extend(piece.rejects)
        try:
            ws.insert_frame(name, piece.tables[name], con=con, validate=False)
        except BaseException as err:
            write_errors.append(err)
            raise
        written[name] = written.get(name, 0) + piece.tables[name].height

    try:
        # This thread parses chunk N+1 while the writer inserts chunk N; leaving the block waits for the
        # writer (and raises its error), so nothing writes once the transaction ends or rolls back.
        with BackgroundWriter(name="arcstudy-chunk-writer") as writer:
            prepared.ctx.write_chunk = partial(writer.submit, write_chunk)
            _read(prepared, FORMATS[prepared.fmt_name or ""])
        _refuse_if_changed(prepared)
    except Exception as err:
        if isinstance(err, duckdb.Error) and not write_errors:
            raise
        if not write_errors:  # a reader bug: this file is refused and the run goes on, as for a worker's file
            prepared.failure = ("rejected", "reader_error", _reader_error(err), "file", None)
    finally:
        prepared.ctx.write_chunk = None
    if write_errors:  # writing failed, not the file (the reader may have taken it for its own): the run stops
        raise write_errors[0]
    if prepared.failure is not None:
        raise _Refused
    assert prepared.output is not None
    prepared.output.rejects[:0] = chunk_rejects
    return written


def commit_file(ws: Workspace, prepared: PreparedFile) -> FileReport:
    """Write a prepared file in one transaction (or record why it was refused)."""
    path, ctx = prepared.path, prepared.ctx
    if prepared.skipped:
        return _skipped_report(prepared)
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
    earlier = ws.read("SELECT file_id FROM raw_ingest__files WHERE file_id = ? OR file_path = ?",
                      [ctx.file_id, str(path)])["file_id"].to_list()  # one query for both questions
    if ctx.file_id in earlier:
        if not prepared.force:
            return FileReport(path, "skipped", message="same content as a file ingested earlier in this run",
                              file_id=ctx.file_id)
        prepared.seen_before = True
    replaced = [f for f in dict.fromkeys(earlier) if f != ctx.file_id]
    own_ids = [ctx.file_id, *replaced]
    counts: dict[str, int] = {}  # rows written, per table
    piece_rejects: list[Reject] = []
    piece_flags: list[str] = []
    pieces = prepared.output.pieces if prepared.output is not None else None
    spill = _SpillFolder() if pieces is not None else None
    try:
        with spill or nullcontext(), ws.transaction() as con:
            # Deleting from every table costs ~40 statements: only when something of this file or path is there.
            for old_id in ([ctx.file_id] if prepared.seen_before else []) + replaced:
                _delete_file_rows(ws, con, old_id)
            if prepared.streamed:
                for name, n in _read_streamed(ws, con, prepared).items():
                    counts[name] = counts.get(name, 0) + n
            output = prepared.output
            assert output is not None
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
                except (OSError, UnicodeDecodeError, FileChangedError) as err:  # read again, after prepare_file
                    prepared.failure = ("unreadable", "unreadable",
                                        f"cannot read the file as {prepared.fmt_name}: {err}", "file", None)
                    raise _Refused from err
                except Exception as err:  # a reader bug: this file is refused and the run goes on (`_failed_piece`)
                    prepared.failure = ("rejected", "reader_error", _reader_error(err), "file", None)
                    raise _Refused from err
                _refuse_if_changed(prepared)
                if prepared.failure is not None:
                    raise _Refused
            for name, df in output.tables.items():
                counts[name] = counts.get(name, 0) + df.height
            quarantine = _quarantine_rows(ctx, prepared.fmt_name, [*output.rejects, *piece_rejects])
            flags = [*output.flags, *piece_flags]
            file_row = conform("raw_ingest__files", [_file_record(prepared, quarantine.height, counts, flags)])
            con.execute("DELETE FROM quarantine WHERE file_id = ?", [ctx.file_id])  # earlier refusals of it
            ws.insert_frame("raw_ingest__files", file_row, con=con)
            for name, spills in staged.items():
                _insert_spilled(con, name, spills)
            if spill is not None:
                spill.release()  # removed while the transaction commits
            if quarantine.height:  # a file can have 100k rejects with their rows' texts: a slice at a time
                with _bounded_insert(con, STREAM_INSERT_MEMORY):
                    for part in quarantine.iter_slices(QUARANTINE_SLICE_ROWS):
                        ws.insert_frame("quarantine", part, con=con)
    except _Refused:  # nothing of the file stays; its refusal is recorded like any other
        prepared.streamed = False
        return commit_file(ws, prepared)
    return _loaded_report(prepared, quarantine.height, len(replaced), counts)


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
        self.path = Path(tempfile.mkdtemp(prefix="arcstudy-ingest-"))
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
    one INSERT ... SELECT streams them with bounded memory. So the biggest table (that of the first piece) is
    inserted by one INSERT whose source is the pieces themselves, pulled as DuckDB asks for rows, and the
    other tables' rows are spilled to Arrow IPC files in `folder` (returned per table, in order), each
    inserted afterwards by one INSERT over its files (`_insert_spilled`). The reader works on the next piece
    meanwhile (`prefetched`); the file still lands whole or not at all.

    Raises what the reading or checking of a piece raised, as it was raised (not DuckDB's wrapper of it);
    a failure of the insert itself comes out as `_WriteFailed`."""
    import pyarrow as pa

    staged: dict[str, list[str]] = {}
    with closing(prefetched(pieces())) as ahead, closing(con.cursor()) as reads:
        others = _OtherFiles(reads, own_ids)

        def stage(i: int, piece: ReaderOutput, streamed: str | None) -> pl.DataFrame | None:
            """Check piece `i`, spill its tables but `streamed`, and return that one's rows."""
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
            rejects.extend(piece.rejects)
            flags.extend(piece.flags)
            return rows

        first = next(ahead, None)
        if first is None:
            return staged
        # the biggest table of the first piece: the others are spilled, then inserted after it
        streamed = max(first.tables, key=lambda n: first.tables[n].estimated_size(), default=None)
        rows = stage(0, first, streamed)
        first = None
        if rows is None:  # no table to stream: every piece is spilled
            for i, piece in enumerate(ahead, start=1):
                stage(i, piece, None)
            return staged
        schema = rows.to_arrow().schema
        failure: list[BaseException] = []  # what the reading or checking raised, inside DuckDB's pull

        def batches() -> Iterator[pa.RecordBatch]:
            nonlocal rows
            for i in itertools.count(1):
                if rows is not None and rows.height:
                    table = rows.to_arrow()
                    yield from (table if table.schema == schema else table.cast(schema)).to_batches()
                rows = table = None  # not held while the next piece is checked
                try:
                    piece = next(ahead, None)
                    if piece is None:
                        return
                    rows = stage(i, piece, streamed)
                except BaseException as err:
                    failure.append(err)
                    raise

        source = batches()
        try:
            with _bounded_insert(con, STREAM_INSERT_MEMORY):
                _insert_stream(con, streamed, pa.RecordBatchReader.from_batches(schema, source))
        except BaseException as err:
            if failure:
                raise failure[0] from None
            raise _WriteFailed(err) from err
        finally:
            source.close()
    return staged


# DuckDB's memory limit during one INSERT ... SELECT from a stream of Arrow batches: from the spilled files,
# once the reader is done; and from the pieces themselves, while the reader holds its own memory beside it
# (the rows DuckDB cannot hold then go to its temporary files, and the process stays well under 1 GB).
SPILL_INSERT_MEMORY = "256MB"
STREAM_INSERT_MEMORY = "64MB"
QUARANTINE_SLICE_ROWS = 8192


@contextmanager
def _bounded_insert(con: duckdb.DuckDBPyConnection, memory: str) -> Iterator[None]:
    """Settings for one INSERT ... SELECT from a stream of Arrow batches: DuckDB would otherwise keep the
    blocks it writes cached up to its memory limit (most of the RAM); and one thread appends a stream of
    Arrow batches with about a third less CPU than several."""
    limit, threads = con.execute("SELECT current_setting('memory_limit'), current_setting('threads')").fetchall()[0]
    con.execute(f"SET memory_limit = '{memory}'")
    con.execute("SET threads = 1")
    try:
        yield
    finally:
        # On a cursor: these settings are the database's, not the transaction's, and a failed insert leaves the
        # transaction aborted (it refuses any statement until the caller rolls it back).
        with closing(con.cursor()) as settings:
            settings.execute(f"SET memory_limit = '{limit}'")
            settings.execute(f"SET threads = {int(threads)}")


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
    with _bounded_insert(con, SPILL_INSERT_MEMORY):
        _insert_stream(con, name, pa.RecordBatchReader.from_batches(schema, batches()))


def _insert_stream(con: duckdb.DuckDBPyConnection, name: str, stream) -> None:
    """One INSERT ... SELECT into table `name` from a pyarrow RecordBatchReader. A failed insert leaves the
    registration in place: DuckDB refuses every statement of an aborted transaction, unregister too, until
    the caller rolls it back (the next registration under the name replaces it)."""
    columns = ", ".join(get_table(name).columns)
    con.register("_stream", stream)
    con.execute(f"INSERT INTO {name} ({columns}) SELECT {columns} FROM _stream")
    con.unregister("_stream")


# --- small files, many to a transaction -------------------------------------------------------------
# A transaction, a registry query and a schema check per table cost milliseconds each, far more than
# reading a task file or a scorecard. Small files are therefore committed in batches: one registry query,
# one validation per table, one insert per table and one transaction for the whole batch. The result is
# exactly that of `commit_file` on each file in turn: the batch takes the fast path only when no file in it
# could see another (no shared content hash or path, no key clash across files or with the database, every
# frame clean), and otherwise, or when writing fails, commits its files one by one with `commit_file`.

SMALL_FILE_BYTES = 1 << 20  # files up to this size are batched
BATCH_MAX_FILES = 500
BATCH_MAX_BYTES = 64 << 20  # input bytes held in memory by one batch


def is_small(prepared: PreparedFile) -> bool:
    """A file for `commit_batch`: small, and read whole (not streamed, not in pieces: `commit_file` writes those)."""
    whole = not prepared.streamed and (prepared.output is None or prepared.output.pieces is None)
    return prepared.n_bytes <= SMALL_FILE_BYTES and whole


def commit_batch(ws: Workspace, batch: list[PreparedFile]) -> list[FileReport]:
    """Commit small prepared files, in order, with the result of `commit_file` on each in turn."""
    batch = validate_batch(batch)
    if len(batch) <= 1:
        return [commit_file(ws, p) for p in batch]
    plan = _plan_batch(ws, batch)
    if plan is None:
        return [commit_file(ws, p) for p in batch]
    try:
        _write_batch(ws, plan)
    except Exception:
        # Rolled back as a whole; one by one, each file lands wholly or raises as it would alone.
        return [commit_file(ws, p) for p in batch]
    return plan.reports


@dataclass
class _BatchPlan:
    reports: list[FileReport]
    tables: dict[str, list[pl.DataFrame]]  # rows to insert, per table, in file order
    files: list[dict]  # registry rows
    quarantine: list[dict]
    clear_ids: list[str]  # file ids whose rows go first (--force re-reads, older versions of a path)
    requarantined_ids: list[str]  # file ids whose earlier quarantine rows go first


def _plan_batch(ws: Workspace, batch: list[PreparedFile]) -> _BatchPlan | None:
    """What writing the batch at once means, or None when its files must be committed one by one."""
    active = [p for p in batch if not p.skipped]
    batch_ids = {p.ctx.file_id for p in active if p.ctx.file_id is not None}
    paths = {str(p.path) for p in active}
    if len(batch_ids) < sum(p.ctx.file_id is not None for p in active) or len(paths) < len(active):
        return None  # a file would see another of the batch in the registry
    loading = [p for p in active if p.failure is None]
    by_id: dict[str, str] = {}
    by_path: dict[str, set[str]] = {}
    if loading:
        rows = ws.read("SELECT file_id, file_path FROM raw_ingest__files "
                       "WHERE file_id IN (SELECT unnest(?)) OR file_path IN (SELECT unnest(?))",
                       [[p.ctx.file_id for p in loading], [str(p.path) for p in loading]]).rows()
        for file_id, file_path in rows:
            by_id[file_id] = file_id
            by_path.setdefault(file_path, set()).add(file_id)
    plan = _BatchPlan([], {}, [], [], [], [])
    loaded: list[tuple[dict[str, pl.DataFrame], list[str]]] = []  # tables, with the ids not a clash for them
    claimed: set[str] = set()  # registry ids some file of the batch already sees
    for p in batch:
        if p.skipped:
            plan.reports.append(_skipped_report(p))
            continue
        if p.failure is not None:
            _, check, reason, location, raw = p.failure
            plan.quarantine += _quarantine_records(p.ctx, p.fmt_name, [Reject(location, check, reason, raw),
                                                                      *p.failure_rejects])
            if p.ctx.file_id:
                plan.requarantined_ids.append(p.ctx.file_id)
            plan.reports.append(_failure_report(p))
            continue
        output, file_id = p.output, p.ctx.file_id
        assert output is not None and file_id is not None
        seen = by_path.get(str(p.path), set()) | ({file_id} if file_id in by_id else set())
        replaced = sorted(seen - {file_id})
        if claimed & seen or batch_ids & set(replaced):
            return None  # files of the batch share an older version: their order decides
        claimed |= seen
        if file_id in seen and not p.force:
            plan.reports.append(FileReport(p.path, "skipped",
                                           message="same content as a file ingested earlier in this run",
                                           file_id=file_id))
            continue
        if file_id in seen or p.seen_before:
            plan.clear_ids.append(file_id)
        plan.clear_ids += replaced
        plan.requarantined_ids.append(file_id)
        quarantine = _quarantine_records(p.ctx, p.fmt_name, output.rejects)
        plan.quarantine += quarantine
        plan.files.append(_file_record(p, len(quarantine)))
        for name, df in output.tables.items():
            plan.tables.setdefault(name, []).append(df)
        plan.reports.append(_loaded_report(p, len(quarantine), len(replaced)))
        loaded.append((output.tables, [file_id, *replaced]))
    if _batch_has_key_clash(ws, loaded):
        return None
    return plan


def validate_batch(batch: list[PreparedFile]) -> list[PreparedFile]:
    """The batch with every file's output validated (`validate_output`). The usual case costs one conform
    and one schema check per table and frame shape for the whole batch: the frames of a table are stacked,
    conformed and checked at once, and each file gets its slice back, when every row is clean. Otherwise the
    files are validated one by one, and a file whose frames cannot be validated at all is refused as if its
    reading had raised (`_failed_piece`)."""
    todo = {id(p): p.output for p in batch if not p.validated and p.output is not None}
    if not todo:
        return batch
    try:
        clean = _conform_and_check_together(list(todo.values()))
    except Exception:  # e.g. a value no cast takes: the file-by-file path finds (and refuses) its file
        clean = False
    out = []
    for p in batch:
        output = todo.get(id(p))
        if output is not None:
            if not clean:
                try:
                    validate_output(output)
                except Exception as err:
                    out.append(_failed_piece(p.path, p.ctx.run_id, err))
                    continue
            p.validated = True
        out.append(p)
    return out


def _conform_and_check_together(outputs: list[ReaderOutput]) -> bool:
    """Conform the outputs' frames a stack per table and shape at a time (conform works row by row, so a
    slice of the conformed stack is the conformed slice), and say whether every stack is certainly valid;
    only then are the outputs' frames replaced by their conformed slices."""
    stacks: dict[tuple, list[tuple[ReaderOutput, str, pl.DataFrame]]] = {}
    for output in outputs:
        for name, df in output.tables.items():
            # A frame without columns conforms to one row of nulls (a literal select): keep it apart.
            shape = (name, tuple(df.columns), tuple(df.dtypes)) if df.width else (name, id(df))
            stacks.setdefault(shape, []).append((output, name, df))
    done: list[tuple[ReaderOutput, str, pl.DataFrame]] = []
    for (name, *_), group in stacks.items():
        stacked = conform(name, pl.concat([df for _, _, df in group]))
        if not validate_frame(name, stacked).ok:
            return False
        if len(group) == 1:
            done.append((group[0][0], name, stacked))
            continue
        offset = 0
        for output, _, df in group:
            done.append((output, name, stacked.slice(offset, df.height)))
            offset += df.height
    for output, name, df in done:
        output.tables[name] = df
    return True


def _batch_has_key_clash(ws: Workspace, loaded: list[tuple[dict[str, pl.DataFrame], list[str]]]) -> bool:
    """Whether any row of the batch's files (their tables, each with the file ids whose rows are no clash for
    it: its own and its path's older versions) shares its primary key with a row of another file of the
    batch or of the database: then `drop_cross_file_duplicates` has work to do, file by file."""
    from schemas import TABLES

    names = dict.fromkeys(name for tables, _ in loaded for name in tables)
    own = None
    try:
        for name in names:
            key = list(TABLES[name].primary_key)
            if "file_id" in key:
                continue
            frame = pl.concat([tables[name].select(key).with_columns(pl.lit(i, pl.Int32).alias("__pos"))
                               for i, (tables, _) in enumerate(loaded) if name in tables])  # one chunk, for DuckDB
            if frame.height == 0:
                continue
            if frame.select(pl.struct(key).is_duplicated().any()).item():
                return True
            if not ws.has_table(name):
                continue
            if own is None:
                own = pl.DataFrame([(i, f) for i, (_, ids) in enumerate(loaded) for f in ids],
                                   schema={"__pos": pl.Int32, "file_id": pl.String}, orient="row")
                ws.con.register("_own_ids", own.to_arrow())
            ws.con.register("_keys", frame.to_arrow())
            try:
                cond = " AND ".join(f"t.{k} = n.{k}" for k in key)
                hit = ws.con.execute(
                    f"SELECT EXISTS (SELECT 1 FROM _keys n JOIN {name} t ON {cond} WHERE NOT EXISTS "
                    f"(SELECT 1 FROM _own_ids o WHERE o.__pos = n.__pos AND o.file_id = t.file_id))").fetchall()[0]
            finally:
                ws.con.unregister("_keys")
            if hit and hit[0]:
                return True
    finally:
        if own is not None:
            ws.con.unregister("_own_ids")
    return False


def _write_batch(ws: Workspace, plan: _BatchPlan) -> None:
    """The batch's rows in one transaction: older rows out first, then one insert per table."""
    from schemas import TABLES

    with ws.transaction() as con:
        if plan.clear_ids:
            for name, table in TABLES.items():
                if "file_id" in table.columns and ws.has_table(name):
                    con.execute(f"DELETE FROM {name} WHERE file_id IN (SELECT unnest(?))", [plan.clear_ids])
        if plan.requarantined_ids:
            con.execute("DELETE FROM quarantine WHERE file_id IN (SELECT unnest(?))", [plan.requarantined_ids])
        if plan.files:
            ws.insert_frame("raw_ingest__files", conform("raw_ingest__files", plan.files), con=con)
        for name, frames in plan.tables.items():
            # One chunk: an Arrow table of a chunk per file costs DuckDB ~30x more to take in.
            ws.insert_frame(name, pl.concat(frames, rechunk=True), con=con, validate=False)  # validated above
        if plan.quarantine:
            ws.insert_frame("quarantine", conform("quarantine", plan.quarantine), con=con)


def ingest_file(ws: Workspace, path: Path, *, run_id: str, fmt_name: str = "auto", force: bool = False,
                keep_frames: bool = False, frames_dir: Path | None = None, chunk_bytes: int | None = None
                ) -> FileReport:
    known = ws.read("SELECT file_id FROM raw_ingest__files")["file_id"].to_list()
    return commit_file(ws, prepare_file(path, run_id=run_id, fmt_name=fmt_name, force=force, keep_frames=keep_frames,
                                        frames_dir=frames_dir, known_file_ids=frozenset(known),
                                        chunk_bytes=chunk_bytes))


def _delete_file_rows(ws: Workspace, con, file_id: str) -> None:
    """Remove everything an earlier ingest of `file_id` wrote (tables of every format carry file_id)."""
    from schemas import TABLES

    for name, table in TABLES.items():
        if "file_id" in table.columns and ws.has_table(name):
            con.execute(f"DELETE FROM {name} WHERE file_id = ?", [file_id])


def _write_file_failure(ws: Workspace, ctx: FileContext, fmt_name: str | None, check: str, reason: str,
                        location: str = "file", raw_text: str | None = None,
                        line_rejects: list[Reject] | None = None) -> None:
    rows = _quarantine_rows(ctx, fmt_name, [Reject(location, check, reason, raw_text), *(line_rejects or [])])
    with ws.transaction() as con:
        if ctx.file_id:
            con.execute("DELETE FROM quarantine WHERE file_id = ?", [ctx.file_id])
        ws.insert_frame("quarantine", rows, con=con)


PARALLEL_MIN_BYTES = 256 * 1024 * 1024


def auto_ingest_workers(file_sizes: list[int], cores: int) -> int:
    """Workers for an ingest without `--workers`: every core when the input that can be shared out (all but the
    largest file, which one process reads whatever the number of workers) pays for the seconds a local
    cluster takes to start, else none. An H-ARC release (one large data.csv and many small task files) is
    therefore read in one process: two workers made it slower (26 s against 20 s at paper scale)."""
    shareable = sum(file_sizes) - max(file_sizes, default=0)
    return cores if shareable >= PARALLEL_MIN_BYTES else 1


# Commits the writer thread may have pending (running or queued) while this thread reads on: two absorb a commit
# that takes longer than reading the next file (DuckDB checkpoints as its log grows) without the reader waiting.
# Beyond two, files whose rows are in memory are queued while they hold at most PENDING_BYTES of input (`_held`):
# the small files of an H-ARC release are read (by the workers, or this thread) while data.csv commits, instead
# of after it.
COMMITS_AHEAD = 2
PENDING_BYTES = 16 << 20


def _held(files: list[PreparedFile]) -> int:
    """Input bytes whose rows `files` hold in memory until committed (a file read in its transaction holds none)."""
    return sum(p.n_bytes for p in files if p.output is not None and p.output.pieces is None and not p.streamed)


def ingest_paths(ws: Workspace, paths: list[Path], *, run_id: str, fmt_name: str = "auto", force: bool = False,
                 keep_frames: bool = False, frames_dir: Path | None = None, progress=None,
                 workers: int | None = None, scheduler: str | None = None,
                 chunk_bytes: int | None = None) -> IngestReport:
    """Ingest files and folders. With several files and workers (local processes, or the Dask cluster at
    `scheduler`), the workers read and validate files while this process alone writes them, in input order
    (a look-ahead of one file per worker keeps memory flat): one transaction per file, small files a batch
    at a time (`commit_batch`, same result). This process writes on one thread of its own (`BackgroundWriter`,
    up to COMMITS_AHEAD commits pending, more while they hold at most PENDING_BYTES of input), so that a serial
    ingest reads the next files while the last one is committed. A big file read in pieces (H-ARC data.csv)
    is read by the writer inside its transaction, its biggest table streamed into the database as the pieces
    come (`_stage_pieces`). A large recording is read by this process inside its transaction, its rows written a chunk
    (`chunk_bytes` of input, given to stream every recording in such chunks) at a time, each chunk inserted
    on a writer thread while the next is parsed."""
    if fmt_name != "auto" and fmt_name not in FORMATS:
        raise ValueError(f"unknown format {fmt_name!r}; known: auto, {', '.join(FORMATS)}")
    report = IngestReport()
    files = expand_paths(paths)
    known = frozenset(ws.read("SELECT file_id FROM raw_ingest__files")["file_id"].to_list())
    prepare = partial(prepare_file, run_id=run_id, fmt_name=fmt_name, force=force, keep_frames=keep_frames,
                      frames_dir=frames_dir, known_file_ids=known, batch_small=True, chunk_bytes=chunk_bytes)
    if workers is None and scheduler is None:
        workers = auto_ingest_workers([p.stat().st_size for p in files if p.is_file()], default_workers())
    batch: list[PreparedFile] = []
    batch_bytes = 0
    # This thread reads (or collects the workers' files) while `writer` commits the file or batch before,
    # in order; a file that streams is read inside its transaction, by this thread, once the writer is idle.
    with open_executor(workers, scheduler, n_items=len(files)) as ex, HashAhead(files) as ahead, \
            BackgroundWriter(depth=COMMITS_AHEAD, on_result=report.files.extend, budget=PENDING_BYTES) as writer:
        if isinstance(ex, SerialExecutor):
            # Files prepared here, in order: hash the next one meanwhile, and leave the schema checks (polars)
            # to the writer thread, beside the commit.
            prepare = ahead.wrap(partial(prepare, validate=False))
        for key, prepared, error in ex.map_ordered(prepare, enumerate(files), progress=progress,
                                                   description="ingesting"):
            if error is not None:
                prepared = _failed_piece(files[key], run_id, error)
            if not is_small(prepared):
                if batch:
                    writer.submit(commit_batch, ws, batch, weight=_held(batch))
                    batch, batch_bytes = [], 0
                if prepared.streamed:
                    writer.drain()
                    report.files.append(commit_file(ws, prepared))
                else:
                    writer.submit(_commit_one, ws, prepared, weight=_held([prepared]))
                continue
            batch.append(prepared)
            batch_bytes += prepared.n_bytes
            if len(batch) >= BATCH_MAX_FILES or batch_bytes >= BATCH_MAX_BYTES:
                writer.submit(commit_batch, ws, batch, weight=_held(batch))
                batch, batch_bytes = [], 0
        if batch:
            writer.submit(commit_batch, ws, batch, weight=_held(batch))
    return report


def _commit_one(ws: Workspace, prepared: PreparedFile) -> list[FileReport]:
    return [commit_file(ws, prepared)]
