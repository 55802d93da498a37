"""`arcstudy ingest` refuses what it cannot honestly read, at once and saying why.

A FIFO or a device once hung ingest with no output (opening a FIFO waits for a writer; /dev/zero never ends);
an empty folder gave "0 files" and exit 0. Each run is a subprocess with a timeout so that a hang fails fast.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.core.workspace import Workspace

TIMEOUT_S = 60


def ingest(db: Path, *paths: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pipeline.cli", "--plain", "ingest", "--db", str(db),
                           *map(str, paths)], capture_output=True, text=True, timeout=TIMEOUT_S)


def refused_rows(db: Path) -> list[tuple[str, str, str]]:
    with Workspace(db, read_only=True) as ws:
        return ws.read("SELECT file_path, check_name, reason FROM quarantine ORDER BY file_path").rows()


def a_recording(folder: Path) -> Path:
    """A copy of a small sample recording: a regular file ingest loads."""
    sample = next((Path(__file__).resolve().parents[2].parent / "shared" / "samples" / "arc-agi-3" / "fixtures")
                  .glob("*_scripted-win.*.jsonl"))
    target = folder / sample.name
    target.write_bytes(sample.read_bytes())
    return target


@pytest.mark.parametrize("kind", ["fifo", "dev_zero"])
def test_a_fifo_or_device_given_directly_is_refused_at_once(tmp_path: Path, kind: str):
    if kind == "fifo":
        path = tmp_path / "pipe.jsonl"
        os.mkfifo(path)
        expected = "a FIFO (named pipe), not a regular file"
    else:
        path = Path("/dev/zero")
        expected = "a character device, not a regular file"
    db = tmp_path / "t.duckdb"
    res = ingest(db, path)
    assert res.returncode == 3, res.stderr
    assert "1 refused" in res.stdout and "Traceback" not in res.stderr
    assert refused_rows(db) == [(str(path.resolve()), "not_a_regular_file",
                                 f"{expected}: only regular files are read")]


def test_a_fifo_inside_a_folder_is_refused_and_the_rest_loads(tmp_path: Path):
    folder = tmp_path / "in"
    folder.mkdir()
    good = a_recording(folder)
    os.mkfifo(folder / "pipe.jsonl")
    db = tmp_path / "t.duckdb"
    res = ingest(db, folder)
    assert res.returncode == 3, res.stderr
    assert "1 loaded" in res.stdout and "1 refused" in res.stdout
    assert [r[:2] for r in refused_rows(db)] == [(str((folder / "pipe.jsonl").resolve()), "not_a_regular_file")]
    with Workspace(db, read_only=True) as ws:
        assert ws.read("SELECT file_name FROM raw_ingest__files").rows() == [(good.name,)]


def test_an_empty_folder_is_an_error_not_zero_files(tmp_path: Path):
    folder = tmp_path / "empty"
    (folder / ".hidden").mkdir(parents=True)
    (folder / ".hidden" / "x.jsonl").write_text("{}\n")
    (folder / "notes.py").write_text("")
    db = tmp_path / "t.duckdb"
    res = ingest(db, folder)
    assert res.returncode == 2
    assert f"no input files in {folder}" in res.stderr and "nothing ingested" in res.stderr
    assert not db.exists()  # refused before the database is created
