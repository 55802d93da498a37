"""A large recording's step records are made a chunk at a time from its steps table (`StepRecordChunks`), and the
texts that repeat on every step are stored once: `score` of a 2,000,000-step file held a record object per step
(about 200 bytes) beside a table that holds the same values. These tests pin that the view gives exactly the
records a list gives, and that scoring through it gives the same scorecards."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import polars as pl
import pytest

import pipeline.scoring.plays as plays_module
from pipeline.recordings.reader import read_recording_file, step_frames
from pipeline.scoring.plays import (
    StepRecordChunks,
    _records,
    read_recording_files,
    recordings_from_tables,
    step_records_of,
)

SAMPLES = Path(__file__).resolve().parents[2].parent / "shared" / "samples" / "arc-agi-3"


def _sample_paths(n: int = 8) -> list[Path]:
    return sorted(p for p in SAMPLES.rglob("*.jsonl") if "playback" not in str(p))[:n]


def _steps() -> pl.DataFrame:
    steps, _, _, _ = read_recording_files(_sample_paths())
    assert steps.height > 100
    return steps


def test_the_chunked_view_gives_every_record_a_list_gives_by_index_slice_and_iteration():
    steps = _steps()
    whole = _records(steps)
    view = StepRecordChunks(steps, chunk_rows=7)
    assert len(view) == len(whole)
    assert list(view) == whole
    assert [view[i] for i in range(len(view))] == whole
    assert [view[i] for i in range(len(view) - 1, -1, -1)] == whole[::-1]  # backwards, across chunks
    assert view[-1] == whole[-1] and view[-len(whole)] == whole[0]
    assert view[5:23] == whole[5:23] and view[::9] == whole[::9]
    with pytest.raises(IndexError):
        view[len(whole)]
    with pytest.raises(IndexError):
        view[-len(whole) - 1]
    assert bool(view) and not StepRecordChunks(steps.clear())
    again = pickle.loads(pickle.dumps(view))  # sent to a worker: the columns travel, not a chunk of records
    assert list(again) == whole


def test_large_recordings_get_the_view_and_small_ones_a_list(monkeypatch):
    steps = _steps()
    assert isinstance(step_records_of(steps), list)
    monkeypatch.setattr(plays_module, "RECORDS_IN_CHUNKS_FROM", 10)
    assert isinstance(step_records_of(steps), StepRecordChunks)


def test_scoring_through_the_view_gives_the_same_cards_and_plays(monkeypatch):
    """Every recording of the samples rebuilt with its records in chunks of 5 equals the one built from a list."""
    steps, plays, files, _ = read_recording_files(_sample_paths(20))
    listed = recordings_from_tables(steps, plays, files)
    monkeypatch.setattr(plays_module, "RECORDS_IN_CHUNKS_FROM", 1)
    monkeypatch.setattr(plays_module, "RECORD_CHUNK_ROWS", 5)
    chunked = recordings_from_tables(steps, plays, files)
    assert any(isinstance(rec.records, StepRecordChunks) for rec in chunked)
    assert len(listed) == len(chunked) > 5
    for a, b in zip(listed, chunked, strict=True):
        assert a.card == b.card and a.play_ids == b.play_ids and a.step_play == b.step_play
        assert a.effects == b.effects and list(a.records) == list(b.records)


def test_texts_repeated_on_every_step_are_the_same_values_stored_once(tmp_path):
    """The file id, game id, guid and play ids of a file's steps: the values a list of them gives, each distinct
    text stored once (their Arrow data buffers hold it once, not once a step)."""
    src = next(p for p in _sample_paths(20) if sum(1 for _ in p.open()) > 40)
    parsed = read_recording_file(src)
    table = pl.concat(step_frames(parsed, "f" * 64, chunk_rows=16), rechunk=False)
    assert table["file_id"].to_list() == ["f" * 64] * table.height
    assert table["game_id"].to_list() == [parsed.game_id] * table.height
    assert table["guid"].to_list() == [parsed.guid] * table.height
    assert table["play_id"].n_unique() < table.height // 4
    for name in ("file_id", "game_id", "guid", "play_id"):
        texts = table[name].to_arrow(compat_level=pl.CompatLevel.newest())  # string views over data buffers
        chunks = texts.chunks if hasattr(texts, "chunks") else [texts]
        data_bytes = sum(b.size for chunk in chunks for b in chunk.buffers()[2:] if b is not None)
        distinct_bytes = sum(len(t) for t in table[name].unique().to_list())
        assert table[name].n_chunks() > 1
        assert data_bytes <= table[name].n_chunks() * distinct_bytes, name  # once per chunk, not once per step
    # the table a list of values gives, column for column
    as_lists = pl.DataFrame({c: table[c].to_list() for c in table.columns}, schema=table.schema)
    assert table.equals(as_lists)
    json.dumps(table.head(1).to_dicts(), default=str)  # plain values


GAMES = Path(__file__).resolve().parents[2] / "games"


def _recording_and_script(folder: Path) -> tuple[Path, Path]:
    """A shipped game's winning recording and a playback script of the same actions (both with reasoning)."""
    solution = next(GAMES.glob("bg41/*/solutions/win.jsonl"))
    lines = [json.loads(text) for text in solution.read_text().splitlines() if text.strip()]
    recording = folder / "bg41-recording.jsonl"
    for line in lines:
        line["data"]["action_input"]["reasoning"] = {"why": "the recorder's"}
    recording.write_text("".join(json.dumps(line) + "\n" for line in lines))
    script = folder / "bg41_win.playback.jsonl"
    script.write_text("".join(json.dumps({"data": {"action_input": {
        "id": line["data"]["action_input"]["id"], "data": {"game_id": line["data"]["game_id"],
                                                           **(line["data"]["action_input"].get("data") or {})},
        "reasoning": {"why": "a test"}}}}) + "\n" for line in lines[1:]))
    return recording, script


