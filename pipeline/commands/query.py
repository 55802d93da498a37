"""`arcstudy query`: read-only SQL over the database."""

from __future__ import annotations

import json
import sys
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table as RichTable

from pipeline.core.console import out
from pipeline.core.workspace import default_db_path

from .common import EXIT_USAGE, DbOption, fail, open_workspace


class QueryFormat(StrEnum):
    table = "table"
    csv = "csv"
    json = "json"
    parquet = "parquet"


def query_command(
    sql: Annotated[str, typer.Argument(help="A SQL query (DuckDB dialect).")],
    db: DbOption = None,
    fmt: Annotated[QueryFormat, typer.Option("--format", help="Output format.")] = QueryFormat.table,
    out_file: Annotated[Path | None, typer.Option("--out", help="Write results to this file.")] = None,
    limit: Annotated[int, typer.Option(help="Rows shown in table format (files get every row).")] = 50,
) -> None:
    """Run a read-only SQL query against the database.

    Reads: the database through a read-only connection (INSERT, DROP and other writes fail).
    Writes: --out FILE when given (csv, json or parquet), else stdout.
    """
    import duckdb

    path = db or default_db_path()
    if fmt is QueryFormat.parquet and out_file is None:
        raise fail("--format parquet needs --out FILE", EXIT_USAGE)
    with open_workspace(path, read_only=True) as ws:
        try:
            df = ws.read(sql)
        except duckdb.Error as err:
            raise fail(f"query failed: {err}") from err
    if fmt is QueryFormat.table and out_file is None:
        table = RichTable(caption=f"{df.height:,} rows" + (f" (first {limit} shown)" if df.height > limit else ""))
        for col in df.columns:
            table.add_column(col)
        for row in df.head(limit).iter_rows():
            table.add_row(*["" if v is None else str(v) for v in row])
        out.console.print(table)
        return
    if fmt is QueryFormat.parquet:
        df.write_parquet(out_file)
    elif fmt is QueryFormat.json or (fmt is QueryFormat.table and out_file is not None):
        text = json.dumps(df.to_dicts(), default=str, indent=1)
        _write_or_echo(text, out_file)
    else:
        from pipeline.report.html import csv_ready

        _write_or_echo(csv_ready(df).write_csv(), out_file)
    if out_file:
        out.info(f"wrote {df.height:,} rows to {out_file}")


def _write_or_echo(text: str, out_file: Path | None) -> None:
    if out_file:
        out_file.write_text(text)
    else:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
