"""Ingest orchestration: hash, skip or replace, detect, read, validate, quarantine, write atomically.

Guarantees (CONVENTIONS.md, issue "Ingest"):
- idempotent: a file whose content hash is already in `raw_ingest__files` is skipped (`force` re-reads it);
  a changed file at a path ingested before replaces the older version, so plays are never counted twice;
- atomic per file: everything a file produces is written in one transaction, or nothing is;
- lossless and loud: every rejected line, row, play or file lands in `quarantine` with its location, the raw
  text and a reason, and the caller's exit code says so.
"""

from __future__ import annotations

import hashlib
import stat
import tempfile
from contextlib import nullcontext
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cache, partial
from pathlib import Path

import polars as pl

from pipeline.core.executor import default_workers, open_executor
from pipeline.core.manifest import sha256_file
from pipeline.core.workspace import Workspace
from pipeline.ingest.base import FileChangedError, FileContext, FileRejected, ReaderOutput, Reject, clip
from pipeline.ingest.formats import FORMATS, InputFormat, detect
from schemas import validate_frame
from schemas.validate import ValidationResult, conform

SKIP_DIR_NAMES = {".git", "__pycache__", ".venv"}
# Not inputs: test sidecars beside sample recordings, and game source code in environment folders
# (game code is only ever executed by the engine, from folders the user names).
SKIPPED_SUFFIXES = (".expected.json", ".py", ".pyc")


@dataclass
class FileReport:
    path: Path
    status: str  # "loaded", "skipped", "replaced", "rejected", "unreadable"
    source_format: str | None = None
    n_loaded: int = 0
    n_quarantined: int = 0
    message: str = ""
    tables: dict[str, int] = field(default_factory=dict)


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


def _quarantine_rows(ctx: FileContext, fmt_name: str | None, rejects: list[Reject]) -> pl.DataFrame:
    rows = []
    for r in rejects:
        key = f"{ctx.file_id}|{ctx.path}|{r.location}|{r.check}|{r.column}|{r.reason}".encode()
        rows.append({
            "quarantine_id": hashlib.sha256(key).hexdigest(),
            "run_id": ctx.run_id,
            "file_id": ctx.file_id,
            "file_path": str(ctx.path),
            "source_format": fmt_name,
            "source_location": r.location,
            "target_table": r.target_table,
            "column_name": r.column,
            "check_name": r.check,
            "failing_value": clip(r.value),
            "reason": r.reason,
            "raw_text": clip(r.raw_text),
        })
    frame = conform("quarantine", rows)
    return frame.unique("quarantine_id", keep="first", maintain_order=True) if len(rows) > 1 else frame


def _location_column(df: pl.DataFrame) -> str | None:
    for col in ("line_number", "row_number"):
        if col in df.columns:
            return col
    return None


@cache
def _clean_check(table_name: str) -> tuple[list[str], dict[str, pl.DataType], list[pl.Expr]]:
    """The table's schema as one polars select that is true when some row may fail it. Built from the same
    field definitions as the pandera schema (`schemas.generate.pandera_schema`: dtype, nullability, ge, le,
    isin, regex as pandera's str_matches, plus the primary key), with pandera's conventions: NaN counts as
    null, a check ignores nulls. Importing pandera is not needed for a clean frame."""
    from schemas import TABLES
    from schemas.fields import FIELDS
    from schemas.generate import is_nullable
    from schemas.model import polars_dtype

    table = TABLES[table_name]
    dtypes: dict[str, pl.DataType] = {}
    suspects: list[pl.Expr] = []
    for name in table.columns:
        f = FIELDS[name]
        dtypes[name] = polars_dtype(f.dtype)
        col = pl.col(name)
        if dtypes[name] in (pl.Float32, pl.Float64):
            suspects.append(col.is_nan().any())  # NaN compares oddly: let pandera judge it
        if not is_nullable(table, name):
            suspects.append(col.is_null().any())
        if f.ge is not None:
            suspects.append((col < f.ge).any())
        if f.le is not None:
            suspects.append((col > f.le).any())
        if f.isin is not None:
            suspects.append((~col.is_in(list(f.isin))).any())
        if f.regex is not None:
            suspects.append((~col.str.contains(f.regex if f.regex.startswith("^") else f"^{f.regex}")).any())
    key = list(table.primary_key)
    if key:
        suspects.append(pl.any_horizontal([pl.col(k).is_null() for k in key]).any())
        suspects.append((pl.struct(key) if len(key) > 1 else pl.col(key[0])).is_duplicated().any())
    return list(dtypes), dtypes, [e.alias(f"s{i}") for i, e in enumerate(suspects)]


