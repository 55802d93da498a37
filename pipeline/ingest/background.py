"""One thread that writes to the database while the calling thread reads on (`BackgroundWriter`).

Parsing a recording is Python and holds the GIL; DuckDB's inserts and commits, polars and hashlib release it.
So ingest hands its database work (a file's or a batch's commit, a streamed file's chunk inserts) to this
thread and reads the next file (or chunk) meanwhile: on two cores the two overlap.

Rules that keep it as safe as doing everything in turn:
- one thread, jobs run one at a time in the order given: the connection is never used by two threads at
  once, provided the caller does not touch it while jobs are pending (it calls `drain` first);
- at most `depth` jobs pending (running or queued): `submit` blocks beyond that, so memory stays bounded;
- a job's exception is raised in the caller, by the next `submit` or by `drain`, and no later job runs
  (the queued ones are cancelled);
- leaving the `with` block waits for the running job, whatever happened: nothing is left writing when the
  caller's error (or a reader's) propagates.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any


class _Skipped(Exception):
    """A job not run because an earlier one failed (that one's exception is what the caller sees)."""


class BackgroundWriter:
    """Run database jobs on one thread, in order, at most `depth` pending; `on_result` (called in the caller's
    thread, in submission order) receives each job's return value."""

    def __init__(self, depth: int = 1, on_result: Callable[[Any], None] | None = None, name: str = "arcstudy-writer"):
        self.depth = max(1, depth)
        self.on_result = on_result
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix=name)
        self._pending: deque[Future] = deque()
        self._failed = False  # set by the writer thread when a job raised: later jobs do not run

    def __enter__(self) -> BackgroundWriter:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        try:
            if exc_type is None:
                self.drain()
            else:  # the caller's error wins: stop queued jobs, let the running one end, and say nothing more
                for future in self._pending:
                    future.cancel()
                self._pending.clear()
        finally:
            self._pool.shutdown(wait=True, cancel_futures=True)  # the thread ends, whatever drain raised

    def submit(self, fn: Callable[..., Any], *args: Any) -> None:
        """Queue `fn(*args)`; first wait (and raise) while `depth` jobs are pending."""
        while len(self._pending) >= self.depth:
            self._collect(self._pending.popleft())
        self._pending.append(self._pool.submit(self._run, fn, args))

    def _run(self, fn: Callable[..., Any], args: tuple) -> Any:
        if self._failed:
            raise _Skipped("an earlier job failed")
        try:
            return fn(*args)
        except BaseException:
            self._failed = True
            raise

    def drain(self) -> None:
        """Wait for every pending job; raise the first job's exception (cancelling the later jobs)."""
        while self._pending:
            self._collect(self._pending.popleft())

    @property
    def idle(self) -> bool:
        return not self._pending

    def _collect(self, future: Future) -> None:
        try:
            result = future.result()
        except BaseException:
            for later in self._pending:
                later.cancel()
            self._pending.clear()
            raise
        if self.on_result is not None:
            self.on_result(result)
