"""One thread that writes to the database while the calling thread reads on (`BackgroundWriter`).

Parsing a recording is Python and holds the GIL; DuckDB's inserts and commits, polars and hashlib release it.
So ingest hands its database work (a file's or a batch's commit, a streamed file's chunk inserts) to this
thread and reads the next file (or chunk) meanwhile: on two cores the two overlap.

Rules that keep it as safe as doing everything in turn:
- one thread, jobs run one at a time in the order given: the connection is never used by two threads at
  once, provided the caller does not touch it while jobs are pending (it calls `drain` first);
- at most `depth` jobs pending (running or queued): `submit` blocks beyond that, so memory stays bounded;
  light jobs go beyond it while the pending jobs' `weight` (the bytes they hold, as the caller counts them)
  stays within `budget`, so that the small files read meanwhile need not wait behind one long commit;
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
    """Run database jobs on one thread, in order, at most `depth` pending (more while their total weight is
    within `budget`); `on_result` (called in the caller's thread, in submission order) receives each job's
    return value."""

    def __init__(self, depth: int = 1, on_result: Callable[[Any], None] | None = None, name: str = "arcstudy-writer",
                 budget: int | None = None):
        self.depth = max(1, depth)
        self.budget = budget
        self.on_result = on_result
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix=name)
        self._pending: deque[tuple[Future, int]] = deque()  # each job with its weight
        self._weight = 0  # of the pending jobs
        self._failed = False  # set by the writer thread when a job raised: later jobs do not run

    def __enter__(self) -> BackgroundWriter:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        try:
            if exc_type is None:
                self.drain()
            else:  # the caller's error wins: stop queued jobs, let the running one end, and say nothing more
                for future, _ in self._pending:
                    future.cancel()
                self._pending.clear()
                self._weight = 0
        finally:
            self._pool.shutdown(wait=True, cancel_futures=True)  # the thread ends, whatever drain raised

    def submit(self, fn: Callable[..., Any], *args: Any, weight: int = 0) -> None:
        """Queue `fn(*args)`; first wait (and raise) while `depth` jobs are pending and the pending jobs' weight
        with this one's would exceed `budget` (None: whatever their weight)."""
        while len(self._pending) >= self.depth and (self.budget is None or self._weight + weight > self.budget):
            self._collect_next()
        self._pending.append((self._pool.submit(self._run, fn, args), weight))
        self._weight += weight

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
            self._collect_next()

    @property
    def idle(self) -> bool:
        return not self._pending

    @property
    def working(self) -> bool:
        """Whether a job is running or queued now (`idle` also waits for finished jobs to be collected)."""
        return any(not future.done() for future, _ in self._pending)

    def _collect_next(self) -> None:
        future, weight = self._pending.popleft()
        self._weight -= weight
        try:
            result = future.result()
        except BaseException:
            for later, _ in self._pending:
                later.cancel()
            self._pending.clear()
            self._weight = 0
            raise
        if self.on_result is not None:
            self.on_result(result)
