"""Fan pure work out to processes while the calling process alone writes: serial, local cluster or remote one.

    with open_executor(workers=4, scheduler=None) as ex:
        for key, value, error in ex.map_unordered(fn, enumerate(items), progress=out.track, description="..."):
            ...  # write `value`, or record `error` as this piece's failure, in the caller's own transactions

Three forms, chosen by `open_executor(workers, scheduler)` (CONVENTIONS.md "Fan-out with one writer"):

- serial: `workers` <= 1 (or one piece of work): a plain loop in this process; Dask is not even imported;
- local: a Dask `LocalCluster` of `workers` single-threaded worker processes on 127.0.0.1, started (on a
  thread, from the moment the executor is opened: open it before your set-up to overlap the two) and closed here. Each worker's memory limit is the machine's RAM divided by the workers (at least 1 GiB, at
  most the RAM); past 95 % of it the worker's nanny restarts the worker.
- cluster: the Dask scheduler at `scheduler` ("tcp://host:port"), run by someone else: only the client
  opened here is closed, never the cluster. Its workers must import this package and see the input files at
  the same paths (docs/cluster.md).

What a piece may do and what happens when it fails:

- `fn` must be a module-level function (or a functools.partial of one) of one item, with no side effects
  the caller relies on: it runs in another process, and Dask may run it again.
- A piece that raises is reported as that piece's `error` and the other pieces go on. Dask retries a raising
  piece `RETRIES` times first (cheap for pure functions, and it rides out a transient error such as a file
  on shared storage briefly missing).
- A worker that dies mid-piece (killed, out of memory) has its piece rescheduled on another worker by the
  scheduler; a piece that kills `distributed.scheduler.allowed-failures` + 1 workers (default 4) is reported
  as an error (`KilledWorker`). Each piece's result arrives once: it is one keyed future, however often run.
- Killing the calling process, even with kill -9, ends the local cluster's workers: each worker process
  watches a pipe from its parent and exits when it closes (distributed.process.AsyncProcess).
"""

from __future__ import annotations

import os
import uuid
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import CancelledError
from contextlib import contextmanager
from typing import Any, NamedTuple, Protocol

# Dask's own retry count for a piece that raises (worker deaths are counted separately by the scheduler).
RETRIES = 2
MIN_WORKER_MEMORY = 1 << 30
CONNECT_TIMEOUT_S = 30

Progress = Callable[[Iterable[Any], str, int], Iterable[Any]]  # pipeline.core.console.out.track


class Outcome(NamedTuple):
    """One piece of work: its key, and its value or the exception it raised (exactly one is meaningful)."""

    key: Any
    value: Any = None
    error: BaseException | None = None


class Executor(Protocol):
    n_workers: int  # processes (or worker threads of a cluster) working at once

    def map_unordered(self, fn: Callable[[Any], Any], items: Iterable[tuple[Any, Any]], *,
                      progress: Progress | None = None, description: str = "working") -> Iterator[Outcome]:
        """`fn(item)` for every (key, item), yielded as the pieces complete."""
        ...

    def map_ordered(self, fn: Callable[[Any], Any], items: Iterable[tuple[Any, Any]], *,
                    look_ahead: int | None = None, progress: Progress | None = None,
                    description: str = "working") -> Iterator[Outcome]:
        """`fn(item)` for every (key, item), yielded in input order, with at most `look_ahead` (default: one
        per worker) pieces submitted beyond the one being waited for, so memory stays flat."""
        ...


def default_workers() -> int:
    """The cores this process may run on (the affinity mask, not the machine's count)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def worker_memory_limit(workers: int) -> int:
    """Bytes each of `workers` local worker processes may use: an equal share of the machine's RAM."""
    import psutil

    total = psutil.virtual_memory().total
    return min(total, max(MIN_WORKER_MEMORY, total // max(1, workers)))


@contextmanager
def open_executor(workers: int | None = None, scheduler: str | None = None, *,
                  n_items: int | None = None, preload: Sequence[str] = ()) -> Iterator[Executor]:
    """The executor for `workers` processes (None: one per usable core) or for the cluster at `scheduler`.

    `n_items`: how many pieces there will be; with one or none, the work runs serially (no cluster is
    worth starting for it). Whatever was opened here is closed on exit, and only that.

    `preload` (a local cluster only): modules each worker imports as it starts (the engine and the scorer),
    not with its first piece."""
    if n_items is not None and n_items <= 1:
        yield SerialExecutor()
        return
    if scheduler:
        from distributed import Client

        client = Client(scheduler, timeout=CONNECT_TIMEOUT_S, set_as_default=False)
        try:
            n_threads = sum(w.get("nthreads", 1) for w in client.scheduler_info()["workers"].values())
            yield DaskExecutor(client, max(1, n_threads))
        finally:
            client.close()
        return
    workers = default_workers() if workers is None else workers
    if workers <= 1:
        yield SerialExecutor()
        return
    # The cluster starts on a thread (its workers spawn and import in processes of their own): a caller that
    # opens the executor before its own set-up (reading the file list, opening the database) overlaps the two,
    # and the first piece waits for it (`DaskExecutor.client`).
    starting = _LocalStart(workers, preload)
    try:
        yield DaskExecutor(starting, workers)
    finally:
        starting.close()


class _LocalStart:
    """A local cluster and its client, started on a thread; `result()` waits for them (raising what the start
    raised), `close()` closes whatever was started."""

    def __init__(self, workers: int, preload: Sequence[str]) -> None:
        import threading

        self.cluster = self.client = None
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._start, args=(workers, preload), name="arcstudy-cluster-start",
                                       daemon=True)
        self.thread.start()

    def _start(self, workers: int, preload: Sequence[str]) -> None:
        try:
            self.cluster = _local_cluster(workers, preload)
            self.client = _local_client(self.cluster)
        except BaseException as err:  # re-raised in the caller's thread by result()
            self.error = err

    def result(self):
        self.thread.join()
        if self.error is not None:
            raise self.error
        return self.client

    def close(self) -> None:
        self.thread.join()
        try:
            if self.client is not None:
                self.client.close()
        finally:
            if self.cluster is not None:
                self.cluster.close()


def _local_client(cluster):
    from distributed import Client

    # Results come straight from the workers, not through the (in-process) scheduler.
    return Client(cluster, set_as_default=False, direct_to_workers=True)


def _local_cluster(workers: int, preload: Sequence[str] = ()):
    import logging

    import dask
    from distributed import LocalCluster

    # Worker logs stay quiet: the caller reports every piece's error (and worker deaths end up there too).
    # No dashboard; the scheduler's small HTTP server (health routes) on a free port rather than 8787.
    # Workers keep glibc's adaptive malloc trim threshold instead of Dask's 64 KiB: readers allocate and
    # free a lot, and trimming that eagerly made a parallel ingest about 20 % slower on this machine.
    # Each worker is one thread (threads_per_worker=1), so polars gets one thread too: its default pool of one
    # thread per core, in every worker beside the writer's DuckDB, oversubscribes the cores and spins.
    with dask.config.set({"distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_": None,
                          "distributed.nanny.pre-spawn-environ.POLARS_MAX_THREADS": "1"}):
        return LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, host="127.0.0.1",
                            memory_limit=worker_memory_limit(workers), dashboard_address=None,
                            scheduler_kwargs={"dashboard_address": "127.0.0.1:0"},
                            silence_logs=logging.CRITICAL, **({"preload": list(preload)} if preload else {}))


