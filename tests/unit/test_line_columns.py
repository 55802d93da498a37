"""`LineColumns`: a large file's lines held as columns give back, line for line, the `Line` that was parsed (times
in any offset, lines without a time, frame hashes, values dropped over their bound), and a file read as columns
is the same recording as one read as a list."""

from __future__ import annotations

import json
import pickle
from dataclasses import fields
from pathlib import Path

import pytest

from pipeline.recordings.lines import Line, parse_line
from pipeline.recordings.reader import LineColumns, LineView, read_recording_file, recording_tables


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
        store.append(ln, ln.raw_json)
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


def test_data_past_the_bound_waits_on_disk_and_comes_back_equal():
    """Past its bound a `DataColumn` writes each distinct `data` to disk and decodes it when asked: every value
    comes back equal, types included: values orjson cannot write exactly (NaN, an integer past 64 bits, a lone
    surrogate) go through `json`; repeats share one entry."""
    from pipeline.recordings.reader import DataColumn

    values = [
        {"game_id": "ab12-00000000", "state": "NOT_FINISHED", "levels_completed": 1, "x": 1.5, "ok": True},
        {"action_input": {"id": 6, "data": {"x": 3, "y": 4}, "reasoning": "why ✓"}, "n": None},
        {"big": 2**70, "infinite": float("inf"), "s": "\udfff"},
        {"levels_completed": 1, "ok": 1},  # not equal to 1.0 nor true
        {"levels_completed": 1, "ok": 1.0},
        {"game_id": "ab12-00000000", "state": "NOT_FINISHED", "levels_completed": 1, "x": 1.5, "ok": True},
        {},
    ]
    raws = [json.dumps(v) for v in values]
    column = DataColumn(held_bytes=0)
    for v, raw in zip(values, raws, strict=True):
        column.append(v, raw)
    assert column.spilled() == len(values)
    assert len(column) == len(values)
    for got, want in zip(column, values, strict=True):
        assert json.dumps(got) == json.dumps(want)  # types and key order (1 vs 1.0 vs true)
    assert column[2]["big"] == 2**70 and column[2]["s"] == "\udfff" and column[2]["infinite"] == float("inf")
    assert type(column[3]["ok"]) is int and type(column[4]["ok"]) is float
    assert column._at[0] == column._at[5]  # one entry for a repeat
    held = DataColumn(held_bytes=10**9)
    for v, raw in zip(values, raws, strict=True):
        held.append(v, raw)
    assert held.spilled() == 0 and held[0] is held[5] and held[1] is values[1]
    assert [json.dumps(v) for v in pickle.loads(pickle.dumps(column))] == [json.dumps(v) for v in values]


def test_pixels_past_the_bound_wait_on_disk_and_come_back_equal():
    """Past its bound a `FrameColumn` writes each line's pixels to disk and reads them back when asked: equal,
    uint8, as many frames as the line had, and writable as a parsed line's are; a line without pixels has none;
    pixels of another shape or type stay held."""
    import numpy as np

    from pipeline.recordings.reader import FrameColumn

    rng = np.random.default_rng(7)
    pixels = {0: rng.integers(0, 16, (1, 64, 64), dtype=np.uint8), 2: rng.integers(0, 16, (3, 64, 64), dtype=np.uint8),
              5: rng.integers(0, 16, (2, 64, 64), dtype=np.uint8), 7: rng.integers(0, 16, (1, 8, 8), dtype=np.uint8),
              9: rng.integers(0, 16, (1, 64, 64), dtype=np.uint8)}
    column = FrameColumn(held_bytes=0)
    for i, value in pixels.items():
        column[i] = value
    assert column.spilled() == 4
    for i in range(11):
        got = column.get(i)
        if i not in pixels:
            assert got is None, i
            continue
        assert got.dtype == np.uint8 and got.shape == pixels[i].shape and np.array_equal(got, pixels[i]), i
        assert i == 7 or got is not pixels[i]
    column.get(2)[0, 0, 0] = 99  # a copy: what the file holds does not change
    assert np.array_equal(column.get(2), pixels[2])
    again = pickle.loads(pickle.dumps(column))
    assert all(np.array_equal(again.get(i), value) for i, value in pixels.items()) and again.get(1) is None
    held = FrameColumn(held_bytes=10**9)
    held[3] = pixels[2]
    assert held.spilled() == 0 and held.get(3) is pixels[2]


