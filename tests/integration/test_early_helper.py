"""The helper process the program starts before its imports (pipeline/commands/early.py): started only for a
command likely to read with one, used by that command when it does, ended unused when it does not or when
nothing takes it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

import pipeline.core.executor as executor
from pipeline.commands import early
from pipeline.core.workspace import Workspace
from pipeline.ingest import ingest_paths, runner

from .test_ingest_helper import _helpers  # the helper processes alive

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO.parent / "shared" / "samples" / "arc-agi-3" / "fixtures"


@pytest.fixture(autouse=True)
def _blas_variables_restored(monkeypatch):
    """`start_early_work` sets the BLAS variables in this process's environment: put them back after each test."""
    for name in early.BLAS_THREADS:
        before = os.environ.get(name)
        monkeypatch.setenv(name, before or "removed after the test")  # monkeypatch records the state before
        if before is None:
            monkeypatch.delenv(name)


@pytest.fixture(autouse=True)
def _sandbox_starts(monkeypatch) -> list[int]:
    """The game sandbox `start_early_work` starts for commands that replay games, noted instead of started."""
    starts: list[int] = []
    monkeypatch.setattr(early, "_start_sandbox", lambda: starts.append(1))
    return starts


@pytest.mark.parametrize(("args", "started"), [
    (["--plain", "export-transitions", "a.jsonl", "--out", "x"], True),
    (["score", "study/", "--games", "games/"], True),
    (["score", "--help"], False),
    (["export-transitions", "-h"], False),
    (["export-transitions", "d/", "--out", "x", "--workers", "1"], True),
    (["export-transitions", "d/", "--out", "x", "--workers=2"], False),  # replayed on the workers
    (["score", "d/", "--scheduler", "tcp://x:1"], False),
    (["ingest", "study/"], False),
    (["--version"], False),
])
def test_a_game_sandbox_is_started_early_for_the_commands_that_replay_games(monkeypatch, args, started,
                                                                            _sandbox_starts):
    monkeypatch.setattr(executor, "start_early_helper", lambda preload: None)
    early.start_early_work(args)
    assert _sandbox_starts == ([1] if started else [])


@pytest.mark.parametrize(("soft", "started"), [(10, False), (early.EARLY_SANDBOX_MIN_FILES - 1, False),
                                               (early.EARLY_SANDBOX_MIN_FILES, True), (1024, True)])
def test_no_game_sandbox_is_started_early_under_a_small_open_files_limit(monkeypatch, soft, started,
                                                                         _sandbox_starts):
    """Its pipes, opened on a thread beside the app's imports, took the descriptors an import needed under
    `ulimit -n 10`: a traceback from importing click, now and then, where the command says the limit in one line."""
    import resource

    monkeypatch.setattr(resource, "getrlimit", lambda which: (soft, resource.RLIM_INFINITY))
    early.start_early_work(["score", "study/", "--games", "games/"])
    assert _sandbox_starts == ([1] if started else [])


@pytest.mark.parametrize(("args", "cores", "load", "started"), [
    (["--plain", "ingest", "study/"], 2, 0.0, True),
    (["ingest", "a.jsonl", "b.jsonl"], 4, 2.0, True),
    (["ingest", "study/", "--workers", "2"], 2, 0.0, False),
    (["ingest", "study/", "--workers=1"], 2, 0.0, False),
    (["ingest", "study/", "--scheduler", "tcp://x:1"], 2, 0.0, False),
    (["ingest", "--help"], 2, 0.0, False),
    (["score", "study/"], 2, 0.0, False),
    (["--version"], 2, 0.0, False),
    (["ingest", "study/"], 1, 0.0, False),  # one core: nothing to share it with
    (["ingest", "study/"], 2, 2.0, False),  # both cores busy: the command would not take it
])
def test_an_early_helper_only_where_the_command_is_likely_to_read_with_one(monkeypatch, args, cores, load, started):
    calls = []
    monkeypatch.setattr(executor, "start_early_helper", calls.append)
    monkeypatch.setattr(executor, "default_workers", lambda: cores)
    monkeypatch.setattr(executor, "machine_load", lambda: load)
    early.start_early_work(args)
    assert calls == ([runner.HELPER_PRELOAD] if started else [])


