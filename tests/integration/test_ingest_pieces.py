"""A big file read in pieces (`ReaderOutput.pieces`, the H-ARC data.csv): its biggest table is inserted by one
streaming INSERT fed by the pieces as they are read, the other tables are spilled and inserted after it, all
in the file's one transaction (`commit._stage_pieces`). These tests hold that path to the result of a file
written whole, and check that a failure inside the stream comes out as the same refusal (or the same
database error) as anywhere else, with nothing of the file stored and no reading thread left behind."""

from __future__ import annotations

import threading
from pathlib import Path

import duckdb
import polars as pl
import pytest

from pipeline.core.workspace import Workspace
from pipeline.ingest import ingest_paths
from pipeline.ingest.base import FileChangedError
from pipeline.ingest.harc import ACTIONS, RAW, _DataFile
from tests.fixtures import harc as fx

PIECE_BYTES = 1500  # the fixture's data.csv (25 rows) in about ten pieces



def _fresh_db(tmp_path: Path, empty_db: Path, name: str) -> Path:
    db = tmp_path / f"{name}.duckdb"
    db.write_bytes(empty_db.read_bytes())
    return db


def _stored(db: Path) -> dict[str, list[tuple]]:
    with Workspace(db, read_only=True) as ws:
        tables = {name: ws.read(f"SELECT * EXCLUDE (file_id) FROM {name} ORDER BY ALL").rows()  # nulls sort too
                  for name in (RAW, ACTIONS, "core_harc__participant_tasks")}
        tables["quarantine"] = sorted(ws.read(
            "SELECT file_path, source_location, check_name, column_name, failing_value, reason, raw_text "
            "FROM quarantine").rows())
        tables["files"] = sorted(ws.read(
            "SELECT file_path, n_records_loaded, n_records_quarantined, flags FROM raw_ingest__files").rows())
    return tables


def _nothing_of_the_file(db: Path) -> None:
    with Workspace(db, read_only=True) as ws:
        for name in (RAW, ACTIONS, "core_harc__participant_tasks", "raw_ingest__files"):
            assert ws.row_count(name) == 0, name


def _no_reading_thread() -> None:
    assert not [t for t in threading.enumerate() if t.name in ("prefetch", "arcstudy-spill-remover")]


@pytest.fixture
def spill_folders(monkeypatch) -> list[Path]:
    """The spill folders the runner makes; each test checks they are gone once the ingest returns."""
    import tempfile

    made: list[Path] = []
    real = tempfile.mkdtemp

    def recording(*args, **kwargs):
        made.append(Path(real(*args, **kwargs)))
        return str(made[-1])

    monkeypatch.setattr("pipeline.ingest.commit.tempfile.mkdtemp", recording)
    return made


def _gone(folders: list[Path]) -> None:
    assert folders and not [f for f in folders if f.exists()]


def test_cross_file_duplicates_found_inside_the_stream_are_those_found_in_a_file_written_whole(
        tmp_path, empty_db, monkeypatch, spill_folders):
    """The second file repeats the first one's events (other bytes, other path): inside the stream its rows are
    checked against the database on a cursor of their own; the quarantine and the rows kept must be those of
    the same files written whole."""
    rows = fx.data_rows()
    first = fx.write_data(tmp_path / "a" / "data.csv", rows)
    second = fx.write_data(tmp_path / "b" / "data.csv", [*rows[:-1], {**rows[-1], "withdraw_comment": "again"}])
    results = {}
    for batch_bytes in (1 << 30, PIECE_BYTES):
        monkeypatch.setattr("pipeline.ingest.harc.BATCH_BYTES", batch_bytes)
        db = _fresh_db(tmp_path, empty_db, f"dup{batch_bytes}")
        with Workspace(db) as ws:
            report = ingest_paths(ws, [first, second], run_id="dup")
        assert [f.status for f in report.files] == ["loaded", "loaded"]
        results[batch_bytes] = _stored(db)
    _gone(spill_folders)
    _no_reading_thread()
    whole, pieces = results.values()
    assert {row[2] for row in whole["quarantine"]} == {"duplicate_across_files"}
    assert pieces == whole


