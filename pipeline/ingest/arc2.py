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
"""

from __future__ import annotations

import polars as pl

from pipeline.ingest.base import FileContext, ReaderOutput
from pipeline.ingest.formats import Head, InputFormat, register
from pipeline.ingest.harc_csv import (
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
    raw_frame,
    read_header,
    short_row,
    src,
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


def read_attempts(ctx: FileContext) -> ReaderOutput:
    header = read_header(ctx.path)
    variant = match_variant(header, VARIANTS, "ARC-AGI-2 attempt log")
    loaded = load_csv(ctx.path, header, raw_table=RAW, source_name="ARC-AGI-2 attempt log")
    out = ReaderOutput(rejects=list(loaded.rejects), flags=list(loaded.flags),
                       detection_evidence=f"header is the {variant.name}")
    out.tables[RAW] = raw_frame(loaded, ctx.file_id)
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
    n_rows = int(df["row_number"].max()) if df.height else 0
    structural = [header_repeated(header)]
    short = short_row(header, header[-1] in ("submissions", "correct_submissions", "task_ID", "session_ID",
                                             "test_index"), loaded.ends_with_newline, n_rows)
    structural += [short] if short is not None else []
    checks = [
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
    rejects, bad = apply_checks(df, checks, ATTEMPTS, structural=structural)
    out.rejects += rejects
    good = df.filter(~bad)
    # a row repeated exactly (every value equal) is one attempt written twice: the later copies are quarantined
    copies, again = apply_checks(_copies_prep(good), [_COPY], ATTEMPTS)
    out.rejects += copies
    good = good.filter(~again).with_columns(
        (pl.col("n_correct_submissions") >= 1).alias("is_solved"),
        solved_within_2(pl.col("n_attempt_submissions"), pl.col("n_correct_submissions"))
        .alias("is_solved_within_2"),
        pl.lit(ctx.file_id).alias("file_id"),
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
    return out


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