def test_the_early_helper_is_the_one_the_ingest_starts_with():
    assert early.EARLY_HELPERS["ingest"] == runner.HELPER_PRELOAD


def test_the_ingest_takes_the_early_helper_or_ends_it(monkeypatch, tmp_path):
    files = sorted(FIXTURES.glob("*.jsonl"))[:3]
    monkeypatch.setattr(runner, "default_workers", lambda: 2)
    monkeypatch.setattr(runner, "machine_load", lambda: 0.0)
    # wanted (the threshold lowered for the small fixtures): the early helper itself is used, then closed
    monkeypatch.setattr(runner, "HELPER_MIN_BYTES", 0)
    executor.start_early_helper(runner.HELPER_PRELOAD)
    started = executor._EARLY[tuple(runner.HELPER_PRELOAD)]
    with runner.start_helper(files) as helper, Workspace(tmp_path / "w.duckdb") as ws:
        assert helper is started and len(_helpers()) == 1
        report = ingest_paths(ws, files, run_id="a", helper=helper)
        assert [f.status for f in report.files] == ["loaded"] * 3 and helper.helper_pieces > 0
    assert not _helpers() and not executor._EARLY
    # not wanted (below the threshold): ended at once, not left running
    monkeypatch.setattr(runner, "HELPER_MIN_BYTES", 1 << 40)
    executor.start_early_helper(runner.HELPER_PRELOAD)
    with runner.start_helper(files) as helper:
        assert helper is None
        assert not _helpers()
    assert not executor._EARLY


def test_an_early_helper_nobody_takes_ends_with_the_program(tmp_path):
    script = ("import sys\nfrom pipeline.core import executor\nexecutor.start_early_helper(('json',))\n"
              "print(executor._EARLY[('json',)]._helper.proc.pid, flush=True)\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=REPO, timeout=60)
    assert done.returncode == 0, done.stderr
    pid = int(done.stdout.strip())
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


def test_the_program_runs_the_app():
    """`python -m pipeline` (the console script's entry) is the app: its exit codes and output."""
    version = subprocess.run([sys.executable, "-m", "pipeline", "--version"], capture_output=True, text=True,
                             cwd=REPO, timeout=60)
    assert version.returncode == 0 and version.stdout.startswith("arcstudy ")
    bad = subprocess.run([sys.executable, "-m", "pipeline", "no-such-verb"], capture_output=True, text=True,
                         cwd=REPO, timeout=60)
    assert bad.returncode == 2 and "no-such-verb" in bad.stderr


def test_the_program_makes_the_blas_single_threaded_unless_the_user_set_it(monkeypatch):
    monkeypatch.setattr(executor, "start_early_helper", lambda preload: None)
    for name in early.BLAS_THREADS:
        monkeypatch.delenv(name, raising=False)  # restored by `_blas_variables_restored`
    early.start_early_work(["score", "study/"])
    assert {name: os.environ.get(name) for name in early.BLAS_THREADS} == {"OPENBLAS_NUM_THREADS": "1"}
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "4")  # the user's choice stands
    early.start_early_work(["score", "study/"])
    assert os.environ["OPENBLAS_NUM_THREADS"] == "4"


def test_numpy_in_the_program_starts_no_blas_thread():
    """The setting is in place before numpy is imported: the program's process has one thread, its own, after
    `import numpy` (OpenBLAS would otherwise have started one per further core)."""
    code = ("import os; from pipeline.commands.early import start_early_work; start_early_work(['--version']); "
            "import numpy; print(len(os.listdir('/proc/self/task')), os.cpu_count())")
    env = {k: v for k, v in os.environ.items() if k not in early.BLAS_THREADS}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, env=env)
    assert done.returncode == 0, done.stderr
    threads, cores = map(int, done.stdout.split())
    assert cores < 2 or threads == 1
