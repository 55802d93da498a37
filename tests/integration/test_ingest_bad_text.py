"""Bad text is one bad line (issue 29, finding 4).

A lone surrogate escape (`\\udfff`, half of an emoji as a client that cuts one in two writes it) once refused
the whole file with a `reader_error` and no line number, and `view` ended in a traceback. Now the line (or the
entry of a JSON document: manifests, scorecards, ARC task collections) is quarantined with its line number
and the rest of the file loads. Fixtures: tests/fixtures/integrity/lone_surrogate.*.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pipeline.cli import app
from pipeline.core.textfiles import lone_surrogates
from pipeline.core.workspace import Workspace
from pipeline.ingest import ingest_paths

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "integrity"
RECORDING = FIXTURES / "lone_surrogate.recording.jsonl"


def _ingest(path: Path, db: Path, **kw):
    with Workspace(db) as ws:
        ws.ensure_tables()
        report = ingest_paths(ws, [path], run_id="r", workers=1, **kw)
        q = ws.read("SELECT source_location, check_name, reason, raw_text FROM quarantine ORDER BY source_location")
        counts = {t: ws.row_count(t) for t in ("core_arc3__steps", "core_study__sessions", "core_arc__tasks",
                                                "core_arc3__scorecard_runs", "core_arc3__environments")
                  if ws.has_table(t)}
    return report, q, counts


@pytest.mark.parametrize("chunk_bytes", [None, 1024], ids=["whole", "streamed"])
def test_recording_line_with_a_lone_surrogate_is_one_bad_line(db_path, chunk_bytes):
    n_lines = len(RECORDING.read_text().splitlines())
    report, q, counts = _ingest(RECORDING, db_path, chunk_bytes=chunk_bytes)
    assert [f.status for f in report.files] == ["loaded"]
    assert q["source_location"].to_list() == ["line 5"]
    assert q["check_name"].to_list() == ["lone_surrogate"]
    assert "reasoning" in q["reason"][0] and "\\udfff" in q["reason"][0]
    assert counts["core_arc3__steps"] == n_lines - 1  # every other line is a step
    assert q["raw_text"][0].encode("utf-8")  # what is kept of the line is storable text


def test_view_of_such_a_file_names_the_line(tmp_path):
    result = CliRunner().invoke(app, ["--plain", "view", str(RECORDING), "--out", str(tmp_path / "v.html")])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert "Traceback" not in result.output
    assert result.exit_code == 3, result.output
    assert "line 5: lone_surrogate" in result.output
    assert (tmp_path / "v.html").stat().st_size > 0


def test_manifest_entry_with_a_lone_surrogate_is_quarantined_with_its_line(db_path):
    report, q, counts = _ingest(FIXTURES / "lone_surrogate.manifest.json", db_path)
    assert [f.status for f in report.files] == ["loaded"]
    assert q["source_location"].to_list() == ["sessions[1] (line 10)"]
    assert counts["core_study__sessions"] == 1


def test_task_collection_entry_with_a_lone_surrogate_is_quarantined(db_path):
    report, q, counts = _ingest(FIXTURES / "lone_surrogate.tasks.json", db_path)
    assert [f.status for f in report.files] == ["loaded"]
    assert q["check_name"].to_list() == ["lone_surrogate"]
    assert q["source_location"][0].endswith("(line 3)")
    assert counts["core_arc__tasks"] == 2


def test_scorecard_environment_with_a_lone_surrogate_is_quarantined(db_path):
    report, q, counts = _ingest(FIXTURES / "lone_surrogate.scorecard.json", db_path)
    assert [f.status for f in report.files] == ["loaded"]
    assert q["source_location"].to_list() == ["environments[1] (line 3)"]
    assert counts["core_arc3__scorecard_runs"] == 1


def test_metadata_is_one_entry_refused_with_its_line(tmp_path, db_path):
    folder = tmp_path / "games"
    shutil.copytree(FIXTURES / "metadata", folder)
    report, q, _ = _ingest(folder, db_path)
    assert [f.status for f in report.files] == ["rejected"]
    assert q["source_location"].to_list() == ["line 2"] and q["check_name"].to_list() == ["lone_surrogate"]
    assert "title" in q["reason"][0]


def test_lone_surrogates_are_found_in_document_order_with_their_lines():
    text = '{"a": [1, {"b": "x\\udfff"}],\n "c": "pair \\ud83d\\ude00", "d\\ud800": 2,\n "e": "\\udc00"}'
    found = lone_surrogates(json.loads(text), text)
    assert [(b.path[:2], b.line, b.escape) for b in found] == [
        (("a", 1), 1, "\\udfff"), (("d\ud800",), 2, "\\ud800"), (("e",), 3, "\\udc00")]
    assert lone_surrogates(json.loads('{"ok": "\\ud83d\\ude00"}'), '{"ok": "\\ud83d\\ude00"}') == []


@pytest.mark.parametrize("fixture", ["lone_surrogate.manifest.json", "lone_surrogate.tasks.json",
                                     "lone_surrogate.scorecard.json", "metadata"])
def test_a_lone_surrogate_in_a_key_is_quarantined_not_a_crash(tmp_path, db_path, fixture):
    """In a key rather than a value, the escape went into the reject's reason as it was, and writing the
    quarantine row ended the ingest with a UnicodeEncodeError (the file's good entries lost with it)."""
    source = FIXTURES / fixture
    if source.is_dir():
        shutil.copytree(source, tmp_path / "in")
        (path,) = (tmp_path / "in").rglob("metadata.json")
        target = tmp_path / "in"
    else:
        path = target = tmp_path / fixture
        path.write_text(source.read_text())
    path.write_text(path.read_text().replace('{"', '{"\\udfffk": 1, "', 1))  # a key of the outermost object
    report, q, _ = _ingest(target, db_path)
    assert "lone_surrogate" in q["check_name"].to_list(), q
    assert any("\\udfffk" in r for r in q["reason"]), q["reason"].to_list()
    assert all(r.encode("utf-8") for r in q["reason"])
