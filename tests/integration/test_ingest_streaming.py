"""A large recording is read inside its transaction and written chunk by chunk: the rows are those of a
one-chunk read, and a failure (or a refusal) mid-file leaves nothing of the file."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from pipeline.core.workspace import Workspace
from pipeline.ingest import commit, ingest_paths

SAMPLES = Path(__file__).resolve().parents[2].parent / "shared" / "samples" / "arc-agi-3"
FRAMES = SAMPLES / "toolkit" / "bt33_click_three_levels.frames.jsonl"  # 29 lines of ~12 KB
TABLES = ("raw_ingest__files", "raw_arc3__recording_lines", "core_arc3__steps", "core_arc3__plays",
          "core_arc3__usage", "core_arc3__card_plays", "quarantine")


def snapshot(ws: Workspace) -> dict[str, pl.DataFrame]:
    out = {}
    for name in TABLES:
        df = ws.read(f"SELECT * FROM {name}")
        df = df.drop([c for c in ("ingested_at", "run_id") if c in df.columns])
        out[name] = df.sort(df.columns)
    return out


def count_chunks(monkeypatch: pytest.MonkeyPatch, fail_at: int | None = None) -> list[int]:
    """Heights of the raw-line frames written, one per insert; raise on insert number `fail_at`."""
    heights: list[int] = []
    real_insert = Workspace.insert_frame

    def record(table_name, df):
        if table_name == "raw_arc3__recording_lines":
            heights.append(df.height)
            if fail_at is not None and len(heights) == fail_at:
                raise RuntimeError("disk full (simulated) mid-file")

    def insert(self, table_name, df, **kw):
        record(table_name, df)
        return real_insert(self, table_name, df, **kw)

    def spill(name, rows, path):  # a streamed file's chunks, inserted by one INSERT once read
        record(name, rows)
        return real_spill(name, rows, path)

    real_spill = commit._spill_chunk
    monkeypatch.setattr(Workspace, "insert_frame", insert)
    monkeypatch.setattr(commit, "_spill_chunk", spill)
    return heights


def test_chunked_ingest_writes_the_rows_of_a_one_chunk_ingest(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    # Every sample recording (quarantined lines, cards, usage lines, playback scripts) in small chunks.
    paths = [SAMPLES, SAMPLES.parent / "playback-arc-agi-3"]
    with Workspace(tmp_path / "whole.duckdb") as ws:
        whole_report = ingest_paths(ws, paths, run_id="w", workers=1)
        whole = snapshot(ws)
    heights = count_chunks(monkeypatch)
    with Workspace(tmp_path / "chunked.duckdb") as ws:
        report = ingest_paths(ws, paths, run_id="c", workers=1, chunk_bytes=40_000)
        chunked = snapshot(ws)
    monkeypatch.undo()
    assert [f.status for f in report.files] == [f.status for f in whole_report.files]
    assert [f.n_loaded for f in report.files] == [f.n_loaded for f in whole_report.files]
    assert len(heights) > len(report.files)  # some files were written in several chunks
    assert sum(heights) == whole["raw_arc3__recording_lines"].height
    for name in TABLES:
        assert chunked[name].equals(whole[name]), name


def test_a_failure_mid_file_leaves_nothing_of_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    with Workspace(tmp_path / "db.duckdb") as ws:
        heights = count_chunks(monkeypatch, fail_at=2)
        with pytest.raises(RuntimeError, match="disk full"):
            ingest_paths(ws, [FRAMES], run_id="a", chunk_bytes=50_000)
        monkeypatch.undo()
        assert len(heights) == 2  # the first chunk was written in the transaction, then rolled back
        assert all(ws.row_count(name) == 0 for name in TABLES)
        assert ingest_paths(ws, [FRAMES], run_id="b", chunk_bytes=50_000).files[0].status == "loaded"
        loaded = snapshot(ws)
        assert loaded["raw_arc3__recording_lines"].height == 29
        assert ingest_paths(ws, [FRAMES], run_id="c", chunk_bytes=50_000).files[0].status == "skipped"
        report = ingest_paths(ws, [FRAMES], run_id="d", chunk_bytes=50_000, force=True)
        assert report.files[0].status == "loaded"
        assert snapshot(ws)["core_arc3__steps"].equals(loaded["core_arc3__steps"])  # idempotent re-read


def test_a_file_refused_after_chunks_were_written_leaves_only_its_refusal(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch):
    # Lines that parse (so their raw rows are written chunk by chunk) but no frame line: refused at the end.
    path = tmp_path / "no_frames.jsonl"
    record = {"timestamp": "2026-05-01T10:00:00+00:00", "data": {"note": "x" * 2000}}
    path.write_text("".join(json.dumps(record) + "\n" for _ in range(40)))
    heights = count_chunks(monkeypatch)
    with Workspace(tmp_path / "db.duckdb") as ws:
        report = ingest_paths(ws, [path], run_id="a", fmt_name="arc3-recording", chunk_bytes=10_000)
        assert len(heights) > 1
        assert report.files[0].status == "rejected"
        assert ws.row_count("raw_arc3__recording_lines") == 0
        assert ws.row_count("raw_ingest__files") == 0
        checks = ws.read("SELECT check_name FROM quarantine")["check_name"].to_list()
        assert checks == ["no_frame_line"]


def test_a_reader_bug_mid_file_refuses_that_file_and_the_others_land(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch):
    from pipeline.recordings import reader

    other = tmp_path / "other.jsonl"
    other.write_bytes(FRAMES.read_bytes().replace(b"bt33", b"bt33", 1) + b"\n")  # different bytes, same rows
    real = reader.read_recording_file

    def buggy(path, *args, **kwargs):
        if Path(path).name == FRAMES.name:
            raise ZeroDivisionError("a reader bug (simulated)")
        return real(path, *args, **kwargs)

    monkeypatch.setattr(reader, "read_recording_file", buggy)
    monkeypatch.setattr("pipeline.ingest.arc3_recordings.read_recording_file", buggy, raising=False)
    with Workspace(tmp_path / "db.duckdb") as ws:
        report = ingest_paths(ws, [FRAMES, other], run_id="a", workers=1, chunk_bytes=50_000)
        assert [f.status for f in report.files] == ["rejected", "loaded"]
        assert "ZeroDivisionError" in report.files[0].message
        rows = ws.read("SELECT file_path, check_name FROM quarantine").rows()
        assert rows == [(str(FRAMES.resolve()), "reader_error")]
        assert ws.read("SELECT file_path FROM raw_ingest__files")["file_path"].to_list() == [str(other.resolve())]
