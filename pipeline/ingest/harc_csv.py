"""CSV machinery shared by the H-ARC and ARC-TGI readers: header variants, loading, row checks.

Loading: the header is read first (a wrong header rejects the file before anything else is parsed), then
polars reads every column as text, in batches of about BATCH_BYTES cut at record boundaries (`CsvSource`;
small files are one batch, `load_csv`). A file polars cannot split into rows (a row with more fields than
the header, a broken quote) is re-read with Python's csv module, which reports the bad records one by one
so they can be quarantined while the rest loads. Blank lines are skipped (flag `blank_lines_skipped`).

Checks: a `RowCheck` is a vectorised rule (a boolean polars expression, true where the row fails) with the
reason as an expression, so ~600k rows are checked without per-row Python. Failing rows become `Reject`s
(quarantine) with the row number, the rule id, the column, the value and the row's fields as JSON.
"""

from __future__ import annotations

import codecs
import csv
import hashlib
import io
import json
from collections.abc import Callable, Iterator, Sequence
from contextlib import closing
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TypeVar

import numpy as np
import polars as pl

from pipeline.core.prefetch import prefetched
from pipeline.core.spool import Spool
from pipeline.core.textfiles import (
    DENSE_JSON_BYTES_PER_CONTAINER,
    DENSE_JSON_FROM_BYTES,
    NUMBER_TOO_LONG,
    decode_head,
    dense_json_reason,
    is_number_too_long,
    json_message,
    lone_surrogates,
)
from pipeline.ingest.base import MAX_RAW_TEXT, FileChangedError, FileRejected, PiecesStartOver, Reject
from pipeline.ingest.formats import Head

ROW = "row_number"
ROW_JSON = "row_json"
EXTRA = "__extra_fields"
HAS_NUL = "__has_nul"  # the row holds a NUL byte (set by `_read_polars` only when the batch has one)
UNSPLIT = "__unsplit"  # the row's field count differs from the header's (already quarantined by the loader)
SRC = "src:"  # prefix of the source (text) columns while typed columns are derived from them
T = TypeVar("T")
MAX_SIDE = 30


def src(name: str) -> str:
    return SRC + name


# --- header variants ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Variant:
    """One known column set of a CSV format."""

    name: str  # what a person calls it: "current 40-column data.csv"
    columns: tuple[str, ...]
    release: str | None = None  # release generation implied by the header (None: decided by file name)


def read_header(path: Path) -> list[str]:
    """The header record of a CSV file (BOM removed), parsed with a real CSV parser."""
    with open(path, encoding="utf-8-sig", errors="replace", newline="") as fh:
        try:
            header = next(csv.reader(fh), None)
        except csv.Error as err:
            raise FileRejected(f"the header line cannot be parsed as CSV: {err}", check="header_unknown") from err
    if not header or not any(h.strip() for h in header):
        raise FileRejected("the file has no header line (the first line is empty)", check="header_unknown")
    return header


def header_columns(head: Head) -> set[str] | None:
    """The CSV header's column names, or None when the first line is not a plausible CSV header."""
    line = head.first_line
    if not line or line[0] in "{[" or "," not in line:
        return None
    try:
        cols = next(csv.reader([line]))
    except csv.Error:
        return None
    return {c.strip() for c in cols}


def match_variant(header: list[str], variants: Sequence[Variant], what: str) -> Variant:
    """The variant whose column set equals the header's; otherwise reject naming what is missing/extra."""
    seen: set[str] = set()
    dups = sorted({h for h in header if h in seen or seen.add(h)})  # type: ignore[func-returns-value]
    if dups:
        raise FileRejected(f"{what}: column(s) {', '.join(dups)} appear more than once in the header",
                           check="header_unknown", raw_text=",".join(header))
    got = set(header)
    for v in variants:
        if got == set(v.columns):
            return v
    best = min(variants, key=lambda v: (len(got ^ set(v.columns)), variants.index(v)))
    missing = [c for c in best.columns if c not in got]
    extra = [c for c in header if c not in best.columns]
    parts = []
    if missing:
        parts.append("missing " + ", ".join(missing))
    if extra:
        parts.append("unexpected " + ", ".join(extra))
    known = "; ".join(f"{v.name} ({len(v.columns)} columns)" for v in variants)
    raise FileRejected(
        f"{what}: the header is not a known column set; closest is the {best.name}: {'; '.join(parts)}. "
        f"Known column sets: {known}. Fix the header or pass the right --format.",
        check="header_unknown", raw_text=",".join(header),
    )


# --- loading --------------------------------------------------------------------------------------

BATCH_BYTES = 12 << 20  # a big file is read in pieces of about this size, each cut at a record boundary (a few
# are in flight at once: the next ones are read and parsed while one is checked and one is written). Each piece
# costs its rules ~10 ms of CPU whatever its size (building and planning some 60 expressions): 12 MB rather
# than 8 takes ~0.3 s of CPU off a 573k-row data.csv for ~40 MB more peak RSS (16 MB: ~0.6 s, up to 0.92 GB)
ROW_HASH = "__row_hash"  # 64-bit hash of the row's fields: tells exact copies from conflicting rows


@dataclass
class LoadedCsv:
    frame: pl.DataFrame  # header columns (String) + row_number (Int64) + row_hash + row_json; blank lines dropped
    rejects: list[Reject]  # records that could not be split into the header's fields
    flags: list[str]  # file-level flags
    ends_with_newline: bool
    # a batch parsed for some of the header's columns only (`CsvSource.again(narrow=)`): the same batch with
    # every column, parsed again from its bytes when asked (None: `frame` has every column)
    full: Callable[[], LoadedCsv] | None = None


class _ParserChanged(Exception):
    """A batch showed that the file needs a more forgiving parser: the batches start over with it."""


class _ShortRecord(Exception):
    """A record of a batch has fewer fields than the header (`CsvSource.exact_fields`)."""


def _has_short_record(chunk: bytes, n_fields: int) -> bool:
    """Whether a record of the batch (header line first) has fewer than `n_fields` fields; also true for a batch
    the csv module cannot split, which its reading then reports record by record."""
    reader = csv.reader(io.StringIO(chunk.decode("utf-8", errors="replace"), newline=""))
    try:
        next(reader, None)  # the header
        return any(0 < len(record) < n_fields for record in reader)  # (a blank line: no record)
    except csv.Error:
        return True


