"""pipeline.core.executor: the serial and local-cluster forms give the same outcomes, errors stay per piece."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pipeline.core.executor import (
    MIN_WORKER_MEMORY,
    DaskExecutor,
    SerialExecutor,
    default_workers,
    open_executor,
    worker_memory_limit,
)

REPO = Path(__file__).resolve().parents[2]


# Pieces run in worker processes: module-level functions, importable there as tests.unit.test_executor.
def square_or_fail(x: int) -> int:
    if x % 7 == 3:
        raise ValueError(f"no square for {x}")
    return x * x


def slow_first(x: int) -> int:
    time.sleep(1.0 if x == 0 else 0.0)
    return -x


def polars_threads(_: int) -> int:
    import polars as pl
    return pl.thread_pool_size()


def recording_progress(log: list):
    def progress(items, description, total):
        log.append((description, total))
        for item in items:
            log.append("step")
            yield item
    return progress


@pytest.fixture(scope="module")
def local():
    with open_executor(workers=2) as ex:
        yield ex


def test_one_worker_or_one_piece_runs_serially_without_importing_dask():
    code = ("import sys\n"
            "from pipeline.core.executor import open_executor, SerialExecutor\n"
            "with open_executor(workers=1) as a, open_executor(workers=4, n_items=1) as b:\n"
            "    assert isinstance(a, SerialExecutor) and isinstance(b, SerialExecutor)\n"
            "    assert [o.value for o in a.map_unordered(abs, enumerate([-1, -2]))] == [1, 2]\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('dask', 'distributed')))\n")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "[]"


def test_serial_and_local_forms_give_the_same_outcomes(local):
    assert isinstance(local, DaskExecutor) and local.n_workers == 2
    items = list(enumerate(range(20)))
    serial = list(SerialExecutor().map_unordered(square_or_fail, items))
    dask = list(local.map_unordered(square_or_fail, items))
    assert [o.key for o in serial] == list(range(20))
    assert sorted(o.key for o in dask) == list(range(20))  # each piece exactly once, in any order

    def plain(outcomes):
        return {o.key: (o.value, type(o.error).__name__ if o.error else None, str(o.error or ""))
                for o in outcomes}

    assert plain(dask) == plain(serial)
    failed = {k for k, (_, kind, _) in plain(serial).items() if kind}
    assert failed == {3, 10, 17}
    assert plain(serial)[10] == (None, "ValueError", "no square for 10")
    assert plain(serial)[4] == (16, None, "")


def test_ordered_map_yields_in_input_order_even_when_the_first_piece_is_slowest(local):
    items = [(f"k{i}", i) for i in range(6)]
    for ex in (SerialExecutor(), local):
        outcomes = list(ex.map_ordered(slow_first, items, look_ahead=2))
        assert [o.key for o in outcomes] == [f"k{i}" for i in range(6)]
        assert [o.value for o in outcomes] == [0, -1, -2, -3, -4, -5]


def test_progress_hook_sees_every_outcome_once_with_the_total(local):
    for ex in (SerialExecutor(), local):
        log: list = []
        outcomes = list(ex.map_unordered(square_or_fail, enumerate(range(5)), progress=recording_progress(log),
                                         description="squaring"))
        assert log == [("squaring", 5)] + ["step"] * 5
        assert len(outcomes) == 5


def test_progress_hook_works_with_the_console_tracker_in_plain_mode(local, capsys):
    from pipeline.core.console import Output

    output = Output()
    output.set_plain(True)
    outcomes = list(local.map_ordered(abs, enumerate(range(-30, 0)), progress=output.track, description="abs"))
    assert [o.value for o in outcomes] == list(range(30, 0, -1))
    err = capsys.readouterr().err
    assert "abs: 30/30" in err


def test_memory_limit_shares_the_machine_with_a_floor():
    import psutil

    total = psutil.virtual_memory().total
    assert worker_memory_limit(2) == max(MIN_WORKER_MEMORY, total // 2)
    assert worker_memory_limit(10_000) == min(total, MIN_WORKER_MEMORY)


def test_default_workers_is_the_usable_cores():
    assert default_workers() == len(os.sched_getaffinity(0))


def test_local_workers_run_polars_on_one_thread_each(local):
    # One single-threaded worker per core: a polars pool per core in each worker would oversubscribe them.
    sizes = [o.value for o in local.map_ordered(polars_threads, enumerate([0, 1, 2, 3]))]
    assert sizes == [1, 1, 1, 1]


def test_ingest_goes_parallel_only_for_input_it_can_share_out():
    from pipeline.ingest.runner import PARALLEL_MIN_BYTES, auto_ingest_workers

    many = [PARALLEL_MIN_BYTES // 100] * 102  # many recordings: shared out among the cores
    assert auto_ingest_workers(many, 4) == 4
    one_large = [4 * PARALLEL_MIN_BYTES] + [1000] * 800  # a data.csv and its task files: one process
    assert auto_ingest_workers(one_large, 4) == 1
    assert auto_ingest_workers(many[:50], 4) == 1  # too little to pay for starting a cluster
    assert auto_ingest_workers([], 4) == 1
    # two cores: one process already keeps both busy; workers only for a release-sized study
    from pipeline.ingest.runner import TWO_CORES_MIN_BYTES

    study = [350_000_000 // 80] * 80  # a simulated study of 80 recordings
    assert auto_ingest_workers(study, 2) == 1 and auto_ingest_workers(study, 4) == 4
    assert auto_ingest_workers([TWO_CORES_MIN_BYTES // 100] * 102, 2) == 2
    assert auto_ingest_workers(many, 1) == 1


def preloaded(_: int) -> tuple[int, bool]:
    return os.getpid(), "tests.fixtures.harc" in sys.modules


def test_preload_is_imported_by_every_local_worker_as_it_starts():
    """`preload`: each worker imports the modules as it starts (the piece itself does not import them)."""
    with open_executor(2, n_items=8, preload=("tests.fixtures.harc",)) as ex:
        outcomes = list(ex.map_unordered(preloaded, [(k, k) for k in range(8)]))
    assert all(o.error is None for o in outcomes)
    assert all(o.value[1] for o in outcomes) and os.getpid() not in {o.value[0] for o in outcomes}


def test_serial_look_ahead_runs_the_next_pieces_before_handing_one_out():
    ran: list[int] = []

    def piece(x: int) -> int:
        ran.append(x)
        if x == 2:
            raise ValueError("piece 2 fails")
        return x * 10

    seen = []
    for outcome in SerialExecutor().map_ordered(piece, enumerate(range(5)), look_ahead=1):
        seen.append((outcome.key, outcome.value, type(outcome.error).__name__ if outcome.error else None))
        # piece k is handed out once piece k+1 has run (the last one: once it has run itself)
        assert ran[-1] == min(outcome.key + 1, 4)
    assert seen == [(0, 0, None), (1, 10, None), (2, None, "ValueError"), (3, 30, None), (4, 40, None)]
    assert ran == [0, 1, 2, 3, 4]


def test_serial_map_ordered_without_look_ahead_runs_each_piece_when_asked_for():
    ran: list[int] = []
    outcomes = SerialExecutor().map_ordered(lambda x: ran.append(x) or x, enumerate(range(3)))
    assert ran == []
    assert next(outcomes).value == 0 and ran == [0]


def test_map_ordered_with_a_total_reads_its_items_as_it_submits_them(local):
    """With ``total`` (export-transitions' pieces of a flood of files, made one by one), the items are an
    iterator read a look-ahead at a time, never listed whole first; the progress bar is told the total. Without
    it, the items were listed before the first piece ran."""
    for ex in (SerialExecutor(), local):
        made: list[int] = []

        def items(made: list[int] = made):
            for i in range(20):
                made.append(i)
                yield i, -i

        log: list = []
        outcomes = ex.map_ordered(abs, items(), look_ahead=2, progress=recording_progress(log),
                                  description="abs", total=20)
        first = next(outcomes)
        assert first.value == 0 and len(made) <= 4  # the piece handed out, the look-ahead, and one in hand
        assert log[0] == ("abs", 20)
        assert [o.value for o in outcomes] == list(range(1, 20)) and len(made) == 20
