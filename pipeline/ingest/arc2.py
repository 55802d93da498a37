"""ARC-AGI-2 human testing attempt log (spec/formats.md §H), also the layout of human audits of ARC-TGI tasks.

One CSV, one row per attempt: one session's attempt at one test pair of one task. Recognised by its columns
(`task_ID, task_set, test_index, session_ID, start_time_seconds, duration_seconds, submissions,
correct_submissions`, any order). Every row is kept as read in raw_arc2__csv_rows; rows that pass the checks
land in core_arc2__attempts, one row per input row.

Quarantined, because the row cannot be true: an empty task_ID or session_ID; a test_index, submissions or
correct_submissions that is not a whole number, or is negative; a negative or non-finite start time or
duration; more correct submissions than submissions. Quarantined because it is there already: a row equal in
every value to an earlier good row of the file (`duplicate_row`, "exact copy of row N": the first is loaded),
or to a row another file brought (`duplicate_across_files`, naming that file and row; COPY_KEY below). Values
are compared as read (typed, spaces around them stripped), not as bytes: a CRLF or BOM copy, a copy with blank
lines or under another folder holds the same rows. Landed with a flag, because the row is only unusual:
`zero_submissions` (the participant moved on without submitting: common in the public file),
`multiple_correct` (2 correct submissions: one row in the public file), `nonstandard_task_set` (not
`Public Train` / `Public Eval`, e.g. `ARC-TGI` in an audit), `nonstandard_task_id` (not 8 hex characters, e.g.
an ARC-TGI task id), `no_duration` (start or duration left empty: the row counts, its time does not).

Solved within 2 (`solved_within_2`, the one definition every table uses): the row gives counts, not the order of
its submissions, so a row counts as solved within two attempts only where that is certain: at least one correct
submission and either at most 2 submissions, or at most one wrong one (submissions - correct_submissions <= 1:
of the first two submissions at most one was wrong, so one was correct). Where it cannot be known (e.g. 3
submissions, 1 correct: the correct one may have been the third) the row is not counted, so counts built on it
are lower bounds.

A log of PIECES_FROM_BYTES or more is read in pieces of about PIECE_ROWS rows (`_AttemptLog`): memory bounded by
the piece (and 16 bytes per distinct row, `_KeptKeys`), the same rows, rejects and flags as the log read whole.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import replace
from pathlib import Path

import polars as pl

from pipeline.core.spool import Spool
from pipeline.ingest.base import FileContext, ReaderOutput, Reject
from pipeline.ingest.buckets import read_ipc, scratch_folder
from pipeline.ingest.formats import Head, InputFormat, register
from pipeline.ingest.harc_csv import (
    ROW,
    CsvSource,
    LoadedCsv,
    RowCheck,
    Variant,
    apply_checks,
    as_int,
    duplicate_rules,
    flag_lists,
    header_columns,
    header_repeated,
    int_parse_failed,
    load_csv,
    match_variant,
    not_blank,
    parse_failed,
    piece_bytes,
    raw_frame,
    read_header,
    short_row,
    src,
    with_row_json,
    without_long_rows,
)
from schemas import get_table
from schemas.arc2 import ARC2_TASK_SETS

RAW = "raw_arc2__csv_rows"
ATTEMPTS = "core_arc2__attempts"
TABLES = (RAW, ATTEMPTS)
COLUMNS = ("task_ID", "task_set", "test_index", "session_ID", "start_time_seconds", "duration_seconds",
           "submissions", "correct_submissions")
VARIANTS = (Variant("ARC-AGI-2 human testing attempt log", COLUMNS),)
ARC_ID = r"^[0-9a-f]{8}$"


def _float(col: str) -> pl.Expr:
    return pl.col(src(col)).str.strip_chars().cast(pl.Float64, strict=False)


def _negative(column: str, typed: str, check: str, unit: str) -> RowCheck:
    return RowCheck(check, pl.col(typed) < 0, pl.format(f"{column} is {{}}, a negative {unit} cannot be true",
                                                         pl.col(src(column))), column)


# The columns that say what an attempt row is (schemas/tables.toml `content_key`, by value: `10` and `10.0` are
# one start time): equal in all of them, two rows are one attempt given twice, within a file (`duplicate_row`)
# or across files (`duplicate_across_files`, pipeline/ingest/commit.py).
COPY_KEY = get_table(ATTEMPTS).content_key
_TYPED_FROM = {"task_id": "task_ID", "session_id": "session_ID", "start_offset_s": "start_time_seconds",
               "attempt_duration_s": "duration_seconds", "n_attempt_submissions": "submissions",
               "n_correct_submissions": "correct_submissions"}
_copies_prep, (_, _COPY) = duplicate_rules(list(COPY_KEY), "duplicate_row", [_TYPED_FROM.get(k, k) for k in COPY_KEY],
                                           content=None, nulls_match=True)


def solved_within_2(submissions: pl.Expr, correct: pl.Expr) -> pl.Expr:
    """True when one of the attempt's first two submissions was certainly correct (see the module docstring):
    correct >= 1 and (submissions <= 2 or submissions - correct <= 1). Unknowable rows are False."""
    return (correct >= 1) & ((submissions <= 2) | (submissions - correct <= 1))


def _row_checks() -> list[RowCheck]:
    """The rules of one row (besides the structural ones, `_structural`)."""
    return [
        not_blank("task_ID", "the task id"), not_blank("session_ID", "the session id"),
        not_blank("test_index", "the test pair index"), not_blank("submissions", "the number of submissions"),
        not_blank("correct_submissions", "the number of correct submissions"),
        *[check for c, t in (
            ("test_index", "test_index"), ("submissions", "n_attempt_submissions"),
            ("correct_submissions", "n_correct_submissions")) for check in int_parse_failed(c, pl.col(t), "a whole number")],
        *[parse_failed(c, pl.col(t), "a number of seconds", "not_a_number") for c, t in (
            ("start_time_seconds", "start_offset_s"), ("duration_seconds", "attempt_duration_s"))],
        *[RowCheck("not_a_number", pl.col(t).is_infinite() | pl.col(t).is_nan(),
                   pl.format(f"{c} is {{}}, expected a finite number of seconds", pl.col(src(c))), c)
          for c, t in (("start_time_seconds", "start_offset_s"), ("duration_seconds", "attempt_duration_s"))],
        _negative("start_time_seconds", "start_offset_s", "negative_time", "time"),
        _negative("duration_seconds", "attempt_duration_s", "negative_time", "duration"),
        _negative("test_index", "test_index", "negative_count", "index"),
        _negative("submissions", "n_attempt_submissions", "negative_count", "count"),
        _negative("correct_submissions", "n_correct_submissions", "negative_count", "count"),
        RowCheck("more_correct_than_submissions",
                 pl.col("n_correct_submissions") > pl.col("n_attempt_submissions"),
                 pl.format("correct_submissions is {} but submissions is {}: a row cannot have more correct "
                           "submissions than submissions", pl.col("n_correct_submissions"),
                           pl.col("n_attempt_submissions")), "correct_submissions"),
    ]


def _structural(header: list[str], ends_with_newline: bool, n_rows: int) -> list[RowCheck]:
    """The rules that say a row's fields are not what the header says. `n_rows`: the file's last row (the
    cut-short rule says so of it when the file ends without a newline); 0 when it is not among the rows."""
    structural = [header_repeated(header)]
    short = short_row(header, header[-1] in ("submissions", "correct_submissions", "task_ID", "session_ID",
                                             "test_index"), ends_with_newline, n_rows)
    return structural + ([short] if short is not None else [])


def _checked(out: ReaderOutput, loaded: LoadedCsv, header: list[str], file_id: str, n_rows: int,
             copies_prep: Callable[[pl.DataFrame], pl.DataFrame]) -> None:
    """The raw rows, rejects and attempts of a log's rows (`loaded.frame`, with row_json), added to `out`: the
    whole log, or one piece of a big one (`_AttemptLog`). `copies_prep`: `_copies_prep`, or for a piece
    `_KeptKeys.prep` (which also knows the rows of the pieces before)."""
    out.tables[RAW] = raw_frame(loaded, file_id)
    df = loaded.frame.rename({h: src(h) for h in header}).with_columns(
        pl.col(src("task_ID")).str.strip_chars().alias("task_id"),
        pl.col(src("task_set")).str.strip_chars().fill_null("").alias("task_set"),
        pl.col(src("session_ID")).str.strip_chars().alias("session_id"),
        as_int(src("test_index")).alias("test_index"),
        as_int(src("submissions")).alias("n_attempt_submissions"),
        as_int(src("correct_submissions")).alias("n_correct_submissions"),
        _float("start_time_seconds").alias("start_offset_s"),
        _float("duration_seconds").alias("attempt_duration_s"),
    )
    rejects, bad = apply_checks(df, _row_checks(), ATTEMPTS,
                                structural=_structural(header, loaded.ends_with_newline, n_rows))
    _gather(out, rejects)
    good = df.filter(~bad)
    # a row repeated exactly (every value equal) is one attempt written twice: the later copies are quarantined
    copies, again = apply_checks(copies_prep(good), [_COPY], ATTEMPTS)
    _gather(out, copies)
    good = good.filter(~again).with_columns(
        (pl.col("n_correct_submissions") >= 1).alias("is_solved"),
        solved_within_2(pl.col("n_attempt_submissions"), pl.col("n_correct_submissions"))
        .alias("is_solved_within_2"),
        pl.lit(file_id).alias("file_id"),
    )
    if good.height:
        good = good.with_columns(flag_lists(good, [
            (pl.col("n_attempt_submissions") == 0, "zero_submissions"),
            (pl.col("n_correct_submissions") > 1, "multiple_correct"),
            (~pl.col("task_set").is_in(list(ARC2_TASK_SETS)), "nonstandard_task_set"),
            (~pl.col("task_id").str.contains(ARC_ID), "nonstandard_task_id"),
            (pl.col("start_offset_s").is_null() | pl.col("attempt_duration_s").is_null(), "no_duration"),
        ]).alias("flags"))
        out.tables[ATTEMPTS] = good


def _gather(out: ReaderOutput, rejects: list[Reject]) -> None:
    """Add rejects to `out`'s; the first that come are taken as they are (`apply_checks` gives a Spool, a flood
    waiting on disk: adding it to an empty one would read it back and write it out again)."""
    if out.rejects:
        out.rejects += rejects
    else:
        out.rejects = rejects


# A log of PIECES_FROM_BYTES or more is read in pieces (`_AttemptLog`) through the machinery of H-ARC data.csv
# (`CsvSource`, `ReaderOutput.pieces`: each piece's rows are written while the next is read), so its memory is
# bounded by the piece, not the file: read whole, a log takes about 38 times its size (1,000,000 rows, 42 MB:
# 1.6 GB). Below it a log is read whole, which is faster for a small file (one set of rules for all its rows).
PIECES_FROM_BYTES = 8 << 20
SOURCE_NAME = "ARC-AGI-2 attempt log"  # in reasons ("a NUL byte, which no ARC-AGI-2 attempt log field contains")
PIECE_ROWS = 100_000  # rows of a piece, about (its size follows from the length of the file's first rows)
MIN_PIECE_BYTES = 64 << 10
# at most (4 MB: 100,000 rows of the public file's length); a file whose first rows are long and the rest short
# is cut into pieces of more rows, checked PIECE_ROWS at a time (`_AttemptLog`), but each parsed whole
MAX_PIECE_BYTES = 4 << 20


def read_attempts(ctx: FileContext) -> ReaderOutput:
    header = read_header(ctx.path)
    variant = match_variant(header, VARIANTS, "ARC-AGI-2 attempt log")
    evidence = f"header is the {variant.name}"
    if ctx.path.stat().st_size >= PIECES_FROM_BYTES:
        size = piece_bytes(ctx.path, PIECE_ROWS, MIN_PIECE_BYTES, MAX_PIECE_BYTES)
        source = CsvSource(ctx.path, header, RAW, size, source_name=SOURCE_NAME)
        return ReaderOutput(detection_evidence=evidence, pieces=_AttemptLog(ctx.file_id, header, source))
    loaded = load_csv(ctx.path, header, raw_table=RAW, source_name=SOURCE_NAME)
    out = ReaderOutput(rejects=list(loaded.rejects), flags=list(loaded.flags), detection_evidence=evidence)
    n_rows = int(loaded.frame[ROW].max()) if loaded.frame.height else 0
    _checked(out, loaded, header, ctx.file_id, n_rows, _copies_prep)
    return out


class _AttemptLog:
    """A big log, called once its pieces are written (`ReaderOutput.pieces`; picklable): its batches in file
    order, each checked by `_checked` exactly as a whole log is, its raw rows and attempts handed out at once.
    Two facts span the file: its last row (the cut-short rule names it: a batch is checked once the next
    batch holding rows is parsed, so that the last one is known), and the rows kept so far, which an exact
    copy in a later batch names (`_KeptKeys`). The file's flags come with the first piece."""

    def __init__(self, file_id: str, header: list[str], source: CsvSource) -> None:
        self.file_id, self.header, self.source = file_id, header, source

    def __call__(self) -> Iterator[ReaderOutput]:
        with scratch_folder("arcstudy-arc2-") as folder:
            kept = _KeptKeys(folder)
            first = True
            batches = (without_long_rows(b, self.header, RAW)  # the record limit wherever a row lies, as read whole
                       for b in self.source.scan_iter(row_hash=False, on_start=kept.clear))
            for batch, last in _last_marked(batches):
                n_rows = int(batch.frame[ROW].max()) if last and batch.frame.height else 0
                # a batch is cut by bytes, from the length of the file's first rows: one of much shorter rows
                # (250,000 in 4 MB) is checked PIECE_ROWS rows at a time, each slice a piece of its own
                for start in range(0, max(batch.frame.height, 1), PIECE_ROWS):
                    part = batch.frame.slice(start, PIECE_ROWS)
                    out = ReaderOutput(rejects=Spool(batch.rejects if start == 0 else ()),
                                       flags=[*(self.source.flags if first else []),
                                              *(batch.flags if start == 0 else [])])
                    first = False
                    loaded = replace(batch, frame=with_row_json(replace(batch, frame=part), self.header))
                    _checked(out, loaded, self.header, self.file_id, n_rows, kept.prep)
                    yield out