def test_a_file_read_as_columns_with_its_pixels_on_disk_is_the_file_read_as_a_list(tmp_path: Path, monkeypatch):
    """The pixels `score` and `export-transitions` read of a large file with frames (every line's past the first
    spilled: the bound at 1 byte) are the pixels a list read holds."""
    import numpy as np

    import pipeline.recordings.reader as reader

    path = tmp_path / "ab12-00000000-9064696e-1bf8-40f1-8b96-607f92b98787.jsonl"
    raw = []
    for i in range(1, 40):
        line = json.loads(_line(i))
        if "timestamp" in line:
            line["timestamp"] = f"2026-01-02T03:04:{i:02d}Z"
        if "frame" in line["data"]:
            line["data"]["frame"] = [[[(r + c + i) % 16 for c in range(64)] for r in range(64)]] * (1 + i % 2)
        raw.append(json.dumps(line).encode())
    path.write_bytes(b"\n".join(raw) + b"\n")
    as_list = read_recording_file(path, want_frames=True)
    monkeypatch.setattr(reader, "HELD_FRAME_BYTES", 1)
    as_columns = read_recording_file(path, columns=True, want_frames=True)
    assert isinstance(as_columns.lines, LineColumns) and as_columns.lines.frames.spilled() >= 10
    framed = [ln for ln in as_list.steps if ln.frames is not None]
    assert len(framed) >= 10 and len(as_columns.steps) == len(as_list.steps)
    for got, want in zip(as_columns.steps, as_list.steps, strict=True):
        assert (got.frames is None) == (want.frames is None), want.number
        assert got.frames is None or np.array_equal(got.frames, want.frames), want.number
        assert got.hashes == want.hashes


@pytest.mark.parametrize("distinct_values", [4096, 1])
def test_step_records_from_the_columns_are_the_lines_records(distinct_values: int, monkeypatch):
    """Counting reads a large file's step records from its columns; past the bound of distinct state and guid
    strings (a flood of guids), from the line."""
    import pipeline.recordings.reader as reader

    monkeypatch.setattr(reader, "SHARED_DATA_LIMIT", distinct_values)
    lines = [parse_line(i, _line(i, guid=f"{i:08d}-1bf8-40f1-8b96-607f92b98787"), want_frames=False)
             for i in range(1, 13)]
    # (no guid: a null value's code; a null state is no frame line any more, the reader refuses it)
    odd = parse_line(13, json.dumps({"timestamp": "2026-01-02T03:04:05Z", "data": {
        "game_id": "ab12-00000000", "state": "WIN", "levels_completed": 2, "action_input": {"id": 1}}}).encode(),
        want_frames=False)
    store = LineColumns()
    for ln in [*lines, odd]:
        store.append(ln, ln.raw_json)
    assert [store.step_record(i) for i in range(len(store))] == [ln.step_record() for ln in [*lines, odd]]
    assert len(store._values) <= max(distinct_values, 2)


def test_a_file_read_as_columns_with_its_data_on_disk_is_the_file_read_as_a_list(tmp_path: Path, monkeypatch):
    """The same recording, every `data` past the first line's spilled (the bound at 1 byte)."""
    import pipeline.recordings.reader as reader

    path = tmp_path / "ab12-00000000-9064696e-1bf8-40f1-8b96-607f92b98787.jsonl"
    raw = [_line(i) for i in range(1, 30)]
    raw.insert(9, raw[8])  # a duplicated write
    raw.insert(3, b'{"timestamp": "2026-01-02T03:04:05+00:00", "data": {"x": 1}}')  # an unknown record
    raw.insert(12, _line(2).replace(b'"id": 0', b'"id": 0, "note": NaN'))  # orjson cannot write it back
    raw[1:1] = [_line(2).replace(b'"id": "ACTION6"', b'"id": 0')] * 2  # two RESETs in a row, same response
    path.write_bytes(b"\n".join(raw) + b"\n")
    as_list = read_recording_file(path)
    monkeypatch.setattr(reader, "HELD_DATA_BYTES", 1)
    as_columns = read_recording_file(path, columns=True)
    assert isinstance(as_columns.lines, LineColumns) and as_columns.lines.data.spilled() > 20
    for name in ("lines", "steps", "usage"):
        assert [astuple(ln) for ln in getattr(as_columns, name)] == [astuple(ln) for ln in getattr(as_list, name)]
    assert list(as_columns.issues) == list(as_list.issues) and len(as_list.issues) >= 2
    for name in ("effects", "play_index", "flags", "variant", "evidence", "has_frames", "card_slots"):
        assert getattr(as_columns, name) == getattr(as_list, name), name
    assert "doubled_reset" in as_list.flags
    for table in ("core_arc3__steps", "core_arc3__plays", "raw_arc3__recording_lines"):
        assert recording_tables(as_columns, "f")[table].equals(recording_tables(as_list, "f")[table]), table


