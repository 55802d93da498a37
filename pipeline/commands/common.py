"""What several `arcstudy` verbs share: exit codes, the `--db` and `--lock-timeout` options, the short error
exit, opening the workspace and where run manifests go. Nothing here imports pipeline.cli.

Exit codes: 0 ok, 1 error, 2 usage, 3 completed with rejected input (see the `quarantine` table), 130 interrupted.
"""

from __future__ import annotations

import errno
import os
import shlex
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from typer.core import TyperCommand, TyperGroup

from pipeline.commands.early import interruption, too_many_open_files
from pipeline.core.console import StdoutFailed, out
from pipeline.core.outputs import OUTPUT_ERRNOS, OutputError, as_output_error, is_output_oserror
from pipeline.core.special_files import not_regular_file

if TYPE_CHECKING:
    from pipeline.core.workspace import Workspace

# DuckDB and polars (and the workspace, which needs both) are imported where they are used, not here: every
# command imports this module, and a command that never opens a database (export-transitions of files, replay,
# view) would pay ~0.3 s of start-up for them.

EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_REJECTED = 0, 1, 2, 3
EXIT_INTERRUPTED = 130  # the shell's code for a run stopped by Ctrl-C (128 + SIGINT)

DbOption = Annotated[
    Path | None,
    typer.Option("--db", help="DuckDB database file (default: $ARCSTUDY_DB or ./arcstudy.duckdb; commands that only "
                 "read fall back to reports/demo/demo.duckdb when neither exists).",
                 dir_okay=False, show_default=False),
]

RawCsvOption = Annotated[bool, typer.Option(
    "--raw-csv", help="Write CSV cells as they are: without it, text that a spreadsheet would run as a formula "
                      "(starting with = + - @, TAB or CR) gets a leading ' (Parquet is always as is).")]

GameVersionOption = Annotated[
    str | None,
    typer.Option("--game-version", help="Playback scripts: replay on this game version (a version hash or "
                 "<code>-<version>) instead of the one the script names (or, when absent, the latest of its code).",
                 show_default=False),
]


def lock_timeout_seconds(value: float) -> float:
    """--lock-timeout: seconds >= 0 (inf waits as long as it takes); NaN, which no clock ever passes, would wait
    forever without saying so, and a negative wait is no wait."""
    if value != value or value < 0:
        raise typer.BadParameter(f"{value}: give a number of seconds >= 0")
    return value


LockTimeoutOption = Annotated[float, typer.Option("--lock-timeout", help="Seconds to wait for another writer.",
                                                  callback=lock_timeout_seconds)]

# The fan-out of a command whose work splits into independent pieces (pipeline.core.executor, docs/cluster.md).
# None means one worker per usable core, left to the command to resolve (a command may stay serial when its
# input is too small for a cluster's start to pay off). Results do not depend on either option.
MAX_WORKERS = 256  # local processes: a typo like 2**70 must not start a cluster until memory runs out
WorkersOption = Annotated[int | None, typer.Option(
    "--workers", min=1, max=MAX_WORKERS, show_default=False,
    help="Worker processes (a local Dask cluster); 1 = serial, in this process, without Dask "
         "(default: all usable cores). Results do not depend on it.")]
SchedulerOption = Annotated[str | None, typer.Option(
    "--scheduler", metavar="ADDRESS", show_default=False,
    help="tcp://host:port of an existing Dask cluster to run the work on instead (its workers must see the "
         "same paths; arcstudy never closes it). Replaces --workers.")]


class _FlagsWithoutType:
    """Help that shows no value type after an on/off flag: typer 0.29 prints `<bool>` after every flag (--help
    included), which reads as if the flag took a value. An empty metavar is click's public way to show none."""

    def get_params(self, ctx):
        params = super().get_params(ctx)
        for param in params:
            if getattr(param, "is_flag", False) and param.metavar is None:
                param.metavar = ""
        return params


# Options of `arcstudy` itself (pipeline.cli.main). --plain is accepted after the command too (it only changes how
# output looks); --version gets a hint there.
GLOBAL_OPTIONS = ("--plain", "--version")
# typer 0.29 parses with its own copy of click, whose UsageError it exports only as BadParameter's base
UsageError: type[Exception] = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "UsageError")


def unknown_option(err: Exception) -> str | None:
    """The option a "No such option" usage error names, else None."""
    return getattr(err, "option_name", None) if type(err).__name__ == "NoSuchOption" else None


