"""Ingest guarantees: idempotent, replaces changed files, atomic per file, safe under concurrency,
frames kept losslessly on request, study manifests and scorecards checked entry by entry."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from pipeline.core.workspace import Workspace
from pipeline.ingest import ingest_paths

SHARED = Path(__file__).resolve().parents[2].parent / "shared"
SAMPLE = SHARED / "samples" / "arc-agi-3" / "toolkit" / "bt11_win_gameover_levelreset.frames.jsonl"
NOFRAMES = SHARED / "samples" / "arc-agi-3" / "toolkit" / "bt11_two_plays_fullreset.noframes.jsonl"


def counts(ws: Workspace) -> dict[str, int]:
    return {t: ws.row_count(t) for t in ("raw_ingest__files", "raw_arc3__recording_lines", "core_arc3__steps",
                                         "core_arc3__plays", "quarantine")}


def test_reingest_is_skipped_and_force_replaces(tmp_path: Path):
    with Workspace(tmp_path / "db.duckdb") as ws:
        assert ingest_paths(ws, [SAMPLE], run_id="a").files[0].status == "loaded"
        before = counts(ws)
        assert ingest_paths(ws, [SAMPLE], run_id="b").files[0].status == "skipped"
        assert counts(ws) == before
        assert ingest_paths(ws, [SAMPLE], run_id="c", force=True).files[0].status == "loaded"
        assert counts(ws) == before
        assert ws.read("SELECT run_id FROM raw_ingest__files")["run_id"].to_list() == ["c"]


def test_a_changed_file_replaces_its_older_version(tmp_path: Path):
    path = tmp_path / "rec.jsonl"
    lines = NOFRAMES.read_text().splitlines()
    path.write_text("\n".join(lines[:20]) + "\n")
    with Workspace(tmp_path / "db.duckdb") as ws:
        ingest_paths(ws, [path], run_id="a")
        assert ws.row_count("core_arc3__steps") == 20
        path.write_text("\n".join(lines) + "\n")
        report = ingest_paths(ws, [path], run_id="b")
        assert report.files[0].status == "replaced"
        assert ws.row_count("core_arc3__steps") == len(lines)
        assert ws.row_count("raw_ingest__files") == 1


def test_the_same_session_from_two_files_is_not_counted_twice(tmp_path: Path):
    copy = tmp_path / "copy.jsonl"
    copy.write_text(NOFRAMES.read_text() + "\n")  # different bytes, same plays
    with Workspace(tmp_path / "db.duckdb") as ws:
        report = ingest_paths(ws, [NOFRAMES, copy], run_id="a")
        assert report.has_rejections
        assert ws.row_count("core_arc3__plays") == 2
        q = ws.read("SELECT check_name, reason FROM quarantine")
        # the plays, and with them every step and card slot they own (issue 29: a file lands whole)
        assert set(q["check_name"]) == {"duplicate_across_files", "duplicate_play"}
        assert all(str(NOFRAMES.resolve()) in r for r in q["reason"])
        assert ws.read("SELECT count(DISTINCT file_id) FROM core_arc3__steps").item() == 1


def test_ingest_is_atomic_per_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    db = tmp_path / "db.duckdb"
    with Workspace(db) as ws:
        real_insert = Workspace.insert_frame

        def crash_on_steps(self, table_name, df, **kw):
            if table_name == "core_arc3__steps":
                raise RuntimeError("disk full (simulated) while writing steps")
            return real_insert(self, table_name, df, **kw)

        monkeypatch.setattr(Workspace, "insert_frame", crash_on_steps)
        with pytest.raises(RuntimeError, match="disk full"):
            ingest_paths(ws, [SAMPLE], run_id="a")
        monkeypatch.undo()
        assert all(n == 0 for n in counts(ws).values())  # nothing half-loaded
        assert ingest_paths(ws, [SAMPLE], run_id="b").files[0].status == "loaded"


def test_concurrent_ingests_wait_for_each_other(tmp_path: Path):
    db = tmp_path / "db.duckdb"
    Workspace(db).close()
    files = sorted((SHARED / "samples" / "arc-agi-3" / "toolkit").glob("*.jsonl"))
    half = len(files) // 2
    procs = [subprocess.Popen([sys.executable, "-m", "pipeline.cli", "--plain", "ingest", *map(str, group),
                               "--db", str(db), "--lock-timeout", "120"], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
             for group in (files[:half], files[half:])]
    results = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], results
    with Workspace(db, read_only=True) as ws:
        assert ws.row_count("raw_ingest__files") == len(files)
        assert ws.row_count("runs") == 2


def test_keep_frames_writes_parquet_whose_pixels_match_the_hashes(tmp_path: Path):
    frames_dir = tmp_path / "frames"
    with Workspace(tmp_path / "db.duckdb") as ws:
        ingest_paths(ws, [SAMPLE], run_id="a", keep_frames=True, frames_dir=frames_dir)
        steps = ws.read("SELECT line_number, frame_sha256s, frames_file FROM core_arc3__steps ORDER BY line_number")
    files = {f for f in steps["frames_file"] if f}
    assert len(files) == 1
    frames = pl.read_parquet(next(iter(files)))
    assert frames.height == sum(len(h) for h in steps["frame_sha256s"])
    for row in frames.iter_rows(named=True):
        assert hashlib.sha256(row["pixels"]).hexdigest() == row["frame_sha256"]
    by_line = {r["line_number"]: r["frame_sha256s"] for r in steps.iter_rows(named=True)}
    first = frames.filter(pl.col("line_number") == 1).row(0, named=True)
    assert by_line[1][0] == first["frame_sha256"]
    # The pixels are the recorded ones, cell for cell.
    recorded = np.asarray(json.loads(SAMPLE.read_text().splitlines()[0])["data"]["frame"][0], dtype=np.uint8)
    assert np.frombuffer(first["pixels"], dtype=np.uint8).reshape(64, 64).tolist() == recorded.tolist()
    assert not list(frames_dir.glob("*.tmp"))


def test_study_manifest_entries_are_checked_one_by_one(tmp_path: Path):
    manifest = {
        "format": "arcstudy-study-manifest/1", "study_id": "s1",
        "participants": [{"participant_id": "p1", "cohort": "a"}, {"participant_id": "p2", "age_band": "25-34"}],
        "sessions": [
            {"session_id": "s1", "participant_id": "p1", "started_at": "2026-03-01T10:00:00+00:00",
             "ended_at": "2026-03-01T11:20:00+00:00", "protocol": "arc-agi-3-2026"},
            {"session_id": "s2", "participant_id": "ghost", "started_at": "2026-03-01T10:00:00+00:00"},
            {"session_id": "s3", "participant_id": "p2", "started_at": "2026-03-02T10:00:00+00:00",
             "ended_at": "2026-03-02T09:00:00+00:00"},
        ],
        "plays": [
            {"guid": "g1", "session_id": "s1", "game_id": "ab12-00000000", "is_first_run": True, "order_in_session": 1},
            {"guid": "g2", "session_id": "s2"},
            {"guid": "g3", "session_id": "s1", "participant_id": "p2"},
        ],
    }
    path = tmp_path / "study.json"
    path.write_text(json.dumps(manifest))
    with Workspace(tmp_path / "db.duckdb") as ws:
        report = ingest_paths(ws, [path], run_id="a")
        assert report.files[0].source_format == "study-manifest"
        assert ws.row_count("core_study__participants") == 2
        assert ws.read("SELECT session_id FROM core_study__sessions")["session_id"].to_list() == ["s1"]
        assert ws.read("SELECT guid, participant_id FROM core_study__session_plays").rows() == [("g1", "p1")]
        q = ws.read("SELECT source_location, check_name FROM quarantine ORDER BY source_location").rows()
        assert q == [("plays[1]", "unknown_session"), ("plays[2]", "contradicts_session"),
                     ("sessions[1]", "unknown_participant"), ("sessions[2]", "ends_before_start")]


def test_scorecards_load_runs(tmp_path: Path):
    expected = json.loads((SHARED / "samples" / "arc-agi-3" / "toolkit" /
                           "tu93_explore_reset_solve_5levels.noframes.expected.json").read_text())
    doc = {"card_id": "c1", "score": expected["scored"]["scorecard_score"],
           "environments": [expected["scored"]["environment"]]}
    path = tmp_path / "scorecard.json"
    path.write_text(json.dumps(doc))
    card = tmp_path / "card.json"
    card.write_text(json.dumps({"won": 0, "played": 1, "total_actions": 150, "levels_completed": 5,
                                "cards": {expected["game_id"]: expected["card"]}}))
    with Workspace(tmp_path / "db.duckdb") as ws:
        ingest_paths(ws, [path, card], run_id="a")
        runs = ws.read("SELECT * FROM core_arc3__scorecard_runs")
        env_run = expected["scored"]["environment"]["runs"][0]
        assert runs["level_scores"][0].to_list() == env_run["level_scores"]
        assert runs["score"][0] == env_run["score"]
        slots = ws.read("SELECT * FROM core_arc3__card_plays")
        assert slots["card_actions"].to_list() == expected["card"]["actions"]


def test_parallel_ingest_writes_exactly_what_sequential_ingest_writes(tmp_path: Path):
    folder = SHARED / "samples" / "arc-agi-3" / "toolkit"
    results = {}
    for workers in (1, 2):
        with Workspace(tmp_path / f"db{workers}.duckdb") as ws:
            report = ingest_paths(ws, [folder], run_id="p", workers=workers)
            assert [f.status for f in report.files] == ["loaded"] * 12
            results[workers] = (
                ws.read("SELECT * EXCLUDE (frames_file) FROM core_arc3__steps ORDER BY file_id, line_number"),
                ws.read("SELECT * FROM core_arc3__plays ORDER BY play_id"),
                ws.read("SELECT file_path, file_id FROM raw_ingest__files ORDER BY file_path"),
            )
    for seq, par in zip(results[1], results[2], strict=True):
        assert seq.equals(par)


def test_parallel_ingest_refuses_and_quarantines_exactly_what_sequential_ingest_does(tmp_path: Path):
    folder = tmp_path / "inputs"
    folder.mkdir()
    for i, sample in enumerate(sorted((SHARED / "samples" / "arc-agi-3" / "toolkit").glob("*.jsonl"))[:4]):
        (folder / f"{i}_{sample.name}").write_bytes(sample.read_bytes())
    (folder / "4_damaged.jsonl").write_bytes(NOFRAMES.read_bytes() + b'{"not": "a step"\nnot json at all\n')
    (folder / "5_notes.txt").write_text("free text that no reader claims\n")
    results = {}
    for workers in (1, 2):
        with Workspace(tmp_path / f"db{workers}.duckdb") as ws:
            report = ingest_paths(ws, [folder], run_id="p", workers=workers)
            assert report.has_rejections
            results[workers] = (
                [(f.path.name, f.status, f.n_loaded, f.n_quarantined) for f in report.files],
                ws.read("SELECT * EXCLUDE (frames_file) FROM core_arc3__steps ORDER BY file_id, line_number"),
                ws.read("SELECT * FROM core_arc3__plays ORDER BY play_id"),
                ws.read("SELECT * EXCLUDE (ingested_at) FROM raw_ingest__files ORDER BY file_path"),
                ws.read("SELECT * FROM quarantine ORDER BY quarantine_id"),
            )
    files = {name: (status, n_quarantined) for name, status, _, n_quarantined in results[1][0]}
    assert files["5_notes.txt"] == ("rejected", 1)
    assert files["4_damaged.jsonl"][0] == "loaded" and files["4_damaged.jsonl"][1] >= 2
    assert results[1][0] == results[2][0]
    for seq, par in zip(results[1][1:], results[2][1:], strict=True):
        assert seq.equals(par)


def test_a_file_whose_reading_raises_is_refused_and_the_others_load(tmp_path: Path, monkeypatch):
    from pipeline.ingest import runner

    real = runner.prepare_file

    def crash_on_the_copy(path: Path, **options):
        if path.name == "crash.jsonl":
            raise KeyError("a reader bug")
        return real(path, **options)

    monkeypatch.setattr(runner, "prepare_file", crash_on_the_copy)
    crash = tmp_path / "crash.jsonl"
    crash.write_bytes(NOFRAMES.read_bytes())
    with Workspace(tmp_path / "db.duckdb") as ws:
        report = ingest_paths(ws, [crash, SAMPLE], run_id="a", workers=1)
        assert [f.status for f in report.files] == ["rejected", "loaded"]
        assert report.has_rejections and "KeyError" in report.files[0].message
        refusal = ws.read("SELECT file_path, check_name, reason FROM quarantine").row(0, named=True)
        assert refusal["file_path"] == str(crash.resolve()) and refusal["check_name"] == "reader_error"
        assert ws.row_count("raw_ingest__files") == 1


def test_identical_files_in_one_run_load_once(tmp_path: Path):
    copy = tmp_path / "same.jsonl"
    copy.write_bytes(NOFRAMES.read_bytes())
    for workers in (1, 2):
        with Workspace(tmp_path / f"db{workers}.duckdb") as ws:
            report = ingest_paths(ws, [NOFRAMES, copy], run_id="a", workers=workers)
            assert [f.status for f in report.files] == ["loaded", "skipped"]
            assert ws.row_count("raw_ingest__files") == 1
            assert not report.has_rejections