def _scored_alike(steps: pl.DataFrame, plays: pl.DataFrame, files: dict) -> None:
    from pipeline.scoring.plays import replay_scripts

    replayed = replay_scripts(steps, plays, files, [GAMES])
    assert not replayed.failed
    recs = recordings_from_tables(replayed.steps, replayed.plays, replayed.files, {}, replayed.scripts)
    assert len(recs) == 2 and all(rec.card is not None for rec in recs)
    assert recs[0].card.plays[0].actions == recs[1].card.plays[0].actions  # the same actions, counted alike


def test_stored_recordings_and_playback_scripts_are_read_with_what_each_needs(tmp_path):
    """`score --db` reads `STEP_COLUMNS` of a stored recording's steps and every column of a stored playback
    script's (its replay reads `reasoning_json`)."""
    from pipeline.core.workspace import Workspace
    from pipeline.ingest import ingest_paths
    from pipeline.scoring.plays import STEP_COLUMNS
    from pipeline.scoring.storage import read_db_plays

    recording, script = _recording_and_script(tmp_path)
    with Workspace(tmp_path / "w.duckdb") as ws:
        ws.ensure_tables()
        ingest_paths(ws, [recording, script], run_id="t")
        steps, plays, files = read_db_plays(ws, [])
        stored = ws.read("SELECT * FROM core_arc3__steps")
    assert plays.height == 2 and steps.height == stored.height
    script_id = plays.filter(pl.col("is_replay_needed"))["file_id"][0]
    assert steps.filter(pl.col("file_id") == script_id)["reasoning_json"].is_not_null().all()
    assert steps.filter(pl.col("file_id") != script_id)["reasoning_json"].is_null().all()  # stored, not read
    assert stored.filter(pl.col("file_id") != script_id)["reasoning_json"].is_not_null().all()
    assert steps["file_id"].to_list() == stored.sort("file_id", "line_number")["file_id"].to_list()
    assert set(STEP_COLUMNS) <= set(steps.columns)
    _scored_alike(steps, plays, files)


