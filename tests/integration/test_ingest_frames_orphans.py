"""--keep-frames writes a recording's frames file while the recording is read, before its rows are committed. A
run stopped before the commit (a full disk, Ctrl-C) or a file refused at its commit left a complete frames file
that no step refers to. What the run wrote and did not commit is removed; what it committed stays."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.core.workspace import Workspace
from pipeline.ingest import ingest_paths, runner

FIXTURES = Path(__file__).resolve().parents[2].parent / "shared" / "samples" / "arc-agi-3" / "fixtures"


def test_a_run_stopped_before_its_commit_leaves_no_frames_file(tmp_path, db_path, monkeypatch):
    recordings = sorted(FIXTURES.glob("*.frames.jsonl"))[:3]
    assert len(recordings) == 3
    frames = tmp_path / "frames"

    def stopped(*args, **kwargs):
        raise KeyboardInterrupt  # Ctrl-C while the writer commits

    monkeypatch.setattr(runner, "commit_batch", stopped)
    monkeypatch.setattr(runner, "_commit_one", stopped)
    with Workspace(db_path) as ws, pytest.raises(KeyboardInterrupt):
        ingest_paths(ws, recordings, run_id="r", workers=1, keep_frames=True, frames_dir=frames)
    assert sorted(frames.glob("*.parquet")) == []
    monkeypatch.undo()
    with Workspace(db_path) as ws:  # the same run, uninterrupted: every frames file is there and referred to
        ingest_paths(ws, recordings, run_id="r2", workers=1, keep_frames=True, frames_dir=frames)
        referred = set(ws.read("SELECT DISTINCT frames_file FROM core_arc3__steps WHERE frames_file IS NOT NULL")[
            "frames_file"].to_list())
    assert {str(p) for p in frames.glob("*.parquet")} == referred and len(referred) == 3
