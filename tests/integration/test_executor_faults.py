"""pipeline.core.executor under faults: an external cluster, a worker killed mid-piece, a parent killed -9.

Clusters listen on 127.0.0.1 only; every process started here is ended here, with bounded waits.
"""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from pipeline.core.executor import SerialExecutor, open_executor
from pipeline.core.workspace import Workspace
from pipeline.ingest import ingest_paths

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
TOOLKIT = REPO.parent / "shared" / "samples" / "arc-agi-3" / "toolkit"
ENV = {**os.environ, "PYTHONPATH": str(REPO)}


def cube(x: int) -> int:
    return x ** 3


def die_once(item: tuple[str, int]) -> int:
    """Kill this worker process the first time piece 2 runs (a marker file remembers that it did)."""
    marker_dir, x = item
    marker = Path(marker_dir) / f"died-{x}"
    if x == 2 and not marker.exists():
        marker.write_text(str(os.getpid()))
        os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(0.2)
    return x * 10


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=15)


def wait_for_workers(address: str, n: int, timeout_s: float = 60) -> None:
    from distributed import Client

    with Client(address, timeout=timeout_s, set_as_default=False) as client:
        client.wait_for_workers(n, timeout=timeout_s)


@pytest.fixture(scope="module")
def external_cluster(tmp_path_factory):
    """`dask scheduler` + `dask worker` (2 single-threaded processes) as a user would start them."""
    address = f"tcp://127.0.0.1:{free_port()}"
    logs = tmp_path_factory.mktemp("cluster")
    procs = []
    try:
        procs.append(subprocess.Popen(
            [str(BIN / "dask"), "scheduler", "--host", "127.0.0.1", "--port", address.rsplit(":", 1)[1],
             "--no-dashboard"], env=ENV, cwd=REPO, stdout=subprocess.DEVNULL,
            stderr=open(logs / "scheduler.log", "w")))
        procs.append(subprocess.Popen(
            [str(BIN / "dask"), "worker", address, "--host", "127.0.0.1", "--nworkers", "2", "--nthreads", "1",
             "--no-dashboard", "--death-timeout", "60"], env=ENV, cwd=REPO, stdout=subprocess.DEVNULL,
            stderr=open(logs / "worker.log", "w")))
        wait_for_workers(address, 2)
        yield address
    finally:
        for proc in reversed(procs):
            stop(proc)


def test_an_external_cluster_gives_the_same_results_and_stays_up(external_cluster):
    items = list(enumerate(range(12)))
    with open_executor(workers=1, scheduler=external_cluster) as ex:
        assert ex.n_workers == 2  # the cluster's worker threads, whatever `workers` said
        remote = {o.key: o.value for o in ex.map_unordered(cube, items)}
        ordered = [o.key for o in ex.map_ordered(cube, items)]
    assert remote == {o.key: o.value for o in SerialExecutor().map_unordered(cube, items)}
    assert ordered == list(range(12))
    wait_for_workers(external_cluster, 2, timeout_s=10)  # arcstudy closed its client only


def test_ingest_on_an_external_cluster_writes_what_a_serial_ingest_writes(external_cluster, tmp_path):
    tables = {}
    for name, options in (("serial", {"workers": 1}), ("cluster", {"scheduler": external_cluster})):
        with Workspace(tmp_path / f"{name}.duckdb") as ws:
            report = ingest_paths(ws, [TOOLKIT], run_id="x", **options)
            assert [f.status for f in report.files] == ["loaded"] * 12
            tables[name] = [ws.read(sql) for sql in (
                "SELECT * EXCLUDE (frames_file) FROM core_arc3__steps ORDER BY file_id, line_number",
                "SELECT * FROM core_arc3__plays ORDER BY play_id",
                "SELECT file_path, file_id, n_records_loaded FROM raw_ingest__files ORDER BY file_path")]
    for serial, cluster in zip(tables["serial"], tables["cluster"], strict=True):
        assert serial.equals(cluster)


def test_a_worker_killed_mid_piece_has_the_piece_retried_and_each_result_arrives_once(tmp_path):
    items = [(i, (str(tmp_path), i)) for i in range(6)]
    with open_executor(workers=2) as ex:
        outcomes = list(ex.map_unordered(die_once, items))
    assert (tmp_path / "died-2").exists()  # the worker really was killed
    assert not psutil.pid_exists(int((tmp_path / "died-2").read_text()))
    assert sorted(o.key for o in outcomes) == list(range(6))
    assert all(o.error is None for o in outcomes)
    assert {o.key: o.value for o in outcomes} == {i: i * 10 for i in range(6)}


PARENT = """
import json, os, time
import psutil
from pipeline.core.executor import open_executor
if __name__ == "__main__":
    with open_executor(workers=2) as ex:
        workers = sorted(ex.client.run(os.getpid).values())
        descendants = sorted(p.pid for p in psutil.Process().children(recursive=True))
        print(json.dumps({"workers": workers, "descendants": descendants}), flush=True)
        time.sleep(120)
"""


def test_kill_9_of_the_parent_leaves_no_worker_behind(tmp_path):
    script = tmp_path / "parent.py"
    script.write_text(PARENT)
    parent = subprocess.Popen([sys.executable, str(script)], env=ENV, cwd=REPO, stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True)
    pids: list[int] = []
    try:
        ready, _, _ = select.select([parent.stdout], [], [], 90)
        assert ready, "the parent did not start its cluster within 90 s"
        started = json.loads(parent.stdout.readline())
        pids = sorted(set(started["workers"]) | set(started["descendants"]))
        assert len(started["workers"]) == 2 and set(started["workers"]) <= set(pids)
        assert all(alive(pid) for pid in started["workers"])
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait(timeout=15)
        deadline = time.monotonic() + 30
        while any(alive(pid) for pid in pids) and time.monotonic() < deadline:
            time.sleep(0.5)
        survivors = [pid for pid in pids if alive(pid)]
        assert not survivors, f"still running after the parent's kill -9: {survivors}"
    finally:
        stop(parent)
        for pid in pids:  # only processes this test's parent started
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