def test_a_recording_and_a_playback_script_read_together_keep_what_each_needs(tmp_path):
    """`score` keeps only `STEP_COLUMNS` of a recording's steps but every column of a playback script's (its
    replay reads `reasoning_json`): read together, both are scored."""
    from pipeline.scoring.parallel import read_and_verify
    from pipeline.scoring.plays import STEP_COLUMNS

    games = GAMES
    recording, script = _recording_and_script(tmp_path)
    steps, plays, files, problems, _ = read_and_verify([recording, script], [games], workers=1)
    assert not problems and len(files) == 2
    assert set(STEP_COLUMNS) < set(steps.columns) and "reasoning_json" in steps.columns
    _scored_alike(steps, plays, files)


def test_the_scored_steps_are_the_stored_columns_values_in_narrow_types():
    """`score` keeps `STEP_COLUMNS` of a recording's steps, its small integer columns (line numbers too) and the
    available actions' items in the narrowest type their values fit: the values are those of the full table."""
    from pipeline.scoring.plays import STEP_COLUMNS

    paths = _sample_paths(20)
    narrow, _, _, _ = read_recording_files(paths, step_columns=STEP_COLUMNS)
    full, _, _, _ = read_recording_files(paths)
    assert narrow.columns == list(STEP_COLUMNS)
    assert narrow.schema["action_id"] in (pl.Int8, pl.UInt8) and narrow.schema["levels_completed"] in (pl.Int8,
                                                                                                        pl.UInt8)
    assert narrow.schema["line_number"] in (pl.Int8, pl.Int16, pl.Int32)
    assert narrow.schema["step_index"] in (pl.Int8, pl.Int16, pl.Int32)
    assert narrow.schema["available_actions"] == pl.List(pl.Int8)  # action ids: a byte each, not eight
    assert narrow.to_dicts() == full.select(STEP_COLUMNS).to_dicts()


def test_a_playback_scripts_steps_made_column_by_column_are_the_rows_it_had():
    """A script's steps are made column by column (a dict per action cost about 2 KB while its table was made):
    the same table as conformed from one dict per action."""
    from pipeline.recordings.counting import ACTION_NAMES
    from pipeline.recordings.playback import read_playback_file, script_guid, script_tables
    from schemas.validate import conform

    scripts = sorted((SAMPLES.parent / "playback-arc-agi-3").glob("*.playback.jsonl"))
    assert len(scripts) >= 3
    for path in scripts:
        script = read_playback_file(path)
        guid = script_guid(script.file_sha256)
        rows = [{
            "file_id": script.file_sha256, "line_number": a.line_number, "step_index": i, "play_id": f"{guid}/0",
            "game_id": script.game_id, "guid": guid, "recorded_at": None, "action_id": a.action_id,
            "action_name": ACTION_NAMES[a.action_id], "click_x": a.x, "click_y": a.y, "state": None,
            "levels_completed": None, "win_levels": None, "is_full_reset": None, "available_actions": None,
            "n_frames": None, "frame_sha256s": None, "last_frame_sha256": None, "frames_file": None,
            "is_post_terminal": None, "step_effect": None, "is_counted": None, "is_level_change": None,
            "reasoning_json": None if a.reasoning is None else json.dumps(a.reasoning, ensure_ascii=False),
            "flags": []} for i, a in enumerate(script.actions)]
        made = script_tables(script, script.file_sha256)["core_arc3__steps"]
        expected = conform("core_arc3__steps", rows)
        assert made.schema == expected.schema and made.to_dicts() == expected.to_dicts(), path.name


def _stored_workspace(tmp_path, paths):
    from pipeline.core.workspace import Workspace
    from pipeline.ingest import ingest_paths

    ws = Workspace(tmp_path / "w.duckdb")
    ws.ensure_tables()
    ingest_paths(ws, paths, run_id="t")
    return ws


