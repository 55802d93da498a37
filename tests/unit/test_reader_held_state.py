"""What the recording reader holds per line until a file's steps are counted (issue 29, finding 3: 2 million
frameless steps must not take gigabytes). Steps whose `data` is the same JSON share one object; JSON that only
compares equal in Python (1, 1.0 and true; NaN) keeps its own, so the stored rows do not change."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from pipeline.recordings import reader
from pipeline.recordings.reader import read_recording_file, step_frames

GUID = "9064696e-1bf8-40f1-8b96-607f92b98787"
GAME = "bt11-fd9df0622a1a"


def _data(action: int, levels: int = 0, reasoning=None, full_reset: bool = False, **extra) -> dict:
    return {"game_id": GAME, "state": "NOT_FINISHED", "levels_completed": levels, "win_levels": 5,
            "action_input": {"id": action, "data": {}, "reasoning": reasoning}, "guid": GUID,
            "full_reset": full_reset, "available_actions": [1, 2, 3, 4], **extra}


def _write(path: Path, datas: list[dict]) -> Path:
    with path.open("w") as f:
        for i, data in enumerate(datas):
            f.write(json.dumps({"timestamp": f"2026-11-22T03:00:{i // 1000:02d}.{i % 1000:06d}+00:00",
                                "data": data}, allow_nan=True) + "\n")
    return path


def test_steps_with_the_same_data_share_one_object(tmp_path: Path):
    datas = [_data(0, full_reset=True)] + [_data(1 + i % 3, levels=i // 100) for i in range(300)]
    rec = read_recording_file(_write(tmp_path / "steps.jsonl", datas))
    assert len(rec.steps) == 301
    distinct_json = {json.dumps(d, sort_keys=True) for d in datas}
    # one `data` object per distinct JSON value, not one per line (3 actions x 3 levels + the opening RESET)
    assert len({id(ln.data) for ln in rec.steps}) == len(distinct_json) == 10
    # no per-line empty list for the values a line dropped: one shared empty tuple
    assert len({id(ln.dropped) for ln in rec.steps}) == 1 and rec.steps[0].dropped == ()
    assert [ln.data for ln in rec.steps] == datas  # sharing changes no value
    assert all(type(ln.sha) is bytes and len(ln.sha) == 32 for ln in rec.steps)  # the digest, not its hex
    rows = reader.line_rows(rec.lines, "f")  # stored as hex, of the line's bytes
    path = tmp_path / "steps.jsonl"
    first = path.read_bytes().split(b"\n")[0]
    assert rows["content_sha256"][0] == hashlib.sha256(first).hexdigest()


def test_values_equal_only_in_python_are_not_shared(tmp_path: Path):
    datas = [_data(0, full_reset=True),
             _data(1, reasoning={"n": 1}), _data(1, reasoning={"n": 1.0}), _data(1, reasoning={"n": True}),
             _data(1, reasoning={"n": 1}),  # the same JSON as line 2: shared
             _data(1, x=float("nan")), _data(1, x=float("nan")), _data(1, x=None),
             _data(1, big=2**70), _data(1, big=2**70)]
    rec = read_recording_file(_write(tmp_path / "types.jsonl", datas))
    steps = rec.steps
    assert steps[1].data is steps[4].data
    assert len({id(ln.data) for ln in steps[1:4]}) == 3  # 1, 1.0 and true stay apart
    assert steps[5].data is not steps[6].data and steps[6].data is not steps[7].data  # NaN is never shared
    assert steps[7].data["x"] is None
    assert steps[8].data is not steps[9].data  # orjson cannot key an integer over 64 bits: kept apart
    rows = next(step_frames(rec, "f"))
    assert rows["reasoning_json"].to_list()[1:5] == ['{"n": 1}', '{"n": 1.0}', '{"n": true}', '{"n": 1}']


def test_the_sharing_table_is_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    datas = [_data(0, full_reset=True)] + [_data(1, levels=i % 5) for i in range(50)]
    path = _write(tmp_path / "bounded.jsonl", datas)
    unbounded = next(step_frames(read_recording_file(path), "f"))
    seen: list[int] = []
    real = reader.share_data

    def spy(data, raw_json, shared):
        seen.append(len(shared))
        return real(data, raw_json, shared)

    monkeypatch.setattr(reader, "SHARED_DATA_LIMIT", 3)
    monkeypatch.setattr(reader, "share_data", spy)
    rec = read_recording_file(path)
    assert max(seen) <= 3 and len(seen) == 51
    assert [ln.data for ln in rec.steps] == datas
    assert next(step_frames(rec, "f")).equals(unbounded)


@pytest.mark.parametrize("long_lines", [False, True], ids=["short", "long"])
def test_long_lines_are_shared_on_their_values_not_their_text(tmp_path: Path, long_lines: bool):
    """A line longer than `SCAN_RAW_UP_TO` (a frame line: ~12 KB of pixels a frame), read without its compact
    text, is not searched for NaN and Infinity, which took a fifth of reading a recording with frames: its `data`
    is looked at for a non-finite float instead. What is shared is the same either way, but a long line that spells NaN only inside a string,
    which orjson writes exactly, is shared too."""
    pad = {"frame": [[[0] * 64] * 64]} if long_lines else {}
    datas = [_data(0, full_reset=True, **pad),
             _data(1, reasoning={"n": 1}, **pad), _data(1, reasoning={"n": 1.0}, **pad),
             _data(1, reasoning={"n": 1}, **pad),  # the same JSON as line 2: shared
             _data(1, x=[{"y": float("nan")}], **pad), _data(1, x=[{"y": float("nan")}], **pad),
             _data(1, x=[{"y": None}], **pad), _data(1, x=float("-inf"), **pad), _data(1, x=float("-inf"), **pad),
             _data(1, big=2**70, **pad), _data(1, big=2**70, **pad),
             _data(1, reasoning="NaN or Infinity?", **pad), _data(1, reasoning="NaN or Infinity?", **pad)]
    path = _write(tmp_path / "lines.jsonl", datas)
    assert (min(len(x) for x in path.read_bytes().splitlines()) > reader.SCAN_RAW_UP_TO) is long_lines
    # as `score` and the export read (without the lines' compact text, which would be what is searched)
    steps = read_recording_file(path, keep_raw_json=False).steps
    assert steps[1].data is steps[3].data and steps[1].data is not steps[2].data
    assert steps[4].data is not steps[5].data and steps[5].data is not steps[6].data  # NaN never shared
    assert steps[6].data["x"] == [{"y": None}] and steps[7].data is not steps[8].data  # nor -Infinity
    assert steps[9].data is not steps[10].data  # an integer over 64 bits: kept apart
    assert (steps[11].data is steps[12].data) is long_lines  # the text is searched only on short lines
    assert steps[11].data == steps[12].data and steps[11].data["action_input"]["reasoning"] == "NaN or Infinity?"


def test_a_deeply_nested_long_line_is_looked_at_without_recursion():
    deep: list = []
    for _ in range(5000):
        deep = [deep]
    data = {"x": deep, "y": 1.5}
    assert reader.share_key(data, b" " * (reader.SCAN_RAW_UP_TO + 1)) is None  # orjson cannot write it that deep
    assert not reader._finite_only({"x": deep, "y": float("nan")})