def _last_marked(batches: Iterable[LoadedCsv]) -> Iterator[tuple[LoadedCsv, bool]]:
    """Each batch, and whether no batch after it holds a row (a batch of blank lines holds none)."""
    held: list[LoadedCsv] = []
    for batch in batches:
        if batch.frame.height and held:
            yield from ((b, False) for b in held)
            held = []
        held.append(batch)
    yield from ((b, True) for b in held)


_HASH = "__key_hash"


def _key_hash() -> pl.Expr:
    """A 64-bit hash of a row's COPY_KEY values, equal for rows `_copies_prep` groups together (-0.0 and 0.0,
    empty values), within one process."""
    return pl.struct(COPY_KEY).hash()


_EARLIER = "__earlier"  # the row number of a kept row of an earlier piece


class _KeptKeys:
    """The rows kept so far of a log read in pieces, one per distinct COPY_KEY (a copy is not kept): in memory
    a 64-bit hash of its values and its row number, 16 bytes a row; its values in an Arrow IPC file per piece
    in `folder`, read back only for the rows whose hash a later row shares, so that a copy is found by its
    values (a hash collision never makes a row a copy)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.clear()

    def clear(self) -> None:
        self.hashes = pl.DataFrame(schema={_HASH: pl.UInt64, _EARLIER: pl.Int64})
        self.files: list[tuple[int, int, Path]] = []  # first row, last row, file
        for path in self.folder.glob("kept-*.arrow"):
            path.unlink()

    def prep(self, good: pl.DataFrame) -> pl.DataFrame:
        """`_copies_prep` of a piece's rows, where a row equal to a row of an earlier piece is a copy of that
        row (`__dup_first` its row, `__dup_n` counting it); the piece's rows of a new key are kept."""
        df = _copies_prep(good)
        firsts = df.filter(pl.col(ROW) == pl.col("__dup_first")).select(
            ROW, _key_hash().alias(_HASH), *COPY_KEY)
        earlier = self._earlier(firsts)
        if earlier.height:
            df = df.join(earlier.rename({ROW: "__dup_first"}), on="__dup_first", how="left",
                         maintain_order="left").with_columns(
                pl.coalesce(_EARLIER, "__dup_first").alias("__dup_first"),
                (pl.col("__dup_n") + pl.col(_EARLIER).is_not_null().cast(pl.UInt32)).alias("__dup_n"),
            ).drop(_EARLIER)
            firsts = firsts.join(earlier, on=ROW, how="anti")
        self._keep(firsts)
        return df

    def _earlier(self, firsts: pl.DataFrame) -> pl.DataFrame:
        """ROW of each of `firsts` equal in COPY_KEY to a kept row, with that row (_EARLIER)."""
        none = pl.DataFrame(schema={ROW: pl.Int64, _EARLIER: pl.Int64})
        hits = firsts.join(self.hashes, on=_HASH, how="inner") if self.hashes.height and firsts.height else none
        if not hits.height:
            return none
        rows = hits[_EARLIER].unique()
        values = pl.concat([read_ipc(path).filter(pl.col(_EARLIER).is_in(rows.implode()))
                            for lo, hi, path in self.files if rows.is_between(lo, hi).any()])
        return hits.join(values, on=[_EARLIER, *COPY_KEY], how="inner", nulls_equal=True).select(ROW, _EARLIER)

    def _keep(self, firsts: pl.DataFrame) -> None:
        if not firsts.height:
            return
        path = self.folder / f"kept-{len(self.files):06d}.arrow"
        firsts.select(pl.col(ROW).alias(_EARLIER), *COPY_KEY).write_ipc(path, compression="uncompressed")
        self.files.append((int(firsts[ROW].min()), int(firsts[ROW].max()), path))
        self.hashes = pl.concat([self.hashes, firsts.select(_HASH, pl.col(ROW).alias(_EARLIER))])


def sniff_attempts(head: Head) -> str | None:
    cols = header_columns(head)
    if not cols:
        return None
    hits = cols & set(COLUMNS)
    if {"task_ID", "session_ID", "correct_submissions"} <= cols or len(hits) >= 6:
        return f"CSV header has the ARC-AGI-2 attempt-log columns {', '.join(sorted(hits))}"
    return None


register(InputFormat(
    "arc2-attempts", "ARC-AGI-2 human testing attempt log (or an audit of ARC-TGI tasks in its layout)",
    read_attempts, sniff_attempts, TABLES))