def test_stored_steps_read_with_their_play_texts_once_equal_the_steps_read_as_text(tmp_path):
    """`read_stored_steps` reads a step's play, file, guid and game ids as its play's place (stored once per
    play): the same values, in the same order, as reading them row by row; and a step whose guid is not its
    play's is read as text, so nothing is ever taken from the wrong play."""
    from pipeline.scoring.plays import STEP_COLUMNS
    from pipeline.scoring.storage import read_stored_steps

    paths = _sample_paths(12)
    with _stored_workspace(tmp_path, paths) as ws:
        ids = ws.read("SELECT DISTINCT file_id FROM core_arc3__steps ORDER BY 1")["file_id"].to_list()
        plain = ws.read(f"SELECT {', '.join(STEP_COLUMNS)} FROM core_arc3__steps ORDER BY file_id, line_number")
        statements = []
        real_read = ws.read
        ws.read = lambda sql, params=None: statements.append(sql) or real_read(sql, params)
        read = read_stored_steps(ws, STEP_COLUMNS, ids)
        assert len(statements) == 2 and "__play" in statements[1]  # the plays' place, not the texts, per step
        ws.read = real_read
        assert read.columns == list(STEP_COLUMNS) and read.height == plain.height > 100
        assert read.equals(plain)
        assert read["file_id"].n_unique() > 5 and read["play_id"].n_unique() > 5
        # only some files: only their steps
        assert read_stored_steps(ws, STEP_COLUMNS, ids[:2]).equals(plain.filter(pl.col("file_id").is_in(ids[:2])))
        # a step whose guid differs from its play's: read row by row, as stored
        ws.con.execute("UPDATE core_arc3__steps SET guid = 'other' WHERE line_number = 3 AND file_id = ?", [ids[0]])
        changed = ws.read(f"SELECT {', '.join(STEP_COLUMNS)} FROM core_arc3__steps ORDER BY file_id, line_number")
        again = read_stored_steps(ws, STEP_COLUMNS, ids)
        assert again.equals(changed) and "other" in again["guid"].to_list()


def test_stored_steps_read_narrow_in_slices_of_whole_small_files_or_line_ranges_equal_the_stored_steps(
        tmp_path, monkeypatch):
    """`read_narrow_steps` (what `score --db` and the export read): small files together up to STEP_SLICE_ROWS
    steps, a larger file by ranges of its lines, a file without steps in none; every slice narrowed. Cast back, the
    same rows in the same order as one read in the stored types."""
    from pipeline.scoring import storage
    from pipeline.scoring.plays import STEP_COLUMNS

    monkeypatch.setattr(storage, "STEP_SLICE_ROWS", 10)
    assert list(storage._step_slices(["a", "b", "c", "d", "e"], {"a": 4, "b": 5, "c": 30, "e": 7},
                                     {"c": [1, 11, 21]})) == [
        (["a", "b"], None), (["c"], (1, 10)), (["c"], (11, 20)), (["c"], (21, None)), (["e"], None)]

    monkeypatch.setattr(storage, "STEP_SLICE_ROWS", 40)
    with _stored_workspace(tmp_path, _sample_paths(12)) as ws:
        ids = ws.read("SELECT DISTINCT file_id FROM core_arc3__steps ORDER BY 1")["file_id"].to_list()
        counts = dict(ws.read("SELECT file_id, count(*) FROM core_arc3__steps GROUP BY 1").iter_rows())
        assert min(counts.values()) < 40 < max(counts.values())  # both kinds of slice
        plain = storage.read_stored_steps(ws, STEP_COLUMNS, ids)
        narrow = storage.read_narrow_steps(ws, STEP_COLUMNS, ids[::-1] + ids[:1])
        assert narrow.schema["state"] == pl.Categorical and narrow.schema["levels_completed"] == pl.Int8
        assert narrow.estimated_size() < plain.estimated_size() / 2
        assert narrow.with_columns(pl.col(c).cast(t) for c, t in plain.schema.items()).equals(plain)
        assert storage.read_narrow_steps(ws, STEP_COLUMNS, ["no such file"]).equals(plain.clear())
