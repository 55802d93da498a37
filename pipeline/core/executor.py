"""Fan pure work out to processes while the calling process alone writes: serial, local cluster or remote one.

    with open_executor(workers=4, scheduler=None) as ex:
        for key, value, error in ex.map_unordered(fn, enumerate(items), progress=out.track, description="..."):
            ...  # write `value`, or record `error` as this piece's failure, in the caller's own transactions

Four forms: three chosen by `open_executor(workers, scheduler)` (CONVENTIONS.md "Fan-out with one writer"), and
the helper, which a caller opens itself:

- serial: `workers` <= 1 (or one piece of work): a plain loop in this process; Dask is not even imported;
- helper (`open_helper_executor`, chosen by a caller for whom a cluster does not pay): this process and one
  spawned helper process, pieces handed in input order to whichever is free (`HelperExecutor`);
- local: a Dask `LocalCluster` of `workers` single-threaded worker processes on 127.0.0.1, started (on a
  thread, from the moment the executor is opened: open it before your set-up to overlap the two) and closed
  here. Each worker's memory limit is the machine's RAM divided by the workers (at least 1 GiB, at most the
  RAM); past 95 % of it the worker's nanny restarts the worker.
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


class SchedulerUnreachable(Exception):
    """The cluster at --scheduler cannot be reached, or its address is not one: said in one line by the command
    (pipeline.commands.common), not a traceback."""


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
                    description: str = "working", total: int | None = None) -> Iterator[Outcome]:
        """`fn(item)` for every (key, item), yielded in input order, with at most `look_ahead` (default: one
        per worker) pieces submitted beyond the one being waited for, so memory stays flat. With ``total``
        (how many items there are, for the progress bar), ``items`` is read as the pieces are submitted, never
        listed whole: an iterator of a flood of pieces made one by one."""
        ...


def default_workers() -> int:
    """The cores this process may run on (the affinity mask, not the machine's count)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def machine_load() -> float | None:
    """How many cores other processes keep busy now: the tasks runnable besides this one, the median of five
    looks 5 ms apart at Linux's /proc/loadavg (elsewhere the 1-minute load average). The average lags by a
    minute: right after a burst of work (this command's own previous run, a DuckDB query on every core) it
    still says 1.5-2 on a machine that is idle, and 1 for a while after others began to fill both cores. Taken
    once a second at most, so that the command's decisions (what it says, whether it starts a helper) agree.
    None where the system says neither."""
    import time

    now = time.monotonic()
    if _LOAD_SEEN and now - _LOAD_SEEN[0] < 1.0:
        return _LOAD_SEEN[1]
    looks = []
    for i in range(5):
        try:
            with open("/proc/loadavg", "rb") as fh:
                looks.append(int(fh.read().split()[3].split(b"/")[0]) - 1)  # less this process's own thread
        except (OSError, ValueError, IndexError):
            break
        if i < 4:
            time.sleep(0.005)
    load: float | None
    if len(looks) == 5:
        load = float(sorted(looks)[2])
    else:
        try:
            load = os.getloadavg()[0]
        except (OSError, AttributeError):
            load = None
    _LOAD_SEEN[:] = [time.monotonic(), load]
    return load


_LOAD_SEEN: list = []  # [when, machine_load()] of the last look


def core_free(cores: int, load: float | None) -> bool:
    """Whether a core is free for a helper process: fewer tasks running besides this process (`load`, from
    `machine_load`) than the cores less a half. Unknown load: free."""
    return load is None or load < cores - 0.5


_EARLY: dict[tuple[str, ...], HelperExecutor] = {}  # helpers started before the command's imports, by preload


def start_early_helper(preload: Sequence[str]) -> None:
    """Start a helper process now, for the command that will ask for one with these `preload`s
    (`take_early_helper`): its interpreter and imports then overlap this process's own imports. One that is not
    taken is ended unused when this process exits."""
    import atexit

    key = tuple(preload)
    if key in _EARLY:
        return
    if not _EARLY:
        atexit.register(discard_early_helpers)
    _EARLY[key] = HelperExecutor(key)


def take_early_helper(preload: Sequence[str]) -> HelperExecutor | None:
    """The helper `start_early_helper(preload)` started, now the caller's to use and close; None if none was."""
    return _EARLY.pop(tuple(preload), None)


def discard_early_helpers() -> None:
    """End the early helpers nobody took."""
    while _EARLY:
        _EARLY.popitem()[1].discard()


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

        try:
            client = Client(scheduler, timeout=CONNECT_TIMEOUT_S, set_as_default=False)
        except (OSError, ValueError, TypeError) as err:  # no scheduler there, or no address distributed reads
            why = (str(err).splitlines() or [type(err).__name__])[0]
            raise SchedulerUnreachable(f"cannot use the Dask scheduler at --scheduler {scheduler}: {why}; start it "
                                       "(`dask scheduler`) or leave --scheduler out to use this machine's cores"
                                       ) from err
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


@contextmanager
def open_helper_executor(preload: Sequence[str] = ()) -> Iterator[HelperExecutor]:
    """`HelperExecutor`, its helper process ended on exit (the running piece finished first). `preload`: modules
    the helper imports as it starts, before its first piece."""
    ex = HelperExecutor(preload)
    try:
        yield ex
    finally:
        ex.close()


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


def _counted(items: Iterable[tuple[Any, Any]], total: int | None) -> tuple[Iterable[tuple[Any, Any]], int]:
    """``items`` and their count: as they are when ``total`` says it, else listed to count them."""
    if total is not None:
        return items, total
    pairs = list(items)
    return pairs, len(pairs)


class SerialExecutor:
    """Every piece in this process, in input order, when it is asked for."""

    n_workers = 1

    def map_unordered(self, fn, items, *, progress=None, description="working"):
        pairs = list(items)
        return _tracked((_call(fn, key, item) for key, item in pairs), len(pairs), progress, description)

    def map_ordered(self, fn, items, *, look_ahead=None, progress=None, description="working", total=None):
        """In input order. With ``look_ahead`` N, the next N pieces' `fn` has run before a piece is handed out:
        for pieces that start background work and return at once (an export's sandbox calls, made on a thread
        while this process writes the piece before), so that the work of the next piece overlaps the caller's
        work on this one. Without it, each piece runs when it is asked for."""
        pairs, n = _counted(items, total)
        if not look_ahead:
            return _tracked((_call(fn, key, item) for key, item in pairs), n, progress, description)
        return _tracked(self._ahead(fn, pairs, look_ahead), n, progress, description)

    @staticmethod
    def _ahead(fn, pairs: Iterable, look_ahead: int) -> Iterator[Outcome]:
        done: deque[Outcome] = deque()
        for key, item in pairs:
            done.append(_call(fn, key, item))
            if len(done) > look_ahead:
                yield done.popleft()
        while done:
            yield done.popleft()


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

    def map_ordered(self, fn, items, *, look_ahead=None, progress=None, description="working", total=None):
        pairs, n = _counted(items, total)
        return _tracked(self._ordered(fn, pairs, look_ahead or self.n_workers), n, progress, description)

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


# Pieces a helper process may have submitted (running or queued) beyond the one it works on: while this process
# reads a large piece of its own it hands the helper nothing, so the helper's queue must outlast it.
HELPER_AHEAD = 4
# Pieces done in input order ahead of the one being waited for (this process works on while the helper holds the
# head piece): bounds the memory of finished pieces not yet handed to the caller. Files differ in size by 1000x
# (a study's recordings: 0.02-17 MB); with 8, a large head piece held by the helper left this process waiting
# once it had read 8 small ones: 24 took 0.2 s (8 %) off an 80-recording ingest on two cores.
HELPER_LOOK_AHEAD = 24
# Results the helper keeps alive after sending them: an object whose pickle names a file it removes when let go
# (a spilled `Spool`) must outlive its unpickling here, which happens before the helper is sent that many more.
HELPER_KEEPS = HELPER_AHEAD + HELPER_LOOK_AHEAD


def _send(stream, obj: Any) -> None:
    import pickle

    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(len(data).to_bytes(8, "little") + data)
    stream.flush()


def _receive(stream) -> Any:
    """The next object sent with `_send`; EOFError when the stream ends."""
    import pickle

    head = stream.read(8)
    if len(head) < 8:
        raise EOFError
    size = int.from_bytes(head, "little")
    data = stream.read(size)
    if len(data) < size:
        raise EOFError
    return pickle.loads(data)


UNSENT = "arcstudy-helper-result-not-sent"  # a helper's answer for a piece whose result could not be sent


def _helper_main() -> None:
    """The helper process of `HelperExecutor`: pieces in on stdin, outcomes out on stdout, until stdin ends."""
    import signal
    import sys
    from collections import deque

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the caller's to handle; it ends this process
    # The pipes move to descriptors of their own, and 0 and 1 to /dev/null and stderr: nothing a piece or a
    # library writes to descriptor 1 (a C library's message, a native progress bar), nor a read of 0, may
    # corrupt the stream of outcomes (the caller would wait for the rest of a message that never comes)
    inp, out = os.fdopen(os.dup(0), "rb"), os.fdopen(os.dup(1), "wb")
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    os.dup2(2, 1)
    sys.stdin, sys.stdout = open(os.devnull), sys.stderr
    kept: deque = deque(maxlen=HELPER_KEEPS)
    sys.path[:], preload = _receive(inp)  # the caller's import path (a test's or a notebook's additions included)
    for module in preload:  # imported before the first piece comes (the caller works meanwhile)
        __import__(module)
    while True:
        try:
            seq, fn, key, item = _receive(inp)
        except EOFError:
            # Let go of what was kept (a spilled result removes its file), then end without the interpreter's
            # teardown of polars, DuckDB and the rest (0.1-0.15 s the caller would wait for in `close`).
            import atexit

            kept.clear()
            atexit._run_exitfuncs()  # the finalizers of what a reference cycle still holds (spilled files) run here
            out.flush()
            os._exit(0)
        outcome = _call(fn, key, item)
        try:
            _send(out, (seq, outcome))
        except Exception:  # a value that cannot be pickled (e.g. one that reads its file later): the caller runs
            _send(out, (seq, UNSENT))  # the piece itself, so the result is the same as without a helper
        kept.append(outcome)


class _Helper:
    """One helper process (`python -c ... _helper_main()`): `submit` returns a Future set by a reader thread."""

    def __init__(self, preload: Sequence[str] = ()) -> None:
        import subprocess
        import sys
        import threading

        env = {**os.environ, "POLARS_MAX_THREADS": os.environ.get("POLARS_MAX_THREADS", "1")}
        # A fresh interpreter started by module, not by forking (DuckDB's and polars's threads would be inherited
        # in an unknown state) nor by multiprocessing's spawn (which runs the caller's __main__ file again).
        self.proc = subprocess.Popen(
            [sys.executable, "-c", "from pipeline.core.executor import _helper_main; _helper_main()"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
        self._futures: dict[int, Any] = {}
        self._seq = 0
        self._lock = threading.Lock()
        self.broken = False
        _send(self.proc.stdin, (list(sys.path), list(preload)))
        self._reader = threading.Thread(target=self._read, name="arcstudy-helper-results", daemon=True)
        self._reader.start()

    def submit(self, fn, key, item):
        from concurrent.futures import Future

        future: Future = Future()
        with self._lock:
            if self.broken:
                raise RuntimeError("the helper process has ended")
            self._seq += 1
            self._futures[self._seq] = future
            seq = self._seq
        try:
            _send(self.proc.stdin, (seq, fn, key, item))
        except (OSError, ValueError) as err:  # the helper ended: its pipe is closed
            self._fail(err)
        return future

    def _read(self) -> None:
        try:
            while True:
                seq, outcome = _receive(self.proc.stdout)
                with self._lock:
                    future = self._futures.pop(seq)
                future.set_result(outcome)
        except BaseException as err:  # EOF (the helper ended) or a result that cannot be read here
            self._fail(err)

    def _fail(self, err: BaseException) -> None:
        with self._lock:
            self.broken = True
            pending, self._futures = list(self._futures.values()), {}
        for future in pending:
            if not future.done():
                future.set_exception(RuntimeError(f"the helper process ended: {err!r}"))

    def discard(self) -> None:
        """End the helper now, whatever it is doing (still importing, say): for one that was never given work."""
        self.proc.kill()
        self.close()

    def close(self) -> None:
        import subprocess

        try:
            self.proc.stdin.close()  # the helper ends when its input does
        except OSError:
            pass
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._reader.join(timeout=5)
        self.proc.stdout.close()


class HelperExecutor:
    """This process and one helper process, each working on pieces, results yielded in input order: on two cores
    a second reader where a Dask cluster's start-up (2-7 s) would cost more than it gains. The helper is a fresh
    interpreter (`_Helper`); its start-up (the imports, ~0.5 s of CPU) overlaps this process's own work (a caller
    may start it early, `preload`ing the modules its pieces need).
    Pieces are handed out in input order to whichever of the two is free. A helper that dies (killed, out of
    memory) has its pieces run in this process instead, and is not used again; a piece that raises is that
    piece's error, as in the other executors. `fn` and the items must be picklable (module-level functions,
    partials of them), and so must what they return."""

    n_workers = 2

    def __init__(self, preload: Sequence[str] = ()) -> None:
        self._helper = _Helper(preload)
        self.helper_pieces = 0  # pieces the helper completed (for tests and reports)

    def close(self) -> None:
        self._helper.close()

    def discard(self) -> None:
        """End the helper process without waiting for it (one started early, `start_early_helper`, and not used)."""
        self._helper.discard()

    def map_unordered(self, fn, items, *, progress=None, description="working"):
        return self.map_ordered(fn, items, progress=progress, description=description)

    def map_ordered(self, fn, items, *, look_ahead=None, progress=None, description="working", total=None):
        pairs = list(items)  # (indexed as the helper takes pieces: listed even with ``total``)
        return _tracked(self._ordered(fn, pairs, look_ahead or HELPER_LOOK_AHEAD), len(pairs), progress,
                        description)

    def _ordered(self, fn, pairs: list, look_ahead: int) -> Iterator[Outcome]:
        from concurrent.futures import FIRST_COMPLETED, Future, wait

        slots: dict[int, Outcome | Future] = {}
        remote: set[int] = set()  # pieces sent to the helper and not finished
        head = assigned = 0
        while head < len(pairs):
            if not self._helper.broken:
                remote = {i for i in remote if not slots[i].done()}  # type: ignore[union-attr]
                while len(remote) < HELPER_AHEAD and assigned < len(pairs) and assigned - head < look_ahead:
                    key, item = pairs[assigned]
                    try:
                        slots[assigned] = self._helper.submit(fn, key, item)
                    except RuntimeError:
                        break
                    remote.add(assigned)
                    assigned += 1
            slot = slots.get(head)
            if slot is None:  # the helper could not take it
                key, item = pairs[head]
                slot = _call(fn, key, item)
                assigned = max(assigned, head + 1)
            elif isinstance(slot, Future):
                if not slot.done() and assigned < len(pairs) and assigned - head < look_ahead:
                    key, item = pairs[assigned]  # the helper holds the head piece: work on the next one here
                    slots[assigned] = _call(fn, key, item)
                    assigned += 1
                    continue
                if not slot.done():
                    wait([slot], return_when=FIRST_COMPLETED)
                try:
                    slot = slot.result()
                    self.helper_pieces += 1
                except RuntimeError:  # the helper ended (killed, out of memory): the piece runs here
                    slot = UNSENT
                if slot == UNSENT:  # (or its result could not be sent back)
                    key, item = pairs[head]
                    slot = _call(fn, key, item)
            slots.pop(head, None)
            remote.discard(head)
            head += 1
            yield slot