def validate_table(name: str, df: pl.DataFrame) -> ValidationResult:
    """`schemas.validate_frame`, with a shortcut for the usual case: a frame that certainly passes (every
    check of the schema evaluated in one polars select, `_clean_check`) is returned as is; anything
    suspicious goes through pandera, which then reports every failure with its rule and reason."""
    columns, dtypes, suspects = _clean_check(name)
    if df.columns == columns and df.dtypes == list(dtypes.values()):
        if not any(df.select(suspects).row(0)):
            return ValidationResult(valid=df, failures=[])
    return validate_frame(name, df)


def conformed(name: str, df: pl.DataFrame) -> pl.DataFrame:
    """`conform`, skipped when the frame already has the table's columns, order and dtypes (most readers'
    frames do; a select per table and file is a large share of a small file's cost)."""
    columns, dtypes, _ = _clean_check(name)
    if df.columns == columns and df.dtypes == list(dtypes.values()):
        return df
    return conform(name, df)


def validate_output(output: ReaderOutput) -> None:
    """Run each table's schema; rows that fail move from the table to the rejects, one reject per failure."""
    for name, df in list(output.tables.items()):
        df = conformed(name, df)
        result = validate_table(name, df)
        if result.failures:
            loc_col = _location_column(df)
            for f in result.failures:
                if f.row is None:
                    location = "file"
                elif loc_col is not None and df[loc_col][f.row] is not None:
                    unit = "line" if loc_col == "line_number" else "row"
                    location = f"{unit} {df[loc_col][f.row]}"
                else:
                    location = f"record {f.row + 1}"
                raw = None if f.row is None else str(df.row(f.row, named=True))
                output.rejects.append(Reject(location, f.check, f.reason, raw, name, f.column, f.value))
        output.tables[name] = result.valid


def drop_cross_file_duplicates(ws: Workspace, output: ReaderOutput, own_file_ids: list[str]) -> None:
    """Primary keys are checked on load across files too: a row whose key another file already loaded is
    quarantined (naming that file) instead of silently doubling a play, session or participant."""
    from schemas import TABLES

    for name, df in list(output.tables.items()):
        key = list(TABLES[name].primary_key)
        if "file_id" in key or df.height == 0 or not ws.has_table(name):
            continue
        ws.con.register("_keys", df.select(key).to_arrow())
        try:
            cond = " AND ".join(f"t.{k} = n.{k}" for k in key)
            placeholders = ", ".join("?" for _ in own_file_ids)
            clash = ws.read(
                f"SELECT {', '.join('n.' + k for k in key)}, any_value(t.file_id) AS other_file_id, "
                f"any_value(f.file_path) AS other_path FROM _keys n JOIN {name} t ON {cond} "
                f"LEFT JOIN raw_ingest__files f ON f.file_id = t.file_id "
                f"WHERE t.file_id NOT IN ({placeholders}) GROUP BY {', '.join('n.' + k for k in key)}",
                own_file_ids,
            )
        finally:
            ws.con.unregister("_keys")
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


