"""The `arcstudy` command line. Each command says in --help what it reads and writes.

Exit codes: 0 ok, 1 error, 2 usage, 3 completed with rejected input (see the `quarantine` table).
"""

from __future__ import annotations

import json
import sys
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table as RichTable

import pipeline
from pipeline.core.console import out
from pipeline.core.workspace import Workspace, WorkspaceError, default_db_path, describe_tables
from schemas import TABLES, data_dictionary

EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_REJECTED = 0, 1, 2, 3

app = typer.Typer(
    name="arcstudy",
    help="Trustworthy numbers from ARC human studies and agent runs.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

DbOption = Annotated[
    Path | None,
    typer.Option("--db", help="DuckDB database file (default: $ARCSTUDY_DB or ./arcstudy.duckdb).",
                 dir_okay=False, show_default=False),
]


def _version_callback(value: bool) -> None:
    if value:
        typer.echo(f"arcstudy {pipeline.__version__}")
        raise typer.Exit(EXIT_OK)


@app.callback()
def main(
    version: Annotated[bool, typer.Option("--version", callback=_version_callback, is_eager=True,
                                          help="Print the version and exit.")] = False,
    plain: Annotated[bool, typer.Option("--plain", help="No colours or live progress bars (automatic in CI "
                                        "and when output is not a terminal).")] = False,
) -> None:
    out.set_plain(plain)


def fail(message: str, code: int = EXIT_ERROR) -> typer.Exit:
    out.error(message)
    return typer.Exit(code)


def open_workspace(db: Path | None, *, read_only: bool = False, lock_timeout_s: float = 30.0) -> Workspace:
    try:
        return Workspace(db or default_db_path(), read_only=read_only, lock_timeout_s=lock_timeout_s)
    except WorkspaceError as err:
        raise fail(str(err)) from err


@app.command("tables")
def tables_command(db: DbOption = None) -> None:
    """List the tables in the database with their layer, row count and description.

    Reads: the database (read-only). Writes: nothing.
    """
    path = db or default_db_path()
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


@app.command("schema")
def schema_command(
    table: Annotated[str | None, typer.Argument(help="A table name; all tables when omitted.")] = None,
    out_file: Annotated[Path | None, typer.Option("--out", help="Write the Markdown to this file.")] = None,
) -> None:
    """Print the data dictionary (every column's type, constraints and meaning) as Markdown.

    Reads: schemas/ (no database needed). Writes: --out FILE when given, else stdout.
    """
    if table is not None and table not in TABLES:
        raise fail(f"unknown table {table!r}; known: {', '.join(sorted(TABLES))}", EXIT_USAGE)
    text = data_dictionary([table] if table else None)
    if out_file:
        out_file.write_text(text + "\n")
        out.info(f"wrote {out_file}")
    else:
        typer.echo(text)


class QueryFormat(StrEnum):
    table = "table"
    csv = "csv"
    json = "json"
    parquet = "parquet"


@app.command("query")
def query_command(
    sql: Annotated[str, typer.Argument(help="One read statement (DuckDB dialect): SELECT, WITH, FROM, DESCRIBE, "
                                       "SHOW, SUMMARIZE or EXPLAIN.")],
    db: DbOption = None,
    fmt: Annotated[QueryFormat, typer.Option("--format", help="Output format.")] = QueryFormat.table,
    out_file: Annotated[Path | None, typer.Option("--out", help="Write results to this file.")] = None,
    limit: Annotated[int, typer.Option(help="Rows shown in table format (files get every row).")] = 50,
    lock_timeout: Annotated[float, typer.Option("--lock-timeout", help="Seconds to wait while another process "
                                                "(ingest, build) has the database open for writing.")] = 30.0,
) -> None:
    """Run one read-only SQL statement against the database.

    Reads: the database only, through a read-only connection that cannot reach files, extensions or settings;
    several statements, writes, ATTACH, COPY, EXPORT, SET, PRAGMA, INSTALL and read_csv()/glob() of other files
    are refused (exit 2). Writes: --out FILE when given (csv, json or parquet), else stdout; BLOB columns are
    written as hex text in csv and json.
    """
    import duckdb
    import polars as pl

    from pipeline.core.workspace import QueryRefused

    path = db or default_db_path()
    if fmt is QueryFormat.parquet and out_file is None:
        raise fail("--format parquet needs --out FILE", EXIT_USAGE)
    with open_workspace(path, read_only=True, lock_timeout_s=lock_timeout) as ws:
        try:
            df = ws.read(sql)
        except QueryRefused as err:
            raise fail(str(err), EXIT_USAGE) from err
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
    else:
        df = df.with_columns(pl.col(pl.Binary).bin.encode("hex"))  # text formats cannot hold raw bytes
        if fmt is QueryFormat.json or (fmt is QueryFormat.table and out_file is not None):
            _write_or_echo(json.dumps(df.to_dicts(), default=str, indent=1), out_file)
        else:
            from pipeline.report.html import csv_ready

            _write_or_echo(csv_ready(df).write_csv(), out_file)
    if out_file:
        out.info(f"wrote {df.height:,} rows to {out_file}")


def _format_choices() -> list[str]:
    from pipeline.ingest import FORMATS

    return ["auto", *FORMATS]


def run_manifest_dir(db_path: Path) -> Path:
    """Manifests of commands whose only output is the database live beside it."""
    return db_path.parent / (db_path.stem + ".runs")


@app.command("ingest")
def ingest_command(
    paths: Annotated[list[Path], typer.Argument(help="Files or directories (searched recursively).",
                                                exists=True, show_default=False)],
    db: DbOption = None,
    fmt: Annotated[str, typer.Option("--format", help="Input format; `auto` detects it from the content. One of: "
                                     "auto, arc3-recording, arc3-metadata, arc3-scorecard, study-manifest, and "
                                     "the H-ARC/ARC formats listed by `arcstudy formats`.")] = "auto",
    force: Annotated[bool, typer.Option("--force", help="Re-read files already ingested (same content hash) "
                                        "and replace what they loaded.")] = False,
    keep_frames: Annotated[bool, typer.Option("--keep-frames", help="Also write frame pixels to zstd Parquet "
                                              "(one file per recording), referenced from core_arc3__steps.")] = False,
    frames_dir: Annotated[Path | None, typer.Option("--frames-dir", help="Where --keep-frames writes "
                                                    "(default: <db>.frames/ beside the database).")] = None,
    lock_timeout: Annotated[float, typer.Option("--lock-timeout", help="Seconds to wait for another "
                                                "writer to release the database.")] = 30.0,
) -> None:
    """Validate and load input files into the database; bad lines and rows go to `quarantine`.

    Reads: the files and folders given (recordings, metadata.json, scorecards, study manifests, H-ARC CSVs,
    ARC task JSON, ARC-TGI CSVs). Writes: raw_* and core_* tables, `quarantine`, `raw_ingest__files`, a row in
    `runs` and its manifest under <db>.runs/; with --keep-frames, Parquet files under <db>.frames/.
    Exit code 3 when anything was quarantined or a file was refused (a FIFO, device or socket is refused
    unread: only regular files are read); exit code 2 when the paths hold no input file at all.
    """
    from rich.table import Table as RichTable

    from pipeline.core.manifest import RunManifest
    from pipeline.ingest import FORMATS, expand_paths, ingest_paths

    if fmt != "auto" and fmt not in FORMATS:
        raise fail(f"unknown format {fmt!r}; one of: {', '.join(_format_choices())}", EXIT_USAGE)
    db_path = db or default_db_path()
    frames_dir = frames_dir or db_path.parent / (db_path.stem + ".frames")
    manifest = RunManifest(command="arcstudy ingest " + " ".join(sys.argv[2:]) if len(sys.argv) > 2 else "ingest",
                           config={"format": fmt, "force": force, "keep_frames": keep_frames,
                                   "frames_dir": str(frames_dir), "db": str(db_path)})
    files = expand_paths(paths)
    if not files:
        raise fail(f"no input files in {', '.join(map(str, paths))} (hidden files and folders, *.py, *.pyc and "
                   "*.expected.json are skipped); nothing ingested", EXIT_USAGE)
    with open_workspace(db_path, lock_timeout_s=lock_timeout) as ws:
        report = ingest_paths(ws, files, run_id=manifest.run_id, fmt_name=fmt, force=force,
                              keep_frames=keep_frames, frames_dir=frames_dir, progress=out.track)
        for f in report.files:
            if f.status != "unreadable" and f.path.is_file():  # never hash a FIFO or device
                try:
                    manifest.add_input(f.path)
                except OSError:
                    pass
        code = EXIT_REJECTED if report.has_rejections else EXIT_OK
        manifest.notes["files"] = {s: sum(1 for f in report.files if f.status == s)
                                   for s in ("loaded", "replaced", "skipped", "rejected", "unreadable")}
        manifest.notes["quarantined"] = report.n_quarantined
        manifest.finish(code)
        ws.record_run(manifest)
    manifest.write_json(run_manifest_dir(db_path) / manifest.run_id)

    table = RichTable(title=f"ingest into {db_path}")
    for col in ("file", "status", "format", "loaded", "quarantined", "note"):
        table.add_column(col, justify="right" if col in ("loaded", "quarantined") else "left")
    for f in report.files:
        table.add_row(str(f.path.name), f.status, f.source_format or "-", f"{f.n_loaded:,}",
                      f"{f.n_quarantined:,}", f.message[:90])
    out.console.print(table)
    counts = manifest.notes["files"]
    out.console.print(
        f"{len(report.files)} files: {counts['loaded']} loaded, {counts['replaced']} replaced, "
        f"{counts['skipped']} skipped (already ingested), {counts['rejected']} refused, "
        f"{counts['unreadable']} unreadable; {report.n_quarantined:,} records quarantined."
    )
    if code == EXIT_REJECTED:
        out.console.print("Some input was rejected: see `arcstudy query \"SELECT * FROM quarantine WHERE run_id = "
                          f"'{manifest.run_id}'\"`.")
    raise typer.Exit(code)


@app.command("formats")
def formats_command() -> None:
    """List the input formats ingest recognises, with what each one is.

    Reads: nothing. Writes: stdout.
    """
    from pipeline.ingest import FORMATS

    table = RichTable(title="input formats")
    table.add_column("format")
    table.add_column("what it is")
    table.add_column("tables")
    for f in FORMATS.values():
        table.add_row(f.name, f.description, ", ".join(f.tables))
    out.console.print(table)


def _write_or_echo(text: str, out_file: Path | None) -> None:
    if out_file:
        out_file.write_text(text)
    else:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")


from pipeline.transforms.cli import register as _register_transforms  # noqa: E402

_register_transforms(app)

from pipeline.scoring.cli import register as _register_scoring  # noqa: E402

_register_scoring(app)

from pipeline.harc.cli import register as _register_harc  # noqa: E402

_register_harc(app)

from pipeline.report.cli import register as _register_report  # noqa: E402

_register_report(app)

from pipeline.simulate.cli import register as _register_simulate  # noqa: E402

_register_simulate(app)

from pipeline.demo import register as _register_demo  # noqa: E402

_register_demo(app)

from pipeline.report.reports_cli import register as _register_reports  # noqa: E402

_register_reports(app)


from pipeline.explore.cli import register as _register_explore  # noqa: E402

_register_explore(app)

from pipeline.qualify.cli import register as _register_qualify  # noqa: E402

_register_qualify(app)


if __name__ == "__main__":  # pragma: no cover
    app()
