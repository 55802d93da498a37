"""Whole-document JSON inputs (metadata.json, scorecards, study manifests, ARC task files) with values no
reader expects: refused or quarantined with a reason a person can act on, never stored altered.

Each case once went wrong: thousands of nested brackets refused the file as "reading the file failed:
RecursionError"; baseline_actions of 2**70 loaded as [null, null] with exit 0.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipeline.core.workspace import Workspace
from pipeline.ingest import ingest_paths

DEEP = "[" * 100_000 + "]" * 100_000

DOCUMENTS = {
    "metadata.json": '{"game_id": "ab12-0123abcd", "baseline_actions": [1], "title": ' + DEEP + "}",
    "card.json": '{"won": 0, "played": 1, "cards": ' + DEEP + "}",
    "manifest.json": '{"format": "arcstudy-study-manifest/1", "study_id": "s", "participants": ' + DEEP + "}",
    "task.json": '{"train": ' + DEEP + ', "test": []}',
}


def ingest_one(tmp_path: Path, name: str, text: str) -> tuple[list[str], list[tuple[str, str]], Workspace]:
    path = tmp_path / "in" / name
    path.parent.mkdir(exist_ok=True)
    path.write_text(text)
    ws = Workspace(tmp_path / "db.duckdb")
    report = ingest_paths(ws, [path], run_id="t", workers=1)
    rows = ws.read("SELECT check_name, reason FROM quarantine").rows()
    return [f.status for f in report.files], rows, ws


@pytest.mark.parametrize("name", list(DOCUMENTS))
def test_a_document_nested_too_deeply_is_refused_saying_so(tmp_path: Path, name: str):
    statuses, rows, ws = ingest_one(tmp_path, name, DOCUMENTS[name])
    ws.close()
    assert statuses == ["rejected"]
    assert len(rows) == 1
    check, reason = rows[0]
    # recognised by its name (metadata.json) and refused by its reader, or recognised by no format
    assert check in ("invalid_json", "unknown_format") and "nested too deeply" in reason, reason
    assert "RecursionError" not in reason


@pytest.mark.parametrize("baseline", [[2**70, 3], [3, -(2**64)]])
def test_metadata_baselines_beyond_64_bits_are_refused_not_nulled(tmp_path: Path, baseline: list[int]):
    doc = {"game_id": "ab12-0123abcd", "title": "x", "baseline_actions": baseline}
    statuses, rows, ws = ingest_one(tmp_path, "metadata.json", json.dumps(doc))
    envs = ws.row_count("core_arc3__environments")
    ws.close()
    assert statuses == ["rejected"] and envs == 0
    assert [check for check, _ in rows] == ["bad_baseline_actions"]
