"""Terminal output shared by every command: rich tables and progress bars, with a plain mode for CI.

Plain mode (no colours, no live progress bars, line-oriented messages) is on when `--plain` is given, when
`CI` is set in the environment, or when stdout is not a terminal.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import TypeVar

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

T = TypeVar("T")


class Output:
    def __init__(self) -> None:
        self.plain = bool(os.environ.get("CI")) or not sys.stdout.isatty()
        self.console = Console(highlight=False)
        self.err = Console(stderr=True, highlight=False)

    def set_plain(self, plain: bool) -> None:
        self.plain = plain or self.plain
        if self.plain:
            self.console = Console(highlight=False, no_color=True, force_terminal=False, width=160)
            self.err = Console(stderr=True, highlight=False, no_color=True, force_terminal=False, width=160)

    def info(self, message: str) -> None:
        self.err.print(message, soft_wrap=True)  # messages are never cut into lines: they stay greppable

    def error(self, message: str) -> None:
        # The message is text, not rich markup: "[baselines]" or "[default]" in it must print as written.
        text = escape(message)
        self.err.print(f"[bold red]error:[/] {text}" if not self.plain else f"error: {text}", soft_wrap=True)

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
