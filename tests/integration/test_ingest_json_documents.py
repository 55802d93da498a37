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


@pytest.mark.parametrize("baseline", [[2**70, 3], [3, -(2**64)], [2**62, 5], [10**9 + 1]])
def test_metadata_baselines_beyond_64_bits_are_refused_not_nulled(tmp_path: Path, baseline: list[int]):
    """Beyond 64 bits they were stored as null; 2**62 was stored, and `score` then stopped (its set-based and
    per-play scores disagreed): a baseline is a number of actions, at most 10**9."""
    doc = {"game_id": "ab12-0123abcd", "title": "x", "baseline_actions": baseline}
    statuses, rows, ws = ingest_one(tmp_path, "metadata.json", json.dumps(doc))
    envs = ws.row_count("core_arc3__environments")
    ws.close()
    assert statuses == ["rejected"] and envs == 0
    assert [check for check, _ in rows] == ["bad_baseline_actions"]


def test_a_metadata_baseline_of_a_billion_actions_still_loads(tmp_path: Path):
    doc = {"game_id": "ab12-0123abcd", "title": "x", "baseline_actions": [10**9, 1]}
    statuses, rows, ws = ingest_one(tmp_path, "metadata.json", json.dumps(doc))
    ws.close()
    assert statuses == ["loaded"] and rows == []


MANIFEST = {
    "format": "arcstudy-study-manifest/1", "study_id": "pilot",
    "participants": [{"participant_id": "p1", "cohort": "a"}, {"participant_id": "p2", "cohort": "a"}],
    "sessions": [{"session_id": "s1", "participant_id": "p1"}, {"session_id": "s2", "participant_id": "p2"}],
    "plays": [{"guid": "00000000-0000-4000-8000-000000000001", "session_id": "s1", "game_id": "ab12-0123abcd",
               "order_in_session": 1}],
}
GUID2 = "00000000-0000-4000-8000-000000000002"


@pytest.mark.parametrize(("kind", "key", "value"), [
    ("plays", "order_in_session", 1.7),  # once stored as 1
    ("plays", "order_in_session", "2"),  # once stored as 2
    ("plays", "order_in_session", 2**70),  # once refused the whole file
    ("participants", "cohort", ["a"]),  # once refused the whole file
    ("sessions", "site", 7),  # once stored as "7"
])
def test_manifest_entry_of_the_wrong_type_is_quarantined_and_the_rest_loads(tmp_path: Path, kind: str, key: str,
                                                                              value):
    doc = json.loads(json.dumps(MANIFEST))
    bad = {"plays": {"guid": GUID2, "session_id": "s1", "game_id": "ab12-0123abcd"},
           "participants": {"participant_id": "p3"}, "sessions": {"session_id": "s3", "participant_id": "p1"}}[kind]
    doc[kind].append({**bad, key: value})
    statuses, rows, ws = ingest_one(tmp_path, "study.json", json.dumps(doc))
    counts = [ws.row_count(t) for t in ("core_study__participants", "core_study__sessions",
                                        "core_study__session_plays")]
    ws.close()
    assert statuses == ["loaded"]
    assert rows == [("bad_type", rows[0][1])] and key in rows[0][1] and repr(value)[:20] in rows[0][1]
    assert counts == [2, 2, 1]


def test_a_manifest_whose_study_id_is_megabytes_is_refused_before_it_is_copied_into_every_row(tmp_path: Path):
    """A 10 MB study_id went into each participant, session and play row: 5 GB of memory, exit 0."""
    doc = {**json.loads(json.dumps(MANIFEST)), "study_id": "s" * 2_000}
    statuses, rows, ws = ingest_one(tmp_path, "study.json", json.dumps(doc))
    ws.close()
    assert statuses == ["rejected"]
    assert rows == [("value_too_large", "study_id is 2,000 bytes, over the 1,024 an identifier may have")]
    doc["study_id"] = "s" * 1_024
    (tmp_path / "ok").mkdir()
    statuses, rows, ws = ingest_one(tmp_path / "ok", "study.json", json.dumps(doc))
    ws.close()
    assert statuses == ["loaded"] and rows == []


def test_scored_summary_run_of_the_wrong_type_is_quarantined_and_the_rest_loads(tmp_path: Path):
    run = {"guid": "00000000-0000-4000-8000-000000000001", "score": 10.0, "levels_completed": 1, "actions": 5,
           "resets": 0, "state": "WIN", "completed": True, "level_scores": [10.0], "level_actions": [5],
           "level_baseline_actions": [3]}
    bad_runs = [{**run, "score": "x"}, {**run, "actions": 2**70}, {**run, "actions": "5"},
                {**run, "level_scores": ["a"]}, {**run, "completed": "yes"}, {**run, "guid": 5}]
    doc = {"card_id": "c1", "score": 10.0, "environments": [{"id": "ab12-0123abcd", "runs": [run, *bad_runs]}]}
    statuses, rows, ws = ingest_one(tmp_path, "scorecard.json", json.dumps(doc))
    stored = ws.read("SELECT run_index, actions, score FROM core_arc3__scorecard_runs").rows()
    ws.close()
    assert statuses == ["loaded"]
    assert stored == [(0, 5, 10.0)]
    # A guid that is not a string breaks the one guid rule of recordings and scorecards (bad_guid).
    assert [check for check, _ in rows] == ["bad_type"] * (len(bad_runs) - 1) + ["bad_guid"]


@pytest.mark.parametrize(("key", "value"), [("default_fps", 1.5), ("tags", [1]), ("title", ["x"])])
def test_metadata_field_of_the_wrong_type_is_refused_not_altered(tmp_path: Path, key: str, value):
    doc = {"game_id": "ab12-0123abcd", "title": "x", "baseline_actions": [3], key: value}
    statuses, rows, ws = ingest_one(tmp_path, "metadata.json", json.dumps(doc))
    ws.close()
    assert statuses == ["rejected"]
    assert [check for check, _ in rows] == ["bad_type"] and key in rows[0][1]


HUMAN = (Path(__file__).resolve().parents[2].parent / "shared" / "samples" / "arc-agi-3" / "human" / "vc33"
         / "82f713eb-a8b5-43fe-a7e2-ca6a5e9451c7.recording.jsonl")


@pytest.mark.parametrize(("key", "value"), [("actions", [2**70]), ("levels_completed", [2**70]),
                                            ("resets", [1e999])])
def test_card_slot_beyond_its_columns_is_quarantined_not_fatal(tmp_path: Path, key: str, value):
    """A card wrapper (the human dataset's summary line, alone in a file) once refused the whole file with
    'reading the file failed: ComputeError' or 'OverflowError'."""
    doc = json.loads(HUMAN.read_text().splitlines()[-1])["data"]
    (card,) = doc["cards"].values()
    card[key] = value
    statuses, rows, ws = ingest_one(tmp_path, "card.json", json.dumps(doc))
    ws.close()
    assert statuses == ["loaded"]
    assert [check for check, _ in rows] in (["bad_type"], ["bad_card"])
    assert "Error" not in rows[0][1]
