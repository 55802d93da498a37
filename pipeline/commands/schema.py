"""`arcstudy schema`: the data dictionary, generated from schemas/."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from pipeline.core.console import out
from pipeline.core.outputs import named, write_text
from schemas import TABLES, data_dictionary

from .common import EXIT_USAGE, fail, refuse_overwriting_any_database


def schema_command(
    table: Annotated[str | None, typer.Argument(help="A table name; all tables when omitted.")] = None,
    out_file: Annotated[Path | None, typer.Option("--out", help="Write the Markdown to this file.")] = None,
) -> None:
    """Print the data dictionary (every column's type, constraints and meaning) as Markdown.

    Reads: schemas/ (no database needed). Writes: --out FILE when given, else stdout.
    """
    if table is not None and table not in TABLES:
        raise fail(f"unknown table {table!r}; known: {', '.join(sorted(TABLES))}", EXIT_USAGE)
    refuse_overwriting_any_database(out_file)
    text = data_dictionary([table] if table else None)
    if out_file:
        try:
            with named("--out"):
                write_text(out_file, text + "\n", make_parents=False)  # whole, never through a symlink
        except ValueError as err:  # a folder, a missing or read-only folder, a NUL in the name
            raise fail(f"cannot write --out {out_file}: {getattr(err, 'strerror', None) or err}") from err
        out.info(f"wrote {out_file}")
    else:
        typer.echo(text)
