"""Ingest writes on a background thread (`BackgroundWriter`) while it reads on: a file's (or a batch's) commit
runs while the next file is read, a streamed file's chunk inserts while its next chunk is parsed. The
failures behave as when everything ran in turn: a write that fails stops the run with the file rolled back,
a reader bug refuses its file (reader_error) and the run goes on, and no thread is left writing."""

from __future__ import annotations

import shutil
import threading
import time
from pathlib import Path

import pytest

from pipeline.core.workspace import Workspace
from pipeline.ingest import batches, commit, ingest_paths, runner

SAMPLES = Path(__file__).resolve().parents[2].parent / "shared" / "samples" / "arc-agi-3"
FRAMES = SAMPLES / "toolkit" / "bt33_click_three_levels.frames.jsonl"  # 29 lines of ~12 KB
GUID = b"3b30d9ed-e5eb-4c9d-a905-13e831744f2b"  # FRAMES's session
TABLES = ("raw_ingest__files", "raw_arc3__recording_lines", "core_arc3__steps", "core_arc3__plays",
          "quarantine")


def _writer_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith(("arcstudy-writer", "arcstudy-chunk-writer"))]


def _copies(folder: Path, n: int) -> list[Path]:
    """`n` recordings of FRAMES's steps, each its own session (guid), so none clashes with another."""
    folder.mkdir()
    out = []
    for i in range(n):
        path = folder / f"copy{i}.jsonl"
        path.write_bytes(FRAMES.read_bytes().replace(GUID, GUID[:-4] + b"%04d" % i))
        out.append(path)
    return out


def _spy_inserts(monkeypatch: pytest.MonkeyPatch, table: str, *, fail_at: int | None = None,
                 delay: float = 0.0) -> list[str]:
    """Names of the threads that inserted into `table`, one per insert; insert number `fail_at` raises,
    each insert first sleeps `delay` (so the reader has moved on when it fails)."""
    threads: list[str] = []
    real_insert = Workspace.insert_frame

    def record(table_name):
        if table_name == table:
            threads.append(threading.current_thread().name)
            time.sleep(delay)
            if fail_at is not None and len(threads) == fail_at:
                raise RuntimeError("disk full (simulated) on the writer thread")

    def insert(self, table_name, df, **kw):
        record(table_name)
        return real_insert(self, table_name, df, **kw)

    def spill(name, rows, path):  # a streamed file's chunks, inserted by one INSERT once read
        record(name)
        return real_spill(name, rows, path)

    real_spill = commit._spill_chunk
    monkeypatch.setattr(Workspace, "insert_frame", insert)
    monkeypatch.setattr(commit, "_spill_chunk", spill)
    return threads


