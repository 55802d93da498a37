"""A huge H-ARC field is quoted, not copied, in its quarantine row.

A data.csv row whose `action` held 16 MB was quarantined with a reason quoting all 16 MB (Python's repr of
the value) and the value in full, once per failing check: a reason no person can read, megabytes stored per
check, and about 0.3 GB more memory while the file was read. A reason now quotes at most SHOWN_CHARS of the
value, so its explanation stays readable after it; a reason or value is cut to MAX_RAW_TEXT like raw_text,
whose full size and sha256 the quarantine row still keeps.
"""

from __future__ import annotations

from pipeline.core.workspace import Workspace
from pipeline.ingest import ingest_paths
from pipeline.ingest.base import MAX_RAW_TEXT
from pipeline.ingest.harc_csv import SHOWN_CHARS
from tests.fixtures import harc as fx

HUGE = 1_000_000


def test_a_huge_field_is_quoted_in_a_short_reason_and_its_size_is_kept(tmp_path, db_path):
    rows = fx.data_rows()
    rows[2] = {**rows[2], "action": "z" * HUGE}
    path = fx.write_data(tmp_path / "data.csv", rows)
    with Workspace(db_path) as ws:
        ws.ensure_tables()
        report = ingest_paths(ws, [path], run_id="r", workers=1)
        q = ws.read("SELECT source_location, check_name, reason, failing_value, n_raw_bytes, raw_sha256 "
                    "FROM quarantine").to_dicts()
        landed = ws.row_count("core_harc__actions")
    assert report.files[0].status == "loaded"
    assert landed == len(rows) - 1  # the other rows land
    assert {r["source_location"] for r in q} == {"row 3"}
    unknown = next(r for r in q if r["check_name"] == "unknown_action")
    assert "not one of" in unknown["reason"]  # the explanation after the quoted value is kept
    assert f"... [{HUGE - SHOWN_CHARS} more chars]" in unknown["reason"]
    for r in q:
        assert len(r["reason"]) <= MAX_RAW_TEXT + 40
        assert r["failing_value"] is None or len(r["failing_value"]) <= MAX_RAW_TEXT + 40
        assert r["n_raw_bytes"] > HUGE  # the row as read, measured in full
    assert unknown["failing_value"].startswith("z" * MAX_RAW_TEXT)
