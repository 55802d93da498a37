"""ARC-TGI export rows the reader must not take as they come:

- a JSON column that names a key twice (`{"train": [...], "test": [...], "train": [...]}`, or a pair naming
  "output" twice) kept only the later value, without a word, while the same task as an ARC task file is refused
  as `duplicate_key`; such a row is quarantined with the same check and words;
- a row over the record limit (a giant `data` field) was read and stored whole (the whole file was one batch,
  so the limit never applied); it is quarantined as `record_too_long` and the rows around it land;
- a task_id or generator_name of spaces only made a task (and a family) named by spaces;
- a NUL byte was said to be in "no H-ARC field" for an ARC-TGI export and an ARC-AGI-2 log alike.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

from pipeline.core.workspace import Workspace
from pipeline.ingest import ingest_paths
from pipeline.ingest.harc_csv import MAX_RECORD_BYTES

HEADER = ["task_id", "created_at", "generator_name", "input_reasoning_chain", "transformation_reasoning_chain",
          "task_variables", "code", "data"]
CODE = "def transform_input(self, grid):\n    return grid\n"
GOOD = json.dumps({"train": [{"input": [[1]], "output": [[1]]}], "test": [{"input": [[2]], "output": [[2]]}]})


def _row(task_id: str, data: str = GOOD, *, generator: str = "taskabcdef01", variables: str = '{"rows": 1}',
         code: str = CODE) -> list[str]:
    return [task_id, "2026-11-29T10:00:00", generator, '["a"]', '["b"]', variables, code, data]


def _export(path: Path, rows: list[list[str]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(HEADER)
        w.writerows(rows)
    return path


def _ingest(db: Path, paths: list[Path], status: str = "loaded") -> tuple[list[str], list[dict]]:
    with Workspace(db) as ws:
        report = ingest_paths(ws, paths, run_id="t", workers=1)
        assert all(f.status == status for f in report.files), [f.status for f in report.files]
        landed = ws.read("SELECT task_id FROM core_arctgi__tasks ORDER BY row_number")["task_id"].to_list() \
            if ws.has_table("core_arctgi__tasks") else []
        q = ws.read("SELECT source_location, check_name, column_name AS source_column, reason, raw_text FROM quarantine "
                    "ORDER BY source_location").to_dicts()
    return landed, q


def test_a_key_named_twice_in_a_json_column_is_quarantined_as_a_task_file_would_be(tmp_path: Path):
    train_twice = ('{"train": [{"input": [[1]], "output": [[1]]}], "test": [{"input": [[1]], "output": [[1]]}], '
                   '"train": [{"input": [[2]], "output": [[2]]}]}')
    output_twice = ('{"train": [{"input": [[1]], "output": [[1]], "output": [[5]]}], '
                    '"test": [{"input": [[1]], "output": [[1]]}]}')
    path = _export(tmp_path / "ARC-AGI-1-Train.csv", [
        _row("ok_first"), _row("train_twice", train_twice), _row("output_twice", output_twice),
        _row("variables_twice", variables='{"rows": 1, "rows": 3}'), _row("ok_last")])
    landed, q = _ingest(tmp_path / "t.duckdb", [path])
    assert landed == ["ok_first", "ok_last"]
    got = {r["source_location"]: (r["check_name"], r["source_column"], r["reason"]) for r in q}
    assert set(got) == {"row 2", "row 3", "row 4"}
    assert {v[0] for v in got.values()} == {"duplicate_key"}
    assert got["row 2"][1:] == ("data", 'data names the key "train" twice: JSON keeps only the later value, so the '
                                "earlier one would be lost without a word; remove or rename one; this row is "
                                "quarantined, the rest of the file loads")
    assert got["row 3"][2].startswith('data, field train.0 names the key "output" twice')
    assert got["row 4"][1] == "task_variables" and '"rows" twice' in got["row 4"][2]
    # the same task as an ARC task file is refused with the same check and words
    task_file = tmp_path / "abcdef12.json"
    task_file.write_text(train_twice)
    _, q2 = _ingest(tmp_path / "t2.duckdb", [task_file], "rejected")
    assert [r["check_name"] for r in q2] == ["duplicate_key"]
    assert q2[0]["reason"].removeprefix("task ") == got["row 2"][2].removeprefix("data ").split("; this row")[0]


def test_a_row_over_the_record_limit_is_quarantined_and_the_rows_around_it_land(tmp_path: Path):
    giant = GOOD[:-1] + ', "pad": "' + "x" * (MAX_RECORD_BYTES + 1024) + '"}'
    path = _export(tmp_path / "ARC-AGI-1-Train.csv", [_row("good_first"), _row("giant", giant), _row("good_last")])
    landed, q = _ingest(tmp_path / "t.duckdb", [path])
    assert landed == ["good_first", "good_last"]
    assert [(r["source_location"], r["check_name"]) for r in q] == [("row 2", "record_too_long")]
    assert f"longer than {MAX_RECORD_BYTES >> 20} MiB" in q[0]["reason"]
    assert q[0]["raw_text"].startswith("giant,") and len(q[0]["raw_text"]) <= 1024  # its start, not the row


def test_a_blank_task_id_or_generator_name_is_quarantined(tmp_path: Path):
    path = _export(tmp_path / "ARC-AGI-1-Train.csv", [
        _row("   "), _row("blank_generator", generator="  "), _row("   ", generator="\t"), _row("ok")])
    db = tmp_path / "t.duckdb"
    landed, q = _ingest(db, [path])
    assert landed == ["ok"]
    got = sorted((r["source_location"], r["check_name"], r["source_column"]) for r in q)
    assert got == [("row 1", "missing_value", "task_id"), ("row 2", "missing_value", "generator_name"),
                   ("row 3", "missing_value", "generator_name"), ("row 3", "missing_value", "task_id")]
    assert all("is empty; every row needs" in r["reason"] for r in q)


def test_a_nul_byte_is_said_to_be_in_no_field_of_the_format_read(tmp_path: Path):
    tgi = _export(tmp_path / "ARC-AGI-1-Train.csv", [_row("nul", code=CODE + "# \x00\n"), _row("ok")])
    arc2 = tmp_path / "arc2.csv"
    arc2.write_text("task_ID,task_set,test_index,session_ID,start_time_seconds,duration_seconds,submissions,"
                    "correct_submissions\na1b2c3d4,Public Eval,0,S\x001,0,10,1,1\na1b2c3d4,Public Eval,0,S2,0,10,1,1\n")
    with Workspace(tmp_path / "t.duckdb") as ws:
        ingest_paths(ws, [tgi, arc2], run_id="t", workers=1)
        q = ws.read("SELECT f.file_path, q.check_name, q.reason FROM quarantine q JOIN raw_ingest__files f "
                    "USING (file_id)").rows()
    reasons = {Path(p).name: (c, r) for p, c, r in q}
    assert reasons["ARC-AGI-1-Train.csv"][0] == reasons["arc2.csv"][0] == "nul_byte"
    assert "which no ARC-TGI export field contains" in reasons["ARC-AGI-1-Train.csv"][1]
    assert "which no ARC-AGI-2 attempt log field contains" in reasons["arc2.csv"][1]
    assert not any("H-ARC" in r for _, r in reasons.values())
