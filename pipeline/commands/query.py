"""`arcstudy query`: read-only SQL over the database."""

from __future__ import annotations

import json
import math
import re
import textwrap
from collections.abc import Iterator
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table as RichTable

from pipeline.core.console import out
from pipeline.core.outputs import csv_text, named, open_output, write_with

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

    from pipeline.core.workspace import CannotRead, QueryRefused

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
    # The result is read and written a batch at a time (`Workspace.read_batches`): a result larger than memory
    # (every stored step to a Parquet file) is written in the memory of a batch, and a table shows its first
    # rows and counts the rest without holding them.
    with open_workspace(path, read_only=True, lock_timeout_s=lock_timeout) as ws:
        try:
            head, batches = ws.read_batches(sql)
            # a folder, a missing or read-only folder, a full disk: OutputError, one line (commands.common)
            with named("--out"):
                rows = _emit(head, batches, fmt, out_file, limit, raw_csv)
        except QueryRefused as err:
            raise fail(str(err), EXIT_USAGE) from err
        except duckdb.Error as err:
            raise fail(f"query failed: {advice_it_accepts(str(err))}") from err
        except CannotRead as err:
            raise fail(_cannot_show(err.__cause__, "read")) from err
        except cannot_show as err:
            raise fail(_cannot_show(err, f"written as {fmt.value}")) from err
    if out_file:
        out.info(f"wrote {rows:,} rows to {out_file}")


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
    # (polars' hint names an environment variable of its own, which is not `query`'s to set)
    reason = (str(err).strip().splitlines() or [type(err).__name__])[0].split(". Hint: ")[0]
    return (f"the result cannot be {what}: {reason}; cast such columns to text in the query (`col::VARCHAR`)"
            + ("" if what == "read" else " or choose another --format"))


def _emit(head, batches, fmt: QueryFormat, out_file: Path | None, limit: int, raw_csv: bool = False) -> int:
    """Show or write the result, a batch at a time; the number of rows."""
    import polars as pl

    if fmt is QueryFormat.table and out_file is None:
        shown, rows = [], 0
        for batch in batches:
            if rows < limit:  # (a Python int: polars takes no limit past 64 bits)
                shown.append(batch.head(min(limit - rows, batch.height)))
            rows += batch.height
        table = RichTable(caption=f"{rows:,} rows" + (f" (first {limit} shown)" if rows > limit else ""))
        for col in head.columns:
            table.add_column(col)
        for part in shown:
            for row in part.iter_rows():
                table.add_row(*["" if v is None else str(v) for v in row])
        out.console.print(table)
        return rows
    counted = [0]

    def each(batch):
        counted[0] += batch.height
        return batch

    if fmt is QueryFormat.parquet:
        assert out_file is not None
        write_with(out_file, lambda tmp: _write_parquet(tmp, head, map(each, batches)), make_parents=False)
        return counted[0]

    def text(frame):  # text formats cannot hold raw bytes
        return each(frame).with_columns(pl.col(pl.Binary).bin.encode("hex"))

    if fmt is QueryFormat.json or (fmt is QueryFormat.table and out_file is not None):
        parts = _json_parts(map(text, batches))
    else:
        parts = _csv_parts(text(head), map(text, batches), raw_csv)
    if out_file:
        with open_output(out_file, make_parents=False) as fh:
            for part in parts:
                fh.write(part)
    else:
        out.result_parts(parts)
    return counted[0]


PARQUET_GROUP_BYTES = 64 << 20  # `_write_parquet`: a row group of about this much (a group per batch was 2x slower)


def _write_parquet(path: Path, head, batches) -> None:
    """The batches into one Parquet file (zstd, as polars writes it), the values as they are, a row group of
    about PARQUET_GROUP_BYTES at a time."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    writer, held, size = None, [], 0

    def flush() -> None:
        nonlocal writer, held, size
        if held:
            table = pa.concat_tables(held)
            if writer is None:
                writer = pq.ParquetWriter(path, table.schema, compression="zstd")
            writer.write_table(table.cast(writer.schema), row_group_size=table.num_rows)
        held, size = [], 0

    try:
        for batch in batches:
            table = batch.to_arrow()
            if held and table.schema != held[0].schema:
                table = table.cast(held[0].schema)
            held.append(table)
            size += table.nbytes
            if size >= PARQUET_GROUP_BYTES:
                flush()
        flush()
    finally:
        if writer is not None:
            writer.close()
    if writer is None:  # no row: the columns alone
        head.write_parquet(path)


def _json_parts(batches) -> Iterator[str]:
    """A JSON array of one object per row, exactly as `json.dumps(rows, indent=1)` writes it, a row at a time."""
    opened = False
    for batch in batches:
        for row in _json_safe(batch.to_dicts()):
            item = json.dumps(row, default=str, indent=1, allow_nan=False)
            yield ("[\n" if not opened else ",\n") + textwrap.indent(item, " ", lambda _line: True)
            opened = True
    yield "\n]" if opened else "[]"


def _csv_parts(head, batches, raw_csv: bool) -> Iterator[str]:
    """The CSV of the result, its header once, a batch at a time."""
    header = True
    for batch in batches:
        if batch.height:
            yield csv_text(batch, raw=raw_csv, header=header)
            header = False
    if header:
        yield csv_text(head, raw=raw_csv)


def _json_safe(value: object) -> object:
    """NaN and the infinities as null: JSON has no such numbers, and `NaN` made the output invalid JSON."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_json_safe(v) for v in value]
    return value


