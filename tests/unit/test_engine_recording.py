"""Toolkit JSONL recordings: the writer reproduces official lines byte for byte; the reader accepts
every variant of spec/formats.md §A (int or name ids, frames or not, usage and scorecard lines)."""

import io
import json
from pathlib import Path

import numpy as np

from engine import ActionInput, FrameData, FrameDataRaw, GameAction, GameState
from engine.recording import RECORDING_FORMAT, RecordingWriter, read_recording, response_to_record

SAMPLES = Path(__file__).resolve().parents[2].parent / "shared" / "samples" / "arc-agi-3"


def response_from_line(data, raw):
    action = data["action_input"]
    action_input = ActionInput(id=GameAction.from_name(action["id"]), data=action["data"], reasoning=action["reasoning"])
    fields = dict(
        game_id=data["game_id"], state=GameState(data["state"]), levels_completed=data["levels_completed"],
        win_levels=data["win_levels"], action_input=action_input, guid=data["guid"], full_reset=data["full_reset"],
        available_actions=data["available_actions"],
    )
    if raw:
        response = FrameDataRaw(**fields)
        response.frame = [np.array(frame, dtype=np.int8) for frame in data.get("frame", [])]
        return response
    return FrameData(frame=data.get("frame", []), **fields)


def rewrite(path, include_frames, raw):
    lines = path.read_text(encoding="utf-8").splitlines()
    out = io.StringIO()
    stamps = iter(json.loads(line)["timestamp"] for line in lines)
    writer = RecordingWriter(out, include_frames=include_frames, clock=lambda: next(stamps))
    for line in lines:
        writer.write(response_from_line(json.loads(line)["data"], raw))
    writer.close()
    return lines, out.getvalue().splitlines()


def test_writer_reproduces_toolkit_lines_without_frames():
    original, written = rewrite(SAMPLES / "fixtures" / "tf62_scripted-lose.noframes.jsonl", False, raw=True)
    assert written == original


def test_writer_reproduces_toolkit_lines_with_frames():
    original, written = rewrite(SAMPLES / "fixtures" / "tf62_scripted-win.frames.jsonl", True, raw=True)
    assert written == original
    original, written = rewrite(SAMPLES / "fixtures" / "tf62_scripted-win.frames.jsonl", True, raw=False)
    assert written == original


def test_int_ids_and_sidecar(tmp_path):
    response = FrameData(game_id="g-1", action_input=ActionInput(id=6, data={"x": 1, "y": 2}), state="WIN")
    assert response_to_record(response, include_frames=False, action_ids="int")["action_input"]["id"] == 6
    path = tmp_path / "rec.jsonl"
    with RecordingWriter(path, include_frames=False, action_ids="int", sidecar=True) as writer:
        writer.write(response)
    line = json.loads(path.read_text(encoding="utf-8"))
    assert set(line) == {"timestamp", "data"} and line["timestamp"].endswith("+00:00")
    meta = json.loads((tmp_path / "rec.jsonl.meta.json").read_text(encoding="utf-8"))
    assert meta["format"] == RECORDING_FORMAT and meta["format_version"] == 1 and meta["line_count"] == 1


def test_reader_toolkit_names_and_frames():
    recording = read_recording(SAMPLES / "fixtures" / "mz41_scripted-win.frames.jsonl")
    first = recording.frame_lines[0]
    assert first.action is GameAction.RESET and first.id_was_name and first.full_reset is True
    assert recording.has_frames and first.frames()[0].shape == (64, 64)
    assert recording.game_id == "mz41-ca81ff3b" and first.line_no == 1


def test_reader_string_ids_without_leading_reset_and_summary_line():
    path = next((SAMPLES / "human" / "lp85").glob("*.recording.jsonl"))
    recording = read_recording(path)
    assert recording.frame_lines[0].action is not GameAction.RESET
    assert all(line.id_was_name for line in recording.frame_lines)
    assert not recording.lines[-1].is_frame and "cards" in recording.lines[-1].data


def test_reader_benchmarking_usage_lines():
    path = next((SAMPLES / "benchmarking").glob("*.recording.jsonl"))
    recording = read_recording(path)
    assert len(recording.lines) == 6 and len(recording.frame_lines) == 3
    assert all(line.action_id == 0 and not line.id_was_name for line in recording.frame_lines)
