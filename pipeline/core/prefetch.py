"""Run a producer ahead of its consumer in a background thread (work that releases the GIL: polars, DuckDB,
file reads), so a pipeline of two stages keeps both cores busy."""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterable, Iterator
from typing import TypeVar

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
