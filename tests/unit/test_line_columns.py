"""`LineColumns`: a large file's lines held as columns give back, line for line, the `Line` that was parsed (times
in any offset, lines without a time, frame hashes, values dropped over their bound), and a file read as columns
is the same recording as one read as a list."""

from __future__ import annotations

import json
from dataclasses import fields
from pathlib import Path

from pipeline.recordings.lines import Line, parse_line
from pipeline.recordings.reader import LineColumns, LineView, read_recording_file


def astuple(ln: Line) -> tuple:
    """Every field; a value dropped over its bound by what was said of it (two reads make two errors)."""
    return tuple([(e.check, e.reason) for e in ln.dropped] if f.name == "dropped" else getattr(ln, f.name)
                 for f in fields(Line))


FRAME = [[[(r * 3 + c) % 16 for c in range(64)] for r in range(64)]]


def _line(i: int, **data) -> bytes:
    ts = ["2026-01-02T03:04:05.123456+00:00", "2026-01-02T05:04:05+02:00", "2026-01-02T03:04:05Z",
          "2026-01-02T03:04:05.5-07:30"][i % 4]
    body = {"game_id": "ab12-00000000", "state": "NOT_FINISHED", "levels_completed": 0, "win_levels": 3,
            "action_input": {"id": "ACTION6" if i % 2 else 0, "data": {"x": i % 64, "y": 3} if i % 2 else {},
                             "reasoning": "r" * 20_000 if i == 5 else None},
            "guid": "9064696e-1bf8-40f1-8b96-607f92b98787", **data}
    if i % 3 == 0:
        body["frame"] = FRAME
    return json.dumps({"timestamp": ts, "data": body} if i != 7 else {"data": {"tokens": 3}}).encode()


def test_every_field_of_every_line_comes_back():
    lines = [parse_line(i, _line(i), want_frames=False) for i in range(1, 13)]
    for i, ln in enumerate(lines):
        ln.offset, ln.size = 1000 * i, 10 + i
    store = LineColumns()
    for ln in lines:
        store.append(ln)
    assert len(store) == len(lines)
    assert [astuple(ln) for ln in store] == [astuple(ln) for ln in lines]
    for got, want in zip(store, lines, strict=True):
        assert got.recorded_at == want.recorded_at
        assert got.recorded_at is None or got.recorded_at.isoformat() == want.recorded_at.isoformat()
    assert any(ln.dropped for ln in store) and any(ln.hashes for ln in store) and store[6].kind == "usage"
    frames = store.select("frame")
    assert isinstance(frames, LineView) and [ln.number for ln in frames] == [ln.number for ln in lines
                                                                             if ln.kind == "frame"]
    assert [ln.number for ln in frames[1:3]] == [ln.number for ln in list(frames)[1:3]]
    assert [ln.number for ln in frames.take([0, 2])] == [frames[0].number, frames[2].number]
    store.release_raw(4)
    assert [ln.raw_json for ln in store][:4] == [ln.raw_json for ln in lines][:4]
    assert all(ln.raw_json == "" for ln in store[4:])


def test_a_file_read_as_columns_is_the_file_read_as_a_list(tmp_path: Path):
    path = tmp_path / "ab12-00000000-9064696e-1bf8-40f1-8b96-607f92b98787.jsonl"
    raw = [_line(i) for i in range(1, 30)]
    raw.insert(9, raw[8])  # a duplicated write
    raw.insert(3, b'{"timestamp": "2026-01-02T03:04:05+00:00", "data": {"x": 1}}')  # an unknown record
    path.write_bytes(b"\n".join(raw) + b"\n")
    as_list, as_columns = read_recording_file(path), read_recording_file(path, columns=True)
    assert isinstance(as_columns.steps, LineView)
    for name in ("lines", "steps", "usage"):
        assert [astuple(ln) for ln in getattr(as_columns, name)] == [astuple(ln) for ln in getattr(as_list, name)]
    assert list(as_columns.issues) == list(as_list.issues) and len(as_list.issues) >= 2
    for name in ("effects", "play_index", "flags", "variant", "has_frames", "has_leading_reset", "card_slots"):
        assert getattr(as_columns, name) == getattr(as_list, name), name
