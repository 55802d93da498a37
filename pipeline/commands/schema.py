"""`arcstudy schema`: the data dictionary, generated from schemas/."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from pipeline.core.console import out
from pipeline.core.outputs import named, write_text
from schemas import TABLES, data_dictionary

from .common import EXIT_USAGE, fail, open_workspace, refuse_overwriting_any_database


def schema_command(
    table: Annotated[str | None, typer.Argument(help="A table name; all tables when omitted.")] = None,
    out_file: Annotated[Path | None, typer.Option("--out", help="Write the Markdown to this file.")] = None,
    upgrade: Annotated[bool, typer.Option("--upgrade", help="Bring the --db database made by an older arcstudy "
                                          "to this schema in place (additive changes only) and say what "
                                          "changed.")] = False,
    db: Annotated[Path | None, typer.Option("--db", help="With --upgrade: the database to upgrade.",
                                            show_default=False)] = None,
) -> None:
    """Print the data dictionary (every column's type, constraints and meaning) as Markdown, or upgrade an
    older database in place with --upgrade.

    Reads: schemas/ (no database needed). Writes: --out FILE when given, else stdout. With --upgrade: the --db
    database (new tables and nullable columns added, derived out_* tables made again, the schema version
    recorded in `schema_version`); a database that cannot be upgraded in place is left untouched (exit 1).
    """
    if upgrade:
        _upgrade(db)
        return
    if db is not None:
        raise fail("--db is only used with --upgrade", EXIT_USAGE)
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
        out.result(text)


def _upgrade(db: Path | None) -> None:
    from pipeline.core.workspace import default_db_path
    from schemas.version import VERSION_TABLE, schema_label

    path = db or default_db_path()
    if not path.exists():
        raise fail(f"database {path} does not exist (nothing to upgrade)")
    with open_workspace(path) as ws:  # a writing open brings the schema up to date, or refuses with why
        rows = ws.read(f"SELECT schema_version, schema_sha256, migration_note FROM {VERSION_TABLE} "
                       "ORDER BY migrated_at DESC LIMIT 1").rows()
    version, digest, note = rows[0]
    out.info(f"{path}: schema {schema_label(version, digest)}" + (f" ({note})" if note else ""))