def _call(fn: Callable[[Any], Any], key: Any, item: Any) -> Outcome:
    try:
        return Outcome(key, fn(item))
    except Exception as err:  # the piece's failure, reported to the caller; KeyboardInterrupt still stops
        return Outcome(key, error=err)


def _tracked(outcomes: Iterator[Outcome], total: int, progress: Progress | None, description: str
             ) -> Iterator[Outcome]:
    yield from (progress(outcomes, description, total) if progress else outcomes)


class SerialExecutor:
    """Every piece in this process, in input order, when it is asked for."""

    n_workers = 1

    def map_unordered(self, fn, items, *, progress=None, description="working"):
        pairs = list(items)
        return _tracked((_call(fn, key, item) for key, item in pairs), len(pairs), progress, description)

    def map_ordered(self, fn, items, *, look_ahead=None, progress=None, description="working"):
        return self.map_unordered(fn, items, progress=progress, description=description)


class DaskExecutor:
    """Pieces as futures of a Dask client (local or remote cluster), results gathered into this process."""

    def __init__(self, client, n_workers: int) -> None:
        self._client = client  # a Client, or a _LocalStart still starting one
        self.n_workers = n_workers

    @property
    def client(self):
        if isinstance(self._client, _LocalStart):
            self._client = self._client.result()
        return self._client

    def _submit(self, fn, item, index: int, run: str):
        name = getattr(fn, "__name__", None) or getattr(getattr(fn, "func", None), "__name__", "piece")
        # A fresh key per piece and call: a retry or a rescheduling after a worker death reuses it, so the
        # piece yields one result however often it ran.
        return self.client.submit(fn, item, key=f"arcstudy-{name}-{run}-{index}", retries=RETRIES, pure=False)

    @staticmethod
    def _outcome(key, future) -> Outcome:
        """Wait for the piece and gather its value (or exception) into this process."""
        try:
            return Outcome(key, future.result())
        except CancelledError:  # not the piece's fault: the cluster lost it (scheduler gone); stop the run
            raise
        except Exception as err:
            return Outcome(key, error=err)

    def map_unordered(self, fn, items, *, progress=None, description="working"):
        pairs = list(items)
        return _tracked(self._unordered(fn, pairs), len(pairs), progress, description)

    def _unordered(self, fn, pairs):
        from distributed import as_completed

        run = uuid.uuid4().hex[:12]
        todo = iter(enumerate(pairs))
        keys = {}
        done = as_completed(loop=self.client.loop)

        def submit_next() -> None:
            for index, (key, item) in todo:
                future = self._submit(fn, item, index, run)
                keys[future.key] = key
                done.add(future)
                return

        # Twice as many pieces in flight as workers: none idles while results come back, and the inputs
        # do not all sit in the scheduler at once.
        for _ in range(2 * self.n_workers):
            submit_next()
        for future in done:
            outcome = self._outcome(keys.pop(future.key), future)
            future.release()
            submit_next()
            yield outcome

    def map_ordered(self, fn, items, *, look_ahead=None, progress=None, description="working"):
        pairs = list(items)
        return _tracked(self._ordered(fn, pairs, look_ahead or self.n_workers), len(pairs), progress,
                        description)

    def _ordered(self, fn, pairs, look_ahead: int):
        run = uuid.uuid4().hex[:12]
        pending: deque = deque()

        def head() -> Outcome:
            key, future = pending.popleft()
            outcome = self._outcome(key, future)
            future.release()
            return outcome

        for index, (key, item) in enumerate(pairs):
            pending.append((key, self._submit(fn, item, index, run)))
            if len(pending) > look_ahead:
                yield head()
        while pending:
            yield head()
