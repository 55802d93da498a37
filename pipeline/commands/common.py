"""What several `arcstudy` verbs share: exit codes, the `--db` and `--lock-timeout` options, the short error
exit, opening the workspace and where run manifests go. Nothing here imports pipeline.cli.

Exit codes: 0 ok, 1 error, 2 usage, 3 completed with rejected input (see the `quarantine` table).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from pipeline.core.console import out
from pipeline.core.workspace import Workspace, WorkspaceError, default_db_path

EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_REJECTED = 0, 1, 2, 3

DbOption = Annotated[
    Path | None,
    typer.Option("--db", help="DuckDB database file (default: $ARCSTUDY_DB or ./arcstudy.duckdb).",
                 dir_okay=False, show_default=False),
]

LockTimeoutOption = Annotated[float, typer.Option("--lock-timeout", help="Seconds to wait for another writer.")]

# The fan-out of a command whose work splits into independent pieces (pipeline.core.executor, docs/cluster.md).
# None means one worker per usable core, left to the command to resolve (a command may stay serial when its
# input is too small for a cluster's start to pay off). Results do not depend on either option.
WorkersOption = Annotated[int | None, typer.Option(
    "--workers", min=1, show_default=False,
    help="Worker processes (a local Dask cluster); 1 = serial, in this process, without Dask "
         "(default: all usable cores). Results do not depend on it.")]
SchedulerOption = Annotated[str | None, typer.Option(
    "--scheduler", metavar="ADDRESS", show_default=False,
    help="tcp://host:port of an existing Dask cluster to run the work on instead (its workers must see the "
         "same paths; arcstudy never closes it). Replaces --workers.")]


def fail(message: str, code: int = EXIT_ERROR) -> typer.Exit:
    """Print `message` as an error and return the exit to raise: `raise fail(...) from err`."""
    out.error(message)
    return typer.Exit(code)


def open_workspace(db: Path | None, *, read_only: bool = False, lock_timeout_s: float = 30.0) -> Workspace:
    try:
        return Workspace(db or default_db_path(), read_only=read_only, lock_timeout_s=lock_timeout_s)
    except WorkspaceError as err:
        raise fail(str(err)) from err


def run_manifest_dir(db_path: Path) -> Path:
    """Manifests of commands whose only output is the database live beside it."""
    return db_path.parent / (db_path.stem + ".runs")


def command_line(name: str) -> str:
    """The command as typed, for run manifests: `arcstudy <name> <its arguments>`."""
    return f"arcstudy {name} " + " ".join(sys.argv[2:]) if len(sys.argv) > 2 else f"arcstudy {name}"