@dataclass
class CsvSource:
    """A CSV file read in batches of about `batch_bytes` (None: the whole file at once), each cut at a record
    boundary (a newline outside quotes) and parsed by polars with the header in front, numbered on from the
    batch before. The loader's decisions hold for the whole file: a file polars cannot split into rows is
    read by Python's csv module (`csv_fallback_parser`), in batches of about as many characters, a file that is
    not UTF-8 lossily.

    `batches()` yields `LoadedCsv` pieces (frame without row_json: `with_row_json` adds it where needed);
    `flags` and `rejects` gather what the batches found. `scan(fn)` is a first pass over the batches,
    `again()` a second one (a file of one batch is not parsed twice)."""

    path: Path
    header: list[str]
    raw_table: str
    batch_bytes: int | None = BATCH_BYTES
    mode: str = "utf8"  # "utf8", "utf8-lossy" (bytes that are not UTF-8), "csv" (Python csv module)
    bad_utf8: bool = False
    file_flags: list[str] = field(default_factory=list)
    ends_with_newline: bool = True
    version: tuple[int, int] = (0, 0)  # size and mtime when first opened: a later pass reads the same file
    source_name: str = "H-ARC"  # the format's name in a reason ("a NUL byte, which no H-ARC field contains")
    # Count every record's fields (Python's csv module, on each batch polars read): for a file whose last column
    # may be empty, where a row that ends early reads as one with empty trailing answers (polars fills them), so
    # `short_row` cannot see it. A short record sends the file to the csv module, which quarantines it.
    exact_fields: bool = False
    _kept: LoadedCsv | None = field(default=None, repr=False)  # the only batch of a file of one batch
    _cuts: _Cuts | None = field(default=None, repr=False)  # where the first whole pass cut the file

    def __post_init__(self) -> None:
        self.version = self._version()
        with open(self.path, "rb") as fh:
            _, facts = decode_head(fh.read(1 << 16))  # polars and csv (utf-8-sig) drop a BOM and accept CRLF
            fh.seek(0, 2)
            size = fh.tell()
            fh.seek(max(0, size - 1))
            self.ends_with_newline = fh.read(1) in (b"\n", b"\r") if size else True
        self.file_flags = facts.flags()

    def _version(self) -> tuple[int, int]:
        st = self.path.stat()
        return st.st_size, st.st_mtime_ns

    @property
    def flags(self) -> list[str]:
        return self.file_flags + (["csv_fallback_parser"] if self.mode == "csv" else [])

    @property
    def single_batch(self) -> bool:
        """The file is read in one batch (`_record_chunks` yields one piece)."""
        return self.batch_bytes is None or self.version[0] < self.batch_bytes

    def scan(self, fn: Callable[[LoadedCsv], T], *, row_hash: bool = True,
             on_start: Callable[[], None] | None = None) -> list[T]:
        """`fn` of every batch, in file order; starts over when a batch needs a more forgiving parser
        (`on_start` is called before each start, so that `fn` can drop what it kept of an abandoned pass). A
        file that turns out to be one batch keeps it (without ROW_HASH) for `again()`."""
        while True:
            if on_start is not None:
                on_start()
            self._kept = None
            try:
                results = []
                for i, batch in enumerate(self.batches(row_hash=row_hash)):
                    self._kept = LoadedCsv(batch.frame.drop(ROW_HASH, strict=False), batch.rejects, batch.flags,
                                           batch.ends_with_newline) if i == 0 else None
                    results.append(fn(batch))
                return results
            except _ParserChanged:
                continue

    def scan_iter(self, *, row_hash: bool = True, on_start: Callable[[], None] | None = None
                  ) -> Iterator[LoadedCsv]:
        """`scan`, a batch at a time: the caller can hand on what it makes of each batch before the next is
        parsed. A batch that needs a more forgiving parser starts the batches over unseen while none was handed
        out yet (`on_start` is called before each start); after that it raises `PiecesStartOver` (what the
        caller made of the earlier batches must be undone), the new parser kept for the next pass."""
        while True:
            if on_start is not None:
                on_start()
            self._kept = None
            handed = False
            try:
                for i, batch in enumerate(self.batches(row_hash=row_hash)):
                    self._kept = LoadedCsv(batch.frame.drop(ROW_HASH, strict=False), batch.rejects, batch.flags,
                                           batch.ends_with_newline) if i == 0 else None
                    handed = True
                    yield batch
                return
            except _ParserChanged as err:
                if handed:
                    raise PiecesStartOver(f"{self.path.name} is read again from its start with a more forgiving "
                                          f"parser ({self.mode})") from err

    def again(self, narrow: Callable[[int], Sequence[str] | None] | None = None) -> Iterator[LoadedCsv]:
        """The batches once more, in file order, as `batches(row_hash=False)` gives them: the kept batch of a
        file of one batch, else parsed again. A big file is parsed twice rather than kept: writing the parsed
        batches out and reading them back costs about twice a parse.

        `narrow(i)`: the columns batch i needs (None: all). Such a batch is parsed for those columns only (a
        third less CPU for data.csv without its 11 survey columns) and comes as it is parsed, without the checks
        `_finish` makes on every field (blank lines, bytes that are not UTF-8, NUL bytes): the caller asks for
        it only where the first pass found none of those in the batch. `LoadedCsv.full()` parses it whole."""
        self._check_unchanged()
        if self._kept is not None:
            yield self._kept
            return
        try:
            yield from self.batches(row_hash=False, narrow=narrow)
        except _ParserChanged as err:  # the first pass settled the parser: only a changed file gets here
            raise FileChangedError(f"{self.path.name} changed since it was first read (it parses differently)") from err

    def _check_unchanged(self) -> None:
        if self._version() != self.version:
            raise FileChangedError(f"{self.path.name} changed since it was first read (size or time differ)")

    def batches(self, *, row_hash: bool = True, narrow: Callable[[int], Sequence[str] | None] | None = None
                ) -> Iterator[LoadedCsv]:
        """The batches in file order; `row_hash=False` leaves out ROW_HASH (a pass that does not need it);
        `narrow`: see `again`."""
        self._check_unchanged()
        if self.mode == "csv":
            for df, rejects in _csv_module_batches(self.path, self.header, self.raw_table, self.batch_bytes):
                yield self._finish(_with_nul_marks(df, self.header), rejects, row_hash)
            return
        offset = 0
        skipped: list[Reject] = []  # over-long records (`LongRecord`), reported with the next batch
        # the next batch is parsed while this one is used
        with closing(prefetched(self._parsed(narrow if self.mode == "utf8" else None))) as parsed:
            for df, err, chunk in parsed:
                if isinstance(df, LongRecord):
                    offset += 1  # it keeps its row number, as a row polars could not split would
                    skipped.append(df.reject(offset, self.raw_table))
                    continue
                if chunk is not None:  # parsed for some columns only
                    full = partial(self._finish_bytes, chunk, offset, skipped)
                    if skipped or HAS_NUL in df.columns:  # not what the first pass saw: the whole batch then
                        loaded = full()
                    else:
                        loaded = LoadedCsv(df.with_columns(pl.col(ROW) + offset), [], [], self.ends_with_newline,
                                           full=full)
                    offset += df.height
                    yield loaded
                    skipped = []
                    continue
                if err is not None:
                    if self.mode == "utf8" and not _is_utf8(self.path):
                        self.bad_utf8, self.mode = True, "utf8-lossy"
                    else:
                        self.mode = "csv"
                    raise _ParserChanged from err
                df = df.with_columns(pl.col(ROW) + offset)
                offset += df.height
                yield self._finish(df, skipped, row_hash)
                skipped = []
        if skipped:  # the file ends with over-long records
            empty = pl.DataFrame(schema={ROW: pl.Int64, **{c: pl.String for c in self.header}, UNSPLIT: pl.Boolean})
            yield self._finish(empty, skipped, row_hash)

    def _parsed(self, narrow: Callable[[int], Sequence[str] | None] | None = None
                ) -> Iterator[tuple[pl.DataFrame | LongRecord | None, Exception | None, bytes | None]]:
        """Each batch parsed by polars (rows numbered from 1), or the error that ends the pass; with its bytes
        where `narrow` had it parsed for some columns only. The next piece of the file is read and cut
        meanwhile (cut once: a later pass reads the same byte ranges)."""
        if self._cuts is not None:
            pieces = _replayed_chunks(self.path, self._cuts)
        else:
            cuts = _Cuts()
            pieces = _record_chunks(self.path, self.batch_bytes, cuts)
        i = 0  # the batch's number (a LongRecord is no batch of its own)
        with closing(prefetched(pieces)) as chunks:
            for chunk in chunks:
                if isinstance(chunk, LongRecord):
                    yield chunk, None, None
                    continue
                columns = narrow(i) if narrow is not None else None
                i += 1
                try:
                    df = _read_polars(chunk, self.header, self.mode, columns)
                except (pl.exceptions.ComputeError, pl.exceptions.SchemaError, pl.exceptions.ShapeError) as err:
                    yield None, err, None
                    return
                if self.exact_fields and _has_short_record(chunk, len(self.header)):
                    yield None, _ShortRecord(), None
                    return
                yield df, None, chunk if columns else None
        if self._cuts is None:
            self._cuts = cuts  # the whole file was cut

    def _finish_bytes(self, chunk: bytes, offset: int, rejects: list[Reject]) -> LoadedCsv:
        """A batch parsed whole from its bytes, its rows numbered on from `offset` (`LoadedCsv.full`)."""
        df = _read_polars(chunk, self.header, self.mode)
        return self._finish(df.with_columns(pl.col(ROW) + offset), list(rejects), False)

    def _finish(self, df: pl.DataFrame, rejects: list[Reject], row_hash: bool) -> LoadedCsv:
        header = self.header
        flags: list[str] = []
        blank = pl.all_horizontal([pl.col(c).is_null() for c in header])
        if EXTRA in df.columns:
            blank = blank & pl.col(EXTRA).is_null()
        if df.select(blank.sum()).item():
            flags.append("blank_lines_skipped")
            df = df.filter(~blank)
        if self.bad_utf8:
            # bytes that are not UTF-8 were replaced by U+FFFD on reading: those rows cannot be trusted
            flags.append("invalid_utf8")
            mangled = pl.any_horizontal([pl.col(c).str.contains("\ufffd", literal=True) for c in header])
            df = df.with_columns((pl.col(UNSPLIT) | mangled.fill_null(False)).alias(UNSPLIT))
            for row, raw in df.filter(mangled).select(ROW, pl.struct(header).struct.json_encode()).iter_rows():
                if any(r.location == f"row {row}" for r in rejects):
                    continue
                rejects.append(Reject(
                    f"row {row}", "invalid_utf8",
                    f"row {row} holds bytes that are not valid UTF-8 (shown as \ufffd in raw_text); re-save the "
                    "file as UTF-8 or fix the row", raw_text=raw, target_table=self.raw_table))
        if HAS_NUL in df.columns:
            # A NUL byte is no text a person typed: the file is damaged there (or is not a CSV at all).
            for row, raw in df.filter(pl.col(HAS_NUL)).select(ROW, pl.struct(header).struct.json_encode()).iter_rows():
                rejects.append(Reject(
                    f"row {row}", "nul_byte",
                    f"row {row} holds a NUL byte (\\x00), which no {self.source_name} field contains: the file is "
                    "damaged there; fix or remove the row", raw_text=raw, target_table=self.raw_table))
            df = df.with_columns((pl.col(UNSPLIT) | pl.col(HAS_NUL)).alias(UNSPLIT)).drop(HAS_NUL)
        if EXTRA in df.columns and df[EXTRA].null_count() == df.height and self.mode != "csv":
            df = df.drop(EXTRA)  # (kept in every batch the csv module read: ROW_HASH must not depend on the batch)
        if row_hash:
            df = df.with_columns(pl.struct(_content_columns(df, header)).hash().alias(ROW_HASH))
        return LoadedCsv(df, rejects, flags, self.ends_with_newline)


