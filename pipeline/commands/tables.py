"""`arcstudy tables`: what is in the database."""

from __future__ import annotations

from rich.table import Table as RichTable

from pipeline.core.console import out
from pipeline.core.workspace import describe_tables

from .common import DbOption, db_to_read, fail, open_workspace


def tables_command(db: DbOption = None) -> None:
    """List the tables in the database with their layer, row count and description.

    Reads: the database (read-only). Writes: nothing.
    """
    path = db_to_read(db)
    if not path.exists():
        raise fail(f"database {path} does not exist (run `arcstudy ingest` first, or pass --db)")
    with open_workspace(path, read_only=True) as ws:
        rows = describe_tables(ws)
    table = RichTable(title=f"tables in {path}")
    for col in ("table", "layer", "rows", "description"):
        table.add_column(col, justify="right" if col == "rows" else "left")
    for name, layer, n, desc in rows:
        table.add_row(name, layer, f"{n:,}", desc)
    out.console.print(table)
