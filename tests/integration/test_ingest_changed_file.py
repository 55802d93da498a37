"""A file that changes while it is ingested (a recording still being written, a file replaced meanwhile) is
refused as `file_changed`: its content hash was taken from other bytes than the rows read, so storing them
under that id would break the link from every row to its file. Nothing of it lands; the next ingest of the
completed file loads it under the hash of what was read."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from pipeline.core.manifest import sha256_file
from pipeline.core.workspace import Workspace
from pipeline.ingest import commit, ingest_paths, runner

SAMPLES = Path(__file__).resolve().parents[2].parent / "shared" / "samples" / "arc-agi-3"
FRAMES = SAMPLES / "toolkit" / "bt33_click_three_levels.frames.jsonl"  # 29 lines of ~12 KB
DATA_TABLES = ("raw_arc3__recording_lines", "core_arc3__steps", "core_arc3__plays")


def _append_while_reading(monkeypatch: pytest.MonkeyPatch, path: Path, times: int = 1) -> None:
    """The file gets one more (repeated) line right after the reader has read it, `times` times."""
    real_read = runner._read  # the one `_read` (pipeline.ingest.prepared), as its callers see it
    extra = path.read_bytes().splitlines(keepends=True)[-1]
    left = [times]

    def read(prepared, fmt, **kw):
        real_read(prepared, fmt, **kw)
        if prepared.path == path.resolve() and left[0] > 0:
            left[0] -= 1
            with open(path, "ab") as fh:
                fh.write(extra)

    # Read whole by `prepare_file` (runner), or streamed inside the transaction by `_read_streamed` (commit).
    monkeypatch.setattr(runner, "_read", read)
    monkeypatch.setattr(commit, "_read", read)


@pytest.mark.parametrize("chunk_bytes", [None, 50_000], ids=["read-whole", "streamed"])
def test_a_file_that_grows_while_read_is_refused_and_loads_once_complete(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch,
                                                                        chunk_bytes):
    path = tmp_path / "live.jsonl"
    shutil.copyfile(FRAMES, path)
    _append_while_reading(monkeypatch, path)
    with Workspace(tmp_path / "db.duckdb") as ws:
        report = ingest_paths(ws, [path], run_id="a", chunk_bytes=chunk_bytes)
        assert [f.status for f in report.files] == ["rejected"]
        assert all(ws.row_count(name) == 0 for name in DATA_TABLES)
        quarantined = ws.read("SELECT check_name, reason FROM quarantine").rows()
        assert [check for check, _ in quarantined] == ["file_changed"]
        assert "changed while it was being ingested" in quarantined[0][1]

        report = ingest_paths(ws, [path], run_id="b", chunk_bytes=chunk_bytes)  # the file is complete now
        assert [f.status for f in report.files] == ["loaded"]
        assert ws.row_count("raw_arc3__recording_lines") == 30  # with the appended line (a duplicate step)
        assert ws.read("SELECT file_id FROM raw_ingest__files").rows() == [(sha256_file(path),)]


def test_a_file_left_alone_is_not_refused(tmp_path: Path):
    path = tmp_path / "still.jsonl"
    shutil.copyfile(FRAMES, path)
    with Workspace(tmp_path / "db.duckdb") as ws:
        for chunk_bytes in (None, 50_000):
            report = ingest_paths(ws, [path], run_id=f"r{chunk_bytes}", chunk_bytes=chunk_bytes, force=True)
            assert report.files[0].status in ("loaded", "replaced")
            assert not ws.read("SELECT 1 FROM quarantine WHERE check_name = 'file_changed'").rows()