def _content_columns(df: pl.DataFrame, header: Sequence[str]) -> list[str]:
    """The fields row_json holds: the header's, and the surplus fields of rows that had too many."""
    return [*header, *([EXTRA] if EXTRA in df.columns else [])]


def with_row_json(loaded: LoadedCsv, header: Sequence[str]) -> pl.DataFrame:
    """The batch's frame with row_json (its fields as a JSON object), the surplus-fields column folded in where a
    row had surplus fields (`"__extra_fields"`, a JSON list of them)."""
    df = loaded.frame
    fields = pl.struct(list(header)).struct.json_encode()
    if EXTRA in df.columns:  # a row's own surplus fields only: a row without any says nothing of them
        fields = pl.when(pl.col(EXTRA).is_null()).then(fields).otherwise(
            pl.struct([*header, EXTRA]).struct.json_encode())
    return df.with_columns(fields.alias(ROW_JSON)).drop(EXTRA, strict=False)


def load_csv(path: Path, header: list[str], *, raw_table: str, source_name: str = "H-ARC",
             batch_bytes: int = BATCH_BYTES, exact_fields: bool = False) -> LoadedCsv:
    """The whole file as one frame (with row_json): for the H-ARC files besides data.csv, ARC-TGI exports and
    ARC-AGI-2 logs. Read in batches of about `batch_bytes` as data.csv is, so that a record over
    MAX_RECORD_BYTES (a giant field) is quarantined (`record_too_long`) without being held whole, and the rows
    around it still load. `source_name`: the format's name in reasons. `exact_fields`: see `CsvSource`."""
    source = CsvSource(path, header, raw_table, batch_bytes=batch_bytes, source_name=source_name,
                       exact_fields=exact_fields)
    batches = [without_long_rows(b, header, raw_table) for b in source.scan(lambda b: b)]
    frame = pl.concat([with_row_json(b, header) for b in batches], how="diagonal_relaxed")
    flags = [*source.flags, *dict.fromkeys(f for b in batches for f in b.flags)]
    return LoadedCsv(frame, Spool(r for b in batches for r in b.rejects), flags, source.ends_with_newline)


def without_long_rows(batch: LoadedCsv, header: Sequence[str], raw_table: str) -> LoadedCsv:
    """The batch without its rows over MAX_RECORD_BYTES, each quarantined as `record_too_long` as `LongRecord`
    quarantines one: a record the file's cutting did not skip (it ended within the piece being read, which may
    run to twice BATCH_BYTES) is held by now, but it is not stored, so the limit is the same wherever the row
    lies in the file."""
    df = batch.frame
    cols = _content_columns(df, header)
    size = pl.sum_horizontal([pl.col(c).str.len_bytes().fill_null(0).cast(pl.Int64) for c in cols])
    over = df.select(size > MAX_RECORD_BYTES).to_series()
    if df.height == 0 or not over.any():
        return batch
    head = pl.concat_str([pl.col(c).str.slice(0, 1024).fill_null("") for c in cols], separator=",").str.slice(0, 1024)
    rejects = list(batch.rejects)
    for row, text in df.filter(over).select(ROW, head).iter_rows():
        rejects.append(LongRecord(text.encode(), terminated=True).reject(row, raw_table))
    rejects.sort(key=lambda r: int(r.location.removeprefix("row ")) if r.location.startswith("row ") else 0)
    return LoadedCsv(df.filter(~over), rejects, batch.flags, batch.ends_with_newline, batch.full)


