"""`BackgroundWriter`: jobs on one thread in order, bounded, errors raised in the caller and nothing run after
them, and nothing left running when the caller's own error propagates."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from pipeline.core.manifest import sha256_file
from pipeline.ingest.background import BackgroundWriter
from pipeline.ingest.runner import HashAhead


def test_jobs_run_on_one_other_thread_in_order_and_results_come_back_in_order():
    results: list[int] = []
    threads: set[int] = set()

    def job(i: int) -> int:
        threads.add(threading.get_ident())
        time.sleep(0.001 * (i % 3))
        return i

    with BackgroundWriter(depth=2, on_result=results.append) as writer:
        for i in range(20):
            writer.submit(job, i)
    assert results == list(range(20))
    assert len(threads) == 1 and threading.get_ident() not in threads


def test_submit_waits_while_depth_jobs_are_pending():
    release = threading.Event()
    started = []

    def job(i: int) -> None:
        started.append(i)
        release.wait(5)

    with BackgroundWriter(depth=1) as writer:
        writer.submit(job, 0)
        blocked = threading.Thread(target=writer.submit, args=(job, 1))
        blocked.start()
        time.sleep(0.1)
        assert blocked.is_alive() and started == [0]  # job 1 not even queued while job 0 runs
        release.set()
        blocked.join(5)
    assert started == [0, 1]


def test_light_jobs_queue_beyond_depth_within_the_budget_and_a_heavy_one_waits():
    """Beyond `depth`, jobs are queued while the pending jobs' weight with the new one's stays within `budget`
    (the small files read while one long commit runs); a job that would exceed it waits as before."""
    release = threading.Event()
    started = []

    def job(i: int) -> None:
        started.append(i)
        release.wait(5)

    with BackgroundWriter(depth=1, budget=10) as writer:
        writer.submit(job, 0)  # the long commit (weight 0: it holds nothing in memory)
        for i in (1, 2, 3):
            writer.submit(job, i, weight=3)  # 9 <= 10: queued at once, the caller reads on
        heavy = threading.Thread(target=writer.submit, args=(job, 4), kwargs={"weight": 2})
        heavy.start()
        time.sleep(0.1)
        assert heavy.is_alive() and started == [0]  # 9 + 2 > 10: waits for a pending job to end
        release.set()
        heavy.join(5)
    assert started == [0, 1, 2, 3, 4]


def test_a_failed_job_raises_in_the_caller_and_no_later_job_runs():
    ran: list[int] = []

    def job(i: int) -> None:
        if i == 1:
            raise OSError("disk full (simulated)")
        ran.append(i)

    writer = BackgroundWriter(depth=3)
    with pytest.raises(OSError, match="disk full"), writer:
        for i in range(6):
            writer.submit(job, i)
    assert ran == [0]
    assert writer.idle


def test_a_job_failing_after_the_last_submit_is_raised_on_leaving_and_the_thread_ends():
    def job() -> None:
        time.sleep(0.1)
        raise OSError("disk full (simulated)")

    with pytest.raises(OSError, match="disk full"), BackgroundWriter(name="arcstudy-test-writer") as writer:
        writer.submit(job)
    assert not [t for t in threading.enumerate() if t.name.startswith("arcstudy-test-writer")]


def test_the_callers_error_waits_for_the_running_job_and_drops_the_queued_ones():
    ran: list[int] = []

    def job(i: int) -> None:
        time.sleep(0.2)
        ran.append(i)

    with pytest.raises(ZeroDivisionError), BackgroundWriter(depth=2) as writer:
        writer.submit(job, 0)
        writer.submit(job, 1)
        time.sleep(0.05)  # job 0 running, job 1 queued
        raise ZeroDivisionError("the reader failed")
    assert ran == [0]  # job 0 finished before the error left the block; job 1 never ran


def test_hash_ahead_gives_sha256_file_and_never_opens_what_is_not_a_regular_file(tmp_path: Path,
                                                                                  monkeypatch: pytest.MonkeyPatch):
    import os

    hashed_ahead: list[str] = []
    real = HashAhead._hash_regular.__func__
    monkeypatch.setattr(HashAhead, "_hash_regular",
                        classmethod(lambda cls, path: (hashed_ahead.append(path.name), real(cls, path))[1]))

    files = []
    for i in range(3):
        f = tmp_path / f"f{i}.bin"
        f.write_bytes(bytes([i]) * (3 << 20))  # big enough to be hashed ahead
        files.append(f)
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    order = [files[0], fifo, files[1], files[2], files[0]]
    with HashAhead(order) as ahead:  # leaving the block would hang on a thread blocked opening the FIFO
        hashes = [ahead.wrap(lambda path, hash_file: hash_file(path) if path != fifo else None)(p) for p in order]
    assert hashes == [sha256_file(f) for f in (files[0],)] + [None] + [sha256_file(f) for f in (*files[1:], files[0])]
    assert hashed_ahead == ["f2.bin", "f0.bin"]  # f1 follows the FIFO: hashed in the caller's thread


def test_hash_ahead_rehashes_a_file_changed_after_it_was_hashed_ahead(tmp_path: Path):
    first, second = tmp_path / "a.bin", tmp_path / "b.bin"
    first.write_bytes(b"a" * (3 << 20))
    second.write_bytes(b"b" * (3 << 20))
    with HashAhead([first, second]) as ahead:
        prepare = ahead.wrap(lambda path, hash_file: hash_file(path))
        assert prepare(first) == sha256_file(first)
        ahead._ahead[1].result()  # the second file is hashed ahead ...
        with open(second, "ab") as fh:  # ... and then grows
            fh.write(b"more")
        assert prepare(second) == sha256_file(second)
