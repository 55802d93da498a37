"""Terminal output shared by every command: rich tables and progress bars, with a plain mode for CI.

Plain mode (no colours, no live progress bars, line-oriented messages) is on when `--plain` is given, when
`CI` is set in the environment, or when stdout is not a terminal.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.segment import Segment

from pipeline.core.textfiles import CONTROL_CHARACTER, visible

T = TypeVar("T")


class _Console(Console):
    """A rich console for text that comes from input files.

    - Markup is off: a `[link=...]` or `[bold]` in a file name, a guid or a cell is shown as written (the few
      messages that style themselves pass `markup=True`, or rich `Text`).
    - Control characters in the text are shown as escapes (`visible`); rich's own styling codes are untouched.
    - Its stream may go away: a closed pipe (`arcstudy ingest | head -1`), a full device (`> /dev/full`) or a
      closed descriptor only silences it. The command goes on and finishes its real work (the database, the
      files) with its exit code; rich's own answer to a closed pipe was SystemExit(1) midway."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(markup=False, **kwargs)

    def _render_buffer(self, buffer: Iterable[Segment]) -> str:
        return super()._render_buffer(
            segment if segment.control or not CONTROL_CHARACTER.search(segment.text)
            else Segment(visible(segment.text), segment.style, segment.control) for segment in buffer)

    def on_broken_pipe(self) -> None:
        self._silence()

    def _check_buffer(self) -> None:
        try:
            super()._check_buffer()
        except OSError as err:  # ENOSPC, EIO, EBADF ...: said once on stderr when stdout is the one
            self._silence(err)

    def _silence(self, err: OSError | None = None) -> None:
        self.quiet = True
        del self._buffer[:]
        stream = sys.stderr if self.stderr else sys.stdout
        if err is not None and not self.stderr:  # said on stderr (never on stdout, which may carry a result)
            with _suppressed():
                os.write(2, f"arcstudy: cannot write to stdout ({err.strerror or err}); its messages are dropped, "
                            "the command goes on\n".encode())
        with _suppressed():  # later writes by anyone else go nowhere, not into an error
            os.dup2(os.open(os.devnull, os.O_WRONLY), stream.fileno())


@contextmanager
def _suppressed() -> Iterator[None]:
    try:
        yield
    except (OSError, ValueError, AttributeError):  # no such stream, a closed descriptor
        pass


def _is_terminal(stream: object) -> bool:
    try:
        return bool(stream.isatty())  # type: ignore[attr-defined]
    except (AttributeError, ValueError, OSError):  # `>&-`: no stdout at all
        return False


class StdoutFailed(Exception):
    """The command's result could not be written to stdout (`Output.result`): its reader went away
    (BrokenPipeError: `arcstudy query ... | head`), the device is full, or there is no stdout."""

    def __init__(self, err: BaseException):
        super().__init__(str(err))
        self.err = err


class Output:
    def __init__(self) -> None:
        self.plain = bool(os.environ.get("CI")) or not _is_terminal(sys.stdout)
        self.console = _Console(highlight=False)
        self.err = _Console(stderr=True, highlight=False)

    def set_plain(self, plain: bool) -> None:
        self.plain = plain or self.plain
        if self.plain:
            self.console = _Console(highlight=False, no_color=True, force_terminal=False, width=160)
            self.err = _Console(stderr=True, highlight=False, no_color=True, force_terminal=False, width=160)

    def result(self, text: str) -> None:
        """The command's result (JSON, CSV, the data dictionary) on stdout, as UTF-8 whatever the locale says (a C
        locale made non-ASCII text a UnicodeEncodeError), a line end added; StdoutFailed when it cannot be
        written."""
        self.result_parts([text])

    def result_parts(self, parts: Iterable[str]) -> None:
        """`result` of the parts joined, each written as it comes (a result larger than memory streams out)."""
        last = ""
        self._write_stdout(b"")
        for part in parts:  # (an error making a part is that error, not stdout's)
            if part:
                self._write_stdout(part.encode("utf-8", "backslashreplace"))
                last = part
        self._write_stdout(b"" if last.endswith("\n") else b"\n", flush=True)

    @staticmethod
    def _write_stdout(data: bytes, flush: bool = False) -> None:
        try:
            if not data:
                sys.stdout.flush()  # what was printed before comes first
            else:
                sys.stdout.buffer.write(data)
            if flush:
                sys.stdout.buffer.flush()
        except (OSError, ValueError, AttributeError) as err:
            raise StdoutFailed(err) from err

    def info(self, message: str) -> None:
        self.err.print(message, soft_wrap=True)  # messages are never cut into lines: they stay greppable

    def error(self, message: str) -> None:
        # The message is text, not rich markup: "[baselines]" or "[default]" in it must print as written.
        text = escape(message)
        self.err.print(f"[bold red]error:[/] {text}" if not self.plain else f"error: {text}", soft_wrap=True,
                       markup=True)

    @contextmanager
    def progress(self, description: str, total: int | None) -> Iterator[Progress | None]:
        if self.plain:
            yield None
            return
        columns = [TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                   TimeRemainingColumn()]
        with Progress(*columns, console=self.err, transient=True) as bar:
            bar.add_task(description, total=total)
            yield bar

    def track(self, items: Iterable[T], description: str, total: int | None = None) -> Iterator[T]:
        """Iterate with a progress bar (or, in plain mode, a line every 10 % of the way)."""
        items = list(items) if total is None and not hasattr(items, "__len__") else items
        total = total if total is not None else len(items)  # type: ignore[arg-type]
        if self.plain:
            step = max(1, total // 10) if total else 1
            for i, item in enumerate(items, 1):
                yield item
                if total and (i % step == 0 or i == total) and total > 20:
                    self.info(f"{description}: {i}/{total}")
            return
        with self.progress(description, total) as bar:
            for item in items:
                yield item
                bar.advance(0)  # type: ignore[union-attr]


out = Output()
