"""Work ahead of its consumer on a background thread, so that two stages of a pipeline keep both cores busy:
`prefetched` runs a producer ahead (work that releases the GIL: polars, DuckDB, file reads); `CallsAhead`
makes calls ahead, in order, whose answers come from another process (a sandbox's child)."""

from __future__ import annotations

import os
import queue
import threading
from collections.abc import Iterable, Iterator
from concurrent.futures import Future
from typing import Any, TypeVar

T = TypeVar("T")
_DONE = object()


def prefetched(items: Iterable[T], depth: int = 1) -> Iterator[T]:
    """The items of `items` in order, each produced in a background thread while the consumer works on the
    ones before (at most `depth` produced ahead). An exception of the producer is raised to the consumer at
    that point; a consumer that stops early (break, exception) stops the producer after its current item."""
    handoff: queue.Queue = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def offer(item: object) -> bool:
        while not stop.is_set():
            try:
                handoff.put(item, timeout=0.05)
                return True
            except queue.Full:
                continue
        return False

    def produce() -> None:
        iterator = iter(items)
        try:
            for item in iterator:
                if not offer((item, None)):
                    break
            else:
                offer((_DONE, None))
        except BaseException as err:  # handed to the consumer, raised there
            offer((_DONE, err))
        finally:
            close = getattr(iterator, "close", None)
            if close is not None:
                close()  # a generator stopped early runs its cleanup here, in the thread that ran it

    worker = threading.Thread(target=produce, name="prefetch", daemon=True)
    worker.start()
    try:
        while True:
            item, err = handoff.get()
            if err is not None:
                raise err
            if item is _DONE:
                return
            yield item
    finally:
        stop.set()
        worker.join()


class CallsAhead:
    """Calls made ahead, in the order submitted, by one background thread of this process (`submit` returns a
    Future at once): e.g. an export's sandbox calls, so that the sandbox's child replays the next piece while
    this process writes the one before. The thread mostly waits on the other process (the GIL free meanwhile);
    a daemon, so it never holds the program's end. Per process: a forked child starts its own thread rather
    than queueing work nobody takes."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._queue: queue.SimpleQueue | None = None
        self._pid = 0  # the process whose thread serves the queue
        self._lock = threading.Lock()

    def submit(self, fn: Any, *args: Any) -> Future:
        future: Future = Future()
        with self._lock:
            if self._queue is None or self._pid != os.getpid():
                self._queue, self._pid = queue.SimpleQueue(), os.getpid()
                threading.Thread(target=self._run, args=(self._queue,), name=self.name, daemon=True).start()
            calls = self._queue
        calls.put((future, fn, args))
        return future

    @staticmethod
    def _run(calls: queue.SimpleQueue) -> None:
        while True:
            future, fn, args = calls.get()
            if future.set_running_or_notify_cancel():
                try:
                    future.set_result(fn(*args))
                except BaseException as err:  # noqa: BLE001 - raised to whoever waits for it
                    future.set_exception(err)
