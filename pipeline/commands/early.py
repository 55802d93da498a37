"""What the `arcstudy` program starts before it imports the app (pipeline/__main__.py).

Importing the app (typer, polars, DuckDB, the command layer) takes about 0.3 s of the process's start. An
`ingest` without --workers or --scheduler reads with a helper process while a core is free
(`pipeline.ingest.runner.start_helper`), and the helper spends about 0.5 s importing the same libraries before
its first file. Started here, from a look at the command line alone, its start overlaps this process's imports:
on an 80-recording study the ingest took 2.09 s against 2.21 s (six interleaved runs each). The command still
decides as before; a helper it does not want (a small input, or options this look does not read) is ended
unused.

It also makes numpy's BLAS single-threaded unless the user says otherwise (`single_threaded_blas`), before
anything imports numpy.

It also turns SIGTERM (what `timeout`, systemd, `docker stop`, Slurm and CI cancellation send) into an
interruption, as Ctrl-C is (`stop_on_sigterm`): the command stops the same way, cleaning up its staged outputs,
temporary folders and open transaction, says so in one line and exits 143 (128 + SIGTERM), instead of vanishing
with its scratch files left behind.

This module imports nothing heavy: it runs before everything else.
"""

from __future__ import annotations

import os
import resource  # here, not where the limit is said: with no descriptor left, that import could not open its file
from collections.abc import Sequence

# verb -> the modules its helper process imports (must equal what the verb's helper is started with:
# pipeline.ingest.runner.HELPER_PRELOAD, checked by a test; a helper started with others is not taken)
EARLY_HELPERS = {"ingest": ("pipeline.ingest.runner",)}
_NO_RUN_OPTIONS = ("--help", "-h", "--version")  # options that make the command not run at all
# options that make the command read without a helper, or not run at all
_NO_HELPER_OPTIONS = ("--workers", "--scheduler", *_NO_RUN_OPTIONS)
# verbs that replay games in the sandbox: a child is started here, in the background, so that its start (about
# 0.3 s) overlaps the app's imports (pipeline.core.game_code.start_game_sandbox_early). The first game replayed in
# this process takes it; when none is (nothing to replay, other limits, the work on worker processes) it is closed
# unused at exit, its start paid on the other core
EARLY_SANDBOX_VERBS = ("export-transitions", "score")


def verb_of(args: Sequence[str]) -> str | None:
    """The command's verb: the first argument that is not an option (arcstudy's own options take no value)."""
    return next((a for a in args if not a.startswith("-")), None)


# numpy's OpenBLAS starts a thread per core when numpy is imported: about 0.09 s of CPU per process here (the
# program, its ingest helper), for matrices that are never big enough to share (the statsmodels fits of a few
# thousand rows). Dask's nanny sets the same for its workers, and the sandbox for its children
# (pipeline.core.sandbox).
BLAS_THREADS = {"OPENBLAS_NUM_THREADS": "1"}


def single_threaded_blas() -> None:
    """One BLAS thread for this process and those it starts, unless the environment already sets a number."""
    for name, value in BLAS_THREADS.items():
        os.environ.setdefault(name, value)


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the main thread is: handled as Ctrl-C is (a KeyboardInterrupt), said as SIGTERM."""


_terminated = False


def _on_sigterm(signum: int, frame: object) -> None:
    global _terminated
    _terminated = True
    raise Terminated()


def stop_on_sigterm() -> None:
    """SIGTERM raises `Terminated` in the main thread (the default would end the process at once, no cleanup)."""
    import signal
    import threading

    if threading.current_thread() is threading.main_thread() and \
            signal.getsignal(signal.SIGTERM) in (signal.SIG_DFL, None):
        signal.signal(signal.SIGTERM, _on_sigterm)


def was_terminated() -> bool:
    """Whether SIGTERM came (an interruption that surfaced as another exception, e.g. DuckDB's, is said as it)."""
    return _terminated


INTERRUPTED_CTRL_C, INTERRUPTED_SIGTERM = 130, 143  # the shell's codes: 128 + SIGINT, 128 + SIGTERM


def interruption() -> tuple[str, int]:
    """How the command was stopped, in words, and its exit code."""
    return ("terminated (SIGTERM)", INTERRUPTED_SIGTERM) if _terminated else ("interrupted (Ctrl-C)",
                                                                              INTERRUPTED_CTRL_C)


def too_many_open_files(code: int) -> str:
    """What a command says when it ran out of file descriptors: this process's (`code` EMFILE), with the limit to
    raise, or the whole machine's (ENFILE)."""
    import errno

    if code == errno.ENFILE:
        return ("too many open files on this machine (the system's limit on open files is reached); the command "
                "stopped before finishing: run it again when other programs hold fewer files")
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    return (f"too many open files (this process may open {soft}: `ulimit -n`); the command stopped before finishing: "
            "raise the limit (1024 or more) and run it again")


# below this many open files (`ulimit -n`), no sandbox child is started early: its pipes, opened on a thread of
# its own, would take descriptors the app's imports need at the same moment (a race the command cannot say well)
EARLY_SANDBOX_MIN_FILES = 64


def _few_files_allowed() -> bool:
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    return soft != resource.RLIM_INFINITY and soft < EARLY_SANDBOX_MIN_FILES


def _on_workers(args: Sequence[str]) -> bool:
    """Whether the command is told to run its work on other processes (--scheduler, or --workers above 1): the
    games are then replayed there, not in this process."""
    for i, arg in enumerate(args):
        name, _, value = arg.partition("=")
        if name == "--scheduler":
            return True
        if name == "--workers":
            value = value or (args[i + 1] if i + 1 < len(args) else "")
            return value.strip() != "1"
    return False


def _start_sandbox() -> None:
    """Imported here, in the main thread (the command imports these modules anyway: a second thread importing
    beside the app's imports could meet them half-initialised); the child starts on a thread of its own."""
    try:
        from pipeline.core.game_code import start_game_sandbox_early

        start_game_sandbox_early()
    except Exception:  # noqa: BLE001 - e.g. a limit in the environment that is no number: the command says it
        pass


def start_early_work(args: Sequence[str]) -> None:
    """Make the BLAS single-threaded (`single_threaded_blas`), then start the helper process the command given
    by `args` (the program's arguments) is likely to read with: only for a verb that reads with one, without
    options that rule it out, on two cores or more, while a core is free (`core_free`, as the command itself
    decides)."""
    single_threaded_blas()
    if verb_of(args) in EARLY_SANDBOX_VERBS and not any(a.split("=", 1)[0] in _NO_RUN_OPTIONS for a in args) \
            and not _on_workers(args) and not _few_files_allowed():
        _start_sandbox()
    preload = EARLY_HELPERS.get(verb_of(args) or "")
    if preload is None or any(a.split("=", 1)[0] in _NO_HELPER_OPTIONS for a in args):
        return
    from pipeline.core.executor import core_free, default_workers, machine_load, start_early_helper

    cores = default_workers()
    if cores > 1 and core_free(cores, machine_load()):
        start_early_helper(preload)
