"""A big data.csv keeps the per-row state of its two passes on disk, in buckets by task
(pipeline/ingest/harc.py `_DataFile.bucketed`, above BOUNDED_BYTES). Forced on a small hostile file (tasks
interleaved, duplicates, conflicting keys, time going back, undo and resize, missing and mismatched joint ids,
a repeated header, blank lines), read in many batches and many buckets, it must store exactly what the same
file read in memory stores, and leave no scratch file behind on success, failure or interrupt."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from pipeline.core.workspace import Workspace
from pipeline.ingest import ingest_paths
from pipeline.ingest.harc import ACTIONS, RAW, TASKS, _DataFile
from tests.fixtures import harc as fx

PIECE_BYTES = 3000  # the file below (~130 rows) in a few dozen batches
PARTICIPANTS = ("c0ffee00c0ffee00c0ffee00c0ffee00", "d15ea5e0d15ea5e0d15ea5e0d15ea5e0")



def _as_participant(row: dict[str, str], old: str, new: str) -> dict[str, str]:
    return {**row, "hashed_id": new, "joint_id_task": row["joint_id_task"].replace(old, new)}


def _hostile_rows() -> list[dict[str, str]]:
    base = fx.data_rows()
    rows = list(base)
    for who in PARTICIPANTS:  # more participants doing the same tasks
        rows += [_as_participant(r, r["hashed_id"], who) for r in base]
    a = base[3]  # an undo of participant A's first task
    rows += [
        dict(base[4]),  # an exact copy: duplicate_row
        {**base[9], "action_x": "2.0"},  # same key, other contents: duplicate_action for both rows
        {**base[9], "action_x": "2.0"},  # ... and a copy of the conflicting row
        {**a, "joint_id_task": "", "action_id": "30"},  # missing joint ids (null key: not duplicates)
        {**a, "joint_id_task": "", "action_id": "30"},
        {**a, "joint_id_task": "someone_else.json", "action_id": "31"},  # joint_id_mismatch
        {**a, "action_id": ""},  # missing counter
        {**a, "action_id": "40", "time": "2023-08-03T08:00:00.000000"},  # time going back, after the last event
        {**a, "action_id": "41", "action": "change_width", "test_output_size_y": "2"},  # resize after the undo
        {**a, "action_id": "42", "test_output_size_y": "9"},  # size_mismatch: no undo since the resize
        {**a, "action_id": "43", "action": "paste"},  # unknown_action
        {**base[12], "attempt_number": "4"},  # attempt 4 on a row that does not close the task
        # the same participant and task under a task_name without .json: another joint id, the same task row
        {**base[0], "task_name": "007bbfb7", "joint_id_task": f"{fx.HASH_A}_007bbfb7", "action_id": "50"},
        {**base[5], "action_id": "60", "first_written_solution": "another description"},  # description_varies
    ]
    random.Random(7).shuffle(rows)  # the rows of the tasks interleaved through the file
    return rows


def _write_hostile(path: Path) -> Path:
    fx.write_data(path, _hostile_rows())
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    # the header again in the middle (two files joined) and blank lines
    lines = [*lines[:40], lines[0], "\n", *lines[40:90], "\n", *lines[90:]]
    path.write_text("".join(lines), encoding="utf-8")
    return path


def _stored(db: Path) -> dict[str, list[tuple]]:
    with Workspace(db, read_only=True) as ws:
        tables = {name: ws.read(f"SELECT * EXCLUDE (file_id) FROM {name}").rows() for name in (RAW, ACTIONS, TASKS)}
        tables["quarantine"] = sorted(ws.read(
            "SELECT source_location, check_name, column_name, failing_value, reason, raw_text FROM quarantine").rows())
        tables["files"] = ws.read("SELECT n_records_loaded, n_records_quarantined, flags FROM raw_ingest__files").rows()
    return tables


@pytest.fixture
def scratch(monkeypatch) -> list[Path]:
    """Every temporary folder made while the test runs (the runner's spill folders and the buckets')."""
    import tempfile

    made: list[Path] = []
    real = tempfile.mkdtemp

    def recording(*args, **kwargs):
        made.append(Path(real(*args, **kwargs)))
        return str(made[-1])

    monkeypatch.setattr(tempfile, "mkdtemp", recording)
    return made


def _bucketed(monkeypatch, *, buckets: int, flush_bytes: int = 1500) -> list[int]:
    """Force the on-disk path on small files: `buckets` buckets, a few batches' rows per bucket file. Returns
    the bucket counts the reader used."""
    monkeypatch.setattr("pipeline.ingest.harc.BOUNDED_BYTES", 0)
    monkeypatch.setattr("pipeline.ingest.harc.BUCKET_BYTES", 1)
    monkeypatch.setattr("pipeline.ingest.harc.MAX_BUCKETS", buckets)
    monkeypatch.setattr("pipeline.ingest.buckets.FLUSH_BYTES", flush_bytes)
    used: list[int] = []
    real = _DataFile.bucketed

    def recording(self, folder):
        used.append(self.buckets)
        return real(self, folder)

    monkeypatch.setattr(_DataFile, "bucketed", recording)
    return used


def _ingest(path: Path, db: Path, empty_db: Path) -> dict[str, list[tuple]]:
    db.write_bytes(empty_db.read_bytes())
    with Workspace(db) as ws:
        report = ingest_paths(ws, [path], run_id="bucketed")
    assert [f.status for f in report.files] == ["loaded"], report.files[0].message
    return _stored(db)


@pytest.mark.parametrize("buckets", [2, 7])
def test_a_hostile_file_read_in_buckets_lands_exactly_like_one_read_in_memory(tmp_path, empty_db, monkeypatch,
                                                                               scratch, buckets):
    path = _write_hostile(tmp_path / "data" / "data.csv")
    monkeypatch.setattr("pipeline.ingest.harc.BATCH_BYTES", PIECE_BYTES)
    in_memory = _ingest(path, tmp_path / "memory.duckdb", empty_db)
    used = _bucketed(monkeypatch, buckets=buckets)
    on_disk = _ingest(path, tmp_path / "buckets.duckdb", empty_db)
    assert used == [buckets]
    checks = {row[1] for row in in_memory["quarantine"]}
    assert checks >= {"duplicate_row", "duplicate_action", "joint_id_mismatch", "missing_value", "header_repeated",
                      "size_mismatch", "unknown_action", "attempt_out_of_range"}, checks
    flags = {f for row in in_memory[TASKS] for f in row[-1]}
    assert flags >= {"time_not_monotonic", "description_varies", "no_terminal_row", "tutorial"}, flags
    for name, rows in in_memory.items():
        assert on_disk[name] == rows, name  # the same rows in the same order
    assert scratch and not [f for f in scratch if f.exists()]


def test_one_read_in_buckets_lands_like_one_read_whole(tmp_path, empty_db, monkeypatch):
    """Against the file read in one batch (never in pieces), as a last anchor."""
    path = _write_hostile(tmp_path / "data" / "data.csv")
    whole = _ingest(path, tmp_path / "whole.duckdb", empty_db)
    monkeypatch.setattr("pipeline.ingest.harc.BATCH_BYTES", PIECE_BYTES)
    _bucketed(monkeypatch, buckets=5, flush_bytes=1 << 30)
    on_disk = _ingest(path, tmp_path / "buckets.duckdb", empty_db)
    for name in whole:
        assert sorted(on_disk[name]) == sorted(whole[name]), name


@pytest.mark.parametrize("error", [ZeroDivisionError, KeyboardInterrupt])
def test_the_buckets_are_removed_when_the_reading_fails_or_is_interrupted(tmp_path, empty_db, monkeypatch, scratch,
                                                                         error):
    path = _write_hostile(tmp_path / "data" / "data.csv")
    monkeypatch.setattr("pipeline.ingest.harc.BATCH_BYTES", PIECE_BYTES)
    _bucketed(monkeypatch, buckets=3)
    checked = []
    real = _DataFile.check_batch

    def failing(self, *args, **kwargs):
        checked.append(1)
        if len(checked) == 4:
            raise error("in the middle of the second pass (simulated)")
        return real(self, *args, **kwargs)

    monkeypatch.setattr(_DataFile, "check_batch", failing)
    db = tmp_path / "failed.duckdb"
    db.write_bytes(empty_db.read_bytes())
    with Workspace(db) as ws:
        if error is KeyboardInterrupt:
            with pytest.raises(KeyboardInterrupt):
                ingest_paths(ws, [path], run_id="failed")
        else:
            report = ingest_paths(ws, [path], run_id="failed")
            assert report.files[0].status == "rejected"
    assert len(checked) == 4
    harc = [f for f in scratch if f.name.startswith("arcstudy-harc-")]
    assert harc and not [f for f in scratch if f.exists()]