def test_columns_that_are_one_value_throughout_hold_nothing_a_line():
    """Frameless lines read without their compact text (score, the transitions export) have no frame hashes and
    an empty text each: those two columns hold nothing per line (a list of None and "" took 16 bytes a line,
    32 MB of a 2,000,000-step recording) until a line holds something else, and every line comes back as parsed."""
    frameless = [parse_line(i, _line(i), want_frames=False, keep_raw=False) for i in range(1, 13) if i % 3]
    store = LineColumns()
    for ln in frameless:
        store.append(ln, b"")
    assert store.hashes.start is None and store.raw_json.texts == {}
    assert [astuple(ln) for ln in store] == [astuple(ln) for ln in frameless]
    with_frames = parse_line(99, _line(3), want_frames=False, keep_raw=True)
    assert with_frames.hashes and with_frames.raw_json
    store.append(with_frames, with_frames.raw_json)  # the first other value: the column becomes a list
    assert [astuple(ln) for ln in store] == [astuple(ln) for ln in [*frameless, with_frames]]
    store.release_raw(0)
    assert all(ln.raw_json == "" for ln in store) and store[-1].hashes == with_frames.hashes
    with pytest.raises(IndexError):
        LineColumns().hashes[0]


def test_a_reader_that_writes_no_line_rows_lets_the_line_hashes_go_after_the_duplicate_check(tmp_path: Path):
    """score, the transitions export and recover-actions never write a line's row, whose `content_sha256` is the
    only later use of the 32-byte hash a line held (64 MB of a 2,000,000-step recording): read without the
    lines' text, a file held as columns lets the hashes go once the duplicated-write check has used them. The
    check finds the same duplicate, and every other field of every line is as read with them."""
    from pipeline.recordings.reader import line_rows

    path = tmp_path / "ab12-00000000-9064696e-1bf8-40f1-8b96-607f92b98787.jsonl"
    raw = [json.dumps({"timestamp": f"2026-01-02T03:04:{i:02d}+00:00", "data": {
        "game_id": "ab12-00000000", "state": "NOT_FINISHED", "levels_completed": 0, "win_levels": 3,
        "action_input": {"id": 0 if i == 0 else "ACTION1", "data": {}}, "guid": "9064696e-1bf8-40f1-8b96-607f92b98787",
        **({"frame": FRAME} if i % 4 == 0 else {})}}).encode() for i in range(30)]
    raw.insert(9, raw[8])  # a duplicated write
    path.write_bytes(b"\n".join(raw) + b"\n")
    kept = read_recording_file(path, columns=True, keep_raw_json=False)
    with_hashes = read_recording_file(path, columns=True)
    assert kept.lines.sha is None and with_hashes.lines.sha is not None
    assert [i.check for i in kept.issues] == [i.check for i in with_hashes.issues] and any(
        i.check == "duplicate_step" for i in kept.issues)
    skip = {"sha", "raw_json"}
    for name in ("lines", "steps", "usage"):
        got, want = getattr(kept, name), getattr(with_hashes, name)
        assert [tuple(getattr(ln, f.name) for f in fields(Line) if f.name not in skip) for ln in got] == \
               [tuple(getattr(ln, f.name) for f in fields(Line) if f.name not in skip) for ln in want], name
        assert all(ln.sha == b"" for ln in got) and all(len(ln.sha) == 32 for ln in want)
    assert kept.effects == with_hashes.effects and kept.play_index == with_hashes.play_index
    with pytest.raises(ValueError, match="hashes were let go"):
        line_rows(kept.steps, "f")
    assert line_rows(with_hashes.steps, "f").height == len(with_hashes.steps)


