"""The `arcstudy` command line: this module only assembles the app, one command per module of
pipeline/commands/ (where each verb says in --help what it reads and writes). Console script:
`arcstudy = pipeline.__main__:main` (which starts what it can before importing this module, then runs the app);
`python -m pipeline` and `python -m pipeline.cli` are the same program.

A verb's module is imported only when that verb runs (or `--help` lists them all): importing every command
module costs about 0.25 s per process, most of it modules the verb never uses.

Exit codes (pipeline/commands/common.py): 0 ok, 1 error, 2 usage, 3 completed with rejected input, 130 interrupted,
143 terminated (SIGTERM).
"""

from __future__ import annotations

import sys

if __name__ == "__main__":  # `python -m pipeline.cli`: the program's early work first, as pipeline/__main__.py does
    from pipeline.commands.early import start_early_work, stop_on_sigterm

    stop_on_sigterm()
    start_early_work(sys.argv[1:])

import importlib  # the app's imports come after that early work (E402 is off for this file)
from collections.abc import Iterator, MutableMapping
from typing import Annotated, NoReturn

import click
import typer
from typer.main import get_command_from_info
from typer.models import CommandInfo

import pipeline
from pipeline.commands.common import EXIT_OK, Command, Group, UsageError, unknown_option
from pipeline.core.console import out
from pipeline.core.special_files import undecodable

# verb: (module of pipeline/commands/, its function), in the order `arcstudy --help` lists them: the order a
# user meets them
COMMANDS: dict[str, tuple[str, str]] = {
    "tables": ("tables", "tables_command"),
    "schema": ("schema", "schema_command"),
    "query": ("query", "query_command"),
    "ingest": ("ingest", "ingest_command"),
    "formats": ("ingest", "formats_command"),
    "forget": ("forget", "forget_command"),
    "build": ("build", "build_command"),
    "baselines": ("build", "baselines_command"),
    "score": ("score", "score_command"),
    "recover-actions": ("recover", "recover_actions_command"),
    "replay-harc": ("harc", "replay_harc_command"),
    "harc-analyses": ("harc", "harc_analyses_command"),
    "harc-graph": ("harc", "harc_graph_command"),
    "view": ("view", "view_command"),
    "replay": ("replay", "replay_command"),
    "export-transitions": ("export_transitions", "export_transitions_command"),
    "simulate": ("simulate", "simulate_command"),
    "demo": ("demo", "demo_command"),
    "report": ("report", "report_command"),
    "explore": ("explore", "explore_command"),
    "qualify": ("qualify", "qualify_command"),
    "check-witnesses": ("witnesses", "check_witnesses_command"),
}


class _Verbs(MutableMapping):
    """The app's commands by name, each built from its module the first time it is looked up."""

    def __init__(self) -> None:
        self._built: dict[str, click.Command] = {}

    def __getitem__(self, name: str) -> click.Command:
        if name not in self._built:
            module, function = COMMANDS[name]
            callback = getattr(importlib.import_module(f"pipeline.commands.{module}"), function)
            self._built[name] = get_command_from_info(
                CommandInfo(name=name, cls=Command, callback=callback),
                pretty_exceptions_short=app.pretty_exceptions_short, rich_markup_mode=app.rich_markup_mode)
        return self._built[name]

    def __setitem__(self, name: str, command: click.Command) -> None:
        raise TypeError(f"arcstudy's verbs are listed in pipeline.cli.COMMANDS, not added ({name})")

    def __delitem__(self, name: str) -> None:
        raise TypeError(f"arcstudy's verbs cannot be removed ({name})")

    def __iter__(self) -> Iterator[str]:
        return iter(COMMANDS)

    def __len__(self) -> int:
        return len(COMMANDS)


class _App(Group):
    """The app's group, whose commands are `_Verbs`."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.commands = _Verbs()

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        for arg in args:  # a path of bytes that are not UTF-8 could be neither opened by name in a table nor shown
            shown = undecodable(arg)
            if shown is not None:
                raise UsageError(f"the argument {shown} is not UTF-8 text (each byte that is not is shown as \\xNN): "
                                 "rename the file or folder, or give a path that is", ctx)
        try:
            return super().parse_args(ctx, args)
        except UsageError as err:  # a command's option before the command: say where it goes
            name = unknown_option(err)
            verbs = [v for v in COMMANDS if name and any(name in (*p.opts, *p.secondary_opts)
                                                         for p in self.commands[v].params)]
            if not verbs:
                raise
            where = f"{len(verbs)} commands have it" if len(verbs) > 3 else f"of {', '.join(verbs)}"
            raise UsageError(f"{name} is an option of the command ({where}), not of arcstudy itself: put it after "
                             f"the command, e.g. arcstudy {verbs[0]} {name} ...", ctx) from err


class _Program(typer.Typer):
    """The app. Run as the program (the console script, `python -m pipeline` or `pipeline.cli`: no arguments) it
    ends the process once the command is done without the interpreter's teardown of polars, DuckDB, numpy and
    the rest, which took 0.11-0.13 s after every command (5 % of an 80-recording ingest). Called with
    arguments (a test, a notebook) it behaves as any Typer app."""

    def __call__(self, *args, **kwargs):
        if args or kwargs:
            return super().__call__(*args, **kwargs)
        try:
            return super().__call__()
        except SystemExit as done:
            end_process(done)


def end_process(done: SystemExit) -> NoReturn:
    """End the process with `done`'s exit code, skipping the interpreter's teardown when nothing can be lost by
    it: only then, i.e. when the code is a number and no other non-daemon thread runs (Python would wait for
    it). Buffered output is flushed, garbage that holds resources (a spilled file) is collected, and the exit
    functions (atexit: temporary folders, logging, Dask) run first, as at a normal exit."""
    import atexit
    import gc
    import os
    import sys
    import threading

    code = 0 if done.code is None else done.code
    others = [t for t in threading.enumerate() if t is not threading.main_thread() and not t.daemon and t.is_alive()]
    if not isinstance(code, int) or others:
        raise done
    gc.collect()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError, AttributeError):  # a closed pipe (`arcstudy ... | head`), no stream (`>&-`)
            pass
    os._exit(code)


app = _Program(
    name="arcstudy",
    cls=_App,
    help="Trustworthy numbers from ARC human studies and agent runs.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    # Help and usage errors in click's plain layout: it wraps every line to the terminal (COLUMNS) and never cuts
    # a word, where rich's boxed tables cut option names and paths with an ellipsis below ~120 columns.
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 120},
)


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


if __name__ == "__main__":  # pragma: no cover
    app()
