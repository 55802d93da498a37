"""One file between its reading and its commit, and what ingest leaves of it.

- `PreparedFile`: everything reading a file produced, before the database is touched; `_read` fills it (the
  file's reader, then the schemas: `validate_output`), `_refuse_if_changed` refuses a file that changed meanwhile,
  `_failed_piece` stands for a file whose reading raised;
- the records a file leaves: its quarantine rows (`_quarantine_records`), its registry row (`_file_record`),
  and its `FileReport` for each outcome (skipped, refused, loaded).
Pure with respect to the database: `commit` writes these records, one file per transaction, and `batches`
many small files at once.
"""

from __future__ import annotations

import hashlib
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import polars as pl

from pipeline.core.manifest import FileVersion, file_version
from pipeline.core.outputs import OutputError, as_output_error, is_output_oserror
from pipeline.core.special_files import resolved
from pipeline.ingest.base import FileContext, FileRejected, ReaderOutput, Reject, clip
from pipeline.ingest.formats import InputFormat
from pipeline.recordings.cards import PREVIEW_CARD_FLAG
from schemas import empty_frame, validate_frame
from schemas.validate import conform


@dataclass
class FileReport:
    path: Path
    status: str  # "loaded", "skipped", "replaced", "rejected", "unreadable"
    source_format: str | None = None
    n_loaded: int = 0
    n_quarantined: int = 0
    message: str = ""
    tables: dict[str, int] = field(default_factory=dict)
    # the content hash of what was loaded or skipped (the file held these bytes from its hash to the end of its
    # reading): the run manifest records it instead of reading the file once more
    file_id: str | None = None


def _quarantine_columns(ctx: FileContext, fmt_name: str | None, rejects: Iterable[Reject]) -> dict[str, list]:
    """The quarantine rows of one file's rejects, as columns (a flood's batch of 20,000 is made without a
    dict per row); a reject repeated word for word is kept once (first wins)."""
    seen: set[str] = set()
    ids, locations, tables, columns, checks, values, reasons, texts, sizes, digests = ([] for _ in range(10))
    prefix = f"{ctx.file_id}|{ctx.path}|"
    for r in rejects:
        quarantine_id = hashlib.sha256(f"{prefix}{r.location}|{r.check}|{r.column}|{r.reason}".encode()).hexdigest()
        if quarantine_id in seen:
            continue
        seen.add(quarantine_id)
        ids.append(quarantine_id)
        locations.append(r.location)
        tables.append(r.target_table)
        columns.append(r.column)
        checks.append(r.check)
        values.append(clip(r.value))
        reasons.append(r.reason)
        texts.append(clip(r.raw_text))
        sizes.append(r.n_raw_bytes)
        digests.append(r.raw_sha256)
    n = len(ids)
    return {"quarantine_id": ids, "run_id": [ctx.run_id] * n, "file_id": [ctx.file_id] * n,
            "file_path": [str(ctx.path)] * n, "source_format": [fmt_name] * n, "source_location": locations,
            "target_table": tables, "column_name": columns, "check_name": checks, "failing_value": values,
            "reason": reasons, "raw_text": texts, "n_raw_bytes": sizes, "raw_sha256": digests}


def _quarantine_records(ctx: FileContext, fmt_name: str | None, rejects: Iterable[Reject]) -> list[dict]:
    """The quarantine rows of one file's rejects (`_quarantine_columns`), a dict per row."""
    columns = _quarantine_columns(ctx, fmt_name, rejects)
    return [dict(zip(columns, row, strict=True)) for row in zip(*columns.values(), strict=True)]


def _quarantine_frame(ctx: FileContext, fmt_name: str | None, rejects: Iterable[Reject]) -> pl.DataFrame:
    return pl.DataFrame(_quarantine_columns(ctx, fmt_name, rejects), schema=empty_frame("quarantine").schema)


QUARANTINE_BATCH = 20_000  # quarantine rows made and written at once (memory holds one such batch)


def _quarantine_frames(ctx: FileContext, fmt_name: str | None, rejects) -> Iterator[pl.DataFrame]:
    """The quarantine rows of `rejects` (any iterable, a `Spool` included) a bounded batch at a time. A reject
    repeated word for word is kept once within a batch; `commit` removes repeats across batches."""
    batch: list[Reject] = []
    for r in rejects:
        batch.append(r)
        if len(batch) >= QUARANTINE_BATCH:
            yield _quarantine_frame(ctx, fmt_name, batch)
            batch = []
    if batch:
        yield _quarantine_frame(ctx, fmt_name, batch)


def _location_column(df: pl.DataFrame) -> str | None:
    for col in ("line_number", "row_number"):
        if col in df.columns:
            return col
    return None


def validate_output(output: ReaderOutput) -> None:
    """Run each table's schema; rows that fail move from the table to the rejects, one reject per failure."""
    for name, df in list(output.tables.items()):
        df = conform(name, df)
        result = validate_frame(name, df, proven=output.proven.get(name, frozenset()))
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
    validated: bool = False  # `output` went through the schemas (`validate_output`)
    streamed: bool = False  # read by commit_file inside the file's transaction, rows written chunk by chunk
    version: FileVersion | None = None  # the file as it was when its content hash was taken (`file_version`)
    matched_path: str | None = None  # where the database's copy of these bytes was ingested from


def raise_if_output_error(err: BaseException, ctx: FileContext, scratch: Path | None = None) -> None:
    """Raise `err` as OutputError when it is a write's failure (a full disk or read-only file system, or any
    error on a path in the frames folder or the `scratch` folder) rather than the input file's: such a run stops
    with exit 1 and one line (pipeline.commands.common), and the file is not marked unreadable or quarantined."""
    if isinstance(err, OSError) and is_output_oserror(err, ctx.frames_dir if ctx.keep_frames else None, scratch):
        where = ctx.frames_dir if ctx.keep_frames and ctx.frames_dir is not None else Path(tempfile.gettempdir())
        raise as_output_error(err, where) from err


