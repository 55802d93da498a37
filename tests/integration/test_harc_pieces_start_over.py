"""A big H-ARC data.csv hands out its raw rows in its first pass, so the database writes them while the file is still
being read. A batch far into the file can show that it needs a more forgiving parser (a row with a surplus field:
Python's csv module; bytes that are not UTF-8: a lossy read), after raw rows of earlier batches were written: the
file's transaction is rolled back and its pieces written again with the settled parser. The file must land exactly as
when it is read in one batch (no raw row twice, the same quarantine, the same file record), and the database must hold
nothing of the abandoned attempt.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.core.workspace import Workspace
from pipeline.ingest import ingest_paths
from tests.fixtures import harc as fx

PIECE_BYTES = 1500  # a fixture data.csv of ~25 rows is then read in several batches



def _damaged(path: Path, surplus: bool, bad_utf8: bool) -> Path:
    """The fixture data.csv with its defects in the last rows (well after the first batch)."""
    lines = path.read_bytes().splitlines(keepends=True)
    if surplus:
        lines[-2] = lines[-2].rstrip(b"\n") + b",surplus\n"
    if bad_utf8:
        lines[-4] = lines[-4].replace(b"edit", b"ed\xffit", 1) if b"edit" in lines[-4] else lines[-4][:-1] + b"\xff\n"
    path.write_bytes(b"".join(lines))
    return path


def _stored(db: Path) -> dict[str, list[tuple]]:
    with Workspace(db, read_only=True) as ws:
        tables = {name: sorted(ws.read(f"SELECT * FROM {name}").drop("file_id").rows(), key=repr)
                  for name in ("raw_harc__csv_rows", "core_harc__actions", "core_harc__participant_tasks")}
        tables["raw keys"] = ws.read("SELECT count(*) AS n, count(DISTINCT row_number) AS d FROM raw_harc__csv_rows"
                                     ).rows()
        tables["quarantine"] = sorted(ws.read(
            "SELECT source_location, check_name, column_name, failing_value, reason, raw_text FROM quarantine").rows(),
            key=repr)
        tables["files"] = ws.read("SELECT n_records_loaded, n_records_quarantined, flags FROM raw_ingest__files").rows()
    return tables


@pytest.mark.parametrize(("surplus", "bad_utf8"), [(True, False), (False, True), (True, True)])
def test_a_late_change_of_parser_lands_the_file_as_one_batch_would(tmp_path, empty_db, monkeypatch, surplus,
                                                                     bad_utf8, parser_start_overs):
    path = _damaged(fx.write_data(tmp_path / "data" / "data.csv"), surplus, bad_utf8)
    starts = parser_start_overs
    results = {}
    for batch_bytes in (1 << 30, PIECE_BYTES):
        monkeypatch.setattr("pipeline.ingest.harc.BATCH_BYTES", batch_bytes)
        db = tmp_path / f"{batch_bytes}.duckdb"
        db.write_bytes(empty_db.read_bytes())
        with Workspace(db) as ws:
            report = ingest_paths(ws, [path], run_id="start-over")
        assert [f.status for f in report.files] == ["loaded"], report.files[0].message
        results[batch_bytes] = _stored(db)
    assert starts, "the test file must make the batched read start over after raw rows were handed out"
    whole, pieces = results.values()
    checks = {q[1] for q in whole["quarantine"]}
    assert ("field_count" in checks) == surplus and ("invalid_utf8" in checks) == bad_utf8
    n, distinct = whole["raw keys"][0]
    assert n == distinct == len(whole["raw_harc__csv_rows"]) > 20
    assert pieces == whole
