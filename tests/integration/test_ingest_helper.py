"""`HelperExecutor`: this process and one helper process read at once, results in input order; a piece's error is
that piece's, a helper that dies leaves its pieces to this process; and an ingest read so writes exactly what a
one-process ingest writes (the automatic choice on two cores below the worker threshold)."""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path

import psutil
import pytest
from typer.testing import CliRunner

import pipeline.core.executor as executor
from pipeline.cli import app
from pipeline.core.executor import HelperExecutor, open_helper_executor
from pipeline.core.spool import Spool
from pipeline.core.workspace import Workspace
from pipeline.ingest import ingest_paths, runner
from schemas import TABLES

FIXTURES = Path(__file__).resolve().parents[2].parent / "shared" / "samples" / "arc-agi-3" / "fixtures"


def where(item: tuple[int, int]) -> tuple[int, int]:
    """(the item, the process that ran it), after a short pause (so that both processes get pieces)."""
    x, _ = item
    time.sleep(0.02)
    return x * x, os.getpid()


def fail_on_three(item: tuple[int, int]) -> int:
    if item[0] == 3:
        raise ValueError("piece three is bad")
    return item[0]


def die_in_helper(item: tuple[int, int]) -> tuple[int, int]:
    """Kill the helper process when it runs a piece from 1 on (this process runs it again, unharmed). The helper
    is handed the first pieces at once, so it runs piece 0 and dies on piece 1."""
    x, parent = item
    if x >= 1 and os.getpid() != parent:
        os._exit(9)
    time.sleep(0.02)
    return x, os.getpid()


def unpicklable_in_helper(item: tuple[int, int]):
    """A result that cannot be sent back from the helper (a generator); a plain one here."""
    x, parent = item
    return (i for i in range(x)) if os.getpid() != parent else x


def spilled_in_helper(item: tuple[int, int]) -> Spool:
    """A result that names a file on disk (a spilled `Spool`)."""
    x, _ = item
    spool = Spool(limit=3)
    spool.extend(range(x * 10, x * 10 + 7))  # two batches on disk, one item in memory
    return spool


def writes_to_descriptor_1(item: tuple[int, int]) -> int:
    """Writes bytes to descriptor 1 and reads descriptor 0, as a C library may (a message, a progress bar)."""
    x, _ = item
    os.write(1, b"\x08\x00\x00\x00 a native library's line\n")
    try:
        os.read(0, 1)
    except OSError:
        pass
    return x


def _helpers() -> list[psutil.Process]:
    """The helper processes alive (a dead one not yet reaped is not)."""
    alive = []
    for p in psutil.Process().children(recursive=True):
        try:
            if "_helper_main" in " ".join(p.cmdline()) and p.status() != psutil.STATUS_ZOMBIE:
                alive.append(p)
        except psutil.Error:  # ended meanwhile, or a zombie
            continue
    return alive


def test_pieces_run_in_both_processes_and_come_back_in_input_order():
    me = os.getpid()
    with open_helper_executor() as ex:
        assert isinstance(ex, HelperExecutor) and len(_helpers()) == 1
        outcomes = list(ex.map_ordered(where, [(i, (i, me)) for i in range(40)]))
    assert [o.key for o in outcomes] == list(range(40))
    assert [o.value[0] for o in outcomes] == [i * i for i in range(40)]
    pids = {o.value[1] for o in outcomes}
    assert me in pids and len(pids) == 2 and ex.helper_pieces > 0  # both read
    assert not _helpers()  # ended on leaving


def test_a_piece_that_raises_is_that_pieces_error_and_the_others_go_on():
    with open_helper_executor() as ex:
        outcomes = list(ex.map_ordered(fail_on_three, [(i, (i, 0)) for i in range(8)]))
    assert [o.key for o in outcomes] == list(range(8))
    assert [type(o.error).__name__ if o.error else o.value for o in outcomes] == [0, 1, 2, "ValueError", 4, 5, 6, 7]
    assert "piece three is bad" in str(outcomes[3].error)


def test_a_helper_that_dies_leaves_its_pieces_to_this_process():
    me = os.getpid()
    with open_helper_executor() as ex:
        outcomes = list(ex.map_ordered(die_in_helper, [(i, (i, me)) for i in range(12)]))
        assert not _helpers()  # it died, and is not restarted
    assert [o.error for o in outcomes] == [None] * 12
    assert [o.value[0] for o in outcomes] == list(range(12))
    assert all(o.value[1] == me for o in outcomes[1:]) and ex.helper_pieces > 0  # it helped until it died


def test_a_result_the_helper_cannot_send_is_made_here():
    me = os.getpid()
    with open_helper_executor() as ex:
        outcomes = list(ex.map_ordered(unpicklable_in_helper, [(i, (i, me)) for i in range(10)]))
    assert [(o.value, o.error) for o in outcomes] == [(i, None) for i in range(10)]


def test_what_a_piece_writes_to_descriptor_1_does_not_corrupt_the_outcomes():
    """The helper once sent its outcomes on descriptor 1 itself: such bytes broke the stream, and this process
    waited for ever for the rest of a message."""
    import threading

    outcomes: list = []
    with open_helper_executor() as ex:
        run = threading.Thread(target=lambda: outcomes.extend(ex.map_ordered(writes_to_descriptor_1,
                                                                             [(i, (i, 0)) for i in range(12)])),
                               daemon=True)
        run.start()
        run.join(timeout=60)
        hung = run.is_alive()
        if hung:  # (the helper is killed so that the test ends)
            for p in _helpers():
                p.kill()
            run.join(timeout=10)
    assert not hung, "the outcomes stopped coming"
    assert [(o.value, o.error) for o in outcomes] == [(i, None) for i in range(12)] and ex.helper_pieces > 0