def _refuse_if_changed(prepared: PreparedFile) -> None:
    """Refuse a file that changed between its content hash and the end of its reading (a log still being
    written, a file replaced meanwhile): its rows would be stored under the id of other bytes."""
    if prepared.failure is not None or prepared.version is None:
        return
    try:
        unchanged = file_version(prepared.path) == prepared.version
    except OSError:
        unchanged = False
    if not unchanged:
        prepared.output = None
        prepared.failure = ("rejected", "file_changed",
                            "the file changed while it was being ingested (its size, modification time or inode "
                            "differ from when its content hash was taken): nothing of it was stored; ingest it "
                            "again once it is complete", "file", None)


def _read(prepared: PreparedFile, fmt: InputFormat, *, validate: bool = True) -> None:
    """Run the reader: `prepared.output` (validated unless `validate` is false: `commit_batch` validates it
    with its batch), or `prepared.failure` when the file is refused."""
    try:
        prepared.output = fmt.reader(prepared.ctx)
    except FileRejected as err:
        prepared.failure = ("rejected", err.check, err.reason, err.location, err.raw_text)
        prepared.failure_rejects = err.rejects
        return
    except (UnicodeDecodeError, OSError) as err:
        raise_if_output_error(err, prepared.ctx)
        prepared.failure = ("unreadable", "unreadable", f"cannot read the file as {fmt.name}: {err}", "file", None)
        return
    if validate:
        validate_output(prepared.output)
        prepared.validated = True


def _skipped_report(prepared: PreparedFile, ws=None) -> FileReport:
    """A byte-identical copy of a file already in the database: skipped, naming the file it matched (known when the
    run started, `prepared.matched_path`, else looked up in `ws`)."""
    matched = prepared.matched_path
    if matched is None and ws is not None and prepared.ctx.file_id is not None:
        paths = ws.read("SELECT file_path FROM raw_ingest__files WHERE file_id = ?", [prepared.ctx.file_id])
        matched = paths["file_path"][0] if paths.height else None
    return FileReport(prepared.path, "skipped", message=skipped_message(prepared.path, matched),
                      file_id=prepared.ctx.file_id)


def skipped_message(path: Path, matched: str | None, *, this_run: bool = False) -> str:
    """Why a file was skipped, naming the file whose bytes it repeats."""
    when = " earlier in this run" if this_run else ""
    if matched is None or matched == str(path):
        return f"already ingested{when} (same content hash); --force re-reads it"
    return f"copy of {matched}: already ingested{when} (same content hash); --force re-reads it"


def _failure_report(prepared: PreparedFile) -> FileReport:
    assert prepared.failure is not None
    status, _, reason, _, _ = prepared.failure
    return FileReport(prepared.path, status, prepared.fmt_name, message=reason,
                      n_quarantined=1 + len(prepared.failure_rejects))


def _loaded_report(prepared: PreparedFile, n_quarantined: int, n_replaced: int,
                   counts: dict[str, int] | None = None) -> FileReport:
    """`counts`: rows per table when the file came in pieces (else the output's own tables)."""
    output = prepared.output
    assert output is not None
    counts = counts if counts is not None else {n: df.height for n, df in output.tables.items()}
    status = "replaced" if n_replaced else "loaded"
    message = f"replaced {n_replaced} older version(s) of this path" if n_replaced else ""
    if PREVIEW_CARD_FLAG in output.flags and "core_arc3__plays" not in output.tables:  # a card file: `score` refuses it
        message = "; ".join(filter(None, (message, "2025 preview card: no per-level costs, so `score` cannot "
                                                    "score it (formats.md A.4)")))
    return FileReport(prepared.path, status, prepared.fmt_name, sum(counts.values()), n_quarantined, message,
                      counts, prepared.ctx.file_id)


def _file_record(prepared: PreparedFile, n_quarantined: int, counts: dict[str, int] | None = None,
                 flags: list[str] | None = None) -> dict:
    """The file's row in the registry, `raw_ingest__files` (`counts`, `flags`: those of all its pieces)."""
    ctx, output = prepared.ctx, prepared.output
    assert output is not None
    n_loaded = sum(counts.values()) if counts is not None else output.n_records()
    return {
        "file_id": ctx.file_id, "file_path": str(prepared.path), "file_name": prepared.path.name,
        "n_bytes": prepared.n_bytes, "source_format": prepared.fmt_name,
        "detection_evidence": output.detection_evidence or prepared.evidence, "ingested_at": ctx.ingested_at,
        "run_id": ctx.run_id, "n_records_loaded": n_loaded, "n_records_quarantined": n_quarantined,
        "flags": sorted(set(output.flags if flags is None else flags)),
    }


def _failed_piece(path: Path, run_id: str, error: BaseException) -> PreparedFile:
    """A file whose reading raised (a reader bug) or killed its worker again and again: refused, run goes on.
    An output that could not be written (OutputError: frames folder, scratch space) is not the file's fault:
    raised again, it stops the run with nothing quarantined."""
    if isinstance(error, OutputError):
        raise error
    ctx = FileContext(resolved(path), None, run_id, datetime.now(UTC))  # type: ignore[arg-type]
    return PreparedFile(ctx.path, ctx, failure=("rejected", "reader_error", _reader_error(error), "file", None))


def _reader_error(error: BaseException) -> str:
    return f"reading the file failed: {type(error).__name__}: {error}"
