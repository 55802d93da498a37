"""Validation that reports records, not exception strings.

`validate_frame` runs the generated pandera schema lazily (all failures collected) on a collected frame
(data checks are skipped on LazyFrames), adds the primary-key check, and returns the rows that passed
plus one `FailureRecord` per problem: table, row, column, check, value, reason.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from functools import cache, reduce
from typing import Any

import polars as pl

from schemas.generate import get_table, pandera_schema

ROW_INDEX = "__row_index"


@dataclass(frozen=True)
class FailureRecord:
    table: str
    row: int | None  # 0-based row of the validated frame; None for frame-level problems
    column: str | None
    check: str
    value: str | None
    reason: str

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass
class ValidationResult:
    valid: pl.DataFrame  # the rows without any row-level failure (empty if the frame is unusable)
    failures: list[FailureRecord]

    @property
    def ok(self) -> bool:
        return not self.failures

    @property
    def failed_rows(self) -> set[int]:
        return {f.row for f in self.failures if f.row is not None}

    @property
    def frame_level_failures(self) -> list[FailureRecord]:
        return [f for f in self.failures if f.row is None]


def _reason(check: str, column: str | None, value: str | None) -> str:
    if check == "column_in_dataframe":
        return f"required column '{value}' is missing"
    if check == "column_in_schema":
        return f"unexpected column '{value}' (not in the schema)"
    if check == "not_nullable":
        return f"column '{column}' must not be null"
    if check.startswith("dtype("):
        expected = check[len("dtype('"):-2]
        return f"column '{column}' has type {value}, expected {expected}"
    if check.startswith("isin("):
        return f"column '{column}': {value!r} is not one of {check[len('isin('):-1]}"
    if check.startswith("greater_than_or_equal_to("):
        return f"column '{column}': {value} is below the minimum {check[len('greater_than_or_equal_to('):-1]}"
    if check.startswith("less_than_or_equal_to("):
        return f"column '{column}': {value} is above the maximum {check[len('less_than_or_equal_to('):-1]}"
    if check.startswith("str_matches("):
        return f"column '{column}': {value!r} does not match the pattern {check[len('str_matches('):-1]}"
    return f"column '{column}' fails {check}: got {value!r}"


def check_primary_key(df: pl.DataFrame | pl.LazyFrame, key: tuple[str, ...] | list[str]) -> pl.DataFrame:
    """Rows whose key is duplicated or null, with their 0-based row index in `ROW_INDEX`.

    Uses a hash group-by over the key columns only, so it stays cheap on frames of many million rows.
    """
    lf = df.lazy().select(list(key)).with_row_index(ROW_INDEX)
    dup = pl.len().over(list(key)) > 1
    has_null = pl.any_horizontal([pl.col(k).is_null() for k in key])
    return lf.filter(dup | has_null).collect()


@cache
def _clean_check(table_name: str, proven: frozenset[str] = frozenset()
                 ) -> tuple[list[str], list[pl.DataType], list[pl.Expr]]:
    """The table's columns, dtypes, and its schema as one polars select that is true when some row may fail
    it. Built from the same field definitions as the pandera schema (`schemas.generate.pandera_schema`:
    dtype, nullability, ge, le, isin, regex as pandera's str_matches, max_bytes, plus the primary key), with
    pandera's conventions: NaN counts as null, a check ignores nulls. `proven`: columns whose value checks (ge, le,
    isin, regex) the caller already made on these rows, left out (their dtype and nullability stay)."""
    from schemas.fields import FIELDS
    from schemas.generate import is_nullable
    from schemas.model import polars_dtype

    table = get_table(table_name)
    dtypes: list[pl.DataType] = []
    suspects: list[pl.Expr] = []
    for name in table.columns:
        f = FIELDS[name]
        dtype = polars_dtype(f.dtype)
        dtypes.append(dtype)
        col = pl.col(name)
        if dtype in (pl.Float32, pl.Float64):
            suspects.append(col.is_nan().any())  # NaN compares oddly: let pandera judge it
        if not is_nullable(table, name):
            suspects.append(col.is_null().any())
        if name in proven:
            continue
        if f.ge is not None:
            suspects.append((col < f.ge).any())
        if f.le is not None:
            suspects.append((col > f.le).any())
        if f.isin is not None:
            suspects.append((~col.is_in(list(f.isin))).any())
        if f.regex is not None:
            suspects.append((~col.str.contains(f.regex if f.regex.startswith("^") else f"^{f.regex}")).any())
        if f.max_bytes is not None and dtype == pl.String:
            suspects.append((col.str.len_bytes() > f.max_bytes).any())
    key = list(table.primary_key)
    if key:
        suspects.append(pl.any_horizontal([pl.col(k).is_null() for k in key]).any())
        # Two rows of one key have one hash: rows whose hashes repeat may share a key, and pandera's path then
        # finds out exactly. The keys' own duplicate test held about 330 bytes a row (a struct of texts) until
        # polars let it go: 700,000 level rows of `score`, 232 MB; their hashes, combined, 68 MB.
        hashed = reduce(operator.xor, [pl.col(k).hash(seed=i) for i, k in enumerate(key)])
        suspects.append(hashed.is_duplicated().any())
    return list(table.columns), dtypes, [e.alias(f"s{i}") for i, e in enumerate(suspects)]


def validate_frame(table_name: str, df: pl.DataFrame, *, shortcut: bool = True,
                   proven: frozenset[str] = frozenset()) -> ValidationResult:
    """The frame judged by the table's schema. A frame that certainly passes (the table's exact layout, and
    no row any check could fail: `_clean_check`, one polars select) is returned as is without importing or
    running pandera, the usual case when writing; anything suspicious goes through pandera, which reports
    every failure with its rule and reason. `shortcut=False` always asks pandera (the tests' reference).
    `proven`: columns whose value checks the caller already made on every row (the H-ARC grid texts, which
    the reader's grid rule checks more strictly than the schema's regex): the shortcut does not test them
    again; pandera, when it runs, checks everything."""
    if shortcut:
        columns, dtypes, suspects = _clean_check(table_name, proven)
        if df.columns == columns and df.dtypes == dtypes and not any(df.select(suspects).row(0)):
            return ValidationResult(valid=df, failures=[])
    import pandera.errors

    table = get_table(table_name)
    schema = pandera_schema(table_name)
    failures: list[FailureRecord] = []
    try:
        schema.validate(df, lazy=True)
    except pandera.errors.SchemaErrors as err:
        for case in err.failure_cases.iter_rows(named=True):
            check = str(case["check"])
            column = case["column"]
            value = None if case["failure_case"] is None else str(case["failure_case"])
            row = case["index"]
            failures.append(FailureRecord(table.name, row, column, check, value, _reason(check, column, value)))
        # A column of the wrong type also makes its value checks error out; report the type once.
        wrong_type = {f.column for f in failures if f.check.startswith("dtype(")}
        failures = [f for f in failures if f.column not in wrong_type or f.check.startswith("dtype(")]

    if all(k in df.columns for k in table.primary_key):
        dups = check_primary_key(df, table.primary_key)
        for rec in dups.iter_rows(named=True):
            key_text = ", ".join(f"{k}={rec[k]!r}" for k in table.primary_key)
            failures.append(FailureRecord(
                table.name, rec[ROW_INDEX], ",".join(table.primary_key), "primary_key",
                key_text, f"primary key ({key_text}) is null or appears more than once",
            ))

    if any(f.row is None for f in failures):
        # A missing column or a wrong dtype affects every row: nothing in the frame is trustworthy.
        valid = df.clear()
    else:
        bad = sorted({f.row for f in failures})
        valid = df.with_row_index(ROW_INDEX).filter(~pl.col(ROW_INDEX).is_in(bad)).drop(ROW_INDEX)
    return ValidationResult(valid=valid, failures=failures)


def _columns(table_name: str, without: tuple[str, ...]) -> dict[str, pl.DataType]:
    from schemas.fields import FIELDS
    from schemas.model import polars_dtype

    table = get_table(table_name)
    unknown = [c for c in without if c not in table.columns]
    if unknown:
        raise KeyError(f"{table_name} has no columns {unknown}")
    return {c: polars_dtype(FIELDS[c].dtype) for c in table.columns if c not in without}


def empty_frame(table_name: str, *, without: tuple[str, ...] = ()) -> pl.DataFrame:
    """A zero-row frame with the table's exact columns and dtypes (less the `without` columns)."""
    return pl.DataFrame(schema=_columns(table_name, without))


_INT_RANGES = {pl.Int8: 8, pl.Int16: 16, pl.Int32: 32, pl.Int64: 64}  # signed: bits
_UINT_RANGES = {pl.UInt8: 8, pl.UInt16: 16, pl.UInt32: 32, pl.UInt64: 64}


def _int_range(dtype: pl.DataType) -> tuple[int, int] | None:
    for t, bits in _INT_RANGES.items():
        if dtype == t:
            return -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
    for t, bits in _UINT_RANGES.items():
        if dtype == t:
            return 0, 2**bits - 1
    return None


def _fits(dtype: pl.DataType, value: object) -> bool:
    """Whether a value read from a document is one the column holds as it is (conform would otherwise turn
    1.7 into 1, "5" into 5, [1] into an error, an integer over 64 bits into an error)."""
    if value is None:
        return True
    if isinstance(dtype, pl.List):
        return isinstance(value, list) and all(_fits(dtype.inner, v) for v in value)
    if dtype == pl.String:
        return isinstance(value, str)
    if dtype == pl.Boolean:
        return isinstance(value, bool)
    if isinstance(value, bool):
        return False
    bounds = _int_range(dtype)
    if bounds is not None:
        return isinstance(value, int) and bounds[0] <= value <= bounds[1]
    if dtype in (pl.Float32, pl.Float64):
        return isinstance(value, (int, float)) and math.isfinite(value)
    return True  # dates and times are parsed (and checked) by the readers themselves


def type_problem(table_name: str, row: dict) -> tuple[str, str] | None:
    """(column, reason) for the first value of `row` that its column cannot hold as it is, else None: a reader
    of a document quarantines that entry instead of storing it altered or failing the whole file."""
    schema = _columns(table_name, ())
    for column, value in row.items():
        dtype = schema.get(column)
        if dtype is not None and not _fits(dtype, value):
            shown = repr(value) if len(repr(value)) <= 80 else repr(value)[:80] + "..."
            return column, f"{column} must be {_type_words(dtype)}, got {shown}"
    return None


def value_problem(table_name: str, row: dict) -> tuple[str, str] | None:
    """(column, reason) for the first value of `row` that its column's checks refuse (null where the table allows
    none; ge, le, isin, regex, max_bytes on a scalar), in the words `validate_frame` gives, else None. For values
    `type_problem` accepts: a reader of a document refuses that entry itself, so that every command reading the
    document through it refuses the same entry for the same reason (validation would quarantine it on ingest
    only, by its row number)."""
    import re

    from schemas.fields import FIELDS
    from schemas.generate import is_nullable

    table = get_table(table_name)
    for column, value in row.items():
        if column not in table.columns:
            continue
        f = FIELDS[column]
        if value is None:
            if not is_nullable(table, column):
                return column, _reason("not_nullable", column, None)
            continue
        if isinstance(value, list | dict):
            continue  # no column check looks inside a list
        if f.ge is not None and value < f.ge:
            return column, _reason(f"greater_than_or_equal_to({f.ge})", column, value)
        if f.le is not None and value > f.le:
            return column, _reason(f"less_than_or_equal_to({f.le})", column, value)
        if f.isin is not None and value not in f.isin:
            return column, _reason(f"isin({list(f.isin)})", column, value)
        if f.regex is not None and isinstance(value, str):
            pattern = f.regex if f.regex.startswith("^") else "^" + f.regex
            if pattern.endswith("$"):  # polars' $ is the end of the text; Python's also matches before a final \n
                pattern = pattern[:-1] + r"\Z"
            if not re.search(pattern, value):
                return column, _reason(f"str_matches('{f.regex}')", column, value[:80])
        if f.max_bytes is not None and isinstance(value, str) and \
                (size := len(value.encode("utf-8", "surrogatepass"))) > f.max_bytes:
            return column, f"column '{column}' is {size} bytes, longer than {f.max_bytes} bytes"
    return None


def _type_words(dtype: pl.DataType, *, plural: bool = False) -> str:
    """What a column holds, in words: "an integer of 64 bits"; `plural`: "integers of 64 bits" (a list's items;
    pluralising the whole phrase once made "a list of integer of 64 bitss")."""
    if isinstance(dtype, pl.List):
        return f"{'lists' if plural else 'a list'} of {_type_words(dtype.inner, plural=True)}"
    if dtype == pl.String:
        return "strings" if plural else "a string"
    if dtype == pl.Boolean:
        return "true or false values" if plural else "true or false"
    bounds = _int_range(dtype)
    if bounds is not None:
        return f"{'integers' if plural else 'an integer'} of {len(bin(bounds[1])) - 2 + (bounds[0] < 0)} bits"
    if dtype in (pl.Float32, pl.Float64):
        return "finite numbers" if plural else "a finite number"
    return f"{dtype} values" if plural else f"a {dtype}"


def conform(table_name: str, rows: Iterable[Mapping[str, Any]] | pl.DataFrame, *,
            without: tuple[str, ...] = ()) -> pl.DataFrame:
    """Build a frame with the table's columns, order and dtypes from python rows (missing keys = null), which may
    be a generator (`rows_frame`).

    `without`: columns the caller adds later (e.g. the H-ARC analyses compute one release's rows and the
    orchestration adds `release_generation`)."""
    schema = _columns(table_name, without)
    if isinstance(rows, pl.DataFrame):
        if rows.columns == list(schema) and rows.dtypes == list(schema.values()):
            return rows  # already the table's layout (a select per table and file adds up on small files)
        return rows.select([pl.col(c).cast(t) if c in rows.columns else pl.lit(None, t).alias(c)
                            for c, t in schema.items()])
    return rows_frame(rows, schema)


def rows_frame(rows: Iterable[Mapping[str, Any]], schema: Mapping[str, pl.DataType]) -> pl.DataFrame:
    """A frame of ``schema`` from python rows (missing keys = null), made a column at a time as the rows come: a
    generator's rows are never all held as dicts. A list of 100,000 rows of `score`'s replay checks, copied into
    a second list of dicts for polars' row constructor, took about 250 MB at `score`'s peak; this is also about
    twice as fast."""
    columns: dict[str, list[Any]] = {c: [] for c in schema}
    filled = list(columns.items())
    for row in rows:
        for name, values in filled:
            values.append(row.get(name))
    try:
        return pl.DataFrame(columns, schema=dict(schema))
    except TypeError:  # a value of another type than its column's (a float in an integer column): the row
        # constructor's casts, as before (made column-wise without `strict`, an unreadable value became null)
        return pl.DataFrame(list(zip(*columns.values(), strict=True)), schema=dict(schema), orient="row")