def _snapshot(ws: Workspace) -> dict:
    clock = {"raw_ingest__files": " EXCLUDE (ingested_at)", "schema_version": " EXCLUDE (migrated_at)"}
    return {name: ws.read(f"SELECT *{clock.get(name, '')} FROM {name} ORDER BY ALL").rows()
            for name in TABLES if ws.has_table(name) and ws.row_count(name) and name != "runs"}


def test_an_ingest_with_a_helper_writes_what_one_process_writes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    folder = tmp_path / "in"
    folder.mkdir()
    for sample in sorted(FIXTURES.glob("*.jsonl")):
        shutil.copy(sample, folder / sample.name)
    (folder / "bad.jsonl").write_text('{"timestamp": "2026-01-01T00:00:00+00:00", "data": {"game_id": 5}}\n{}\n')
    monkeypatch.setattr(executor, "default_workers", lambda: 2)  # as on a two-core machine
    monkeypatch.setattr(runner, "default_workers", lambda: 2)
    monkeypatch.setattr(runner, "HELPER_MIN_BYTES", 0)
    monkeypatch.setattr(runner, "machine_load", lambda: 0.2)  # a core free
    used: list[HelperExecutor] = []
    real = runner.open_helper_executor

    def spy(*args):
        cm = real(*args)
        ex = cm.__enter__()
        used.append(ex)
        return _Entered(cm, ex)

    monkeypatch.setattr(runner, "open_helper_executor", spy)
    snapshots, reports = [], []
    for workers in (None, 1):
        with Workspace(tmp_path / f"db{workers}.duckdb") as ws:
            report = ingest_paths(ws, [folder], run_id="a", workers=workers)
            reports.append([(f.path.name, f.status, f.n_loaded, f.n_quarantined, f.message) for f in report.files])
            snapshots.append(_snapshot(ws))
    assert len(used) == 1 and used[0].helper_pieces > 0  # the automatic choice used the helper; --workers 1 not
    assert reports[0] == reports[1]
    assert snapshots[0] == snapshots[1]
    assert snapshots[0]["quarantine"] and snapshots[0]["core_arc3__steps"]


class _Entered:
    def __init__(self, cm, ex):
        self.cm, self.ex = cm, ex

    def __enter__(self):
        return self.ex

    def __exit__(self, *exc):
        return self.cm.__exit__(*exc)


@pytest.mark.parametrize("load", [0.0, 2.0])
def test_the_command_reads_with_a_helper_only_while_a_core_is_free(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                                   load: float):
    monkeypatch.setattr(executor, "default_workers", lambda: 2)
    monkeypatch.setattr(runner, "default_workers", lambda: 2)
    monkeypatch.setattr(runner, "HELPER_MIN_BYTES", 0)
    monkeypatch.setattr(runner, "machine_load", lambda: load)  # what the ingest decides by
    monkeypatch.setattr(executor, "machine_load", lambda: load)  # what the command says why by
    started: list[int] = []
    real = runner.open_helper_executor
    monkeypatch.setattr(runner, "open_helper_executor", lambda *a: started.append(1) or real(*a))
    files = sorted(FIXTURES.glob("*.jsonl"))[:3]
    result = CliRunner().invoke(app, ["--plain", "ingest", *map(str, files), "--db", str(tmp_path / "w.duckdb")])
    assert result.exit_code in (0, 3), result.output
    if load < 1.5:
        assert started == [1]
        assert "reading in this process and one helper process" in result.output
        assert "--workers 1 for this one alone" in result.output
    else:  # both cores busy: a helper would only compete for them
        assert started == []
        assert "reading in this one process: no core is free (2 other tasks running on 2 cores)" in result.output


def test_a_helper_leaves_no_spilled_file_behind(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """The helper ends without the interpreter's teardown; the files of the results it kept are removed first."""
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    tempfile.tempdir = None  # tempfile reads TMPDIR again (this process and the helper it starts)
    try:
        me = os.getpid()
        with open_helper_executor() as ex:
            outcomes = list(ex.map_ordered(spilled_in_helper, [(i, (i, me)) for i in range(6)]))
            assert ex.helper_pieces > 0
            assert [list(o.value) for o in outcomes] == [list(range(i * 10, i * 10 + 7)) for i in range(6)]
            del outcomes
        assert not _helpers()
        assert list(tmp_path.glob("arcstudy-spool-*")) == []
    finally:
        tempfile.tempdir = None


def test_machine_load_counts_the_tasks_running_now(monkeypatch: pytest.MonkeyPatch):
    """What other processes keep busy at this moment, not the 1-minute average (which lags behind a burst)."""
    import subprocess
    import sys

    if not Path("/proc/loadavg").is_file():
        pytest.skip("no /proc/loadavg here (Linux only): machine_load falls back to the load average")
    monkeypatch.setattr(executor, "_LOAD_SEEN", [])
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(3)]
    try:
        time.sleep(0.3)
        assert executor.machine_load() >= 2  # three busy spinners (two cores may run only two of them at once)
        assert executor.machine_load() == executor.machine_load()  # one look a second: the command's choices agree
    finally:
        for p in spinners:
            p.kill()
            p.wait()