def piece_bytes(path: Path, rows: int, low: int, high: int) -> int:
    """The size of the pieces a big file is read in: about `rows` rows of the length of its first MiB's lines (a
    row costs its checks about the same memory whatever its length), between `low` and `high` bytes."""
    with open(path, "rb") as fh:
        head = fh.read(1 << 20)
    return min(high, max(low, len(head) * rows // max(head.count(b"\n"), 1)))


MAX_RECORD_BYTES = 16 << 20  # an H-ARC record is a few KB (a 30x30 grid is under 3 KB of JSON), an ARC-TGI row
# (its code and a task of a few 30x30 pairs) tens of KB


@dataclass(frozen=True)
class LongRecord:
    """A record over MAX_RECORD_BYTES, skipped by `_record_chunks` without being held whole: its start, and
    whether it ended before the end of the file (else a quote opened in it is never closed)."""

    head: bytes
    terminated: bool

    def reject(self, row: int, raw_table: str) -> Reject:
        why = ("" if self.terminated else
               ": it runs to the end of the file, so a quote opened in it is never closed")
        return Reject(f"row {row}", "record_too_long",
                      f"row {row} is longer than {MAX_RECORD_BYTES >> 20} MiB{why}; it is not stored (raw_text "
                      "holds its first KiB). Fix or remove the row",
                      raw_text=self.head[:1024].decode("utf-8", "replace"), target_table=raw_table)


@dataclass
class _Cuts:
    """Where `_record_chunks` cut the file: the header record, and each piece after it as its byte range
    (start, end) or the `LongRecord` in its place. A second pass reads the same ranges (`_replayed_chunks`)
    instead of looking for the record boundaries again."""

    head: bytes = b""
    pieces: list[tuple[int, int] | LongRecord] = field(default_factory=list)


def _record_chunks(path: Path, batch_bytes: int | None, cuts: _Cuts | None = None) -> Iterator[bytes | LongRecord]:
    """The file in pieces of about `batch_bytes`, each ending at a record boundary (a newline after an even
    number of quotes), every piece after the first with the header record in front. A record longer than
    MAX_RECORD_BYTES comes as a `LongRecord` in its place: memory stays bounded whatever one field holds.
    `cuts`, when given, is filled with where the pieces lie in the file."""
    cuts = cuts if cuts is not None else _Cuts()
    with open(path, "rb") as fh:
        if batch_bytes is None:
            yield fh.read()
            return
        head = pending = b""
        start = 0  # the file offset of buf[0]
        carry = 0  # bytes after the last cut: read again at the front of the next piece rather than copied there
        yielded = False
        while True:
            data = fh.read(batch_bytes + carry)
            at_end = len(data) < batch_bytes + carry
            carry = 0
            buf = pending + data if pending else data
            if at_end:  # the end of the file: the rest is the last piece
                if head and len(buf) > MAX_RECORD_BYTES and _last_record_end(buf) == 0:
                    # the file ends inside one over-long record (closed by the end of the file if its quotes are)
                    cuts.pieces.append(LongRecord(buf[:1024], terminated=buf.count(b'"') % 2 == 0))
                    yield cuts.pieces[-1]
                    return
                if buf or not yielded:
                    cuts.head = head
                    cuts.pieces.append((start, start + len(buf)))
                    yield head + buf
                return
            if not head:
                end = _first_record_end(buf)
                if end == 0:  # the header is longer than a batch: read on
                    pending = buf
                    continue
                head, buf = buf[:end], buf[end:]
                start += end
                cuts.head = head
            end = _last_record_end(buf)
            if end == 0:  # no record ends in this piece (a huge quoted field): read on
                if len(buf) > MAX_RECORD_BYTES:  # buf is one record's start: skip to its end
                    rest = _skip_record(fh, buf, batch_bytes)
                    cuts.pieces.append(LongRecord(buf[:1024], terminated=rest is not None))
                    yield cuts.pieces[-1]
                    if rest is None:
                        return
                    yielded, pending = True, rest
                    start = fh.tell() - len(rest)
                    continue
                pending = buf
                continue
            cuts.pieces.append((start, start + end))
            yield b"".join((head, memoryview(buf)[:end]))  # one copy
            yielded, pending = True, b""
            start += end
            carry = len(buf) - end
            fh.seek(start)


def _replayed_chunks(path: Path, cuts: _Cuts) -> Iterator[bytes | LongRecord]:
    """The pieces `_record_chunks` cut, read again from their byte ranges."""
    with open(path, "rb") as fh:
        for piece in cuts.pieces:
            if isinstance(piece, LongRecord):
                yield piece
                continue
            start, end = piece
            fh.seek(start)
            yield cuts.head + fh.read(end - start)


def _skip_record(fh, start: bytes, block: int) -> bytes | None:
    """Read past the record that `start` begins (it holds no record end): the bytes after its end, or None
    when the file ends first. Only the quote count's parity is kept, never the record."""
    odd = start.count(b'"') % 2
    while data := fh.read(block):
        pos = 0
        while (newline := data.find(b"\n", pos)) >= 0:
            odd ^= data.count(b'"', pos, newline) % 2
            if not odd:
                return data[newline + 1:]
            pos = newline + 1
        odd ^= data.count(b'"', pos) % 2
    return None


def _count_quotes(buf: bytes, end: int) -> int:
    """The number of double quotes in buf[:end]: numpy compares the bytes in bulk, under half the CPU of
    `bytes.count` (a 452 MB data.csv cut in 12 MB pieces: 0.23 -> 0.08 s)."""
    if end <= 0:
        return 0
    return int(np.count_nonzero(np.frombuffer(buf, dtype=np.uint8, count=end) == 0x22))


def _first_record_end(buf: bytes) -> int:
    end = buf.find(b"\n")
    while end >= 0 and buf.count(b'"', 0, end) % 2:
        end = buf.find(b"\n", end + 1)
    return end + 1


def _last_record_end(buf: bytes) -> int:
    end = buf.rfind(b"\n")
    quotes = _count_quotes(buf, end + 1)
    while end >= 0 and quotes % 2:
        before = buf.rfind(b"\n", 0, end)
        quotes -= buf.count(b'"', before + 1, end + 1)
        end = before
    return end + 1


def _with_nul_marks(df: pl.DataFrame, header: list[str]) -> pl.DataFrame:
    return df.with_columns(pl.any_horizontal([pl.col(c).str.contains("\x00", literal=True) for c in header])
                           .fill_null(False).alias(HAS_NUL))


def _read_polars(data: bytes, header: list[str], encoding: str, columns: Sequence[str] | None = None
                 ) -> pl.DataFrame:
    """`columns`: these of the header only (polars still splits every field, but makes no column of the
    others)."""
    # null_values: "" (a quoted empty field) and an unquoted empty field mean the same, no value (the csv
    # module path does the same)
    if columns is not None:
        df = pl.read_csv(data, infer_schema=False, has_header=True, encoding=encoding, raise_if_empty=False,
                         null_values="", columns=[header.index(c) for c in columns])
        header = list(columns)
    else:
        df = pl.read_csv(data, infer_schema=False, has_header=True, encoding=encoding, raise_if_empty=False,
                         null_values="")
    if df.columns != header:  # polars de-duplicates or trims names; the header check ran before
        df.columns = header
    df = df.with_row_index(ROW, offset=1).with_columns(pl.col(ROW).cast(pl.Int64), pl.lit(False).alias(UNSPLIT))
    return _with_nul_marks(df, header) if b"\x00" in data else df  # rare: only then is every field searched


def _is_utf8(path: Path) -> bool:
    decoder = codecs.getincrementaldecoder("utf-8")()
    with open(path, "rb") as fh:
        try:
            while chunk := fh.read(1 << 20):
                decoder.decode(chunk)
            decoder.decode(b"", final=True)
        except UnicodeDecodeError:
            return False
    return True


class _RecordTooLong(Exception):
    """The record `_LineTap` was reading grew past MAX_RECORD_BYTES: skipped to its end, not held."""

    def __init__(self, record: LongRecord):
        super().__init__()
        self.record = record


class _LineTap:
    """Feeds lines to csv.reader, remembers the text of the record being parsed, and keeps memory bounded: a
    record (the lines since the last `take`) that grows past MAX_RECORD_BYTES characters is skipped to its end
    (a line end after an even number of quotes, as `_record_chunks` finds it) and raises `_RecordTooLong`
    instead of being read whole (one line of a gigabyte is never held)."""

    def __init__(self, fh: io.TextIOBase):
        self.fh = fh
        self.buffer: list[str] = []
        self.held = 0  # characters in `buffer`
        self.read = 0  # characters read from the file, for the batches' size

    def __iter__(self) -> Iterator[str]:
        return self

    def __next__(self) -> str:
        limit = MAX_RECORD_BYTES
        line = self.fh.readline(limit - self.held + 1)
        if not line:
            raise StopIteration
        self.read += len(line)
        if self.held + len(line) > limit:
            head = ("".join(self.buffer) + line[:1024])[:1024]
            odd = (sum(part.count('"') for part in self.buffer) + line.count('"')) % 2
            self.buffer, self.held = [], 0
            terminated = self._skip(odd, ended=line[-1] in "\r\n")
            raise _RecordTooLong(LongRecord(head.encode(), terminated))
        self.buffer.append(line)
        self.held += len(line)
        return line

    def _skip(self, odd: int, ended: bool) -> bool:
        """Read past the rest of an over-long record (its last line ended already when `ended`, its quotes so far
        odd when `odd`): whether it ends before the file does."""
        while not ended or odd:
            part = self.fh.readline(1 << 20)
            if not part:
                return False
            self.read += len(part)
            odd ^= part.count('"') % 2
            ended = part[-1] in "\r\n"
        return True

    def take(self) -> str:
        text = "".join(self.buffer)
        self.buffer, self.held = [], 0
        return text


def _next_record(reader: Iterator[list[str]]) -> list[str]:
    """The reader's next record, its fields as long as a record may be: `_LineTap` bounds the record, and the csv
    module's own limit (128 KiB a field by default, a process-wide setting) would refuse fields that polars reads."""
    saved = csv.field_size_limit(MAX_RECORD_BYTES + 1)
    try:
        return next(reader)
    finally:
        csv.field_size_limit(saved)


def _splits_into_rows(text: str, n_fields: int) -> bool:
    """Whether `text` reads as CSV records of exactly `n_fields` fields each (blank lines aside)."""
    try:
        return all(len(record) == n_fields for record in csv.reader(io.StringIO(text, newline=""), strict=True)
                   if record)
    except csv.Error:
        return False


def _csv_module_batches(path: Path, header: list[str], raw_table: str, batch_bytes: int | None
                        ) -> Iterator[tuple[pl.DataFrame, list[Reject]]]:
    """Slow path for files polars refuses: parse record by record, quarantine records that do not fit. The
    records come in batches of about `batch_bytes` characters (None: one batch), numbered on across them, so a big
    file with one bad row costs the memory of a batch, not of the file (a 452 MB data.csv: 3 GB when it was
    read in one batch)."""
    n = len(header)
    with open(path, encoding="utf-8-sig", errors="replace", newline="") as fh:
        tap = _LineTap(fh)
        reader = csv.reader(tap, strict=True)
        next(reader)  # header, checked by the caller
        tap.take()
        row = 0
        records: list[list[str | None]] = []
        rows: list[int] = []
        extras: list[str | None] = []
        rejects: list[Reject] = Spool()
        batch_start = tap.read
        while True:
            if batch_bytes is not None and tap.read - batch_start >= batch_bytes and (records or rejects):
                yield _csv_batch(header, records, rows, extras, rejects)
                records, rows, extras, rejects = [], [], [], Spool()
                batch_start = tap.read
            try:
                fields = _next_record(reader)
            except StopIteration:
                break
            except _RecordTooLong as err:
                row += 1  # it keeps its row number, as in `CsvSource.batches`
                rejects.append(err.record.reject(row, raw_table))
                continue
            except csv.Error as err:
                row += 1
                at_eof = "unexpected end of data" in str(err)
                text = tap.take()
                first, _, rest = text.partition("\n")
                if at_eof and rest.strip() and _splits_into_rows(rest, n):
                    # A quote opened on this line is never closed: the record ran to the end of the file and took
                    # every later line with it. When those lines are rows of the header's fields (not the rest of
                    # a multi-line field cut off), the line is left out and they are read again as rows of their
                    # own (a runaway record is at most MAX_RECORD_BYTES: `_LineTap`).
                    rejects.append(Reject(
                        f"row {row}", "csv_malformed",
                        f"row {row} cannot be split into fields: a quote opened on its line is never closed (the "
                        "file ends inside it). Fix the quoting of this row; the lines after it are read as rows of "
                        "their own", raw_text=first + "\n", target_table=raw_table))
                    tap = _LineTap(io.StringIO(rest))
                    reader = csv.reader(tap, strict=True)
                    batch_start = tap.read
                    continue
                # a quote closed only on a later line takes the rows written on the lines between into this
                # record: say so, or they would vanish unnamed (rows are records: the next one is row + 1)
                lines = text.count("\n") + (0 if text.endswith("\n") else 1)
                swallowed = (f"; it runs over {lines} lines of the file{' to its end' if at_eof else ''}, so any "
                             "row written on its later lines was read into it and is not loaded"
                             if lines > 1 else "")
                rejects.append(Reject(
                    f"row {row}", "csv_malformed",
                    f"row {row} cannot be split into fields ({err}): a quote is not closed or is followed by text"
                    f"{'; the file ends inside a quoted field (cut off?)' if at_eof else ''}. "
                    "Fix the quoting of this row" + swallowed,
                    raw_text=text, target_table=raw_table,
                ))
                continue  # csv.reader starts a fresh record on the next line
            row += 1
            text = tap.take()
            if not fields:  # blank line: polars numbers it too, then it is dropped as blank
                records.append([None] * n)
                rows.append(row)
                extras.append(None)
                continue
            values: list[str | None] = [f if f != "" else None for f in fields]
            if len(values) != n:
                kind = "more" if len(values) > n else "fewer"
                rejects.append(Reject(
                    f"row {row}", "field_count",
                    f"row {row} has {len(values)} fields but the header has {n} ({kind} than expected"
                    f"{': an unquoted comma inside a value?' if kind == 'more' else ': truncated row?'})",
                    raw_text=text, target_table=raw_table,
                ))
            records.append((values + [None] * n)[:n])
            extras.append(json.dumps(values[n:], ensure_ascii=False) if len(values) > n else None)
            rows.append(row)
    yield _csv_batch(header, records, rows, extras, rejects)


def _csv_batch(header: list[str], records: list[list[str | None]], rows: list[int], extras: list[str | None],
               rejects: list[Reject]) -> tuple[pl.DataFrame, list[Reject]]:
    data = {h: [r[i] for r in records] for i, h in enumerate(header)}
    df = pl.DataFrame(data, schema={h: pl.String for h in header})
    unsplit = {int(r.location.split()[1]) for r in rejects if r.check == "field_count"}
    df = df.with_columns(pl.Series(ROW, rows, dtype=pl.Int64), pl.Series(EXTRA, extras, dtype=pl.String),
                         pl.Series(UNSPLIT, [r in unsplit for r in rows], dtype=pl.Boolean))
    return df.select([ROW, *header, EXTRA, UNSPLIT]), rejects


def sha256_texts(values: pl.Series) -> pl.Series:
    """Hex sha256 of each UTF-8 text (null stays null)."""
    # polars-hash hashes inside polars: no Python object per value, about 0.6x the CPU of hashlib per value
    # and well under DuckDB's sha256; the same hex text
    import polars_hash

    return values.to_frame().select(polars_hash.col(values.name).chash.sha2_256()).to_series()


def md5_texts(values: pl.Series) -> pl.Series:
    """Hex md5 of each UTF-8 text (null stays null); small files only (polars-hash has no md5)."""
    data = values.cast(pl.Binary).to_list()
    return pl.Series(values.name, [None if v is None else hashlib.md5(v).hexdigest() for v in data], dtype=pl.String)


def raw_frame(loaded: LoadedCsv, file_id: str) -> pl.DataFrame:
    """file_id, row_number, content_sha256 (sha256 of row_json), row_json."""
    df = loaded.frame
    return pl.DataFrame({
        "file_id": pl.Series([file_id] * df.height, dtype=pl.String),
        ROW: df[ROW].cast(pl.Int64),
        "content_sha256": sha256_texts(df[ROW_JSON]),
        ROW_JSON: df[ROW_JSON],
    })


# --- typed parsing (expressions over source text columns) -----------------------------------------

TRUE_TEXT = ("true", "1", "1.0", "t", "yes")
FALSE_TEXT = ("false", "0", "0.0", "f", "no")
TIME_FORMATS = ("%Y-%m-%dT%H:%M:%S%.f", "%Y-%m-%d %H:%M:%S%.f", "%m/%d/%Y, %I:%M:%S %p", "%m/%d/%Y, %H:%M:%S")


def as_int(col: str) -> pl.Expr:
    """Integer text (`"3"`, or `"3.0"` as pandas writes integer columns that had gaps) -> Int64."""
    text = pl.col(col).str.strip_chars()
    direct = text.cast(pl.Int64, strict=False)
    as_float = text.cast(pl.Float64, strict=False)
    integral = pl.when(as_float.is_finite() & (as_float == as_float.floor()) & (as_float.abs() < 2**53)) \
        .then(as_float).cast(pl.Int64, strict=False)
    return pl.coalesce(direct, integral)


def as_bool(col: str) -> pl.Expr:
    text = pl.col(col).str.strip_chars().str.to_lowercase()
    return pl.when(text.is_in(TRUE_TEXT)).then(True).when(text.is_in(FALSE_TEXT)).then(False) \
        .otherwise(None).cast(pl.Boolean)


def as_time(col: str) -> pl.Expr:
    """The four time formats of spec/formats.md §D.6 -> naive timestamp (participant-local)."""
    text = pl.col(col).str.strip_chars()
    return pl.coalesce([text.str.to_datetime(f, strict=False, time_unit="us") for f in TIME_FORMATS])


BOOL_TEXT = {"True": True, "False": False, "true": True, "false": False, "TRUE": True, "FALSE": False,
             "1": True, "0": False, "1.0": True, "0.0": False}


def _primary_time_format(values: pl.Series) -> str:
    """The first of TIME_FORMATS that parses the column's first value (files use one format throughout)."""
    first = values.drop_nulls().head(1)
    for fmt in TIME_FORMATS:
        if first.len() and first.str.strip_chars().str.to_datetime(fmt, strict=False, time_unit="us").null_count() == 0:
            return fmt
    return TIME_FORMATS[0]


def _integral_text(col: str) -> pl.Expr:
    """Integer text with a ".0" suffix (`"3.0"`) -> Int64, exactly as `as_int` reads it (below 2**53)."""
    value = pl.col(col).str.strip_suffix(".0").cast(pl.Int64, strict=False)
    return pl.when(value.is_between(1 - 2**53, 2**53 - 1)).then(value)


def typed(df: pl.DataFrame, *, ints: dict[str, str] | None = None, bools: dict[str, str] | None = None,
          times: dict[str, str] | None = None) -> pl.DataFrame:
    """Add typed columns `{output: source column}`: an exact fast parse for every row, then the tolerant
    parse (`as_int`, `as_bool`, `as_time`) only for the rows the fast one missed (usually none; an integer
    column with `"3.0"` texts first gets `_integral_text`)."""
    ints, bools, times = ints or {}, bools or {}, times or {}
    df = df.with_columns(
        *[pl.col(s).cast(pl.Int64, strict=False).alias(o) for o, s in ints.items()],
        *[pl.col(s).replace_strict(BOOL_TEXT, default=None, return_dtype=pl.Boolean).alias(o) for o, s in bools.items()],
        *[pl.col(s).str.to_datetime(_primary_time_format(df[s]), strict=False, time_unit="us").alias(o)
          for o, s in times.items()],
    )
    source = {**ints, **bools, **times}
    slow = {**{o: as_int(s) for o, s in ints.items()}, **{o: as_bool(s) for o, s in bools.items()},
            **{o: as_time(s) for o, s in times.items()}}
    if not source:
        return df

    def missed(columns: Sequence[str]) -> list[str]:
        found = df.select([(pl.col(source[o]).is_not_null() & pl.col(o).is_null()).any().alias(o) for o in columns])
        return [o for o, m in found.row(0, named=True).items() if m]

    redo = missed(list(source))
    if any(o in ints for o in redo):  # "3.0": an integer column with gaps as pandas writes it (action_x, action_y)
        df = df.with_columns(pl.coalesce(o, _integral_text(ints[o])).alias(o) for o in redo if o in ints)
        redo = missed(redo)
    if redo:
        rows = pl.any_horizontal([pl.col(source[o]).is_not_null() & pl.col(o).is_null() for o in redo])
        fix = df.filter(rows).select(ROW, *[slow[o].alias(o) for o in redo])
        df = df.update(fix, on=ROW)
    return df


def flag_lists(df: pl.DataFrame, pairs: Sequence[tuple[pl.Expr, str]]) -> pl.Series:
    """A List[String] of the flag names whose condition holds, per row (in the order given). Built through a
    bit mask and a small lookup table, since most rows share a handful of combinations."""
    mask = pl.sum_horizontal([cond.fill_null(False).cast(pl.UInt32) * (1 << i) for i, (cond, _) in enumerate(pairs)])
    m = df.select(mask.cast(pl.UInt32).alias("__m"))
    values = m["__m"].unique().to_list()
    lookup = pl.DataFrame({"__m": values, "flags": [[name for i, (_, name) in enumerate(pairs) if v >> i & 1]
                                                    for v in values]},
                          schema={"__m": pl.UInt32, "flags": pl.List(pl.String)})
    return m.join(lookup, on="__m", how="left", maintain_order="left")["flags"]


def json_list_ok(col: str) -> pl.Expr:
    """True where the text is a JSON list (vectorised: polars' JSON parser, no Python per row)."""
    text = pl.col(col)
    return text.str.strip_chars().str.starts_with("[") & text.str.json_path_match("$").is_not_null()


_JSON_INT = r"(?:0|-?[1-9][0-9]*)"
_JSON_INT_LIST = rf"\[{_JSON_INT}(?:,{_JSON_INT})*\]"
# a JSON list of lists of integers without spaces, as the H-ARC interface writes selected_data ([[row, col], ...])
# and copy_paste_data ([[row, col, colour], ...]): every text this matches is a JSON list
PLAIN_INT_LISTS = rf"^\[(?:{_JSON_INT_LIST}(?:,{_JSON_INT_LIST})*)?\]$"


def dense_json(col: str) -> pl.Expr:
    """True where a long text holds far more JSON arrays and objects than any record needs (`dense_json_reason`,
    counted the same way): not to be parsed."""
    text = pl.col(col)
    n = text.str.len_bytes()
    brackets = text.str.count_matches("[", literal=True) + text.str.count_matches("{", literal=True)
    return (n >= DENSE_JSON_FROM_BYTES) & (brackets * DENSE_JSON_BYTES_PER_CONTAINER > n)


def json_list_ok_series(values: pl.Series) -> pl.Series:
    """`json_list_ok` of each text (false where the text is null, as there): a text of PLAIN_INT_LISTS's shape is
    a JSON list (one regex scan), and only the others go through polars' JSON parser (573k rows of data.csv's two
    JSON columns: about 0.3 -> 0.1 s of CPU), but for a long text far too dense to parse (`dense_json`: false;
    polars' parser took 2 GB for a 15 MB field of `[[0]],` repeated)."""
    plain = values.str.contains(PLAIN_INT_LISTS)
    rest = (~plain).fill_null(False).arg_true()
    if rest.len():
        others = values.gather(rest).to_frame("t")
        parsable = others.select(~dense_json("t").fill_null(False)).to_series().arg_true()
        ok = pl.repeat(False, len(rest), dtype=pl.Boolean, eager=True)
        if parsable.len():
            ok = ok.scatter(parsable, others[parsable].select(json_list_ok("t")).to_series())
        plain = plain.scatter(rest, ok)
    return plain.fill_null(False)


GRID_PROBLEMS = {
    1: "is empty",
    2: "does not start and end with '|' (expected rows of digits between bars, e.g. |012|345|)",
    3: "contains a character that is not a digit 0-9 or '|'",
    4: "has an empty row (two adjacent bars, or only bars)",
    5: "has rows of uneven length",
    6: "is larger than the 30 x 30 maximum",
}


def with_grid_columns(df: pl.DataFrame, col: str, prefix: str) -> pl.DataFrame:
    """Add `{prefix}_h`, `{prefix}_w` (null unless well formed) and `{prefix}_code` (0 = well formed, else a
    key of GRID_PROBLEMS) for a grid-string column, plus the raw shape numbers the reasons quote.

    Well formed (spec/formats.md §D.6): `|` at both ends and between rows, every row non-empty, digits
    0-9 only, all rows the same length, at most 30 x 30. Two passes so that the split runs once, over the
    distinct grids only (a task's grids repeat on most of its rows), joined back by value; unless the
    column's first GRID_SAMPLE values are mostly distinct, then the split runs on every row.
    """
    names = [f"{prefix}_{k}" for k in ("shape_ok", "hraw", "wmin", "wmax", "code", "h", "w")]
    sample = df[col].head(GRID_SAMPLE)
    if 2 * sample.n_unique() > sample.len():  # mostly distinct (a participant's output grids): the unique values
        # and the join back would cost more than they save (573k rows: 1.2 -> 0.85 s of CPU)
        return df.with_columns(_grid_columns(df.select(col), col, prefix).select(names))
    distinct = _grid_columns(df.select(pl.col(col).unique()), col, prefix)
    return df.join(distinct.select(col, *names), on=col, how="left", maintain_order="left", nulls_equal=True)


GRID_SAMPLE = 2048  # values of a grid column looked at to decide whether its distinct values are worth finding


def _grid_columns(df: pl.DataFrame, col: str, prefix: str) -> pl.DataFrame:
    """The grid columns of `with_grid_columns` (plus `{prefix}_shape_ok`). Most grids are well formed: one
    regex per row, built from the row's first row length (`^(?:\\|[0-9]{w})+\\|$`, at most MAX_SIDE distinct
    patterns) and the text's length settle those; only the rest are split into rows and measured
    (`_grid_columns_split`), so the numbers the reasons quote are the same either way (573k output grids: about
    half the CPU of splitting every grid)."""
    s = pl.col(col)
    first = s.str.slice(1).str.find("|", literal=True)  # the first row's length (null: no second bar)
    pattern = pl.when(first.is_between(1, MAX_SIDE)).then(pl.format(r"^(?:\|[0-9]{{{}}})+\|$", first))
    fast = df.select(
        pl.col(col),
        s.str.contains(pattern).fill_null(False).alias("ok"),
        # a grid the pattern matches is 1 + h * (w + 1) bytes long: its height without counting its bars
        ((s.str.len_bytes().cast(pl.Int64) - 1) // (first.cast(pl.Int64) + 1)).alias("hraw"),
        first.cast(pl.Int64).alias("w"),
    )
    h, w = pl.col("hraw"), pl.col("w")
    code = pl.when(h > MAX_SIDE).then(6).otherwise(0).cast(pl.Int8)
    fast = fast.select(
        pl.col(col), pl.col("ok"),
        pl.lit(True).alias(f"{prefix}_shape_ok"),
        h.alias(f"{prefix}_hraw"), w.alias(f"{prefix}_wmin"), w.alias(f"{prefix}_wmax"),
        code.alias(f"{prefix}_code"),
        pl.when(code == 0).then(h).alias(f"{prefix}_h"), pl.when(code == 0).then(w).alias(f"{prefix}_w"),
    )
    ok = fast["ok"]
    names = [f"{prefix}_{k}" for k in ("shape_ok", "hraw", "wmin", "wmax", "code", "h", "w")]
    if not ok.all():  # the other grids (null, malformed, wider than MAX_SIDE): measured the long way
        rest = (~ok).arg_true()
        slow = _grid_columns_split(df.select(pl.col(col).gather(rest)), col, prefix)
        fast = fast.with_columns(fast[n].scatter(rest, slow[n]) for n in names)
    return df.with_columns(fast.select(names).get_columns())


def _grid_columns_split(df: pl.DataFrame, col: str, prefix: str) -> pl.DataFrame:
    s = pl.col(col)
    lengths = s.str.strip_chars("|").str.split("|").list.eval(pl.element().str.len_bytes())
    df = df.with_columns(
        (s.str.starts_with("|") & s.str.ends_with("|")).alias(f"{prefix}_barred"),
        s.str.contains(r"[^0-9|]").alias(f"{prefix}_foreign"),  # a character other than a digit or a bar
        (s.str.count_matches("|", literal=True) - 1).cast(pl.Int64).alias(f"{prefix}_hraw"),
        lengths.list.min().cast(pl.Int64).alias(f"{prefix}_wmin"),
        lengths.list.max().cast(pl.Int64).alias(f"{prefix}_wmax"),
    )
    barred, foreign, h, wmin, wmax = (pl.col(f"{prefix}_{k}") for k in ("barred", "foreign", "hraw", "wmin", "wmax"))
    # rows of digits between bars (^\|([0-9]+\|)+$), from the two scans above: no empty row, not a lone bar
    df = df.with_columns((barred & ~foreign & ~s.str.contains("||", literal=True) & (s.str.len_bytes() > 1))
                         .alias(f"{prefix}_shape_ok"))
    shape_ok = pl.col(f"{prefix}_shape_ok")
    code = (
        pl.when(s.is_null()).then(1)
        .when(~barred).then(2)
        .when(foreign).then(3)
        .when(~shape_ok).then(4)
        .when(wmin != wmax).then(5)
        .when((h > MAX_SIDE) | (wmax > MAX_SIDE)).then(6)
        .otherwise(0).cast(pl.Int8)
    )
    return df.with_columns(code.alias(f"{prefix}_code")).with_columns(
        pl.when(pl.col(f"{prefix}_code") == 0).then(h).alias(f"{prefix}_h"),
        pl.when(pl.col(f"{prefix}_code") == 0).then(wmin).alias(f"{prefix}_w"),
    )


def grid_reason(col: str, prefix: str) -> pl.Expr:
    """The words for a malformed grid (evaluated on failing rows only)."""
    code = pl.col(f"{prefix}_code")
    s = pl.col(col)
    text = pl.col(f"{prefix}_code").replace_strict(GRID_PROBLEMS, default="", return_dtype=pl.String)
    detail = (
        pl.when(code == 3).then(pl.format(" ('{}')", s.str.extract(r"([^0-9|])", 1)))
        .when(code == 5).then(pl.format(" (shortest {} cells, longest {})", pl.col(f"{prefix}_wmin"),
                                        pl.col(f"{prefix}_wmax")))
        .when(code == 6).then(pl.format(" (it is {} x {})", pl.col(f"{prefix}_hraw"), pl.col(f"{prefix}_wmax")))
        .otherwise(pl.lit(""))
    )
    return pl.format(f"{col} {{}}{{}}", text, detail)


def grid_check(col: str, prefix: str, source_column: str | None = None) -> RowCheck:
    return RowCheck("grid_malformed", pl.col(f"{prefix}_code") != 0, grid_reason(col, prefix),
                    source_column or col, value=pl.col(col))


def grid_problems(values: Sequence[str | None]) -> pl.DataFrame:
    """The vectorised grid check on a list of strings: height, width, problem (null when well formed)."""
    df = with_grid_columns(pl.DataFrame({"g": list(values)}, schema={"g": pl.String}), "g", "__g")
    return df.select(pl.col("__g_h").alias("height"), pl.col("__g_w").alias("width"),
                     pl.when(pl.col("__g_code") != 0).then(grid_reason("g", "__g").str.strip_prefix("g "))
                     .alias("problem"))


# --- row checks -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class RowCheck:
    check: str  # rule id (quarantine.check_name)
    failed: pl.Expr  # true where the row fails; null counts as passing
    reason: pl.Expr  # text, evaluated on failing rows
    column: str | None = None  # source column at fault
    value: pl.Expr | None = None  # failing value (text)
    explain: Callable[[str | None], str] | None = None  # optional python refinement of the reason


def broken(structural: Sequence[RowCheck]) -> pl.Expr:
    """True where the row's fields are not what the header says: the loader could not split it, or a
    structural check fails. Such a row gets only that reject (see `apply_checks`)."""
    return pl.any_horizontal([pl.col(UNSPLIT), *[c.failed.fill_null(False) for c in structural]])


MAX_LISTED_ROWS = 10  # a key's rows a reason names: the first ones and how many (a key on 400,000 rows of a 300 MB
# file put all 400,000 row numbers into each of its 400,000 reasons: over 24 GB)


def listed_rows(row: str = ROW) -> pl.Expr:
    """In an aggregation over a key's rows: their row numbers in order as text for a reason, every one up to
    MAX_LISTED_ROWS, else the first MAX_LISTED_ROWS and how many there are."""
    first = pl.col(row).sort().head(MAX_LISTED_ROWS).cast(pl.String).str.join(", ")
    return pl.when(pl.len() > MAX_LISTED_ROWS).then(pl.format("{}, ... ({} rows in all)", first, pl.len())) \
        .otherwise(first)


def duplicate_rules(keys: list[str], check: str, shown: list[str] | None = None, *,
                    structural: Sequence[RowCheck] = (), content: str | None = ROW_HASH,
                    nulls_match: bool = False) -> tuple[Callable[[pl.DataFrame], pl.DataFrame], list[RowCheck]]:
    """A function adding the columns the two duplicate rules of a key read, and the rules: exact copies (the
    later copies go to quarantine) and conflicting rows (all of them go, since nobody can tell which one is
    right). The columns are whole-file facts, so a file read in batches gets them before its first batch.
    The conflict reason lists the key's rows that are not already quarantined as structurally broken.
    `prep(df, sorted_by_key=True)`: the rows of each key are adjacent (df is sorted by the key), so a key's
    rows are one run and the windows group by an integer run id instead of hashing the key texts (~15x less
    work on data.csv's 600k rows).
    `content`: the column that tells two rows of one key apart (default the hash of the row's fields); None
    when the key is the whole content (every field, by value), so rows of one key are copies and never conflict.
    `nulls_match`: an empty key field matches another empty one (default: a row with an empty key field is
    judged by neither rule). `shown`: the key's names in reasons (default `keys`)."""
    key_ok = pl.lit(True) if nulls_match else pl.all_horizontal([pl.col(k).is_not_null() for k in keys])
    distinct = pl.lit(1, pl.UInt32) if content is None else pl.col(content).n_unique()

    def prep(df: pl.DataFrame, *, sorted_by_key: bool = False) -> pl.DataFrame:
        group = pl.struct(keys).rle_id() if sorted_by_key else keys
        df = df.with_columns(
            pl.when(key_ok).then(pl.len().over(group)).alias("__dup_n"),
            pl.when(key_ok).then(distinct.over(group) if content is not None else distinct)
            .alias("__dup_distinct"),
            pl.when(key_ok).then(pl.col(ROW).min().over(group)).alias("__dup_first"),
        )
        conflicting = (pl.col("__dup_n") > 1) & (pl.col("__dup_distinct") > 1) & ~broken(structural)
        rows = df.filter(conflicting).group_by(keys).agg(listed_rows().alias("__dup_rows"))
        if rows.height == 0:  # the usual case: no join (it would hash every row's key) to add a null column
            return df.with_columns(pl.lit(None, pl.String).alias("__dup_rows"))
        return df.join(rows, on=keys, how="left", maintain_order="left")

    values = [pl.col(k).cast(pl.String).fill_null("(empty)") if nulls_match else pl.col(k) for k in keys]
    key_text = pl.format(", ".join(f"{k}={{}}" for k in shown or keys), *values)
    conflict = RowCheck(
        check, (pl.col("__dup_n") > 1) & (pl.col("__dup_distinct") > 1),
        pl.format("{} appears on rows {} with different contents; keep the right row and remove the others",
                  key_text, pl.col("__dup_rows")),
        value=key_text)
    copy = RowCheck(
        "duplicate_row", (pl.col("__dup_n") > 1) & (pl.col("__dup_distinct") == 1) & (pl.col(ROW) != pl.col("__dup_first")),
        pl.format("exact copy of row {} ({}); the first copy was loaded", pl.col("__dup_first"), key_text),
        value=key_text)
    return prep, [conflict, copy]


def _clipped(text: pl.Expr, limit: int = MAX_RAW_TEXT) -> pl.Expr:
    """`clip` (pipeline.ingest.base) in polars: a reason or value quoting a huge field is cut to `limit`
    characters before it is copied into Python, once per failing check."""
    over = text.str.len_chars().cast(pl.Int64) - limit
    return pl.when(over > 0).then(pl.format("{}... [{} more chars]", text.str.slice(0, limit), over)) \
        .otherwise(text)


SHOWN_CHARS = 200  # of a bad value quoted in a reason: the reason's explanation after it stays readable


def _shown(text: pl.Expr) -> pl.Expr:
    """A bad value as a reason quotes it (Python's repr), cut to SHOWN_CHARS first."""
    return _clipped(text, SHOWN_CHARS).map_elements(repr, return_dtype=pl.String)


REJECT_SLICE_ROWS = 20_000  # failing rows of one check whose rejects are made at once


def apply_checks(df: pl.DataFrame, checks: Sequence[RowCheck], target_table: str, *,
                 structural: Sequence[RowCheck] = (), raw_text: pl.Expr | None = None
                 ) -> tuple[list[Reject], pl.Series]:
    """Rejects for every failing (row, check), and a boolean Series: row has at least one failure.
    `raw_text`: the reject's raw_text, evaluated on failing rows only (default: the row_json column).

    A row failing a `structural` check (its fields are not what the header says) gets only that reject:
    the other checks would only repeat the same problem column by column.
    """
    checks = [*structural, *checks]
    if df.height == 0 or not checks:
        return [], pl.Series("bad", [False] * df.height, dtype=pl.Boolean)
    unsplit = pl.col(UNSPLIT)
    # each structural rule evaluated once (not again inside every other check's `~broken`)
    failing = [pl.col(f"__c{i}") for i in range(len(structural))]
    flags = df.with_columns(*[c.failed.fill_null(False).alias(f"__c{i}") for i, c in enumerate(structural)]) \
        .with_columns(pl.any_horizontal([unsplit, *failing]).alias("__structural_broken")).select(
            *[(f & ~unsplit).alias(f.meta.output_name()) for f in failing],
            *[(c.failed.fill_null(False) & ~pl.col("__structural_broken")).alias(f"__c{i}")
              for i, c in enumerate(checks) if i >= len(structural)],
            unsplit.alias("__unsplit_bad"))
    rejects: list[Reject] = Spool()  # a flood of bad rows waits on disk
    for i, c in enumerate(checks):
        mask = flags[f"__c{i}"]
        if not mask.any():
            continue
        value = c.value if c.value is not None else (pl.col(src(c.column)) if c.column and src(c.column)
                                                     in df.columns else pl.lit(None, pl.String))
        exprs = [pl.col(ROW), _clipped(c.reason.cast(pl.String)).alias("reason"),
                 _clipped(value.cast(pl.String)).alias("value"),
                 (pl.col(ROW_JSON) if raw_text is None else raw_text).alias("raw")]
        if c.explain is not None:  # it reads the whole value (the clipped one made a JSON error "at character 4096")
            exprs.append(value.cast(pl.String).alias("whole"))
        # only the columns this check reads are filtered (a row holding a huge field is copied once per failing
        # check otherwise, each copy of every column); rechunk: polars 2.1 panics ("i < self.len()", string
        # views) building a reason on the filtered rows of a frame of several chunks (a conflicting duplicate
        # key in a real-shaped data.csv)
        used = list(dict.fromkeys(name for e in exprs for name in e.meta.root_names()))
        # a slice of the failing rows at a time: a flood (every row of a batch failing) holds one slice's
        # reasons and texts, not the batch's
        failing_rows = mask.arg_true()
        for start in range(0, failing_rows.len(), REJECT_SLICE_ROWS):
            rows = failing_rows.slice(start, REJECT_SLICE_ROWS)
            bad = df.select(used)[rows].rechunk().select(exprs)
            for row, reason, val, raw, *whole in bad.iter_rows():
                if c.explain is not None:
                    reason = f"{reason}: {c.explain(whole[0])}"
                rejects.append(Reject(f"row {row}", c.check, reason, raw_text=raw, target_table=target_table,
                                      column=c.column, value=val))
            del bad
    any_bad = flags.select(pl.any_horizontal(pl.all()).alias("bad")).to_series()
    return rejects, any_bad


def required(column: str, what: str | None = None) -> RowCheck:
    return RowCheck("missing_value", pl.col(src(column)).is_null(),
                    pl.lit(f"{column} is empty; every row needs {what or 'a value here'}"), column)


def not_blank(column: str, what: str) -> RowCheck:
    """`required`, and a value of spaces only counts as empty too (an id or name no one can tell apart)."""
    text = pl.col(src(column))
    return RowCheck("missing_value", text.is_null() | (text.str.strip_chars() == ""),
                    pl.lit(f"{column} is empty; every row needs {what}"), column)


def parse_failed(column: str, typed: pl.Expr, expected: str, check: str) -> RowCheck:
    """The source text is present but did not parse as `expected`."""
    return RowCheck(check, pl.col(src(column)).is_not_null() & typed.is_null(),
                    pl.format(f"{column} is {{}}, expected {expected}",
                              _shown(pl.col(src(column)))), column)


def int_parse_failed(column: str, typed: pl.Expr, expected: str) -> list[RowCheck]:
    """The source text is present but did not parse as an integer (`as_int`): `not_an_integer` when it is no
    whole number, `out_of_range` when it is one the column cannot hold (past 64 bits; or written as a decimal,
    "3.0", past 2**53, where a float no longer holds every integer)."""
    text = pl.col(src(column)).str.strip_chars()
    as_float = text.cast(pl.Float64, strict=False)
    whole = (as_float.is_finite() & (as_float == as_float.floor())).fill_null(False)
    failed = pl.col(src(column)).is_not_null() & typed.is_null()
    shown = pl.col(src(column)).map_elements(repr, return_dtype=pl.String)
    return [
        RowCheck("not_an_integer", failed & ~whole, pl.format(f"{column} is {{}}, expected {expected}", shown), column),
        RowCheck("out_of_range", failed & whole,
                 pl.when(text.str.contains(r"^[+-]?[0-9]+$"))
                 .then(pl.format(f"{column} is {{}}, outside -2**63..2**63-1 (the 64-bit integers)", shown))
                 .otherwise(pl.format(f"{column} is {{}}, outside -2**53..2**53, the whole numbers read exactly "
                                      "when written as a decimal or with an exponent; write it as digits only",
                                      shown)), column),
    ]


def out_of_range(column: str, typed: pl.Expr, lo: int, hi: int, check: str = "out_of_range") -> RowCheck:
    return RowCheck(check, typed.is_not_null() & ((typed < lo) | (typed > hi)),
                    pl.format(f"{column} is {{}}, outside {lo}-{hi}", typed), column)


def not_in(column: str, allowed: Sequence[str], check: str = "out_of_vocabulary") -> RowCheck:
    col = pl.col(src(column))
    shown = ", ".join(allowed) if len(allowed) <= 6 else ", ".join(allowed[:6]) + ", ..."
    return RowCheck(check, col.is_not_null() & ~col.is_in(list(allowed)),
                    pl.format(f"{column} is {{}}, not one of {shown}",
                              _shown(col)), column)


def json_explain(column: str) -> Callable[[str | None], str]:
    def explain(value: str | None) -> str:
        too_dense = dense_json_reason(value or "", "the text")
        if too_dense is not None:
            return too_dense
        try:
            parsed = json.loads(value or "")
        except json.JSONDecodeError as err:
            return f"{json_message(err)} at character {err.pos}"
        except RecursionError:  # a hostile row must not take its whole file down
            return "it is nested too deeply to read"
        except ValueError as err:  # (not a JSONDecodeError)
            return NUMBER_TOO_LONG if is_number_too_long(err) else str(err)
        if isinstance(parsed, list):  # Python's json reads what the JSON standard (and polars) does not
            if lone_surrogates(parsed, value):
                return "it holds a lone surrogate escape (half of a UTF-16 pair), which no UTF-8 text can hold"
            return ("it holds NaN, Infinity or a number too large for a float (1e400), which JSON does not "
                    "allow")
        return f"it parses as a JSON {type(parsed).__name__}, not a list"
    return explain


def header_repeated(header: Sequence[str]) -> RowCheck:
    """A row that is the header line again (two files joined end to end, the second one's BOM included):
    one reject saying so, rather than one per column that holds a column name instead of a value."""
    first, *rest = header
    return RowCheck(
        "header_repeated",
        pl.all_horizontal([pl.col(src(first)).str.strip_prefix("\ufeff") == first,
                           *[pl.col(src(c)) == c for c in rest]]),
        pl.lit("this row repeats the header line (column names, not data): the file looks like two files joined "
               "together; remove the line"))


def short_row(header: Sequence[str], last_required: bool, ends_with_newline: bool, n_rows: int) -> RowCheck | None:
    """Rows that stop early (polars fills the missing trailing fields with null): detectable when the last
    column may not be empty. The reason says how many trailing fields are missing."""
    if not last_required:
        return None
    n = len(header)
    cols = [src(c) for c in header]
    trailing = pl.sum_horizontal([pl.all_horizontal([pl.col(c).is_null() for c in cols[k:]]).cast(pl.Int64)
                                  for k in range(n)])
    first_missing = trailing.replace_strict({k: header[n - k] for k in range(1, n + 1)}, default=None,
                                            return_dtype=pl.String)
    hint = "" if ends_with_newline else "; the file ends without a newline, so it was probably cut off"
    return RowCheck(
        "field_count", pl.col(cols[-1]).is_null(),
        pl.format(f"row ends early: the last {{}} of {n} fields are empty, from column {{}} on (truncated row?){{}}",
                  trailing, first_missing, pl.when(pl.col(ROW) == n_rows).then(pl.lit(hint)).otherwise(pl.lit(""))),
        header[-1],
    )