@dataclass
class PreparedFile:
    """Everything a file produced before touching the database (made in a worker process when parallel)."""

    path: Path
    ctx: FileContext
    n_bytes: int = 0
    fmt_name: str | None = None
    evidence: str = ""
    output: ReaderOutput | None = None
    failure: tuple[str, str, str, str, str | None] | None = None  # status, check, reason, location, raw text
    failure_rejects: list[Reject] = field(default_factory=list)  # lines quarantined before the file was refused
    skipped: bool = False
    seen_before: bool = False  # the database already held this content hash (a --force re-read)
    force: bool = False


def not_regular_file(path: Path) -> str | None:
    """Why `path` (symlinks followed) is not a regular file, or None when it is. Reading a FIFO blocks until a
    writer comes and /dev/zero never ends, so only regular files are ever opened."""
    try:
        mode = path.stat().st_mode
    except OSError:
        return None  # hashing reports it as unreadable, with the OS's reason
    if stat.S_ISREG(mode):
        return None
    kinds = ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
             (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a directory"))
    return next((name for test, name in kinds if test(mode)), "not a regular file")


def prepare_file(path: Path, *, run_id: str, fmt_name: str = "auto", force: bool = False,
                 keep_frames: bool = False, frames_dir: Path | None = None,
                 known_file_ids: frozenset[str] = frozenset()) -> PreparedFile:
    """Hash, detect, read and validate one file. Pure with respect to the database."""
    path = path.resolve()
    now = datetime.now(UTC)
    kind = not_regular_file(path)
    if kind is not None:
        ctx = FileContext(path, None, run_id, now)  # type: ignore[arg-type]
        return PreparedFile(path, ctx, failure=("rejected", "not_a_regular_file",
                                                f"{kind}, not a regular file: only regular files are read", "file",
                                                None))
    try:
        file_id = sha256_file(path)
        n_bytes = path.stat().st_size
    except OSError as err:
        ctx = FileContext(path, None, run_id, now)  # type: ignore[arg-type]
        return PreparedFile(path, ctx, failure=("unreadable", "unreadable",
                                                f"cannot read the file: {err.strerror or err}", "file", None))
    ctx = FileContext(path, file_id, run_id, now, keep_frames=keep_frames, frames_dir=frames_dir)
    prepared = PreparedFile(path, ctx, n_bytes, force=force)
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
    try:
        prepared.output = fmt.reader(ctx)
    except FileRejected as err:
        prepared.failure = ("rejected", err.check, err.reason, err.location, err.raw_text)
        prepared.failure_rejects = err.rejects
        return prepared
    except (UnicodeDecodeError, OSError) as err:
        prepared.failure = ("unreadable", "unreadable", f"cannot read the file as {fmt.name}: {err}", "file", None)
        return prepared
    validate_output(prepared.output)
    return prepared


def commit_file(ws: Workspace, prepared: PreparedFile) -> FileReport:
    """Write a prepared file in one transaction (or record why it was refused)."""
    path, ctx = prepared.path, prepared.ctx
    if prepared.skipped:
        return FileReport(path, "skipped", message="already ingested (same content hash); --force re-reads it")
    if prepared.failure is not None:
        status, check, reason, location, raw = prepared.failure
        _write_file_failure(ws, ctx, prepared.fmt_name, check, reason, location, raw, prepared.failure_rejects)
        return FileReport(path, status, prepared.fmt_name, message=reason,
                          n_quarantined=1 + len(prepared.failure_rejects))
    output = prepared.output
    assert output is not None and ctx.file_id is not None
    # Workers judged "seen before" against the database as it was when the run started; an identical file
    # committed earlier in this same run is only visible here.
    earlier = ws.read("SELECT file_id FROM raw_ingest__files WHERE file_id = ? OR file_path = ?",
                      [ctx.file_id, str(path)])["file_id"].to_list()  # one query for both questions
    if ctx.file_id in earlier:
        if not prepared.force:
            return FileReport(path, "skipped", message="same content as a file ingested earlier in this run")
        prepared.seen_before = True
    replaced = [f for f in dict.fromkeys(earlier) if f != ctx.file_id]
    own_ids = [ctx.file_id, *replaced]
    drop_cross_file_duplicates(ws, output, own_ids)
    counts = {n: df.height for n, df in output.tables.items()}
    rejects, flags = list(output.rejects), list(output.flags)
    spill = tempfile.TemporaryDirectory(prefix="arcstudy-ingest-") if output.pieces is not None else nullcontext()
    with spill as spill_dir:
        try:
            staged = {} if spill_dir is None else \
                _stage_pieces(ws, output.pieces, own_ids, counts, rejects, flags, Path(spill_dir))
        except (OSError, UnicodeDecodeError, FileChangedError) as err:  # read again here, after prepare_file
            reason = f"cannot read the file as {prepared.fmt_name}: {err}"
            _write_file_failure(ws, ctx, prepared.fmt_name, "unreadable", reason)
            return FileReport(path, "unreadable", prepared.fmt_name, message=reason, n_quarantined=1)
        with ws.transaction() as con:
            # Deleting from every table costs ~40 statements: only when something of this file or path is there.
            for old_id in ([ctx.file_id] if prepared.seen_before else []) + replaced:
                _delete_file_rows(ws, con, old_id)
            con.execute("DELETE FROM quarantine WHERE file_id = ?", [ctx.file_id])  # earlier refusals of it
            for name, df in output.tables.items():
                ws.insert_frame(name, df, con=con, validate=False)  # validated in prepare_file
            for name, spills in staged.items():
                _insert_spilled(con, name, spills)
            n_quarantined = _insert_file_row(ws, con, prepared, counts, rejects, flags)
    status = "replaced" if replaced else "loaded"
    message = f"replaced {len(replaced)} older version(s) of this path" if replaced else ""
    return FileReport(path, status, prepared.fmt_name, sum(counts.values()), n_quarantined, message, counts)


def _stage_pieces(ws: Workspace, pieces, own_ids: list[str], counts: dict[str, int], rejects: list[Reject],
                  flags: list[str], folder: Path) -> dict[str, list[str]]:
    """Validate a big file's pieces one at a time and spill each table's rows to Arrow IPC files in `folder`
    (returned per table, in order). DuckDB holds a transaction's appended rows in memory until it commits,
    so appending the pieces one by one inside the file's transaction would hold the whole file; one
    INSERT ... SELECT streaming from the spilled files does not (`_insert_spilled`), and the file still
    lands whole or not at all."""
    staged: dict[str, list[str]] = {}
    for i, piece in enumerate(pieces()):
        validate_output(piece)
        drop_cross_file_duplicates(ws, piece, own_ids)
        for name, df in piece.tables.items():
            spill = folder / f"{name}-{i:06d}.arrow"
            conformed(name, df).write_ipc(spill, compression="uncompressed")
            staged.setdefault(name, []).append(str(spill))
            counts[name] = counts.get(name, 0) + df.height
        rejects += piece.rejects
        flags += piece.flags
    return staged


SPILL_INSERT_MEMORY = "256MB"


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
    con.register("_spilled", pa.RecordBatchReader.from_batches(schema, batches()))
    # DuckDB would otherwise keep the blocks it writes cached up to its memory limit (most of the RAM); and
    # one thread appends a stream of Arrow batches with about a third less CPU than several
    limit, threads = con.execute("SELECT current_setting('memory_limit'), current_setting('threads')").fetchone()
    con.execute(f"SET memory_limit = '{SPILL_INSERT_MEMORY}'")
    con.execute("SET threads = 1")
    try:
        columns = ", ".join(_clean_check(name)[0])
        con.execute(f"INSERT INTO {name} ({columns}) SELECT {columns} FROM _spilled")
    finally:
        con.execute(f"SET memory_limit = '{limit}'")
        con.execute(f"SET threads = {int(threads)}")
        con.unregister("_spilled")


def _insert_file_row(ws: Workspace, con, prepared: PreparedFile, counts: dict[str, int], rejects: list[Reject],
                     flags: list[str]) -> int:
    """raw_ingest__files (what the file gave) and its quarantined records; returns how many records."""
    ctx, path, output = prepared.ctx, prepared.path, prepared.output
    assert output is not None
    quarantine = _quarantine_rows(ctx, prepared.fmt_name, rejects)
    _insert_validated(ws, "raw_ingest__files", conform("raw_ingest__files", [{
        "file_id": ctx.file_id, "file_path": str(path), "file_name": path.name, "n_bytes": prepared.n_bytes,
        "source_format": prepared.fmt_name, "detection_evidence": output.detection_evidence or prepared.evidence,
        "ingested_at": ctx.ingested_at, "run_id": ctx.run_id, "n_records_loaded": sum(counts.values()),
        "n_records_quarantined": quarantine.height, "flags": sorted(set(flags)),
    }]), con)
    if quarantine.height:
        _insert_validated(ws, "quarantine", quarantine, con)
    return quarantine.height


def _insert_validated(ws: Workspace, name: str, df: pl.DataFrame, con) -> None:
    """`Workspace.insert_frame` with its validation through `validate_table` (its shortcut for clean frames);
    a frame that fails is handed to insert_frame's own check, which refuses it with every failure listed."""
    df = conformed(name, df)
    ws.insert_frame(name, df, con=con, validate=not validate_table(name, df).ok)


def ingest_file(ws: Workspace, path: Path, *, run_id: str, fmt_name: str = "auto", force: bool = False,
                keep_frames: bool = False, frames_dir: Path | None = None) -> FileReport:
    known = ws.read("SELECT file_id FROM raw_ingest__files")["file_id"].to_list()
    return commit_file(ws, prepare_file(path, run_id=run_id, fmt_name=fmt_name, force=force, keep_frames=keep_frames,
                                        frames_dir=frames_dir, known_file_ids=frozenset(known)))


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
        _insert_validated(ws, "quarantine", rows, con)


PARALLEL_MIN_BYTES = 256 * 1024 * 1024


def _failed_piece(path: Path, run_id: str, error: BaseException) -> PreparedFile:
    """A file whose reading raised (a reader bug) or killed its worker again and again: refused, run goes on."""
    ctx = FileContext(path.resolve(), None, run_id, datetime.now(UTC))  # type: ignore[arg-type]
    reason = f"reading the file failed: {type(error).__name__}: {error}"
    return PreparedFile(ctx.path, ctx, failure=("rejected", "reader_error", reason, "file", None))


def ingest_paths(ws: Workspace, paths: list[Path], *, run_id: str, fmt_name: str = "auto", force: bool = False,
                 keep_frames: bool = False, frames_dir: Path | None = None, progress=None,
                 workers: int | None = None, scheduler: str | None = None) -> IngestReport:
    """Ingest files and folders. With several files and workers (local processes, or the Dask cluster at
    `scheduler`), the workers read and validate files while this process alone writes them, one transaction
    per file, in input order (a look-ahead of one file per worker keeps memory flat)."""
    if fmt_name != "auto" and fmt_name not in FORMATS:
        raise ValueError(f"unknown format {fmt_name!r}; known: auto, {', '.join(FORMATS)}")
    report = IngestReport()
    files = expand_paths(paths)
    known = frozenset(ws.read("SELECT file_id FROM raw_ingest__files")["file_id"].to_list())
    prepare = partial(prepare_file, run_id=run_id, fmt_name=fmt_name, force=force, keep_frames=keep_frames,
                      frames_dir=frames_dir, known_file_ids=known)
    if workers is None and scheduler is None:
        # A local cluster costs seconds to start: worth it for large inputs only.
        total = sum(p.stat().st_size for p in files if p.is_file())
        workers = default_workers() if total >= PARALLEL_MIN_BYTES else 1
    with open_executor(workers, scheduler, n_items=len(files)) as ex:
        for key, prepared, error in ex.map_ordered(prepare, enumerate(files), progress=progress,
                                                   description="ingesting"):
            if error is not None:
                prepared = _failed_piece(files[key], run_id, error)
            report.files.append(commit_file(ws, prepared))
    return report
