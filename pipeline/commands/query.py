"""`arcstudy query`: read-only SQL over the database."""

from __future__ import annotations

import json
import math
import re
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table as RichTable

from pipeline.core.console import out
from pipeline.core.outputs import csv_text, named, write_text, write_with

from .common import (
    EXIT_USAGE,
    DbOption,
    RawCsvOption,
    db_to_read,
    fail,
    lock_timeout_seconds,
    open_workspace,
    refuse_overwriting_database,
)


class QueryFormat(StrEnum):
    table = "table"
    csv = "csv"
    json = "json"
    parquet = "parquet"


def query_command(
    sql: Annotated[str, typer.Argument(help="One read statement (DuckDB dialect): SELECT, WITH, FROM, DESCRIBE, "
                                       "SHOW, SUMMARIZE or EXPLAIN.")],
    db: DbOption = None,
    fmt: Annotated[QueryFormat | None, typer.Option("--format", help="Output format (default: table on the "
                                                    "terminal; with --out, from its suffix: .csv, .parquet, "
                                                    "else json).", show_default=False)] = None,
    out_file: Annotated[Path | None, typer.Option("--out", help="Write results to this file.")] = None,
    limit: Annotated[int, typer.Option(min=0, help="Rows shown in table format (files get every row).")] = 50,
    lock_timeout: Annotated[float, typer.Option("--lock-timeout", help="Seconds to wait while another process "
                                                "(ingest, build) has the database open for writing.",
                                                callback=lock_timeout_seconds)] = 30.0,
    raw_csv: RawCsvOption = False,
) -> None:
    """Run one read-only SQL statement against the database.

    Reads: the database only, through a read-only connection that cannot reach files, extensions or settings;
    several statements, writes, ATTACH, COPY, EXPORT, SET, PRAGMA, INSTALL and read_csv()/glob() of other files
    are refused (exit 2). Writes: --out FILE when given (csv, json or parquet), else stdout; BLOB columns are
    written as hex text in csv and json. --out is written whole (a temporary file renamed over it: a symlink
    there is replaced, never written through). CSV text cells that a spreadsheet would run as a formula (starting
    with = + - @, TAB or CR) get a leading ' unless --raw-csv.
    """
    import duckdb
    import polars as pl

    from pipeline.core.workspace import QueryRefused

    if fmt is None:
        suffix = out_file.suffix.lower() if out_file is not None else ""
        fmt = {".csv": QueryFormat.csv, ".parquet": QueryFormat.parquet}.get(suffix, QueryFormat.table)
    path = db_to_read(db)
    if fmt is QueryFormat.parquet and out_file is None:
        raise fail("--format parquet needs --out FILE", EXIT_USAGE)
    refuse_overwriting_database(out_file, path)
    # Polars holds what DuckDB returns, or says it cannot (an INTERVAL, a date past year 262143, nested values
    # in a CSV): said as such, not a traceback. A polars panic is a BaseException, hence named here.
    cannot_show = (pl.exceptions.PolarsError, pl.exceptions.PanicException)
    with open_workspace(path, read_only=True, lock_timeout_s=lock_timeout) as ws:
        try:
            df = ws.read(sql)
        except QueryRefused as err:
            raise fail(str(err), EXIT_USAGE) from err
        except duckdb.Error as err:
            raise fail(f"query failed: {advice_it_accepts(str(err))}") from err
        except cannot_show as err:
            raise fail(_cannot_show(err, "read")) from err
    try:  # a folder, a missing or read-only folder, a full disk: OutputError, one line (commands.common)
        with named("--out"):
            _emit(df, fmt, out_file, limit, raw_csv)
    except cannot_show as err:
        raise fail(_cannot_show(err, f"written as {fmt.value}")) from err
    if out_file:
        out.info(f"wrote {df.height:,} rows to {out_file}")


NO_SETTINGS = "`arcstudy query` cannot change settings"
# DuckDB's advice to change a setting, which `query` refuses (a read-only connection, settings locked): replaced
# by what a query can do instead.
_SETTING_ADVICE = (
    (re.compile(r'\s*Use "SET max_expression_depth TO x" to increase the maximum expression depth\.?'),
     f" {NO_SETTINGS}: nest less (a long chain of + or || as a list function, `list_sum([...])`; or parts of "
     "the expression as columns of a WITH clause, then combined)."),
    (re.compile(r"\s*Possible solutions:.*", re.S),  # out of memory: SET threads, preserve_insertion_order, ...
     f" {NO_SETTINGS} (threads, memory_limit): read less at once (fewer columns, a WHERE filter, aggregate "
     "before joining, LIMIT)."),
    (re.compile(r'[^.\n]*\b[Uu]se\s+"?SET\s[^.\n]*\.?'), f" {NO_SETTINGS}."),  # any other
)


def advice_it_accepts(message: str) -> str:
    """DuckDB's error message with its advice to SET something (refused here) replaced by advice `query` takes."""
    for pattern, instead in _SETTING_ADVICE:
        message = pattern.sub(instead, message)
    return message


def _cannot_show(err: BaseException, what: str) -> str:
    reason = (str(err).strip().splitlines() or [type(err).__name__])[0]
    return (f"the result cannot be {what}: {reason}; cast such columns to text in the query (`col::VARCHAR`)"
            + ("" if what == "read" else " or choose another --format"))


def _emit(df, fmt: QueryFormat, out_file: Path | None, limit: int, raw_csv: bool = False) -> None:
    import polars as pl

    if fmt is QueryFormat.table and out_file is None:
        table = RichTable(caption=f"{df.height:,} rows" + (f" (first {limit} shown)" if df.height > limit else ""))
        for col in df.columns:
            table.add_column(col)
        for row in df.head(min(limit, df.height)).iter_rows():  # polars takes no limit past 64 bits
            table.add_row(*["" if v is None else str(v) for v in row])
        out.console.print(table)
        return
    if fmt is QueryFormat.parquet:
        assert out_file is not None
        write_with(out_file, df.write_parquet, make_parents=False)  # raw: Parquet keeps the values as they are
        return
    df = df.with_columns(pl.col(pl.Binary).bin.encode("hex"))  # text formats cannot hold raw bytes
    if fmt is QueryFormat.json or (fmt is QueryFormat.table and out_file is not None):
        _write_or_echo(json.dumps(_json_safe(df.to_dicts()), default=str, indent=1, allow_nan=False), out_file)
    else:
        _write_or_echo(csv_text(df, raw=raw_csv), out_file)


def _json_safe(value: object) -> object:
    """NaN and the infinities as null: JSON has no such numbers, and `NaN` made the output invalid JSON."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_json_safe(v) for v in value]
    return value


def _write_or_echo(text: str, out_file: Path | None) -> None:
    if out_file:
        write_text(out_file, text, make_parents=False)
    else:
        out.result(text)
