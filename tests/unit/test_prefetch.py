import threading

import pytest

from pipeline.core.prefetch import CallsAhead, prefetched


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


def test_calls_ahead_run_in_order_on_one_background_thread_and_raise_to_the_waiter():
    ahead = CallsAhead("test-ahead")
    order, threads = [], []

    def note(x):
        order.append(x)
        threads.append(threading.current_thread().name)
        if x == 2:
            raise ValueError("call 2 fails")
        return x * x

    futures = [ahead.submit(note, x) for x in range(5)]
    assert [f.result(10) for f in futures[:2]] == [0, 1]
    with pytest.raises(ValueError, match="call 2 fails"):
        futures[2].result(10)
    assert [f.result(10) for f in futures[3:]] == [9, 16]
    assert order == [0, 1, 2, 3, 4] and set(threads) == {"test-ahead"}


def test_calls_ahead_serve_a_forked_child_too():
    """A process forked after the thread started has no such thread: its first call starts its own, rather than
    queueing work nobody takes."""
    import os

    ahead = CallsAhead("test-ahead")
    assert ahead.submit(pow, 2, 5).result(10) == 32
    pid = os.fork()
    if pid == 0:  # the child: exit 0 only if the call is answered
        try:
            os._exit(0 if ahead.submit(pow, 3, 3).result(10) == 27 else 1)
        except BaseException:  # noqa: BLE001 - a timeout or anything else is this test's failure
            os._exit(1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
