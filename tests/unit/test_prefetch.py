import threading

import pytest

from pipeline.core.prefetch import prefetched


def test_prefetched_gives_every_item_in_order_from_another_thread():
    threads = []

    def produce():
        for i in range(50):
            threads.append(threading.current_thread())
            yield i

    assert list(prefetched(produce(), depth=2)) == list(range(50))
    assert all(t is not threading.current_thread() for t in threads)


def test_a_producer_error_reaches_the_consumer_after_the_items_before_it():
    def produce():
        yield 1
        yield 2
        raise ValueError("broken batch")

    got = []
    with pytest.raises(ValueError, match="broken batch"):
        for item in prefetched(produce()):
            got.append(item)
    assert got == [1, 2]


def test_a_consumer_that_stops_early_stops_the_producer_and_runs_its_cleanup():
    produced, closed = [], threading.Event()

    def produce():
        try:
            for i in range(1000):
                produced.append(i)
                yield i
        finally:
            closed.set()

    for item in prefetched(produce(), depth=1):
        if item == 3:
            break
    assert closed.is_set() and len(produced) <= 6