def test_chunks_are_inserted_on_the_writer_thread(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    threads = _spy_inserts(monkeypatch, "raw_arc3__recording_lines")
    with Workspace(tmp_path / "db.duckdb") as ws:
        report = ingest_paths(ws, [FRAMES], run_id="a", chunk_bytes=50_000)
        assert report.files[0].status == "loaded"
        assert ws.row_count("raw_arc3__recording_lines") == 29
    assert len(threads) > 2 and all(name.startswith("arcstudy-chunk-writer") for name in threads)
    assert not _writer_threads()


def test_a_chunk_insert_failing_mid_file_stops_the_run_and_leaves_nothing_of_the_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    files = _copies(tmp_path / "in", 2)
    with Workspace(tmp_path / "db.duckdb") as ws:
        threads = _spy_inserts(monkeypatch, "raw_arc3__recording_lines", fail_at=3, delay=0.05)
        with pytest.raises(RuntimeError, match="disk full"):
            ingest_paths(ws, files, run_id="a", workers=1, chunk_bytes=50_000)
        monkeypatch.undo()
        assert len(threads) == 3  # no chunk was inserted after the failing one
        assert not _writer_threads()
        assert all(ws.row_count(name) == 0 for name in TABLES)  # the first chunks were rolled back
        report = ingest_paths(ws, files, run_id="b", workers=1, chunk_bytes=50_000)  # the connection is fine
        assert [f.status for f in report.files] == ["loaded", "loaded"]


def test_a_reader_bug_after_chunks_were_written_refuses_that_file_only(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch):
    from pipeline.recordings import reader

    bad, good = _copies(tmp_path / "in", 2)
    real_parse = reader.parse_line

    def parse_line(number, raw, want_frames, **options):
        if number == 20 and threading.current_thread() is threading.main_thread() and _reading_bad[0]:
            raise ZeroDivisionError("a reader bug (simulated) at line 20")
        return real_parse(number, raw, want_frames, **options)

    _reading_bad = [False]
    real_read = reader.read_recording_file
    threads = _spy_inserts(monkeypatch, "raw_arc3__recording_lines", delay=0.05)  # busy when the bug hits
    inserted_before_good: list[int] = []

    def read_recording_file(path, *args, **kwargs):
        _reading_bad[0] = Path(path).name == bad.name
        if not _reading_bad[0]:
            inserted_before_good.append(len(threads))
        return real_read(path, *args, **kwargs)

    monkeypatch.setattr(reader, "parse_line", parse_line)
    monkeypatch.setattr("pipeline.ingest.arc3_recordings.read_recording_file", read_recording_file)
    with Workspace(tmp_path / "db.duckdb") as ws:
        report = ingest_paths(ws, [bad, good], run_id="a", workers=1, chunk_bytes=50_000)
        assert [f.status for f in report.files] == ["rejected", "loaded"]
        assert "ZeroDivisionError" in report.files[0].message
        assert inserted_before_good[0] >= 2  # chunks of the bad file were written before the bug, then rolled back
        assert ws.read("SELECT check_name FROM quarantine")["check_name"].to_list() == ["reader_error"]
        assert ws.read("SELECT file_path FROM raw_ingest__files")["file_path"].to_list() == [str(good.resolve())]
        assert ws.row_count("raw_arc3__recording_lines") == 29  # the good file's lines only
    assert not _writer_threads()


def test_a_file_commit_failing_on_the_writer_thread_stops_the_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    # Each file committed alone (not in a batch) on the writer thread, while the next one is read.
    monkeypatch.setattr(batches, "SMALL_FILE_BYTES", 0)
    monkeypatch.setattr(batches, "SMALL_RECORDING_BYTES", 0)
    files = _copies(tmp_path / "in", 4)
    with Workspace(tmp_path / "db.duckdb") as ws:
        threads = _spy_inserts(monkeypatch, "core_arc3__steps", fail_at=2, delay=0.05)
        with pytest.raises(RuntimeError, match="disk full"):
            ingest_paths(ws, files, run_id="a", workers=1)
        assert threads == ["arcstudy-writer_0", "arcstudy-writer_0"]
        assert not _writer_threads()
        # The first file landed whole; the second was rolled back; the ones after it were not committed.
        assert ws.read("SELECT file_path FROM raw_ingest__files")["file_path"].to_list() == [
            str(files[0].resolve())]
        assert ws.row_count("raw_arc3__recording_lines") == 29
        assert ws.row_count("quarantine") == 0


def test_a_reader_bug_while_the_writer_commits_refuses_that_file_and_the_run_goes_on(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(batches, "SMALL_FILE_BYTES", 0)
    monkeypatch.setattr(batches, "SMALL_RECORDING_BYTES", 0)
    files = _copies(tmp_path / "in", 3)
    real_read = runner._read

    def buggy(prepared, fmt, **kwargs):
        if prepared.path.name == files[1].name:
            raise ZeroDivisionError("a reader bug (simulated)")
        return real_read(prepared, fmt, **kwargs)

    monkeypatch.setattr(runner, "_read", buggy)
    _spy_inserts(monkeypatch, "core_arc3__steps", delay=0.1)  # the first file still being written
    with Workspace(tmp_path / "db.duckdb") as ws:
        report = ingest_paths(ws, files, run_id="a", workers=1)
        assert [f.status for f in report.files] == ["loaded", "rejected", "loaded"]
        assert ws.read("SELECT check_name FROM quarantine")["check_name"].to_list() == ["reader_error"]
        assert ws.row_count("raw_ingest__files") == 2
    assert not _writer_threads()


def test_an_interrupt_while_the_writer_commits_leaves_whole_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(batches, "SMALL_FILE_BYTES", 0)
    monkeypatch.setattr(batches, "SMALL_RECORDING_BYTES", 0)
    files = _copies(tmp_path / "in", 3)
    real_read = runner._read

    def interrupted(prepared, fmt, **kwargs):
        if prepared.path.name == files[1].name:
            raise KeyboardInterrupt
        return real_read(prepared, fmt, **kwargs)

    monkeypatch.setattr(runner, "_read", interrupted)
    _spy_inserts(monkeypatch, "core_arc3__steps", delay=0.2)
    with Workspace(tmp_path / "db.duckdb") as ws:
        with pytest.raises(KeyboardInterrupt):
            ingest_paths(ws, files, run_id="a", workers=1)
        assert not _writer_threads()  # the commit of the first file ended before the interrupt left ingest
        assert ws.read("SELECT file_path FROM raw_ingest__files")["file_path"].to_list() == [
            str(files[0].resolve())]
        assert ws.row_count("raw_arc3__recording_lines") == 29


def test_threaded_ingest_of_many_files_writes_what_a_serial_commit_writes(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch):
    """The same rows whether each commit waits for the next file or not (the writer made synchronous)."""
    folder = tmp_path / "in"
    folder.mkdir()
    for sample in sorted(SAMPLES.rglob("*.jsonl")):
        shutil.copy(sample, folder / f"{sample.parent.name}-{sample.name}")
    monkeypatch.setattr(batches, "SMALL_FILE_BYTES", 0)
    monkeypatch.setattr(batches, "SMALL_RECORDING_BYTES", 0)  # every file committed alone, on the writer
    with Workspace(tmp_path / "threaded.duckdb") as ws:
        threaded_report = ingest_paths(ws, [folder], run_id="r", workers=1)
        threaded = {name: ws.read(f"SELECT * FROM {name} ORDER BY ALL").rows()
                    for name in ("raw_arc3__recording_lines", "core_arc3__steps", "core_arc3__plays", "quarantine")}

    class Inline:  # BackgroundWriter's interface, each job run at once in the caller's thread
        def __init__(self, depth=1, on_result=None, name="", budget=None):
            self.on_result = on_result

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return None

        def submit(self, fn, *args, weight=0):
            result = fn(*args)
            if self.on_result is not None:
                self.on_result(result)

        def drain(self):
            return None

    monkeypatch.setattr(runner, "BackgroundWriter", Inline)
    with Workspace(tmp_path / "inline.duckdb") as ws:
        inline_report = ingest_paths(ws, [folder], run_id="r", workers=1)
        inline = {name: ws.read(f"SELECT * FROM {name} ORDER BY ALL").rows()
                  for name in threaded}
    assert [(f.path, f.status, f.n_loaded, f.n_quarantined, f.message) for f in threaded_report.files] == \
        [(f.path, f.status, f.n_loaded, f.n_quarantined, f.message) for f in inline_report.files]
    assert len(threaded_report.files) > 5
    for name in threaded:
        assert threaded[name] == inline[name], name


def test_a_validation_that_raises_on_the_writer_thread_refuses_that_file_and_the_run_goes_on(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    # A serial ingest checks a file's rows against the schemas on the writer thread: a check that raises is a
    # reader_error for that file (as when a worker's prepare_file raised), not a write error.
    from pipeline.core.manifest import sha256_file

    monkeypatch.setattr(batches, "SMALL_FILE_BYTES", 0)
    monkeypatch.setattr(batches, "SMALL_RECORDING_BYTES", 0)
    files = _copies(tmp_path / "in", 3)
    bad_id = sha256_file(files[1])
    real_validate = commit.validate_output

    def validate_output(output):
        if any("file_id" in df.columns and bad_id in df["file_id"].to_list() for df in output.tables.values()):
            assert threading.current_thread() is not threading.main_thread()
            raise ZeroDivisionError("a schema check bug (simulated)")
        return real_validate(output)

    monkeypatch.setattr(commit, "validate_output", validate_output)  # `commit_file` checks it on the writer
    with Workspace(tmp_path / "db.duckdb") as ws:
        report = ingest_paths(ws, files, run_id="a", workers=1)
        assert [f.status for f in report.files] == ["loaded", "rejected", "loaded"]
        assert "ZeroDivisionError" in report.files[1].message
        assert ws.read("SELECT file_path, check_name FROM quarantine").rows() == [
            (str(files[1].resolve()), "reader_error")]
        assert ws.row_count("raw_ingest__files") == 2


def test_files_holding_little_are_read_while_a_long_commit_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Beyond COMMITS_AHEAD pending commits, files whose rows hold little memory (PENDING_BYTES of input in
    all) are still read and queued: the small files of an H-ARC release are read while data.csv commits.
    Here the first file's commit waits until the last file has been read; it would wait in vain (and the
    run stall behind it) if reading stopped at two pending commits."""
    paths = _copies(tmp_path / "in", 5)
    monkeypatch.setattr(batches, "SMALL_FILE_BYTES", 0)
    monkeypatch.setattr(batches, "SMALL_RECORDING_BYTES", 0)  # every file committed alone, on the writer
    last_read = threading.Event()
    real_prepare, real_commit = runner.prepare_file, runner._commit_one

    def prepare(path: Path, **kwargs):
        prepared = real_prepare(path, **kwargs)
        if path.name == paths[-1].name:
            last_read.set()
        return prepared

    waited: list[bool] = []

    def commit_once_read(ws, prepared):
        if prepared.path.name == paths[0].name:
            waited.append(last_read.wait(10))
        return real_commit(ws, prepared)

    monkeypatch.setattr(runner, "prepare_file", prepare)
    monkeypatch.setattr(runner, "_commit_one", commit_once_read)
    with Workspace(tmp_path / "ahead.duckdb") as ws:
        report = ingest_paths(ws, [tmp_path / "in"], run_id="r", workers=1)
        assert ws.row_count("core_arc3__plays") == 5
    assert waited == [True]
    assert [f.status for f in report.files] == ["loaded"] * 5