def _timed_line(i: int, at: str | None = None) -> bytes:
    """Line `i` of a long recording: times one second apart, a frame every fifth line, a full RESET every 50th,
    its own reasoning every seventh (distinct `data`)."""
    minute, second = divmod(i, 60)
    body = {"game_id": "ab12-00000000", "state": "NOT_FINISHED", "levels_completed": (i // 10) % 3,
            "win_levels": 3, "full_reset": i % 50 == 0,
            "action_input": {"id": 0 if i % 50 == 0 else "ACTION6" if i % 2 else "ACTION1",
                             "data": {"x": i % 64, "y": 3} if i % 2 else {},
                             "reasoning": f"step {i}" if i % 7 == 0 else None},
            "guid": "9064696e-1bf8-40f1-8b96-607f92b98787"}
    if i % 5 == 0:
        body["frame"] = [[[(r + c + i) % 16 for c in range(64)] for r in range(64)]]
    ts = at or f"2026-01-02T{3 + minute // 60:02d}:{minute % 60:02d}:{second:02d}+00:00"
    return json.dumps({"timestamp": ts, "data": body}).encode()


def test_a_long_file_whose_columns_wait_on_disk_is_the_file_read_as_a_list(tmp_path: Path, monkeypatch):
    """Past `HELD_ITEMS` lines every per-line column of a file read as columns (its fixed-width fields, its
    frame hashes, where its `data` and pixels are, the positions of its steps, their effects and plays) becomes
    a `SpillArray` whose older blocks wait on disk, so that memory no longer grows with the file. Made tiny
    here, the same file reads as the same recording: every line, issue, effect, play and table row; a time
    dropped after its line went to disk (a clock glitch) is dropped in the file."""
    from pipeline.core import spill
    from pipeline.core.spill import SpillArray
    from pipeline.recordings import reader
    from pipeline.recordings.reader import line_rows

    path = tmp_path / "ab12-00000000-9064696e-1bf8-40f1-8b96-607f92b98787.jsonl"
    raw = [_timed_line(i) for i in range(3_000)]
    raw[10] = _timed_line(10, at="2099-01-01T00:00:00+00:00")  # its time alone jumps ahead: dropped, line kept
    raw.insert(40, raw[39])  # a duplicated write
    raw.insert(700, b'{"timestamp": "2026-01-02T03:04:05+00:00", "data": {"x": 1}}')  # an unknown record
    path.write_bytes(b"\n".join(raw) + b"\n")
    as_list = read_recording_file(path, want_frames=True)
    monkeypatch.setattr(spill, "HELD_ITEMS", 256)
    monkeypatch.setattr(spill, "BLOCK_ITEMS", 64)
    monkeypatch.setattr(reader, "HELD_DATA_BYTES", 1)
    monkeypatch.setattr(reader, "HELD_FRAME_BYTES", 1)
    as_columns = read_recording_file(path, want_frames=True, columns=True)
    store = as_columns.lines
    assert isinstance(store, LineColumns)
    on_disk = [store.number, store.time, store.action_id, store.hashes.start, store.hashes.digests,
               store.data._objects, as_columns.steps.positions, as_columns.effects.codes, as_columns.play_index]
    assert all(isinstance(c, SpillArray) and c.spilled() > 0 for c in on_disk)
    assert store.frames.spilled() > 500 and store.data.spilled() > 2_000
    for name in ("lines", "steps", "usage"):
        got, want = getattr(as_columns, name), getattr(as_list, name)
        assert len(got) == len(want)
        for a, b in zip(got, want, strict=True):
            assert astuple(a)[:7] == astuple(b)[:7] and astuple(a)[8:] == astuple(b)[8:]
            assert (a.frames is None) == (b.frames is None) and (a.frames is None or (a.frames == b.frames).all())
    assert as_list.steps[10].recorded_at is None and any(i.check == "time_jumps_ahead" for i in as_list.issues)
    assert list(as_columns.issues) == list(as_list.issues)
    for name in ("effects", "play_index", "flags", "variant", "evidence", "has_frames", "card_slots"):
        assert getattr(as_columns, name) == getattr(as_list, name), name
    assert len(set(as_list.play_index)) == 60
    for table in ("core_arc3__steps", "core_arc3__plays", "raw_arc3__recording_lines"):
        assert recording_tables(as_columns, "f")[table].equals(recording_tables(as_list, "f")[table]), table
    # ingest writes the lines' rows a chunk at a time, from views of the columns
    chunk = slice(1_000, 2_000)
    assert line_rows(store[chunk], "f").equals(line_rows(as_list.lines[chunk], "f"))