class Command(_FlagsWithoutType, TyperCommand):
    """Every `arcstudy` verb: `app.command(name, cls=Command)`.

    A path option naming a FIFO, socket or device is refused (exit 2) before the verb runs: opening it would
    hang or never end. /dev/null stays usable. Positional inputs are the verbs' own to judge (ingest and score
    report such a file among the rejected).

    Verbs end with `typer.Exit`; a SystemExit reaching here was raised by code arcstudy runs (a game's `sys.exit()`
    or `exit()`): it would end the run with the game's code (0 reads as success) and nothing said, so it is
    reported as an error instead."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        own = {opt for param in self.params for opt in (*param.opts, *param.secondary_opts)}
        end = args.index("--") if "--" in args else len(args)
        if "--plain" not in own and "--plain" in args[:end]:  # `arcstudy tables --plain` as `arcstudy --plain tables`
            out.set_plain(True)
            args = [a for i, a in enumerate(args) if not (a == "--plain" and i < end)]
        try:
            return super().parse_args(ctx, args)
        except UsageError as err:
            name = unknown_option(err)
            if name in GLOBAL_OPTIONS and name not in own:
                raise UsageError(f"{name} is a global option: put it before the command (arcstudy {name})",
                                 ctx) from err
            raise

    def invoke(self, ctx: Any) -> Any:
        for param in self.params:
            if param.param_type_name != "option":  # typer's own click: no isinstance against click.Option
                continue
            value = ctx.params.get(param.name or "")
            for path in value if isinstance(value, list | tuple) else [value]:
                if isinstance(path, Path) and str(path) != os.devnull:
                    kind = not_regular_file(path, dir_ok=True)
                    if kind is not None:
                        raise fail(f"{param.opts[-1]} {path}: {kind}, not a regular file or folder", EXIT_USAGE)
        try:
            try:
                return super().invoke(ctx)
            except Exception as err:
                failure = _database_failure(err) or _scheduler_failure(err)
                if failure is None:
                    raise
                raise failure from err
        except OutputError as err:  # an output (or scratch space) that cannot be written: not the input's fault
            raise output_failed(err) from err
        except RecursionError as err:  # the readers of input files say which; this is for any other reading
            raise fail("an input given to the command is nested too deeply to read (thousands of brackets or tables "
                       "inside one another); the command stopped before finishing") from err
        except SystemExit as err:
            from engine.loader import describe_game_error

            raise fail(f"code run by arcstudy called exit ({describe_game_error(err)}); the command stopped before "
                       "finishing and its output is incomplete") from err
        except KeyboardInterrupt as err:  # Ctrl-C (e.g. out of a game that never returns from a step), SIGTERM
            raise _interrupted() from err
        except MemoryError as err:  # a limit on the address space (ulimit -v) or a machine out of memory
            raise fail("out of memory: the command stopped before finishing (a memory limit such as `ulimit -v`, or "
                       "too little free memory; fewer --workers use less)") from err
        except OSError as err:
            if err.errno not in (errno.EMFILE, errno.ENFILE):
                raise
            raise fail(too_many_open_files(err.errno)) from err
        except StdoutFailed as failed:  # the command's result (out.result): its reader went away, or stdout is full
            _stdout_to_devnull()
            err = failed.err
            if isinstance(err, BrokenPipeError):  # `arcstudy query ... | head`: the reader had what it wanted
                raise typer.Exit(EXIT_OK) from err
            why = err.strerror if isinstance(err, OSError) and err.strerror else "there is no stdout"
            raise fail(f"cannot write the result to stdout ({why}): it was cut short") from err
        except BaseException as err:  # last: every clause above sees its own first
            words = _cannot_start_sandbox(err)
            if words is None:
                raise
            raise fail(words) from err


def _cannot_start_sandbox(err: BaseException) -> str | None:
    """What to say when this process could not start a sandbox child for code from outside (a limit of this
    machine, not the input's failure: `pipeline.core.sandbox.SandboxCannotStart`); None for any other error. Looked
    at only once the sandbox is imported, as `_database_failure` does for DuckDB."""
    sandbox = sys.modules.get("pipeline.core.sandbox")
    if sandbox is None or not isinstance(err, sandbox.SandboxCannotStart):
        return None
    error = err.error
    if error.errno in (errno.EMFILE, errno.ENFILE):
        return too_many_open_files(error.errno)
    why = {errno.EAGAIN: "too many processes (`ulimit -u`) or threads",
           errno.ENOMEM: "too little free memory",
           errno.ENOSPC: f"the disk of the temporary folder ({tempfile.gettempdir()}) is full",
           errno.EDQUOT: f"the disk quota of the temporary folder ({tempfile.gettempdir()}) is used up"}
    return (f"could not start the sandbox that runs code from outside ({why.get(error.errno, error.strerror)}); the "
            "command stopped before finishing: free the resource and run it again")


def _scheduler_failure(err: Exception) -> typer.Exit | None:
    """The exit for a --scheduler that cannot be used (`pipeline.core.executor.SchedulerUnreachable`), said."""
    executor = sys.modules.get("pipeline.core.executor")
    if executor is None or not isinstance(err, executor.SchedulerUnreachable):
        return None
    return fail(str(err))


def _database_failure(err: Exception) -> typer.Exit | None:
    """The exit for a DuckDB failure that is not a bug (out of memory, stopped by Ctrl-C or SIGTERM mid-query, the
    database's own file cannot be written: a full disk, a name too long), said; None for any other error. DuckDB
    raises nothing before it is imported, so it is looked at only once some module has."""
    duckdb = sys.modules.get("duckdb")
    if duckdb is None:
        return None
    if isinstance(err, duckdb.OutOfMemoryException):
        return fail(f"DuckDB ran out of memory ({_first_line(err)}); the command stopped before finishing and "
                    "what it was writing was rolled back")
    if isinstance(err, duckdb.InterruptException) or (isinstance(err, RuntimeError)
                                                       and str(err) == "Query interrupted"):
        return _interrupted()
    if isinstance(err, duckdb.IOException) and "Could not read" in str(err):  # a file cut short or damaged
        return fail(f"cannot read the database: {_first_line(err)}; its file is damaged or cut short (a copy "
                    "that stopped early?): restore it, or make it again with `arcstudy ingest`")
    if isinstance(err, duckdb.Error) and _is_database_write_error(err):
        return fail(f"cannot write the database: {_first_line(err).removeprefix('TransactionContext Error: ')}; "
                    "what was being written was rolled back (free some space, or choose another --db)")
    return None


def _stdout_to_devnull() -> None:
    """Later writes to stdout (the interpreter's flush at exit) go nowhere instead of failing again."""
    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass


def _interrupted() -> typer.Exit:
    words, code = interruption()
    return fail(f"{words}: the command stopped before finishing; output files and folders it had not finished were "
                "left as they were", code)


class Group(_FlagsWithoutType, TyperGroup):
    """The `arcstudy` app itself: `typer.Typer(cls=Group)`."""

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        """Each command with the whole first sentence of its help, wrapped (click cuts it at the line's end
        with "...", which at 80 columns left most of every summary out)."""
        rows = []
        for name in self.list_commands(ctx):
            command = self.get_command(ctx, name)
            if command is not None and not command.hidden:
                rows.append((name, command.get_short_help_str(limit=1000)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


_FULL = OUTPUT_ERRNOS - {errno.EROFS}


def _is_database_write_error(err: BaseException) -> bool:
    """DuckDB's I/O failures (a full disk, a file it cannot create), which it raises as IOException or, at a
    commit, as a TransactionException."""
    import duckdb

    return isinstance(err, duckdb.IOException) or (isinstance(err, duckdb.TransactionException)
                                                  and "Failed to commit" in str(err))


def _first_line(err: BaseException) -> str:
    return (str(err).strip().splitlines() or [type(err).__name__])[0]


def output_failed(err: OutputError) -> typer.Exit:
    """The one way an output that cannot be written ends a command: one line naming the path and the OS's
    reason, exit 1 (pipeline.core.outputs raises OutputError for every output-side OSError)."""
    return fail(f"{err}; free some space, or choose another place"
                if err.errno in _FULL else
                f"{err}; choose another place, or remove what is in the way")


def fail(message: str, code: int = EXIT_ERROR) -> typer.Exit:
    """Print `message` as an error and return the exit to raise: `raise fail(...) from err`."""
    out.error(message)
    return typer.Exit(code)


def open_workspace(db: Path | None, *, read_only: bool = False, lock_timeout_s: float = 30.0) -> Workspace:
    from pipeline.core.workspace import Workspace, WorkspaceError, default_db_path

    path = db or default_db_path()
    if not read_only:
        refuse_too_long_database_name(path)
    try:
        return Workspace(path, read_only=read_only, lock_timeout_s=lock_timeout_s)
    except WorkspaceError as err:
        raise fail(str(err)) from err


def left_out_beside(out_file: Path) -> Path:
    """Where a command whose output is one file lists every input line it left out, past the manifest's share."""
    return out_file.with_name(out_file.stem + ".left_out.jsonl")


def refuse_names_too_long(option: str, *paths: Path) -> None:
    """Exit 1 before any work when a file the command writes (its output, the manifest beside it) has a longer
    name than the file system allows: found at the manifest, after the work, the output stood complete-looking
    while the command failed."""
    for path in paths:
        try:
            limit = os.pathconf(path.parent if str(path.parent) else ".", "PC_NAME_MAX")
        except (OSError, ValueError):  # a folder not made yet: the usual limit
            limit = 255
        if len(os.fsencode(path.name)) > limit:
            raise fail(f"cannot write {option} {paths[0]}: File name too long ({path.name[:40]}... needs "
                       f"{len(os.fsencode(path.name))} bytes, the file system allows {limit}); choose a shorter name")


def refuse_too_long_database_name(db: Path) -> None:
    """Exit 1 before any work when the log DuckDB writes beside the database (`<db>.wal`) would have a longer name
    than the file system allows: the database would otherwise fail at its first commit, after the work."""
    try:
        limit = os.pathconf(db.parent if str(db.parent) else ".", "PC_NAME_MAX")
    except (OSError, ValueError):
        limit = 255
    longest = len(os.fsencode(db.name + ".wal"))
    if longest > limit:
        raise fail(f"cannot write the database {db}: File name too long (the log DuckDB keeps beside it, the name "
                   f"plus .wal, needs {longest} characters; the file system allows {limit}); choose a shorter --db "
                   "name")


def write_run_manifest(manifest: Any, db_path: Path) -> Path:
    """The manifest of a run whose output is the database, under `<db>.runs/<run_id>/` (run_manifest_dir). The
    database is already written: a manifest that cannot be (a file named `<db>.runs`, a full disk) says so in one
    line, exit 1."""
    try:
        return manifest.write_json(run_manifest_dir(db_path) / manifest.run_id)
    except OutputError as err:
        raise fail(f"{db_path} was written (run {manifest.run_id} is in its `runs` table), but {err}; remove what "
                   "is in the way") from err


def refuse_overwriting_database(out_file: Path | None, db: Path, option: str = "--out") -> None:
    """Exit 2 when an output file or folder is the database (or its write-ahead log) under any name: writing a
    result there would destroy the study, and a command that only reads must not be able to (a folder named
    `<db>.wal` made every later opening of the database fail, replaying its log)."""
    if out_file is None:
        return
    wal = db.with_name(db.name + ".wal")
    for protected in (db, wal):
        try:
            same = (os.path.realpath(out_file) == os.path.realpath(protected)  # Path.resolve raises on a loop
                    or (out_file.exists() and protected.exists() and out_file.samefile(protected)))
        except OSError:  # e.g. a name too long to exist: not the database (writing it fails, and says why)
            same = False
        if same:
            raise fail(f"{option} {out_file} is the database{' log' if protected is wal else ''} ({protected}); "
                       "choose another name", EXIT_USAGE)


def make_out_dir(path: Path, option: str = "--out", db: Path | None = None) -> Path:
    """Create the folder a command writes into before any work: one that cannot exist (under a regular file, in
    a missing or read-only place, a NUL in its name, too long a name) stops the command with exit 1 naming
    `option`; one that is the database `db` or its log, with exit 2."""
    if db is not None:
        refuse_overwriting_database(path, db, option)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except (OSError, ValueError) as err:
        raise fail(f"cannot write {option} {path}: {getattr(err, 'strerror', None) or err}; choose a folder "
                   "that can be created") from err
    return path


@contextmanager
def out_write_errors_said(folder: Path | None, option: str = "--out") -> Iterator[None]:
    """A file or folder under `folder` that cannot be written (a regular file where a subfolder goes, a full
    disk) stops the command with exit 1 naming the path, instead of a traceback; other errors pass."""
    try:
        yield
    except OSError as err:
        if folder is None or not is_output_oserror(err, folder):
            raise
        raise output_failed(as_output_error(err, folder)) from err


@contextmanager
def foreign_tables_said(db_path: Path) -> Iterator[None]:
    """A database whose tables lack the columns arcstudy reads (another program's, or another table under an
    arcstudy name) stops the command with exit 1 saying so, instead of a traceback from deep inside."""
    import duckdb
    import polars as pl

    try:
        yield
    except (duckdb.BinderException, duckdb.CatalogException, pl.exceptions.ColumnNotFoundError,
            pl.exceptions.SchemaError, pl.exceptions.SchemaFieldNotFoundError) as err:  # not I/O, locks, bugs
        first = (str(err).strip().splitlines() or [type(err).__name__])[0]
        raise fail(f"cannot use {db_path}: {first}; its tables do not have the columns arcstudy expects (a "
                   "database of another program or version?): give --db the database `arcstudy ingest` wrote") from err


def refuse_overwriting_any_database(out_file: Path | None) -> None:
    """Exit 2 when an output file is an existing DuckDB database, for commands that have no --db to compare
    with (`schema --out`, `baselines --from-counts --out`): a text file written there destroys a study."""
    if out_file is None:
        return
    from pipeline.core.workspace import DUCKDB_MAGIC

    offset, magic = DUCKDB_MAGIC
    try:
        with open(out_file, "rb") as fh:
            head = fh.read(offset + len(magic))
    except (OSError, ValueError):  # missing, a folder, a bad name: writing it says why
        return
    if head[offset:] == magic:
        raise fail(f"--out {out_file} is a DuckDB database; choose another file", EXIT_USAGE)


def db_to_read(db: Path | None) -> Path:
    """The database a read-only command opens: --db, else `default_db_to_read()`, saying so when that is the
    demo database (on stderr: stdout may be a query's CSV)."""
    if db is not None:
        return db
    from pipeline.core.workspace import default_db_to_read

    path, is_demo = default_db_to_read()
    if is_demo:
        out.info(f"using the demo database {path} (no ./arcstudy.duckdb; --db or $ARCSTUDY_DB choose another)")
    return path


# The folders the commands write beside the database by default, `<db stem><suffix>/`: one list, which
# `database_companions` leaves out of an ingest's input.
RUNS, FRAMES, REPORTS, SCORES, HARC, BUILD = ".runs", ".frames", ".reports", ".score", ".harc", ".build"
DATABASE_FOLDERS = (RUNS, FRAMES, REPORTS, SCORES, HARC, BUILD)


def beside_database(db_path: Path, suffix: str) -> Path:
    """The default folder `suffix` (one of DATABASE_FOLDERS) of the database `db_path`."""
    return db_path.parent / (db_path.stem + suffix)


def database_companions(db_path: Path) -> list[Path]:
    """The database file, its write-ahead log and the folders the commands write beside it by default: what an
    `ingest .` run from the database's own folder must not take for input."""
    return [db_path, db_path.with_name(db_path.name + ".wal"),
            *(beside_database(db_path, suffix) for suffix in DATABASE_FOLDERS)]


def run_manifest_dir(db_path: Path) -> Path:
    """Manifests of commands whose only output is the database live beside it."""
    return beside_database(db_path, RUNS)


def command_line(ctx: typer.Context) -> str:
    """The verb being run and the arguments it was given, for run manifests: `arcstudy <verb> <arguments>`.

    Rebuilt from the verb's own context (take `ctx: typer.Context` in the command) rather than sys.argv, so a verb
    run in-process by another one (each step of `arcstudy demo`) records its own command line, not the outer one.
    Only parameters given on the command line are written (defaults and environment values were not typed);
    values are shell-quoted. Parameters are read by their public attributes: typer may bring its own click."""
    words = ["arcstudy", ctx.info_name or ctx.command.name or "?"]
    for param in ctx.command.params:
        source = ctx.get_parameter_source(param.name) if param.name else None
        if getattr(source, "name", None) != "COMMANDLINE":
            continue
        words += _param_words(param, ctx.params.get(param.name))
    return shlex.join(words)


def _param_words(param: Any, value: Any) -> list[str]:
    values = list(value) if isinstance(value, (list, tuple)) else [value]
    if param.param_type_name == "argument":
        return [_word(v) for v in values if v is not None]
    if param.count:
        return [param.opts[0]] * int(value or 0)
    if param.is_flag:
        if not value:
            return param.secondary_opts[:1]
        return param.opts[:1]
    return [word for v in values if v is not None for word in (param.opts[0], _word(v))]


def _word(value: Any) -> str:
    if isinstance(value, Enum):
        return str(value.value)
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)