def test_a_write_error_inside_the_stream_stops_the_run_and_stores_nothing(tmp_path, empty_db, monkeypatch,
                                                                          spill_folders):
    """A row the database refuses (here a null where the table says NOT NULL, slipped past the checks) is the
    database's failure, not the file's: the run stops with DuckDB's error, the transaction rolls back."""
    from pipeline.ingest import commit

    monkeypatch.setattr("pipeline.ingest.harc.BATCH_BYTES", PIECE_BYTES)
    path = fx.write_data(tmp_path / "data" / "data.csv")
    real = commit.validate_output
    seen = []

    def poisoning(output):
        real(output)
        if ACTIONS in output.tables:  # the biggest table of a piece: the one streamed into the database
            seen.append(1)
            if len(seen) == 3:
                output.tables[ACTIONS] = output.tables[ACTIONS].with_columns(pl.lit(None, pl.Int64).alias("row_number"))

    monkeypatch.setattr(commit, "validate_output", poisoning)  # `_stage_pieces` checks each piece
    db = _fresh_db(tmp_path, empty_db, "write_error")
    with Workspace(db) as ws, pytest.raises(duckdb.ConstraintException, match="row_number"):
        ingest_paths(ws, [path], run_id="write_error")
    assert len(seen) == 3
    _nothing_of_the_file(db)
    _gone(spill_folders)
    _no_reading_thread()


class _ReaderBug(Exception):
    pass


@pytest.mark.parametrize(("error", "status", "check", "message"), [
    (_ReaderBug("a reader bug in piece 3 (simulated)"), "rejected", "reader_error",
     "reading the file failed: _ReaderBug: a reader bug in piece 3 (simulated)"),
    (FileChangedError("the file changed while it was read (simulated)"), "unreadable", "unreadable",
     "cannot read the file as harc-data: the file changed while it was read (simulated)"),
])
def test_a_reading_error_inside_the_stream_refuses_the_file_with_the_readers_own_message(
        tmp_path, empty_db, monkeypatch, spill_folders, error, status, check, message):
    """The third piece is read while DuckDB pulls rows from the stream: its error must reach the file's report
    and quarantine as the reader raised it (not as DuckDB's wrapper of it), and the run goes on."""
    monkeypatch.setattr("pipeline.ingest.harc.BATCH_BYTES", PIECE_BYTES)
    path = fx.write_data(tmp_path / "data" / "data.csv")
    task = tmp_path / "task.json"
    task.write_text('{"train": [{"input": [[1]], "output": [[2]]}], "test": [{"input": [[3]], "output": [[4]]}]}')
    checked = []
    real = _DataFile.check_batch

    def failing(self, *args, **kwargs):
        checked.append(1)
        if len(checked) == 3:
            raise error
        return real(self, *args, **kwargs)

    monkeypatch.setattr(_DataFile, "check_batch", failing)
    db = _fresh_db(tmp_path, empty_db, check)
    with Workspace(db) as ws:
        report = ingest_paths(ws, [path, task], run_id=check)
        data, task_report = report.files
        assert (data.status, data.message) == (status, message)
        assert task_report.status == "loaded"
        quarantined = ws.read("SELECT file_path, check_name, reason FROM quarantine").rows()
        assert quarantined == [(str(path.resolve()), check, message)]
        assert ws.read("SELECT count(*) AS n FROM raw_ingest__files")["n"][0] == 1  # the task file only
        for name in (RAW, ACTIONS, "core_harc__participant_tasks"):
            assert ws.row_count(name) == 0, name
    assert len(checked) == 3
    _gone(spill_folders)
    _no_reading_thread()
