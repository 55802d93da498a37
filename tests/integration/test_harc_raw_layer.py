"""The lean H-ARC raw layer (raw_harc__csv_rows: each CSV field as text under `csv_<header name>`, provenance by
file_id = the file's sha256 and the row number) keeps every value as read. That the typed tables and the
quarantine are those of the reader before it (the per-row JSON + sha256 layout, commit 969e8f1) was checked once
with `benchmarks/compare_ingest.py --reference` (EXCEPT ALL both ways); it is not a test, since later changes
to quarantine reasons would rightly differ from that old reader.

Corpus: the valid H-ARC fixture tree (both releases, surveys), one file per defect of test_ingest_harc, and a
small simulated H-ARC study (`simulate_harc_study`, 6 participants)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from pipeline.core.workspace import Workspace
from pipeline.ingest import ingest_paths
from pipeline.simulate.harc import StudyDesign, simulate_harc_study
from schemas.harc import raw_csv_column
from tests.integration.test_ingest_harc import DEFECTS, write_valid_tree

TINY = StudyDesign("tiny", n_training=3, n_training_ten=1, n_evaluation=3, n_incomplete_training=1,
                   n_incomplete_evaluation=1, n_tasks_training=12, n_tasks_evaluation=12)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("harc_raw")
    files = root / "files"
    write_valid_tree(files / "valid")
    for name, d in DEFECTS.items():
        folder = files / "defects" / name
        folder.mkdir(parents=True)
        d.build(folder / d.file)
    simulate_harc_study(files / "sim", scale=TINY, seed=7, workers=1, arc_tgi=False)
    db = root / "ws.duckdb"
    with Workspace(db) as ws:
        ws.ensure_tables()
        ingest_paths(ws, [files], run_id="test")
    return files, db


def _raw_by_file(ws: Workspace) -> dict[str, list[dict]]:
    rows = ws.read("SELECT f.file_path, r.* FROM raw_harc__csv_rows r JOIN raw_ingest__files f USING (file_id) "
                   "ORDER BY f.file_path, r.row_number")
    out: dict[str, list[dict]] = {}
    for r in rows.iter_rows(named=True):
        out.setdefault(r["file_path"], []).append(r)
    return out


def test_the_raw_layer_holds_every_field_as_read(corpus):
    files, db = corpus
    with Workspace(db, read_only=True) as ws:
        raw = _raw_by_file(ws)
    clean = [p for p in raw if "/defects/" not in p]
    assert len(clean) >= 20  # both releases' fixture files and the simulated study's
    for path in clean:
        with open(path, newline="", encoding="utf-8-sig") as fh:
            header, *records = csv.reader(fh)
        expected = [{h: v or None for h, v in zip(header, r, strict=True)} for r in records if r]
        got = [{h: row[raw_csv_column(h)] for h in header} for row in raw[path]]
        assert got == expected, path
        others = {c for row in raw[path] for c, v in row.items()
                  if c.startswith("csv_") and v is not None} - {raw_csv_column(h) for h in header}
        assert not others, (path, others)  # the columns the file does not have stay empty
        assert [row["row_number"] for row in raw[path]] == list(range(1, len(expected) + 1))


def test_a_row_with_too_many_fields_keeps_the_surplus(corpus):
    files, db = corpus
    with Workspace(db, read_only=True) as ws:
        extra = ws.read("SELECT row_number, extra_fields_json FROM raw_harc__csv_rows "
                        "WHERE extra_fields_json IS NOT NULL")
    assert extra.height >= 1
    for text in extra["extra_fields_json"]:
        assert isinstance(json.loads(text), list) and json.loads(text)


def test_quarantined_rows_quote_the_fields_the_raw_layer_holds(corpus):
    _, db = corpus
    with Workspace(db, read_only=True) as ws:
        q = ws.read("SELECT file_path, source_location, raw_text FROM quarantine WHERE target_table LIKE '%harc%' "
                    "AND source_location LIKE 'row %' AND raw_text LIKE '{%'")
        raw = _raw_by_file(ws)
    compared = 0
    for path, location, text in q.rows():
        try:  # rows polars could not split quote the line as written, not a JSON object
            fields = json.loads(text)
        except json.JSONDecodeError:
            continue
        compared += 1
        extra = fields.pop("__extra_fields", None)
        row = next(r for r in raw[path] if r["row_number"] == int(location.split()[1]))
        assert {h: row[raw_csv_column(h)] for h in fields} == fields, (path, location)
        assert row["extra_fields_json"] == extra
    assert compared >= 10


def test_a_workspace_with_the_previous_raw_layout_is_refused_with_what_to_do(tmp_path):
    """A database made before the lean raw layer (raw_harc__csv_rows with row_json and content_sha256) cannot
    take it in place (a raw column removed: SCHEMA_VERSION 3): it is refused, naming the change and the way out,
    and nothing in it is touched."""
    from pipeline.core.workspace import WorkspaceError

    db = tmp_path / "old.duckdb"
    with Workspace(db) as ws:
        ws.ensure_tables()
        ws.con.execute("DROP TABLE raw_harc__csv_rows")
        ws.con.execute("CREATE TABLE raw_harc__csv_rows (file_id VARCHAR NOT NULL, row_number BIGINT NOT NULL, "
                       "content_sha256 VARCHAR NOT NULL, row_json VARCHAR NOT NULL, PRIMARY KEY (file_id, row_number))")
        ws.con.execute("INSERT INTO raw_harc__csv_rows VALUES ('old', 1, 'x', '{\"task_name\":\"a.json\"}')")
    with pytest.raises(WorkspaceError) as err:
        with Workspace(db) as ws:
            ws.ensure_schema()
    assert "raw_harc__csv_rows" in str(err.value) and "no longer a column" in str(err.value)
    assert "arcstudy ingest" in str(err.value)
