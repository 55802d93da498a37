"""A recording's plays are built as columns, a chunk of plays at a time (`play_frames`), and a large file's are
written by ingest as they come, like its steps: held as rows of dicts, a recording of a million one-step plays
took the ingest to 2.09 GB. These tests pin that the chunks give the rows the steps imply, whatever the chunk
size, and that a streamed file whose plays another file loaded quarantines them as a file read whole does."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

import pipeline.recordings.reader as reader
from pipeline.core.workspace import Workspace
from pipeline.ingest import ingest_paths
from pipeline.recordings.reader import play_frames, read_recording_file

GUID = "5b0c1a52-2f44-4c1e-9f0e-2d7c1d1e0a11"
GAME = "bt11-fd9df0622a1a"


def _line(i: int, *, reset: bool, timed: bool = True) -> str:
    data = {"game_id": GAME, "state": "NOT_FINISHED", "levels_completed": 0, "win_levels": 5,
            "action_input": {"id": "RESET" if reset else "ACTION3", "data": {}, "reasoning": None},
            "guid": GUID, "full_reset": reset, "available_actions": [3, 4]}
    hour = 3 + i % 2  # the same instants, half of them written at +01:00 (stored as UTC)
    ts = f"2026-11-22T{hour:02d}:00:{i // 1000:02d}.{i % 1000:03d}000+0{i % 2}:00"
    return json.dumps({"timestamp": ts, "data": data} if timed else {"data": data})


def _recording(path: Path, play_lengths: list[int]) -> Path:
    """A frameless toolkit recording of plays of the given lengths (each a full RESET, then actions: a RESET
    right after a RESET is its echo, the same play)."""
    lines, i = [], 0
    for length in play_lengths:
        for k in range(length):
            lines.append(_line(i, reset=k == 0))
            i += 1
    path.write_text("\n".join(lines) + "\n")
    return path


def _expected_plays(rec, file_id: str) -> list[dict]:
    """Each play's row worked out from its steps one by one (what the reader stored before it built columns)."""
    by_play: dict[int, list] = {}
    for step, play in zip(rec.steps, rec.play_index, strict=True):
        by_play.setdefault(play, []).append(step)
    rows = []
    for index, steps in sorted(by_play.items()):
        times = [s.recorded_at for s in steps if s.recorded_at is not None]
        rows.append({
            "play_id": rec.play_id(index), "file_id": file_id, "guid": rec.guid, "game_id": rec.game_id,
            "play_index": index, "recording_variant": rec.variant, "schema_generation": rec.schema_generation,
            "first_line_number": steps[0].number, "last_line_number": steps[-1].number, "n_steps": len(steps),
            "started_at": times[0] if times else None, "ended_at": times[-1] if times else None,
            "has_frames": rec.has_frames, "is_only_reset_levels": rec.is_only_reset_levels,
            "is_action_ids_lost": rec.is_action_ids_lost,
            "has_leading_reset": rec.has_leading_reset if index == 0 else True, "is_replay_needed": False,
            "flags": list(rec.flags),
        })
    return rows


def _sample_paths(shared_dir: Path) -> list[Path]:
    return sorted(p for p in (shared_dir / "samples" / "arc-agi-3").rglob("*.jsonl") if "playback" not in str(p))


@pytest.mark.parametrize("columns", [False, True], ids=["lines", "columns"])
def test_play_chunks_give_the_rows_the_steps_imply_whatever_the_chunk_size(tmp_path, shared_dir, columns):
    made = _recording(tmp_path / f"{GAME}-{GUID}.jsonl", [2, 3, 2, 2, 5, 2, 2, 4, 2, 2, 3])
    for path in [made, *_sample_paths(shared_dir)]:
        rec = read_recording_file(path, columns=columns)
        expected = _expected_plays(rec, "f")
        for chunk_rows in (1, 3, 1_000_000):
            chunks = list(play_frames(rec, "f", chunk_rows))
            assert [c.height for c in chunks[:-1]] == [chunk_rows] * (len(chunks) - 1), path.name
            got = pl.concat(chunks)
            assert got.to_dicts() == expected, (path.name, chunk_rows)
    assert len(_expected_plays(read_recording_file(made), "f")) == 11


def _quarantine_and_tables(db: Path) -> tuple[list, dict[str, list]]:
    with Workspace(db) as ws:
        q = ws.read("SELECT target_table, check_name, source_location, reason, raw_text FROM quarantine "
                    "ORDER BY ALL").rows()
        tables = {name: ws.read(f"SELECT * EXCLUDE (ingested_at, run_id) FROM {name} ORDER BY ALL").rows()
                  if name == "raw_arc3__recording_lines" else ws.read(f"SELECT * FROM {name} ORDER BY ALL").rows()
                  for name in ("core_arc3__plays", "core_arc3__steps")}
    return q, tables


def test_a_streamed_file_quarantines_the_plays_another_file_loaded_as_a_file_read_whole(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    # The first file's six plays; the second holds them again (other bytes: its last lines differ) and three more.
    first = _recording((tmp_path / "a").mkdir() or tmp_path / "a" / f"{GAME}-{GUID}.jsonl", [2, 2, 3, 2, 2, 2])
    second = _recording((tmp_path / "b").mkdir() or tmp_path / "b" / f"{GAME}-{GUID}.jsonl",
                        [2, 2, 3, 2, 2, 2, 2, 4, 2])
    monkeypatch.setattr(reader, "PLAY_CHUNK_ROWS", 2)  # the streamed file's plays in several chunks
    results = {}
    for mode, chunk_bytes in (("whole", None), ("streamed", 512)):
        db = tmp_path / f"{mode}.duckdb"
        with Workspace(db) as ws:
            ingest_paths(ws, [first], run_id="a", workers=1)
            report = ingest_paths(ws, [second], run_id="b", workers=1, chunk_bytes=chunk_bytes)
            assert report.has_rejections and report.files[0].status != "rejected"
            plays = ws.read("SELECT f.file_path, p.play_index FROM core_arc3__plays p "
                            "JOIN raw_ingest__files f USING (file_id) ORDER BY 1, 2").rows()
            assert plays == [(str(first), i) for i in range(6)] + [(str(second), i) for i in range(6, 9)]
            n_q = ws.read("SELECT n_records_quarantined FROM raw_ingest__files WHERE run_id = 'b'").item()
        results[mode] = _quarantine_and_tables(db)
        q = results[mode][0]
        assert sum(1 for row in q if row[0] == "core_arc3__plays") == 6
        assert {row[1] for row in q if row[0] == "core_arc3__plays"} == {"duplicate_across_files"}
        assert {row[2] for row in q if row[0] == "core_arc3__plays"} == {f"record {i}" for i in range(1, 7)}
        assert sum(1 for row in q if row[0] == "core_arc3__steps") == 13  # the six plays' steps
        assert n_q == len(q)
    (whole_q, whole_tables), (streamed_q, streamed_tables) = results["whole"], results["streamed"]
    assert streamed_tables == whole_tables
    # Every quarantine row alike; a step's raw text aside: a streamed file's steps are quarantined in the
    # database, their text DuckDB's rendering of the row (`_drop_duplicate_plays_written`).
    assert [row if row[0] == "core_arc3__plays" else row[:4] for row in streamed_q] == \
        [row if row[0] == "core_arc3__plays" else row[:4] for row in whole_q]

